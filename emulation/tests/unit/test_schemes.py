"""hosts.schemes reads the scheme table from cchost itself (`cchost --schemes --json`): the built
binary's table must say what the Python config lists today (model/config.py), and the argv
builder passes scheme parameters as --param."""

import os
from pathlib import Path
from typing import get_args

import pytest

from ccemu.hosts import cchost, schemes
from ccemu.model.config import CREDIT_SCHEMES, SCHEME_PORT_PROFILES, SchemeName

TRANSPORT = cchost.REPO_ROOT / "transport"


def built_cchost() -> Path | None:
    """The newest cchost built from this tree: build/cchost (`make setup`, or $CCEMU_CCHOST) or
    cargo's own (`cargo build --release` in transport/, with or without --target)."""
    candidates = [cchost.CCHOST, TRANSPORT / "target" / "release" / "cchost",
                  *(TRANSPORT / "target").glob("*/release/cchost")]
    found = [path for path in candidates if path.is_file() and os.access(path, os.X_OK)]
    return max(found, key=lambda path: path.stat().st_mtime_ns, default=None)


@pytest.fixture(scope="module")
def binary() -> Path:
    path = built_cchost()
    if path is None:
        pytest.skip(f"no cchost built: neither {cchost.CCHOST} nor {TRANSPORT}/target/*release/cchost exists "
                    "(make setup, or cargo build --release in transport/)")
    return path


def test_the_built_cchost_lists_the_schemes_the_python_config_names_in_the_same_order(binary):
    assert schemes.names(binary) == get_args(SchemeName)


def test_the_built_cchost_gives_each_scheme_the_port_profile_the_python_config_does(binary):
    assert schemes.port_profiles(binary) == SCHEME_PORT_PROFILES


def test_the_credit_schemes_of_the_built_cchost_are_the_python_configs(binary):
    assert schemes.credit_schemes(binary) == CREDIT_SCHEMES
    assert all((s.driver == "receiver") == s.credit for s in schemes.schemes(binary))


def test_each_scheme_has_a_unique_wire_id_and_its_times_are_the_parameters_that_dilate(binary):
    table = schemes.schemes(binary)
    assert len({s.wire_id for s in table}) == len(table)
    for s in table:
        for p in s.params:
            assert p.dilates == (p.unit == "us"), f"{s.name}.{p.name}"
            assert p.doc, f"{s.name}.{p.name} has no doc"
    timer = schemes.params("dcqcn", binary)["timer_us"]
    assert (timer.default, timer.unit, timer.dilates) == (55.0, "us", True)
    assert schemes.params("dctcp+", binary)["slow_time_unit_us"].default is None  # the flow's base RTT
    with pytest.raises(ValueError, match=r"unknown scheme 'tcp' \(cchost runs expresspass, spraypass, dctcp"):
        schemes.scheme("tcp", binary)


def test_the_table_is_read_once_per_build_of_the_binary(tmp_path):
    calls = tmp_path / "calls"
    fake = tmp_path / "cchost"
    table = ('[{"name": "toy", "wire_id": 42, "driver": "sender", "port_profile": "dctcp", "credit": false, "params": '
             '[{"name": "window_segments", "default": 8, "unit": "segments", "dilates": false, "doc": "d"}]}]')
    fake.write_text(f"#!/bin/sh\necho >> {calls}\necho '{table}'\n")
    fake.chmod(0o755)
    assert schemes.names(fake) == ("toy",)
    assert schemes.params("toy", fake)["window_segments"].default == 8
    assert calls.read_text().count("\n") == 1
    fake.write_text(fake.read_text() + "# rebuilt\n")  # another size: another build
    assert schemes.credit_schemes(fake) == ()
    assert calls.read_text().count("\n") == 2


def test_a_cchost_that_cannot_list_its_schemes_is_said_so(tmp_path):
    old = tmp_path / "cchost"
    old.write_text("#!/bin/sh\necho \"error: unexpected argument '--schemes' found\" >&2\nexit 2\n")
    old.chmod(0o755)
    said = r"exited 2: error: unexpected argument '--schemes'.*make setup"
    with pytest.raises(schemes.SchemesUnreadable, match=said):
        schemes.schemes(old)
    with pytest.raises(schemes.SchemesUnreadable, match="printed no scheme table"):
        schemes.parse('{"name": "dctcp"}')


def test_the_argv_passes_scheme_parameters_as_param_flags_and_nothing_more_without_them(tmp_path):
    binary = Path("/opt/cchost")
    plain = cchost.command("h3", 10.0, "dcqcn", 7, tmp_path, binary=binary, extra=("--alpha", "0.5"))
    assert plain == cchost.command("h3", 10.0, "dcqcn", 7, tmp_path, binary=binary, extra=("--alpha", "0.5"),
                                   params={})
    assert "--param" not in plain
    with_params = cchost.command("h3", 10.0, "dcqcn", 7, tmp_path, binary=binary, extra=("--alpha", "0.5"),
                                 params={"dcqcn.timer_us": 300, "dcqcn+tcd.cnp_interval_us": 40.5})
    assert with_params == plain[:-2] + ["--param", "dcqcn.timer_us=300", "--param", "dcqcn+tcd.cnp_interval_us=40.5",
                                        "--alpha", "0.5"]
    for bad in ("timer_us", "dcqcn.", ".timer_us", "dcqcn.timer_us=5"):
        with pytest.raises(ValueError, match="expected <scheme>.<key>"):
            cchost.param_args({bad: 1})
