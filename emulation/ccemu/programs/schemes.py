"""Asking a built cchost for its scheme table (`cchost --schemes --json`): what `make schemes`
checks in as model/schemes.json, and what its test compares that file with. Everything else
reads model/schemes.py's TABLE.

The table is read once per cchost build (the binary's path, size and modification time) and
cached.
"""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path

from ..model.schemes import Scheme, SchemesUnreadable, parse
from .cchost import cchost_binary


@lru_cache(maxsize=8)
def _read(binary: Path, size: int, mtime_ns: int) -> tuple[Scheme, ...]:
    # size and mtime_ns are the cache key's: a rebuilt cchost is asked again.
    try:
        done = subprocess.run([str(binary), "--schemes", "--json"], capture_output=True, text=True, timeout=30)
    except OSError as e:
        raise SchemesUnreadable(f"{binary} --schemes --json: {e}") from e
    if done.returncode != 0:
        raise SchemesUnreadable(f"{binary} --schemes --json exited {done.returncode}: {done.stderr.strip()[-500:]} "
                                "(a cchost from before `--schemes`? run `make setup`)")
    return parse(done.stdout)


def schemes(binary: Path | None = None) -> tuple[Scheme, ...]:
    """Every scheme of `binary` (default: build/cchost, `cchost_binary()`), in cchost's order."""
    path = Path(binary or cchost_binary())
    stat = path.stat()
    return _read(path, stat.st_size, stat.st_mtime_ns)
