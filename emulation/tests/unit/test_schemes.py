"""The scheme table is cchost's (`cchost --schemes --json`): the checked-in model/schemes.json must
be what the built binary lists, every Python list of schemes derives from it, experiment files set
a scheme's parameters by its names, and the argv builder passes them as --param."""

import json
import os
import subprocess
from pathlib import Path
from typing import get_args

import pytest

from ccemu.programs import cchost, schemes
from ccemu.model import schemes as model_schemes
from ccemu.model.config import (CREDIT_SCHEMES, PORT_PROFILES, SCHEME_PORT_PROFILES, ConfigError, SchemeName,
                                parse_config)
from ccemu.model.config.ports import PORT_PROFILE_CLASSES

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


def test_the_checked_in_table_is_what_the_built_cchost_lists(binary):
    assert schemes.schemes(binary) == model_schemes.TABLE, "run `make schemes` (model/schemes.json is stale)"


# The table as cchost wrote it, read without model/schemes.py: what the Python lists are held to. The
# tests below iterate it, so that a scheme added to the transport needs no line here.
WRITTEN = json.loads(model_schemes.TABLE_FILE.read_text())
# What bundles and experiment files already name: these keep their profile and driver whatever joins
# the table (cchost's own test pins their wire ids).
PINNED = {"expresspass": ("expresspass", "receiver"), "spraypass": ("spraypass", "receiver"),
          "dctcp": ("dctcp", "sender"), "dctcp+": ("dctcp", "sender"), "dcqcn": ("dcqcn", "sender"),
          "dcqcn+tcd": ("tcd", "sender")}


def test_the_python_config_names_the_tables_schemes_in_the_same_order():
    assert get_args(SchemeName) == model_schemes.names() == tuple(s["name"] for s in WRITTEN)
    assert set(PINNED) <= set(model_schemes.names())


def test_each_scheme_runs_on_the_port_profile_the_table_gives_it_and_the_python_config_has_that_profile():
    assert SCHEME_PORT_PROFILES == {s["name"]: s["port_profile"] for s in WRITTEN}
    assert set(SCHEME_PORT_PROFILES.values()) <= set(PORT_PROFILES)
    assert {name: SCHEME_PORT_PROFILES[name] for name in PINNED} == {name: p for name, (p, _) in PINNED.items()}


def test_the_credit_schemes_are_the_receiver_driven_ones_and_their_profiles_have_a_credit_class():
    assert CREDIT_SCHEMES == tuple(s["name"] for s in WRITTEN if s["driver"] == "receiver")
    assert all((s.driver == "receiver") == s.credit for s in model_schemes.TABLE)
    assert {name: model_schemes.scheme(name).driver for name in PINNED} == {n: d for n, (_, d) in PINNED.items()}
    for name in CREDIT_SCHEMES:  # behind ports without one, credits would queue behind data
        profile = SCHEME_PORT_PROFILES[name]
        port = next(c for c in PORT_PROFILE_CLASSES if c.model_fields["profile"].default == profile)()
        assert port.credit_class()[0] > 0, f"{name} runs on {profile} ports, which have no credit class"


def test_an_experiment_file_sets_a_schemes_parameters_and_cchost_gets_them_as_param_flags(tmp_path):
    config = parse_config({"name": "t", "topology": {"kind": "star"}, "schemes": [
        {"scheme": "dcqcn", "params": {"timer_us": 300, "cnp_interval_us": 40}}, {"scheme": "dctcp"}]})
    argv = cchost.experiment_command(config, "h1", "dcqcn", 7, tmp_path, binary=Path("/opt/cchost"))
    i = argv.index("--param")
    assert argv[i:i + 4] == ["--param", "dcqcn.timer_us=300.0", "--param", "dcqcn.cnp_interval_us=40.0"]
    assert "--param" not in cchost.experiment_command(config, "h1", "dctcp", 7, tmp_path, binary=Path("/opt/cchost"))
    # Written back (a bundle's manifest), a scheme without params reads as before they existed.
    assert "params" not in config.model_dump()["schemes"][1]
    assert config.model_dump()["schemes"][0]["params"] == {"timer_us": 300, "cnp_interval_us": 40}


