"""A bundle's files, read and written as root without following links (SECURITY.md).

Bundles are files people exchange, and ccemu reads and rewrites them as root (`ccemu report`,
sweeps merging the bundles machines sent back). A bundle whose summary.md is a link to
/etc/profile.d/x.sh would have root write a shell line there. So a bundle is read only when it
holds nothing but regular files and folders (`check_bundle`), its files are opened with O_NOFOLLOW,
and every output is written to a new file beside it, then renamed over the old name, all through
the folder's own descriptor opened with O_NOFOLLOW: a link planted at the output's name is
replaced, never written through, and a folder swapped for a link after the check is refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F)}  # C0 controls and DEL, shown escaped


class BundleFileError(ValueError):
    """A bundle holding what ccemu never writes (a link, a device, a fifo), or an output that is one (one line)."""


def check_bundle(directory: Path) -> None:
    """Refuse a bundle (BundleFileError naming the first offender) holding anything but regular
    files and folders, at any depth; the bundle's own path is the caller's and may be a link."""
    pending = [Path(directory)]
    while pending:
        folder = pending.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_symlink():
                    raise BundleFileError(f"{entry.path} is a link: a bundle holds regular files and folders only "
                                          "(ccemu never writes a link)")
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif not entry.is_file(follow_symlinks=False):
                    raise BundleFileError(f"{entry.path} is not a regular file: a bundle holds regular files and "
                                          "folders only")


def read_text(path: Path) -> str:
    """A regular file's text, never through a link (BundleFileError otherwise)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a link
            raise BundleFileError(f"{path} is a link: not read") from None
        raise
    with os.fdopen(fd, "rb") as source:
        if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
            raise BundleFileError(f"{path} is not a regular file: not read")
        return source.read().decode()


@contextlib.contextmanager
def _folder(path: Path, create: bool) -> Iterator[int]:
    """The folder's descriptor, opened without following a link at its last component."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o755)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):  # a file or a link where the folder should be
            raise BundleFileError(f"{path} is not a folder (a link or a file): nothing written into it") from None
        raise
    try:
        yield fd
    finally:
        os.close(fd)


def write_bytes(path: Path, data: bytes, create_folder: bool = False) -> Path:
    """Write `data` as `path` (mode 0644): a new file beside it, renamed over the name, so that a
    link or a file at the name is replaced, never written through. `create_folder`: make the
    folder if it is missing (a folder, not a link, if it is there)."""
    path = Path(path)
    with _folder(path.parent, create_folder) as folder:
        temporary = f".{path.name}.{secrets.token_hex(4)}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                     dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder)
            raise
    return path


def write_text(path: Path, text: str, create_folder: bool = False) -> Path:
    return write_bytes(path, text.encode(), create_folder)


def printable(value: str) -> str:
    """`value` with its control characters (newlines, escapes) shown as \\xNN: text from a bundle
    goes into Markdown and terminals as one line of what it says, never as lines or commands."""
    return value.translate(CONTROL)


def printable_tree(value):
    """Every string in a JSON value (dicts, lists) made printable; keys too."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(k) if isinstance(k, str) else k: printable_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable_tree(v) for v in value]
    return value
