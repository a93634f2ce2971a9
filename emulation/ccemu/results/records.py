"""What cchost leaves in a block's folder, read: its records (one JSON line per flow or event) and
its counters (one JSON file per cchost, rewritten while it runs)."""

from __future__ import annotations

import json
from pathlib import Path


def read_records(path: Path) -> list[dict]:
    """The complete records of a file cchost may be writing (a last line without its newline is
    being written: left for the next read)."""
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]


def read_counters(path: Path) -> dict:
    return json.loads(path.read_text())


def counters_under(workdir: Path) -> list[tuple[str, dict]]:
    """(host, counters) of every cchost counters file under a block's `workdir` (a host may have
    several: one per cchost it ran). A file being rewritten (cchost writes them while it runs) is
    left for the next read."""
    found = []
    for path in workdir.glob("**/*.counters"):
        try:
            counters = read_counters(path)
        except (ValueError, OSError):
            continue
        found.append((f"h{counters['host']}", counters))
    return found