@pytest.mark.parametrize("params, message", [
    ({"timer": 5}, "schemes.0.params.timer: dcqcn has no such parameter (it has: timer_us, cnp_interval_us, "),
    ({"timer_us": float("nan")}, "schemes.0.params.timer_us: input should be a finite number"),
    ({"timer_us": "soon"}, "schemes.0.params.timer_us: input should be a valid number"),
    ({"timer_us": 0}, "schemes.0.params.timer_us: must be microseconds > 0, at most a year (got 0)"),
])
def test_a_bad_scheme_parameter_is_one_line_naming_it(params, message):
    with pytest.raises(ConfigError) as error:
        parse_config({"name": "t", "topology": {"kind": "star"}, "schemes": [{"scheme": "dcqcn", "params": params}]})
    assert message in str(error.value) and "\n" not in str(error.value)


# Values at and around every kind of bound cchost's ranges have (0, 1, a fraction, a count's least, a year).
PROBES = (-1.0, 0.0, 1e-9, 0.5, 1.0, 1.5, 2.0, 10.0, 4294967295.0, 4294967296.0, 3.2e13, 3.1536e13, 3.1537e13)


def test_validation_admits_a_scheme_parameter_exactly_when_the_built_cchost_does(binary):
    """The fuzzing found initial_window_segments 0.0 accepted by validation and refused by cchost:
    the ranges now come with the table, and every parameter agrees with cchost on every probe."""
    for scheme in model_schemes.TABLE:
        for param in scheme.params:
            for value in PROBES:
                argv = [str(binary), "--host", "1", "--link-mbps", "100", "--records", "/nonexistent", "--scheme",
                        scheme.name, "--param", f"{scheme.name}.{param.name}={value!r}", "--check-args"]
                cchost_takes = subprocess.run(argv, capture_output=True, timeout=30).returncode == 0
                assert param.range.admits(value) == cchost_takes, (scheme.name, param.name, value)


def test_each_scheme_has_a_unique_wire_id_and_its_times_are_the_parameters_that_dilate():
    table = model_schemes.TABLE
    assert len({s.wire_id for s in table}) == len(table)
    for s in table:
        for p in s.params:
            assert p.dilates == (p.unit == "us"), f"{s.name}.{p.name}"
            assert p.doc, f"{s.name}.{p.name} has no doc"
    timer = model_schemes.params("dcqcn")["timer_us"]
    assert (timer.default, timer.unit, timer.dilates) == (55.0, "us", True)
    assert model_schemes.params("dctcp+")["slow_time_unit_us"].default is None  # the flow's base RTT
    with pytest.raises(ValueError) as unknown:
        model_schemes.scheme("tcp")
    assert str(unknown.value) == f"unknown scheme 'tcp' (cchost runs {', '.join(model_schemes.names())})"


def test_the_table_is_read_once_per_build_of_the_binary(tmp_path):
    calls = tmp_path / "calls"
    fake = tmp_path / "cchost"
    table = ('[{"name": "toy", "wire_id": 42, "driver": "sender", "port_profile": "dctcp", "credit": false, "params": '
             '[{"name": "window_segments", "default": 8, "unit": "segments", "dilates": false, "doc": "d", '
             '"range": {"above": null, "at_least": 1, "at_most": 64, "whole": true, "says": "1 to 64"}}]}]')
    fake.write_text(f"#!/bin/sh\necho >> {calls}\necho '{table}'\n")
    fake.chmod(0o755)
    assert model_schemes.names(schemes.schemes(fake)) == ("toy",)
    assert model_schemes.params("toy", schemes.schemes(fake))["window_segments"].default == 8
    assert calls.read_text().count("\n") == 1
    fake.write_text(fake.read_text() + "# rebuilt\n")  # another size: another build
    assert model_schemes.credit_schemes(schemes.schemes(fake)) == ()
    assert calls.read_text().count("\n") == 2


def test_a_cchost_that_cannot_list_its_schemes_is_said_so(tmp_path):
    old = tmp_path / "cchost"
    old.write_text("#!/bin/sh\necho \"error: unexpected argument '--schemes' found\" >&2\nexit 2\n")
    old.chmod(0o755)
    said = r"exited 2: error: unexpected argument '--schemes'.*make setup"
    with pytest.raises(model_schemes.SchemesUnreadable, match=said):
        schemes.schemes(old)
    with pytest.raises(model_schemes.SchemesUnreadable, match="printed no scheme table"):
        model_schemes.parse('{"name": "dctcp"}')


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
