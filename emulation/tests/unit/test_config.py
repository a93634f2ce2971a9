import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccemu.model import schemes
from ccemu.model.config import (PORT_PROFILES, SCHEME_PORT_PROFILES, WORKLOAD_KINDS, ConfigError, DctcpPort,
                                DoesNotFit, SchemeConfig, load_config, parse_config)
from ccemu.fabric.admission import admit
from ccemu.fabric.footprint import MachineLimits
from ccemu.model.kernel import KernelFeatures

REPO = Path(__file__).resolve().parents[3]
NO_MODULES = KernelFeatures(openvswitch=False)
# A machine no config here comes near.
ROOMY = MachineLimits(memory_available_bytes=1 << 50, pid_max=4_194_304, threads_max=1 << 30, tasks_now=0,
                      nproc=None, net_namespaces_max=1 << 30, open_files_soft=1024, open_files_hard=1 << 20,
                      file_max=1 << 40, files_now=0)


def config(**sections):
    return {"name": "t", "topology": {"kind": "fattree", "k": 4}, **sections}


# The registries' names as the errors list them, so that a scheme, kind or port profile added to its
# registry needs no line here: a union's tags ("'a', 'b', 'c'"), a Literal's ("'a', 'b' or 'c'").
def tags(names) -> str:
    return ", ".join(map(repr, names))


def either(names) -> str:
    return f"{tags(names[:-1])} or {names[-1]!r}"


