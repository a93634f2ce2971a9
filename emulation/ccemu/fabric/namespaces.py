"""What the kernel says of processes and network namespaces, by identities that cannot be reused
while a record holds them (fabric/inventory.py says why): a process's start time, a namespace's
inode held open and its cookie; and code run inside namespaces by a thread that enters them."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class NamespaceError(RuntimeError):
    """A namespace could not be entered part way through."""


def process_start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot, or None if it is gone (or a zombie:
    dead, only waiting for its parent to read its status)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name may hold spaces and parentheses: fields resume after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])


def netns_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


SO_NETNS_COOKIE = 71  # <asm-generic/socket.h>, Linux 5.14
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def netns_cookie(ns_fd: int) -> int | None:
    """The cookie of the network namespace `ns_fd` refers to (an open /proc/PID/ns/net), read
    from a socket made inside it."""

    def read_cookie() -> int | None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                return struct.unpack("=Q", sock.getsockopt(socket.SOL_SOCKET, SO_NETNS_COOKIE, 8))[0]
            except OSError:
                return None  # a kernel before 5.14: the caller says what that means

    return made_in_namespaces([ns_fd], read_cookie)[0]


def made_in_namespaces(ns_fds: list[int], make: Callable[[], T]) -> list[T | None]:
    """make() called inside each network namespace of `ns_fds` (open /proc/PID/ns/net), by one
    short-lived thread that enters them in turn: setns moves only the calling thread, and a
    socket made in a namespace stays in it. None where the namespace could not be entered."""
    made: list[T | None] = []

    def visit() -> None:
        for fd in ns_fds:
            made.append(make() if _libc.setns(fd, CLONE_NEWNET) == 0 else None)

    thread = threading.Thread(target=visit, name="in-namespaces")
    thread.start()
    thread.join()
    if len(made) != len(ns_fds):
        raise NamespaceError("entering the namespaces failed part way (see the thread's traceback above)")
    return made


@contextlib.contextmanager
def open_netns(pid: int) -> Iterator[int | None]:
    """/proc/PID/ns/net held open (the namespace cannot go, nor its inode change hands, while
    it is); None if pid is gone."""
    try:
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


@functools.cache
def protected_cookies() -> frozenset[int]:
    """Our own namespace's and init's (where readable): never a run's to remove. Read once:
    neither changes while we run."""
    protected = set()
    for pid in (os.getpid(), 1):
        with open_netns(pid) as ns_fd:
            cookie = netns_cookie(ns_fd) if ns_fd is not None else None
        if cookie is not None:
            protected.add(cookie)
    return frozenset(protected)


def netns_inode_or_none(pid: int) -> int | None:
    try:
        return netns_inode(pid)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def netns_of_processes() -> Iterator[tuple[int, int]]:
    """(pid, network namespace inode) of every process."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            inode = netns_inode_or_none(int(entry.name))
            if inode is not None:
                yield int(entry.name), inode


def mounted_paths() -> set[str]:
    with open("/proc/self/mounts") as mounts:
        return {line.split()[1] for line in mounts}


def pids_in_namespaces(inodes: set[int]) -> list[int]:
    """Pids of every process whose network namespace has one of `inodes` (the caller makes sure
    those inodes still mean the namespaces it wants: see Inventory.held_namespaces)."""
    return [pid for pid, inode in netns_of_processes() if inode in inodes]
