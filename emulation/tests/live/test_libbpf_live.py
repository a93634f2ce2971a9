"""ports/libbpf.py on a real array map, pinned on a bpffs of the test's own (root; CI runs these)."""

import ctypes
import errno
import os
import struct
import subprocess

import pytest

from ccemu.ports.libbpf import PinnedMap

BPF_MAP_TYPE_ARRAY = 2
VALUE = struct.Struct("<QQ")


@pytest.fixture
def bpffs(tmp_path):
    """A bpffs mounted for this test alone, unmounted after it."""
    mount = tmp_path / "bpffs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "bpf", "bpf", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def pinned_array(bpffs, entries: int):
    """An array map of `entries` VALUEs, value i = (i, 1000 + i), pinned at bpffs/array."""
    lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
    lib.bpf_map_create.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint32,
                                   ctypes.c_uint32, ctypes.c_void_p]
    fd = lib.bpf_map_create(BPF_MAP_TYPE_ARRAY, b"test_array", 4, VALUE.size, entries, None)
    assert fd >= 0, os.strerror(-fd)
    try:
        for key in range(entries):
            value = ctypes.create_string_buffer(VALUE.pack(key, 1000 + key))
            assert lib.bpf_map_update_elem(fd, ctypes.byref(ctypes.c_uint32(key)), value, 0) == 0
        path = bpffs / "array"
        assert lib.bpf_obj_pin(fd, str(path).encode()) == 0
    finally:
        os.close(fd)
    return path


@pytest.mark.root
def test_a_batch_read_of_an_array_map_gives_the_first_values_in_key_order_and_stops_at_its_end(bpffs):
    path = pinned_array(bpffs, 5)
    pinned = PinnedMap(path, VALUE.size)
    try:
        assert [VALUE.unpack(raw) for raw in pinned.first(3)] == [(0, 1000), (1, 1001), (2, 1002)]
        assert [VALUE.unpack(raw)[0] for raw in pinned.first(64)] == [0, 1, 2, 3, 4]
        assert pinned.first(0) == []
        assert VALUE.unpack(pinned.lookup(4)) == (4, 1004)
        assert pinned.lookup(5) is None
    finally:
        pinned.close()


@pytest.mark.root
def test_opening_a_map_that_is_not_pinned_names_its_path(bpffs):
    with pytest.raises(OSError, match="opening pinned map .*/missing: No such file") as raised:
        PinnedMap(bpffs / "missing", VALUE.size)
    assert raised.value.errno == errno.ENOENT