@pytest.mark.parametrize("data, message", [
    ({**config(), "topolgy": {}}, "config: topolgy: unknown key"),
    (config(topology={"kind": "fattree", "k": 5}), "config: topology.k: must be even (got 5)"),
    (config(topology={"kind": "fattree", "k": 0}), "config: topology.k: must be >= 2 (got 0)"),
    (config(topology={"kind": "fattree", "k": 4, "pods": 2}), "config: topology.pods: unknown key"),
    (config(topology={"kind": "torus"}), "config: topology.kind: must be one of"),
    (config(link={"rate_mbps": 0}), "config: link.rate_mbps: must be at least 0.001 (1 kbit/s): the port program "
                                    "keeps rates in whole bytes per second (got 0)"),
    (config(link={"rate_mbps": -5}), "config: link.rate_mbps: must be at least 0.001 (1 kbit/s)"),
    (config(port={"buffer_bytes": 1000}), "config: port.buffer_bytes: must hold at least one full frame, "
                                          "1514 bytes at MTU 1500 (got 1000)"),
    (config(link={"delay_us": 100}), "config: link.delay_us: unknown key"),
    ({"topology": {"kind": "star"}}, "config: name: required key is missing"),
    (config(topology={"kind": "leafspine", "spines": 0}), "config: topology.spines: input should be greater"),
    (config(fabric={"ovs_instances": 0}), "config: fabric.ovs_instances"),
    (config(port={"profile": "red"}), f"config: port.profile: must be one of {tags(PORT_PROFILES)} (got 'red')"),
    (config(port={"profile": "dctcp", "ecn_threshold_bytes": 200000}),
     "config: port.ecn_threshold_bytes: must be below port.buffer_bytes (150000) (got 200000)"),
    (config(port={"profile": "dctcp", "ecn_threshold_bytes": 100000, "buffer_bytes": 384500,
                  "host_buffer_bytes": 50000}),
     "config: port.host_buffer_bytes: must be above port.ecn_threshold_bytes (100000) (got 50000)"),
    (config(port={"host_buffer_bytes": 1000}), "config: port.host_buffer_bytes: must hold at least one full frame, "
                                               "1514 bytes at MTU 1500 (got 1000)"),
    (config(port={"profile": "expresspass", "credit_buffer_credits": 0}),
     "config: port.credit_buffer_credits: input should be greater than or equal to 1 (got 0)"),
    (config(port={"profile": "expresspass", "credit_share": 0.9}), "config: port.credit_share: input should be less"),
    (config(port={"ecn_threshold_bytes": 5000}), "config: port.ecn_threshold_bytes: unknown key"),
    (config(port={"profile": "spraypass", "credit_mark_window": 0}), "config: port.credit_mark_window: input"),
    (config(schemes=[{"scheme": "dctcp", "port": {"profile": "expresspass"}}]),
     "config: schemes.0.port.profile: dctcp runs on dctcp ports (got 'expresspass'); to run it on expresspass "
     "ports on purpose, set schemes.0.port_mismatch_intended: true"),
    (config(schemes=[{"scheme": "dctcp"}, {"scheme": "dctcp"}]), "config: schemes: each scheme once"),
    (config(schemes=[{"scheme": "tcp"}]), f"config: schemes.0.scheme: input should be {either(schemes.names())} "
                                          "(got 'tcp')"),
    (config(workload={"kind": "incast", "aggregator": "h17"}),
     "config: workload.aggregator: the topology has h1..h16 (got h17)"),
    (config(workload={"kind": "convergence", "receiver": "h99"}),
     "config: workload.receiver: the topology has h1..h16 (got h99)"),
    (config(workload={"kind": "victim", "hot_receiver": "h17"}),
     "config: workload.hot_receiver: the topology has h1..h16 (got h17)"),
    (config(workload={"kind": "incast", "flows": [4, 0]}), "config: workload.flows: every N must be >= 1"),
    (config(workload={"kind": "incast", "rounds": 2, "settle_rounds": 2}),
     "config: workload.settle_rounds: must be below workload.rounds (2): the rounds after it are the ones counted "
     "(got 2)"),
    (config(workload={"kind": "incst"}), f"config: workload.kind: must be one of {tags(WORKLOAD_KINDS)} (got 'incst')"),
    (config(workload={"kind": "convergence", "per_scheme": {"tcp": {"senders": 2}}}),
     f"config: workload.per_scheme.tcp: input should be {either(schemes.names())} (got 'tcp')"),
    (config(workload={"kind": "convergence", "per_scheme": {"dctcp": {"interval_rtts": 0}}}),
     "config: workload.per_scheme.dctcp.interval_rtts: input should be greater than 0 (got 0)"),
    (config(workload={"kind": "realistic", "cdf": "search", "loads": [0.5, 1.5]}),
     "config: workload.loads: every load must be in (0, 1] (got 1.5)"),
    (config(link={"fabric_share": 1.5}), "config: link.fabric_share: input should be less than or equal to 1 "
                                          "(got 1.5)"),
    ({**config(workload={"kind": "realistic", "load_on": "tor_uplinks"}), "topology": {"kind": "star"}},
     "config: workload.load_on: a load on the ToR uplinks needs a topology whose hosts' switches have uplinks, "
     "all alike (a fat-tree, leaf-spine or dumbbell)"),
    # k=4 with full-rate uplinks: 0.95 on the uplinks needs 0.95 x 15/14 of every host link.
    (config(workload={"kind": "realistic", "loads": [0.5, 0.95], "load_on": "tor_uplinks"}),
     "config: workload.loads: 0.95 on the ToR uplinks needs 1.02 of every host link: at most 1"),
    (config(hosts={"kind": "vm"}), "config: hosts.kind: input should be 'namespace' or 'docker' (got 'vm')"),
    (config(hosts={"cpus": 0.5}), "config: hosts.cpus: needs kind: docker (namespace hosts have no image and no "
                                  "limits)"),
    (config(hosts={"image": "lab/host:1"}), "config: hosts.image: needs kind: docker"),
    (config(hosts={"kind": "docker", "cpus": 0.005}),
     "config: hosts.cpus: input should be greater than or equal to 0.01 (got 0.005)"),
    (config(hosts={"kind": "docker", "memory_mb": 4}),
     "config: hosts.memory_mb: input should be greater than or equal to 6 (got 4)"),
    (config(hosts={"kind": "docker", "per_host": {"h17": {"cpus": 0.5}}}),
     "config: hosts.per_host.h17: the topology has h1..h16"),
    (config(hosts={"kind": "docker", "per_host": {"switch1": {}}}),
     "config: hosts.per_host: keys are host names like h2 (got 'switch1')"),
    (config(hosts={"kind": "docker", "per_host": {"h2": {"cpu": 1}}}), "config: hosts.per_host.h2.cpu: unknown key"),
    # Host names are matched whole and in ASCII: a trailing newline or a full-width digit is no host.
    (config(hosts={"kind": "docker", "per_host": {"h2\n": {"cpus": 1}}}),
     "config: hosts.per_host: keys are host names like h2 (got 'h2\\n')"),
    (config(hosts={"kind": "docker", "per_host": {"h\uff13": {"cpus": 1}}}),
     "config: hosts.per_host: keys are host names like h2 (got 'h\uff13')"),
    (config(link={"host_shares": {"h1\n": 0.5}}), "config: link.host_shares: not a host name: 'h1\\n'"),
    (config(datacenter={"link_gbps": 10, "dilation": 0.5}),
     "config: datacenter.dilation: must be 'auto' or a number from 1 to 1e6 (got 0.5)"),
    (config(datacenter={"link_gbps": 10}, link={"rate_mbps": 20}, fabric={"datapath": "ovs"}),
     "config: link.rate_mbps: is set by datacenter.link_gbps / datacenter.dilation (10) when the experiment "
     "declares a datacenter: remove it (got 20)"),
    (config(datacenter={"link_gbps": 0}), "config: datacenter.link_gbps: input should be greater than 0"),
    (config(transport={"alpha": 0}), "config: transport.alpha: input should be greater than 0"),
    (config(transport={"w_init": 0}), "config: transport.w_init: input should be greater than 0 (got 0)"),
    (config(transport={"w_init": 1.5}), "config: transport.w_init: input should be less than or equal to 1 (got 1.5)"),
    (config(transport={"slow_time_unit_us": 0}),
     "config: transport.slow_time_unit_us: input should be greater than 0 (got 0)"),
    (config(transport={"slow_time_unit_us": float("inf")}),
     "config: transport.slow_time_unit_us: input should be a finite number (got inf)"),
    (config(fabric={"datapath": "xdp"}), "config: fabric.datapath: input should be 'auto', 'ovs' or 'bpf' (got 'xdp')"),
    # What the workload asks of a run, bounded where it is asked (issue 29's accepted nonsense).
    (config(workload={"kind": "incast", "flows": [10**9]}),
     "config: workload.flows: every N must be at most 1000000 (got 1000000000)"),
    (config(workload={"kind": "incast", "total_bytes": 3, "flows": [8]}),
     "config: workload.total_bytes: 3 bytes over N=8 senders leaves responses of 0 bytes: at least 8"),
    (config(workload={"kind": "incast", "flows": [1000], "rounds": 2000}),
     "config: workload.rounds: 2000 rounds of N=1000 are 2000000 flows in a block: at most 1000000"),
    (config(workload={"kind": "incast", "round_timeout_s": float("inf")}),
     "config: workload.round_timeout_s: input should be a finite number (got inf)"),
    (config(workload={"kind": "realistic", "flows": 10**12}), "config: workload.flows: input should be less than or "
                                                              "equal to 1000000 (got 1000000000000)"),
    (config(workload={"kind": "permutation", "size_bytes": 10**20}),
     "config: workload.size_bytes: input should be less than or equal to 1000000000000000"),
    (config(workload={"kind": "shuffle", "tasks_per_host": 10**4}),
     "config: workload.tasks_per_host: 10000 tasks on each of 16 hosts, each sending to every other host, are "
     "2400000 flows: at most 1000000"),
    (config(workload={"kind": "convergence", "senders": 50}),
     "config: workload.senders: 50 senders to h1, each a host of its own: the topology has 15 other hosts"),
    (config(workload={"kind": "convergence", "per_scheme": {"dctcp": {"senders": 16}}}),
     "config: workload.per_scheme.dctcp.senders: 16 senders to h1, each a host of its own"),
    (config(workload={"kind": "victim", "bursters": ["h11", "h99"]}),
     "config: workload.bursters: the topology has h1..h16 (got h99)"),
    (config(workload={"kind": "victim", "victim_receiver": "h1"}),
     "config: workload.victim_receiver: h1 is already one of victim_senders: each host has one role"),
    (config(workload={"kind": "victim", "burst_interval_us": 1e-9}),
     "config: workload.burst_interval_us: 6 bursters every 1e-09 us over the flows' "),
    # Found by test_fuzz_config: the smallest float (a division by zero once in seconds).
    (config(workload={"kind": "victim", "burst_interval_us": 5e-324}),
     "config: workload.burst_interval_us: 6 bursters every 4.94066e-324 us over the flows' "),
    (config(workload={"kind": "victim", "burst_interval_us": float("inf")}),
     "config: workload.burst_interval_us: input should be a finite number (got inf)"),
    (config(port={"profile": "dcqcn", "buffer_bytes": 3_000_000, "kmax_bytes": 5_000_000}),
     "config: port.kmax_bytes: must be below port.buffer_bytes (3000000): no queue reaches it (got 5000000)"),
    (config(port={"profile": "tcd", "buffer_bytes": 3_000_000, "threshold_bytes": 4_000_000}),
     "config: port.threshold_bytes: must be below port.buffer_bytes (3000000): no queue reaches it"),
    (config(port={"profile": "dcqcn", "buffer_bytes": 3_000_000,
                  "lossless": {"xoff_bytes": 30_000, "xon_bytes": 20_000, "headroom_bytes": 0}}),
     "config: port.lossless.headroom_bytes: must hold at least the frame an ingress is receiving when its pause is "
     "decided, 1514 bytes at MTU 1500 (got 0)"),
    # A string is no number, and a YAML 1.1 reading of one (1_0) is a string to the config's YAML 1.2.
    (config(topology={"kind": "fattree", "k": "4"}), "config: topology.k: input should be a valid integer (got '4')"),
    (config(workload={"kind": "incast", "rounds": "1_0"}),
     "config: workload.rounds: input should be a valid integer (got '1_0')"),
    (config(transport={"persistent_connections": "false"}),
     "config: transport.persistent_connections: input should be a valid boolean (got 'false')"),
    (config(datacenter={"link_gbps": 0.001, "dilation": 16000}),
     "config: datacenter.dilation: makes link.rate_mbps (datacenter.link_gbps / datacenter.dilation), which must "
     "be at least 0.001 (1 kbit/s)"),
    (config(datacenter={"link_gbps": 10, "dilation": "yes"}),
     "config: datacenter.dilation: input should be a valid number (got 'yes')"),
])
def test_bad_config_names_the_key_and_the_rule_in_one_line(data, message):
    with pytest.raises(ConfigError) as error:
        parse_config(data, kernel=NO_MODULES)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("section, message", [
    ({"link": {"rate_mbps": 1e12}}, "config: link.rate_mbps: must be at most 100000 (100 Gbit/s): the port program's "
                                    "fluid drain overflows 64 bits above 147573 Mbit/s (got 1e+12)"),
    ({"link": {"rate_mbps": 100_001}}, "config: link.rate_mbps: must be at most 100000 (100 Gbit/s): the port "
                                       "program's fluid drain overflows 64 bits above 147573 Mbit/s (got 100001)"),
    ({"link": {"rate_mbps": float("nan")}}, "config: link.rate_mbps: input should be a finite number (got nan)"),
    ({"port": {"buffer_bytes": (1 << 30) + 1}},
     "config: port.buffer_bytes: input should be less than or equal to 1073741824 (got 1073741825)"),
    ({"port": {"profile": "expresspass", "credit_buffer_credits": 12_782_641}},
     "config: port.credit_buffer_credits: input should be less than or equal to 12782640 (got 12782641)"),
    ({"port": {"profile": "spraypass", "credit_mark_window": 1 << 32}},
     "config: port.credit_mark_window: input should be less than or equal to 4294967295 (got 4294967296)"),
    ({"port": {"profile": "dctcp", "buffer_bytes": 1 << 30, "ecn_threshold_bytes": 1 << 30}},
     "config: port.ecn_threshold_bytes: must be below port.buffer_bytes (1073741824) (got 1073741824)"),
    ({"link": {"rate_mbps": 0.01}, "port": {"profile": "expresspass", "credit_share": 0.01}},
     "config: port.credit_share: gives the credit class 100 bit/s at link.rate_mbps 0.01; it needs at least 672 "
     "(one credit a second), or the port program sees no credit class (got 0.01)"),
    ({"schemes": [{"scheme": "expresspass", "port": {"profile": "spraypass"}}]},
     "config: schemes.0.port.profile: expresspass runs on expresspass ports (got 'spraypass'); to run it on "
     "spraypass ports on purpose, set schemes.0.port_mismatch_intended: true"),
    ({"schemes": [{"scheme": "dctcp"}, {"scheme": "expresspass", "port": {"profile": "droptail"}}]},
     "config: schemes.1.port.profile: expresspass sends data against credits, and droptail ports have no credit "
     "class (use expresspass ports)"),
    ({"schemes": [{"scheme": "expresspass", "port": {"profile": "dctcp"}, "port_mismatch_intended": True}]},
     "config: schemes.0.port.profile: expresspass sends data against credits, and dctcp ports have no credit class "
     "(use expresspass ports)"),
    ({"schemes": [{"scheme": "spraypass", "port": {"profile": "dctcp"}}]},
     "config: schemes.0.port.profile: spraypass sends data against credits, and dctcp ports have no credit class "
     "(use spraypass ports)"),
    ({"schemes": [{"scheme": "spraypass", "port": {"profile": "dctcp"}, "port_mismatch_intended": True}]},
     "config: schemes.0.port.profile: spraypass sends data against credits, and dctcp ports have no credit class "
     "(use spraypass ports)"),
    ({"schemes": [{"scheme": "dctcp+", "port": {"profile": "spraypass"}}]},
     "config: schemes.0.port.profile: dctcp+ runs on dctcp ports (got 'spraypass'); to run it on spraypass ports "
     "on purpose, set schemes.0.port_mismatch_intended: true"),
])
def test_what_the_port_program_cannot_represent_or_a_scheme_cannot_use_is_refused_in_one_exact_line(section, message):
    with pytest.raises(ConfigError) as error:
        parse_config(config(**section), kernel=NO_MODULES)
    assert str(error.value) == message


