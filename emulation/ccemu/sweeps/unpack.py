"""The machines' archives of a sweep's runs, unpacked on the controller (playbooks/sweep.yml's
"Unpack them into the sweep's folder"): only regular files and folders, only under runs/, with
our owner and plain modes, never through a link.

A machine's archive is what root on that machine packed, and the controller unpacks it as root:
tar (and Ansible's unarchive) would keep its owners, modes (setuid included) and links, and
follow a link an earlier member planted (runs/x -> /etc, then runs/x/profile.d/y.sh). Here a
member that is not a regular file or folder, or whose path is absolute, climbs with '..' or is
outside runs/, refuses the whole archive before anything is written (one line naming it); files
are written 0644 and folders made 0755, each path component checked not to be a link. Files keep
their modification times, as tar keeps them: a run's times are data (a point's machine file is
written as it starts and its log to its end, and the sweep's tests read the order from them).

    python -m ccemu.sweeps.unpack ARCHIVE SWEEP_DIR
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tarfile
from pathlib import Path, PurePosixPath

from .plan import RUNS_DIR


class UnpackError(ValueError):
    """An archive holding what a machine's runs never do (one line)."""


def _relative(member: tarfile.TarInfo, archive: Path) -> PurePosixPath:
    path = PurePosixPath(member.name)
    if path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0] != RUNS_DIR:
        raise UnpackError(f"{archive}: {member.name!r} is not under {RUNS_DIR}/: nothing unpacked")
    if not (member.isfile() or member.isdir()):
        raise UnpackError(f"{archive}: {member.name!r} is a link or a special file: nothing unpacked (a sweep's "
                          "runs hold regular files and folders only)")
    return path


def _folder_under(root: Path, parts: tuple[str, ...]) -> Path:
    """root/parts..., each component made (0755) or checked to be a folder, never a link."""
    here = root
    for part in parts:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            os.mkdir(here, 0o755)
            continue
        if not stat.S_ISDIR(mode):
            raise UnpackError(f"{here} is not a folder (a link or a file): nothing written under it")
    return here


def unpack(archive: Path, directory: Path) -> int:
    """Unpack `archive`'s runs into `directory` (the sweep's folder); the number of files written."""
    with tarfile.open(archive, "r:gz") as tar:
        members = tar.getmembers()
        paths = [_relative(member, archive) for member in members]  # every member judged before any is written
        written = 0
        for member, path in zip(members, paths):
            if member.isdir():
                _folder_under(directory, path.parts)
                continue
            folder = _folder_under(directory, path.parts[:-1])
            target = folder / path.parts[-1]
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)  # replaced, not written through: a link there goes, not its target
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            with os.fdopen(fd, "wb") as out, tar.extractfile(member) as source:
                while chunk := source.read(1 << 20):
                    out.write(chunk)
                out.flush()  # before the time is set: a later write would move it
                os.utime(out.fileno(), (member.mtime, member.mtime))
            written += 1
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m ccemu.sweeps.unpack ARCHIVE SWEEP_DIR", file=sys.stderr)
        return 2
    try:
        unpack(Path(argv[0]), Path(argv[1]))
    except (UnpackError, OSError, tarfile.TarError) as exc:
        print(f"ccemu: unpacking {argv[0]}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
