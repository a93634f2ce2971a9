"""What a process we started wrote to its log (the last line is what a one-line failure quotes),
and how it ended."""

from __future__ import annotations

import signal
from pathlib import Path

MAX_QUOTED = 200  # characters of a log line that go into a one-line message


def last_line(path: Path, most: int | None = MAX_QUOTED) -> str:
    """The last non-empty line of `path`, its first `most` characters (None: all of it); "" if there
    is none or `path` is not a regular file that can be read (a fifo there would block the read)."""
    try:
        if not path.is_file():
            return ""
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:most] if lines else ""


def ended(returncode: int) -> str:
    """How a process ended, from its Popen returncode (negative: the signal that killed it)."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


def ended_saying(returncode: int, said: str) -> str:
    """ended(), with what the process said (`said`: its log's last words) when it ended on its own;
    killed by a signal from outside, its log ends with whatever it happened to write before."""
    return f"{ended(returncode)}{': ' + said if said and returncode >= 0 else ''}"