@pytest.mark.parametrize("scheme, profile", [("expresspass", "spraypass"), ("dctcp", "droptail"),
                                             ("dctcp", "expresspass")])
def test_a_scheme_runs_on_another_schemes_ports_when_the_mismatch_is_intended(scheme, profile):
    parsed = parse_config(config(schemes=[{"scheme": scheme, "port": {"profile": profile},
                                           "port_mismatch_intended": True}]), kernel=NO_MODULES)
    assert parsed.schemes[0].port.profile == profile


def test_the_largest_link_rate_and_buffers_are_accepted():
    parsed = parse_config(config(link={"rate_mbps": 100_000}, port={"buffer_bytes": 1 << 20}), kernel=NO_MODULES)
    assert parsed.link.rate_mbps == 100_000


def test_buffer_and_k_are_documented_as_bytes_on_the_wire():
    for field in (DctcpPort.model_fields["buffer_bytes"], DctcpPort.model_fields["ecn_threshold_bytes"]):
        assert "bytes on the wire" in field.description and "20 x 1538 = 30760" in field.description
    assert "port_mismatch_intended" in SchemeConfig.model_fields
    assert "on purpose" in SchemeConfig.model_fields["port_mismatch_intended"].description


def test_validating_a_config_counts_its_topology_and_never_builds_it(monkeypatch):
    def no_building(*args):
        raise AssertionError("validation built the topology")

    for factory in ("fat_tree", "leaf_spine", "dumbbell", "star"):
        monkeypatch.setattr(f"ccemu.model.config.topology.{factory}", no_building)
    with pytest.raises(ConfigError, match="workload.aggregator: the topology has h1..h16000000 "):
        parse_config(config(topology={"kind": "fattree", "k": 400},
                            workload={"kind": "incast", "aggregator": "h99999999"}), kernel=NO_MODULES)
    with pytest.raises(DoesNotFit, match="topology.k: a fat-tree with k=400 has 16000000 hosts"):
        admit(parse_config(config(topology={"kind": "fattree", "k": 400}), kernel=NO_MODULES))


