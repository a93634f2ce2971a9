"""ports/libbpf.py without a live map (tests/live/test_libbpf_live.py reads real ones)."""

import ctypes

import pytest

from ccemu.ports import libbpf


def test_a_machine_without_libbpf_is_told_what_to_install_when_it_first_opens_a_map(monkeypatch, tmp_path):
    def missing(name, **_):
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")
    monkeypatch.setattr(ctypes, "CDLL", missing)
    libbpf._lib.cache_clear()
    try:
        with pytest.raises(OSError, match=r"^reading the port maps needs libbpf 1.x \(libbpf.so.1: .*\): run `make "
                                          r"setup`, which installs libbpf-dev$"):
            libbpf.PinnedMap(tmp_path / "port_state", 8)
    finally:
        libbpf._lib.cache_clear()
