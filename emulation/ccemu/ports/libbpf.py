"""The few libbpf calls ccemu makes from Python, through ctypes over the system's libbpf.so.1 (the
library port_loader links, from libbpf-dev): open a pinned map, look up one key, or read the first
`count` entries of an array map in one system call (a scrape reads every port's counters in four).
libbpf keeps the system call's number and attribute layout per architecture; we keep none.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

BPF_F_LOCK = 4  # copy a value holding a bpf_spin_lock under that lock: no torn reads


class _BatchOpts(ctypes.Structure):
    """struct bpf_map_batch_opts (bpf/bpf.h)."""
    _fields_ = [("sz", ctypes.c_size_t), ("elem_flags", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


@functools.cache
def _lib() -> ctypes.CDLL:
    """libbpf, loaded at the first map opened (importing this module needs no libbpf)."""
    try:
        lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
    except OSError as exc:
        raise OSError(f"reading the port maps needs libbpf 1.x ({exc}): run `make setup`, which "
                      "installs libbpf-dev") from None
    lib.bpf_obj_get.argtypes = [ctypes.c_char_p]
    lib.bpf_map_lookup_elem_flags.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64]
    lib.bpf_map_lookup_batch.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                         ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32),
                                         ctypes.POINTER(_BatchOpts)]
    for function in (lib.bpf_obj_get, lib.bpf_map_lookup_elem_flags, lib.bpf_map_lookup_batch):
        function.restype = ctypes.c_int
    return lib


def _checked(result: int, what: str) -> int:
    """libbpf 1.x returns -errno on failure."""
    if result < 0:
        raise OSError(-result, f"{what}: {os.strerror(-result)}")
    return result


class PinnedMap:
    """A BPF map pinned on a bpffs with __u32 keys and `value_size`-byte values. `flags`:
    BPF_F_LOCK for a map whose values hold a spin lock."""

    def __init__(self, path: Path, value_size: int, flags: int = 0):
        self.fd = open_pinned(path)
        self.value_size, self.flags = value_size, flags
        self._value = ctypes.create_string_buffer(value_size)
        self._key = ctypes.c_uint32()

    def lookup(self, key: int) -> bytes | None:
        """The value at `key`; None when the map has none."""
        self._key.value = key
        result = _lib().bpf_map_lookup_elem_flags(self.fd, ctypes.byref(self._key), self._value, self.flags)
        if result == -2:  # ENOENT
            return None
        _checked(result, f"looking up key {key}")
        return self._value.raw

    def first(self, count: int) -> list[bytes]:
        """The values of keys 0 .. count-1 of an array map (fewer if the map is smaller), read in
        one batch: each value copied whole (under its lock with BPF_F_LOCK), the batch not at one
        instant."""
        if count <= 0:
            return []
        keys = (ctypes.c_uint32 * count)()
        values = ctypes.create_string_buffer(count * self.value_size)
        read = ctypes.c_uint32(count)
        next_key = ctypes.c_uint32()
        opts = _BatchOpts(sz=ctypes.sizeof(_BatchOpts), elem_flags=self.flags)
        result = _lib().bpf_map_lookup_batch(self.fd, None, ctypes.byref(next_key), keys, values,
                                           ctypes.byref(read), ctypes.byref(opts))
        if result != -2:  # ENOENT: the map ended before `count` (read says how many came)
            _checked(result, f"reading {count} entries")
        raw, size = values.raw, self.value_size
        if any(keys[i] != i for i in range(read.value)):
            raise OSError(f"a batch read of an array map returned keys out of order: {list(keys[:read.value])}")
        return [raw[i * size:(i + 1) * size] for i in range(read.value)]

    def close(self) -> None:
        os.close(self.fd)


def open_pinned(path: Path) -> int:
    """A file descriptor of the BPF object pinned at `path` (a ring buffer, to map)."""
    return _checked(_lib().bpf_obj_get(str(path).encode()), f"opening pinned map {path}")