def test_port_profile_defaults_to_droptail_and_expresspass_to_the_papers_credit_share():
    assert parse_config(config(port={"buffer_bytes": 9000}), kernel=NO_MODULES).port.profile == "droptail"
    port = parse_config(config(port={"profile": "spraypass"}), kernel=NO_MODULES).port
    assert port.credit_share == pytest.approx(84 / (84 + 1538))
    assert (port.credit_buffer_bytes, port.credit_mark_window) == (8 * 84, 4)


def test_link_delay_is_no_key():
    # Propagation delay is the datacenter's (datacenter.link_delay_us), added at the hosts: netem
    # behind a port would sit inside the queue the port programs measure.
    for delay in (100, 0):
        with pytest.raises(ConfigError, match="^config: link.delay_us: unknown key$"):
            parse_config(config(link={"delay_us": delay}), kernel=NO_MODULES)


def test_a_config_is_judged_without_reading_the_machine(monkeypatch):
    def no_probing(*args):
        raise AssertionError("validation probed the machine")

    monkeypatch.setattr("ccemu.fabric.footprint.MachineLimits.probe", no_probing)
    # The kernel is not probed either: the model cannot reach fabric/kernel.py's probe_kernel at
    # all (the layers contract, tests/unit/test_layout.py), so there is nothing to patch for it.
    monkeypatch.setattr("os.cpu_count", no_probing)
    assert parse_config(config(topology={"kind": "fattree", "k": 400}, hosts={"kind": "docker", "cpus": 4096},
                               datacenter={"link_gbps": 10})).topology.k == 400


