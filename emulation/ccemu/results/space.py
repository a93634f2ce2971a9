"""The results folder's disk: enough free before a run starts, watched while it runs, and a
reserve that lets the bundle be written with what finished when the disk fills up mid-run.

A full disk shows first as a cchost that cannot write its flow records (it exits naming
ENOSPC); without a reserve the bundle's own tables and manifest would then fail to be written
too, and hours of finished blocks would be lost with them. So a run holds RESERVE_BYTES of the
disk from the start (a file in the bundle, allocated), watches the free space while its blocks
run, and gives the reserve back just before it writes its tables.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

# What a bundle's tables, manifest, summary and plots take (measured: a realistic run of 800 flows
# wrote 0.73 MB in all, flows.csv ~104 B a flow, plots 0.16 MB): room for the tables of ~100 000
# flows. A run of more may not fit in it; it keeps a full disk from costing the bundle of any shipped
# experiment.
RESERVE_BYTES = 16 << 20
# Below this the disk counts as full: a cchost writes a record line (~400 B) per flow and its
# counters at exit, Prometheus a WAL page every scrape; a block cannot be trusted to finish in less.
FULL_BELOW_BYTES = 1 << 20
RESERVE_FILE = ".space-reserve"


class ResultsDiskFull(RuntimeError):
    """The results folder's disk has no room for the run (before it) or filled up (during it)."""


def free_bytes(directory: Path) -> int:
    """What an unprivileged writer may still use (root may use the filesystem's own reserve too:
    counting without it errs toward stopping early)."""
    return shutil.disk_usage(directory).free


def full(directory: Path) -> str | None:
    """Why the disk of `directory` counts as full; None while it does not."""
    try:
        free = free_bytes(directory)
    except OSError as exc:
        return f"the results folder {directory} cannot be read ({exc.strerror})"
    if free >= FULL_BELOW_BYTES:
        return None
    return f"the results folder's disk is full ({free // 1024} KiB free under {directory})"


class Reserve:
    """RESERVE_BYTES held in `directory` until released (or the directory is removed); `folder`:
    the results folder the user named, for the message."""

    def __init__(self, directory: Path, folder: Path):
        self.path = directory / RESERVE_FILE
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            # Allocated, not a hole: a sparse file would hold nothing. (glibc writes the blocks
            # where a filesystem has no fallocate.)
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except OSError as exc:
            self.path.unlink()
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise ResultsDiskFull(
                    f"the results folder {folder} has less than {RESERVE_BYTES >> 20} MiB free "
                    f"({free_bytes(directory) // 1024} KiB): free some space or give --results another folder; "
                    "nothing was started") from None
            raise
        finally:
            os.close(fd)

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
