"""The memory allocators ovs-vswitchd can run with (`fabric.ovs_allocator`), preloaded from their
Debian packages. Its userspace datapath allocates and frees packet buffers for every packet it
forwards: glibc's malloc and free were up to 18 % of its CPU samples (`ccemu bench capacity
--profile`, emulation/README.md "This machine's limits")."""

from __future__ import annotations

from pathlib import Path

from ..model.config.fabric import ALLOCATORS

# Where the dynamic loader finds a preload given by name (Debian's multiarch directories first).
LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib")


class AllocatorMissing(RuntimeError):
    """The allocator asked for is not installed."""


def allocator_library(allocator: str) -> str | None:
    """The library to preload into ovs-vswitchd for `allocator` (None: glibc's own), or
    AllocatorMissing naming the package that brings it. The loader only warns about a missing
    preload, and the switches would forward with glibc's malloc under another name."""
    if allocator not in ALLOCATORS:
        raise AllocatorMissing(f"fabric.ovs_allocator: no allocator {allocator!r} (known: {', '.join(ALLOCATORS)})")
    entry = ALLOCATORS[allocator]
    if entry is None:
        return None
    library, package = entry
    if not any(Path(directory, library).exists() for directory in LIBRARY_DIRS):
        raise AllocatorMissing(f"fabric.ovs_allocator {allocator}: {library} is not installed (Debian package "
                               f"{package}; `make setup` installs it)")
    return library