def test_admission_refuses_more_cpus_than_the_machine_has_naming_the_key():
    parsed = parse_config(config(hosts={"kind": "docker", "cpus": 3, "per_host": {"h2": {"cpus": 4}}}))
    with pytest.raises(ConfigError, match=r"^config: hosts.cpus: this machine has 2 CPUs \(got 3\)$"):
        admit(parsed, cpus=2, machine=ROOMY)
    with pytest.raises(ConfigError, match=r"^incast.yaml: hosts.per_host.h2.cpus: this machine has 3 CPUs \(got 4\)$"):
        admit(parsed, "incast.yaml", cpus=3, machine=ROOMY)
    assert admit(parsed, cpus=4, machine=ROOMY) is parsed


def test_defaults_fill_every_optional_section():
    parsed = parse_config({"name": "t", "topology": {"kind": "star"}}, kernel=NO_MODULES)
    assert parsed.topology.hosts == 4 and parsed.link.mtu == 1500 and parsed.fabric.ovs_instances == "auto"


def test_auto_ovs_instances_is_one_per_cpu_and_five_switches_but_never_more_than_switches(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    fabric = parse_config(config(), kernel=NO_MODULES).fabric
    assert [fabric.instance_count(n) for n in (1, 2, 6, 20, 45, 80)] == [1, 2, 2, 4, 9, 16]
    assert parse_config(config(fabric={"ovs_instances": 3}), kernel=NO_MODULES).fabric.instance_count(20) == 3


@pytest.mark.parametrize("path", sorted((REPO / "workloads" / "experiments").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_experiment_is_valid(path):
    assert load_config(path, kernel=NO_MODULES).name == path.stem


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
                          kernel=NO_MODULES)
    assert [s.port.profile for s in parsed.schemes] == ["expresspass", "dctcp"]
    assert parsed.for_scheme(parsed.schemes[1]).port.ecn_threshold_bytes == 16000


def test_every_scheme_of_the_table_is_accepted_on_its_own_port_profile_by_default():
    parsed = parse_config(config(schemes=[{"scheme": s} for s in schemes.names()]), kernel=NO_MODULES)
    assert [(s.scheme, s.port.profile) for s in parsed.schemes] == list(SCHEME_PORT_PROFILES.items())
    assert next(s for s in parsed.schemes if s.scheme == "spraypass").port.credit_mark_window == 4


def test_w_init_and_slow_time_unit_are_unset_by_default_and_taken_when_given():
    default = parse_config(config(), kernel=NO_MODULES).transport
    assert (default.w_init, default.slow_time_unit_us) == (None, None)
    given = parse_config(config(transport={"alpha": 0.0625, "w_init": 0.0625, "slow_time_unit_us": 100}),
                         kernel=NO_MODULES).transport
    assert (given.w_init, given.slow_time_unit_us) == (0.0625, 100.0)


def test_the_incast_experiment_file_is_valid():
    parsed = load_config(REPO / "workloads" / "experiments" / "incast.yaml", kernel=NO_MODULES)
    ports = {s.scheme: s.port for s in parsed.schemes}
    assert {"expresspass", "spraypass", "dctcp", "dctcp+"} <= set(ports)
    assert all(port.profile == SCHEME_PORT_PROFILES[scheme] for scheme, port in ports.items())
    expresspass, spraypass, dctcp, dctcp_plus = (ports[s] for s in ("expresspass", "spraypass", "dctcp", "dctcp+"))
    assert (spraypass.buffer_bytes, spraypass.credit_buffer_credits, spraypass.credit_share) == \
        (expresspass.buffer_bytes, expresspass.credit_buffer_credits, expresspass.credit_share)
    assert spraypass.credit_mark_window == 4
    assert dctcp_plus == dctcp
    assert parsed.workload.kind == "incast"


def test_hosts_are_namespaces_by_default_and_per_host_limits_override_every_hosts():
    assert parse_config(config()).hosts.kind == "namespace"
    hosts = parse_config(config(hosts={"kind": "docker", "cpus": 0.5, "memory_mb": 64,
                                       "per_host": {"h2": {"cpus": 0.05}}})).hosts
    assert (hosts.limits("h2").cpus, hosts.limits("h2").memory_mb) == (0.05, 64)
    assert (hosts.limits("h3").cpus, hosts.limits("h3").memory_mb) == (0.5, 64)
    assert parse_config(config(hosts={"kind": "docker"})).hosts.limits("h1").cpus is None


def test_a_convergence_scheme_takes_its_own_senders_and_interval_where_given():
    workload = parse_config(config(workload={"kind": "convergence", "senders": 4, "interval_rtts": 40,
                                             "per_scheme": {"dctcp": {"senders": 2, "interval_rtts": 600},
                                                            "dctcp+": {"interval_rtts": 100}}}),
                            kernel=NO_MODULES).workload
    assert (workload.senders_of("dctcp"), workload.interval_rtts_of("dctcp")) == (2, 600)
    assert (workload.senders_of("dctcp+"), workload.interval_rtts_of("dctcp+")) == (4, 100)
    assert (workload.senders_of("expresspass"), workload.interval_rtts_of("expresspass")) == (4, 40)


def test_each_port_profile_says_its_own_manifest_entries_and_credit_gap_in_the_order_the_schemes_give():
    from ccemu.model.config import DropTailPort, ExpressPassPort
    from ccemu.model.config.ports import DcqcnPort, SprayPassPort
    assert DropTailPort().manifest_entries(6) == {} == DcqcnPort().manifest_entries(6)
    assert DctcpPort(ecn_threshold_bytes=20_000).manifest_entries(0) == {"dctcp_k_bytes": 20_000}
    # (8 credits + a burst of 2) x (credit + data frame) x 6 credit queues: what bundles have always said.
    bound = {"expresspass_queue_bound_bytes": 97_320, "expresspass_credit_queues_on_longest_path": 6}
    assert ExpressPassPort().manifest_entries(6) == bound == SprayPassPort().manifest_entries(6)
    assert ExpressPassPort().manifest_entries(0) == {}  # no block ran: no path to count
    manifest: dict = {}
    for port in (DctcpPort(), ExpressPassPort(), DctcpPort(ecn_threshold_bytes=40_000)):  # as the runner writes them
        manifest.update(port.manifest_entries(6))
    assert list(manifest.items()) == [("dctcp_k_bytes", 40_000), *bound.items()]
    assert DropTailPort().credit_gap_us(10) is None and DctcpPort().credit_gap_us(10) is None
    assert ExpressPassPort(credit_share=0.05).credit_gap_us(10) == pytest.approx(84 * 8 / (10 * 0.05))


@pytest.mark.parametrize("section, message", [
    ({"datacenter": {"link_gbps": 10, "dilation": True}}, "config: datacenter.dilation: must be a number (got true)"),
    ({"datacenter": {"link_gbps": True}}, "config: datacenter.link_gbps: must be a number (got true)"),
    # A string is no number either, even one that reads as one (strict sections).
    ({"datacenter": {"link_gbps": "yes"}}, "config: datacenter.link_gbps: input should be a valid number (got 'yes')"),
    ({"datacenter": {"link_gbps": "10"}}, "config: datacenter.link_gbps: input should be a valid number (got '10')"),
    ({"link": {"rate_mbps": True}}, "config: link.rate_mbps: must be a number (got true)"),
    ({"seed": False}, "config: seed: must be a number (got false)"),
    ({"topology": {"kind": "star", "hosts": True}}, "config: topology.hosts: must be a number (got true)"),
    ({"workload": {"kind": "incast", "flows": [8, True]}}, "config: workload.flows.1: must be a number (got true)"),
    ({"schemes": [{"scheme": "dctcp", "params": {"g": True}}]},
     "config: schemes.0.params.g: must be a number (got true)"),
    ({"port": {"profile": "dctcp", "ecn_threshold_bytes": True}},
     "config: port.ecn_threshold_bytes: must be a number (got true)"),
    ({"fabric": {"ovs_instances": True}},
     "config: fabric.ovs_instances: must be a number (got true)"),
])
def test_a_bool_where_a_number_is_meant_is_refused_naming_the_key(section, message):
    with pytest.raises(ConfigError) as error:
        parse_config(config(**section), kernel=NO_MODULES)
    assert str(error.value) == message


def test_a_bool_is_still_taken_where_the_key_admits_one():
    parsed = parse_config(config(fabric={"pin_ovs": True}, transport={"persistent_connections": False},
                                 workload={"kind": "incast", "warm_up": False}), kernel=NO_MODULES)
    assert parsed.fabric.pin_ovs is True and parsed.workload.warm_up is False


def test_the_derived_link_rate_is_checked_explicitly_naming_the_datacenter_key_even_without_asserts():
    code = ("from ccemu.model.config import parse_config, KeyedError\n"
            "c = parse_config({'name': 't', 'topology': {'kind': 'star'}, "
            "'datacenter': {'link_gbps': 10, 'dilation': 1000}})\n"
            "bad = c.model_copy(update={'link': c.link.model_copy(update={'rate_mbps': 7.0})})\n"
            "try:\n    bad._links_ran_at_the_dilated_rate()\nexcept KeyedError as e:\n    print(e.loc, e)\n")
    for flags in ([], ["-O"]):
        result = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True)
        assert result.stdout.strip() == ("('datacenter', 'link_gbps') link.rate_mbps (7) is not datacenter.link_gbps / "
                                         "datacenter.dilation (10): give both as plain numbers and no link.rate_mbps")


@pytest.mark.parametrize("name", ["..", ".", "../x", "a/b", "-x", "a..b", "x" * 65, ""])
def test_a_name_that_could_leave_the_results_folder_is_refused_naming_name(name):
    with pytest.raises(ConfigError) as error:
        parse_config({**config(), "name": name}, kernel=NO_MODULES)
    assert str(error.value).startswith("config: name: must be a name: letters, digits, '_', '-' and '.', starting "
                                       "with a letter or digit, no '..', at most 64 characters (got ")
    assert "\n" not in str(error.value)


def test_a_sweep_named_dot_dot_is_refused_in_one_line_naming_name(tmp_path):
    from ccemu.sweeps.plan import load_sweep
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("name: ..\nexperiment: incast\ngrid: {workload.rounds: [1]}\n")
    with pytest.raises(ConfigError) as error:
        load_sweep(sweep)
    assert str(error.value) == (f"{sweep}: name: must be a name: letters, digits, '_', '-' and '.', starting with a "
                                "letter or digit, no '..', at most 64 characters (got '..')")


@pytest.mark.parametrize("data", [
    {**config(), "name": ["x" * 8] * 2000},
    config(topology={"kind": "y" * 5000}),
    config(topology={"kind": "fattree", "k": "9" * 4000}),
    config(workload={"kind": "incast", "flows": [0] * 3000}),
    config(link={"rate_mbps": "x" * 5000}),
    config(hosts={"kind": "docker", "per_host": {"h" * 5000: {}}}),
    config(fabric={"ovs_instances": "z" * 5000}),
    config(schemes=[{"scheme": "dctcp", "params": {"g" * 5000: float("nan")}}]),
    {**config(), "k" * 5000: 1},
    config(datacenter={"link_gbps": 10}, link={"rate_mbps": [1] * 5000}),
])
def test_an_error_quotes_at_most_a_short_excerpt_of_the_value(data):
    with pytest.raises(ConfigError) as error:
        parse_config(data, kernel=NO_MODULES)
    assert len(str(error.value)) <= len("config: ") + 400 and "\n" not in str(error.value)
    assert "..." in str(error.value)


@pytest.mark.parametrize("path", [REPO / "ci" / "smoke.yaml"], ids=lambda p: p.name)
def test_the_ci_smoke_config_is_valid(path):
    assert load_config(path, kernel=NO_MODULES).name == "smoke"


@pytest.mark.parametrize("path", sorted((REPO / "workloads" / "sweeps").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_sweep_loads(path):
    from ccemu.sweeps.plan import load_sweep
    assert load_sweep(path).points
