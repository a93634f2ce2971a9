"""struct port_config is described once (ccemu/ports/fields.py): the C header is generated from
the table, the Python map layout and the loader's config lines come from it, and the built loader
parses what Python writes."""

import re
import subprocess
import typing
from pathlib import Path

import pytest

from ccemu.model.kernel import KernelFeatures
from ccemu.model.config import PORT_PROFILES, parse_config
from ccemu.model.config.ports import PORT_PROFILE_CLASSES, PortConfig
from ccemu.ports import fields
from ccemu.ports.layouts import PORT_CONFIG
from ccemu.ports.program import BPF_BUILD_DIR
from ccemu.ports.tc import PortShape, port_program_line, port_program_values

BPF = Path(fields.__file__).parent / "bpf"
NO_MODULES = KernelFeatures(openvswitch=False)
# The markers the existing profiles run, kept whatever profiles join PORT_PROFILE_CLASSES (the tests
# below take every profile from the registry: a new one needs no line here).
PROFILE_MARKERS = {"droptail": "none", "dctcp": "dctcp", "expresspass": "none", "spraypass": "spraypass",
                   "dcqcn": "red", "tcd": "tcd"}


def loader() -> Path:
    path = BPF_BUILD_DIR / "port_loader"
    if not path.exists():
        pytest.skip("the port loader is not built (make setup)")
    return path


def shape_of(profile: str) -> PortShape:
    config = parse_config({"name": "t", "topology": {"kind": "star"}, "link": {"rate_mbps": 10},
                           "port": {"profile": profile}}, kernel=NO_MODULES)
    return PortShape.of(config)


def test_the_checked_in_header_is_what_the_field_table_generates():
    assert (BPF / "port_config.h").read_text() == fields.render_header(), (
        "regenerate it: python -m ccemu.ports.fields > ccemu/ports/bpf/port_config.h")


def test_port_h_takes_struct_port_config_from_the_generated_header_only():
    port_h = (BPF / "port.h").read_text()
    assert '#include "port_config.h"' in port_h and "struct port_config {" not in port_h


def test_the_python_map_layout_is_the_field_tables():
    assert [name for name, _ in PORT_CONFIG.fields] == [f.name for f in fields.PORT_CONFIG_FIELDS]
    assert PORT_CONFIG.size == 128


def test_the_python_map_layout_has_the_compiled_structs_offsets():
    layout = subprocess.run([str(loader()), "--layout"], capture_output=True, text=True, check=True).stdout
    c = {name: int(value) for name, value in (line.split() for line in layout.splitlines())
         if name.startswith("port_config")}
    python = {"port_config": PORT_CONFIG.size} | {f"port_config.{name}": offset
                                                  for name, offset in PORT_CONFIG.offsets().items()}
    assert python == c


def test_every_profile_is_in_the_config_union_once_and_runs_a_marker_with_that_markers_parameters():
    assert typing.get_args(typing.get_args(PortConfig)[0]) == PORT_PROFILE_CLASSES
    assert len(PORT_PROFILE_CLASSES) == len(set(PORT_PROFILES))
    ran = {profile: shape_of(profile).marker for profile in PORT_PROFILES}
    assert {profile: ran[profile].kind for profile in PROFILE_MARKERS} == PROFILE_MARKERS
    for profile, marker in ran.items():
        assert marker.kind in fields.MARKERS, profile
        assert {name for name, _ in marker.fields} == {f.name for f in fields.MARKER_PARAMETERS
                                                       if f.of_marker == marker.kind}, profile


def test_every_marker_but_none_has_its_case_in_the_port_program():
    program = (BPF / "port.bpf.c").read_text()
    for marker in fields.MARKERS:
        if marker != "none":
            assert re.search(rf"\bPORT_MARKER_{marker.upper()}\b", program), marker
    assert "ecn_threshold_bytes)" not in program  # no "0 means off" test of a parameter


def test_a_line_has_every_written_field_once_and_refuses_missing_or_unknown_ones():
    values = port_program_values(shape_of("dctcp"), 1, 2, switch_port=True)
    keys = [pair.split("=")[0] for pair in fields.config_line("s1-eth1", values).split()]
    assert keys == ["port"] + [f.name for f in fields.WRITTEN_FIELDS] and "pad" not in keys
    with pytest.raises(ValueError, match=r"missing \['xon_bytes'\], unknown \['tcd'\]"):
        fields.config_line("x", {**{k: v for k, v in values.items() if k != "xon_bytes"}, "tcd": 1})
    with pytest.raises(ValueError, match="buffer_bytes takes 2 values"):
        fields.config_line("x", {**values, "buffer_bytes": 5})
    with pytest.raises(ValueError, match="marker 'ecn' is none of"):
        fields.config_line("x", {**values, "marker": "ecn"})
    with pytest.raises(ValueError, match=r"xoff_bytes: 4294967296 is not an integer in \[0, 4294967295\]"):
        fields.config_line("x", {**values, "xoff_bytes": 1 << 32})


