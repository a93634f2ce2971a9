import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccemu.config import ConfigError, load_config, parse_config
from ccemu.kernel import KernelFeatures

REPO = Path(__file__).resolve().parents[2]
NO_NETEM = KernelFeatures(netem=False, openvswitch=False)
WITH_NETEM = KernelFeatures(netem=True, openvswitch=False)


def config(**sections):
    return {"name": "t", "topology": {"kind": "fattree", "k": 4}, **sections}


@pytest.mark.parametrize("data, message", [
    ({**config(), "topolgy": {}}, "config: topolgy: unknown key"),
    (config(topology={"kind": "fattree", "k": 5}), "config: topology.k: must be even (got 5)"),
    (config(topology={"kind": "fattree", "k": 0}), "config: topology.k: must be >= 2 (got 0)"),
    (config(topology={"kind": "fattree", "k": 4, "pods": 2}), "config: topology.pods: unknown key"),
    (config(topology={"kind": "torus"}), "config: topology.kind: must be one of"),
    (config(link={"rate_mbps": 0}), "config: link.rate_mbps: input should be greater than 0 (got 0)"),
    (config(link={"rate_mbps": -5}), "config: link.rate_mbps: input should be greater than 0 (got -5)"),
    (config(port={"buffer_bytes": 1000}), "config: port.buffer_bytes: must hold at least one full frame, "
                                          "1514 bytes at MTU 1500 (got 1000)"),
    (config(link={"delay_us": 100}), "config: link.delay_us: 100 us needs the netem qdisc, which this "
                                     "kernel lacks (CONFIG_NET_SCH_NETEM); use 0"),
    ({"topology": {"kind": "star"}}, "config: name: required key is missing"),
    (config(topology={"kind": "leafspine", "spines": 0}), "config: topology.spines: input should be greater"),
    (config(fabric={"ovs_instances": 0}), "config: fabric.ovs_instances"),
    (config(port={"profile": "red"}), "config: port.profile: must be one of 'droptail', 'dctcp', 'expresspass', "
                                      "'spraypass' (got 'red')"),
    (config(port={"profile": "dctcp", "ecn_threshold_bytes": 200000}),
     "config: port.ecn_threshold_bytes: must be below port.buffer_bytes (150000) (got 200000)"),
    (config(port={"profile": "expresspass", "credit_buffer_credits": 0}),
     "config: port.credit_buffer_credits: input should be greater than or equal to 1 (got 0)"),
    (config(port={"profile": "expresspass", "credit_share": 0.9}), "config: port.credit_share: input should be less"),
    (config(port={"ecn_threshold_bytes": 5000}), "config: port.ecn_threshold_bytes: unknown key"),
    (config(port={"profile": "spraypass", "credit_mark_window": 0}), "config: port.credit_mark_window: input"),
    (config(schemes=[{"scheme": "dctcp", "port": {"profile": "expresspass"}}]),
     "config: schemes.0.port.profile: dctcp needs dctcp ports (got 'expresspass')"),
    (config(schemes=[{"scheme": "dctcp"}, {"scheme": "dctcp"}]), "config: schemes: each scheme once"),
    (config(schemes=[{"scheme": "tcp"}]), "config: schemes.0.scheme: input should be 'expresspass' or 'dctcp'"),
    (config(workload={"kind": "incast", "aggregator": "h17"}),
     "config: workload.aggregator: the topology has h1..h16 (got h17)"),
    (config(workload={"kind": "incast", "flows": [4, 0]}), "config: workload.flows: every N must be >= 1"),
    (config(workload={"kind": "incst"}), "config: workload.kind: must be one of 'incast', 'realistic'"),
    (config(workload={"kind": "realistic", "cdf": "search", "load": 1.5}), "config: workload.load: input should"),
    (config(transport={"alpha": 0}), "config: transport.alpha: input should be greater than 0"),
])
def test_bad_config_names_the_key_and_the_rule_in_one_line(data, message):
    with pytest.raises(ConfigError) as error:
        parse_config(data, kernel=NO_NETEM)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_port_profile_defaults_to_droptail_and_expresspass_to_the_papers_credit_share():
    assert parse_config(config(port={"buffer_bytes": 9000}), kernel=NO_NETEM).port.profile == "droptail"
    port = parse_config(config(port={"profile": "spraypass"}), kernel=NO_NETEM).port
    assert port.credit_share == pytest.approx(84 / (84 + 1538))
    assert (port.credit_buffer_bytes, port.credit_mark_window) == (8 * 84, 4)


def test_link_delay_is_accepted_where_the_kernel_has_netem():
    assert parse_config(config(link={"delay_us": 100}), kernel=WITH_NETEM).link.delay_us == 100


def test_defaults_fill_every_optional_section():
    parsed = parse_config({"name": "t", "topology": {"kind": "star"}}, kernel=NO_NETEM)
    assert parsed.topology.hosts == 4 and parsed.link.mtu == 1500 and parsed.fabric.ovs_instances == "auto"


def test_auto_ovs_instances_is_one_per_cpu_and_five_switches_but_never_more_than_switches(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    fabric = parse_config(config(), kernel=NO_NETEM).fabric
    assert [fabric.instance_count(n) for n in (1, 2, 6, 20, 45, 80)] == [1, 2, 2, 4, 9, 16]
    assert parse_config(config(fabric={"ovs_instances": 3}), kernel=NO_NETEM).fabric.instance_count(20) == 3


@pytest.mark.parametrize("path", sorted((REPO / "workloads" / "experiments").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_experiment_is_valid(path):
    assert load_config(path, kernel=NO_NETEM).name == path.stem


def test_yaml_that_is_not_a_mapping_is_rejected_with_the_file_name(tmp_path):
    bad = tmp_path / "list.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match=r"list.yaml: expected a mapping"):
        load_config(bad)


def test_cli_exits_2_with_one_line_and_starts_nothing(tmp_path):
    bad = tmp_path / "odd.yaml"
    bad.write_text("name: odd\ntopology: {kind: fattree, k: 3}\n")
    state_root = tmp_path / "state"
    result = subprocess.run(
        [sys.executable, "-m", "ccemu.cli", "check", "--config", str(bad)],
        capture_output=True, text=True, env={**os.environ, "CCEMU_STATE_ROOT": str(state_root)},
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"ccemu: {bad}: topology.k: must be even (got 3)"]
    assert result.stdout == ""
    assert not state_root.exists()


def test_schemes_take_their_own_port_profile_by_default():
    parsed = parse_config(config(schemes=[{"scheme": "expresspass"},
                                          {"scheme": "dctcp", "port": {"ecn_threshold_bytes": 16000}}]),
                          kernel=NO_NETEM)
    assert [s.port.profile for s in parsed.schemes] == ["expresspass", "dctcp"]
    assert parsed.for_scheme(parsed.schemes[1]).port.ecn_threshold_bytes == 16000


def test_the_incast_experiment_file_is_valid():
    parsed = load_config(REPO / "workloads" / "experiments" / "incast.yaml", kernel=NO_NETEM)
    assert [s.scheme for s in parsed.schemes] == ["expresspass", "dctcp"]
    assert parsed.workload.kind == "incast"