@pytest.mark.parametrize("profile", PORT_PROFILES)
def test_the_loader_parses_every_profiles_line_back_to_the_same_line(tmp_path, profile):
    lines = [port_program_line("s1-eth1", shape_of(profile), 3, 4, switch_port=True),
             port_program_line("h1-eth0", shape_of(profile), 4, 3, switch_port=False)]
    config = tmp_path / "ports"
    config.write_text("\n".join(lines) + "\n")
    done = subprocess.run([str(loader()), "check", str(config)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == lines


GOOD = port_program_line("s1-eth1", shape_of("dcqcn"), 3, 4, switch_port=True)


@pytest.mark.parametrize("change, message", [
    ({"tcd": "1"}, "unknown key 'tcd'"),
    ({"xon_bytes": None, "marker": None}, "missing keys: xon_bytes marker"),
    ({"port": None}, "missing keys: port"),
    ({"xoff_bytes": "12k"}, "bad value for xoff_bytes: '12k' (an integer below 2^32)"),
    ({"xoff_bytes": "4294967296"}, "bad value for xoff_bytes: '4294967296' (an integer below 2^32)"),
    ({"xoff_bytes": "-1"}, "bad value for xoff_bytes: '-1' (an integer below 2^32)"),
    ({"buffer_bytes": "150000"}, "bad value for buffer_bytes: '150000' (comma-separated integers, data then credit)"),
    ({"buffer_bytes": "1,2,3"}, "bad value for buffer_bytes: '1,2,3' (comma-separated integers, data then credit)"),
    ({"marker": "ecn"}, "bad value for marker: 'ecn' (a marker name of port_config.h)"),
    ({"red_kmin_bytes": "300000"}, "marker red needs red_kmin_bytes below red_kmax_bytes"),
    ({"xon_bytes": "400000"}, "xon_bytes must not be above xoff_bytes"),
    ({"port_id": "65536"}, "port_id and peer_port_id must be below PORT_MAX_FABRIC_PORTS (65536)"),
    ({"marker": "dctcp"}, "marker dctcp needs ecn_threshold_bytes above 0"),
    ({"marker": "spraypass"}, "marker spraypass needs credit_mark_window and credit_rate_Bps above 0"),
])
def test_the_loader_refuses_a_bad_line_with_one_line_naming_what_is_wrong(tmp_path, change, message):
    pairs = dict(pair.split("=", 1) for pair in GOOD.split())
    for key, value in change.items():
        if value is None:
            del pairs[key]
        else:
            pairs[key] = value
    config = tmp_path / "ports"
    config.write_text(GOOD + "\n" + " ".join(f"{k}={v}" for k, v in pairs.items()) + "\n")
    done = subprocess.run([str(loader()), "check", str(config)], capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"port_loader: {config} line 2: ") and done.stderr.count("\n") == 1
    assert message in done.stderr


def test_the_loader_refuses_a_repeated_key(tmp_path):
    config = tmp_path / "ports"
    config.write_text(GOOD + " lossless=1\n")
    done = subprocess.run([str(loader()), "check", str(config)], capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr == f"port_loader: {config} line 1: key 'lossless' given twice\n"


def test_a_port_configures_itself_and_only_a_hosts_nic_turns_its_offloads_off():
    from ccemu.ports.interface import configure
    from ccemu.ports.program import PortIds
    from ccemu.ports.tc import port_qdiscs

    shape = shape_of("dctcp")
    switch_port, nic = configure("s1-eth1", PortIds(1, 2), shape, True), configure("h1-eth0", PortIds(2, 1), shape,
                                                                                     False)
    assert switch_port.ip == ("link set s1-eth1 up",) and switch_port.shell == ()
    assert nic.shell == ("ethtool -K h1-eth0 tx off tso off gso off > /dev/null",)
    assert switch_port.tc == tuple(port_qdiscs("s1-eth1", shape))
    assert nic.program == port_program_line("h1-eth0", shape, 2, 1, switch_port=False)
