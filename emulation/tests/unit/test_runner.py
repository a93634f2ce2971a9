"""What the runner hands cchost, computed without a fabric: schedules (with each flow's number
of equal-cost paths, from the topology's routing) and the transport's command-line flags."""

import json
import random

import pytest

from ccemu.programs.cchost import ScheduledFlow, write_schedule
from ccemu.model.config import IncastWorkload, parse_config
from ccemu.model.kernel import KernelFeatures
from ccemu.model.routing import Routing
from ccemu.programs.cchost import check_args, transport_args
from ccemu.experiments.incast import incast_schedule, warm_up_schedule
from ccemu.model.topology import fat_tree, leaf_spine

NO_MODULES = KernelFeatures(openvswitch=False)


def test_a_schedule_line_carries_paths_when_set_and_leaves_it_out_otherwise():
    with_paths = json.loads(ScheduledFlow(id=7, dst=1, size=1000, start=0.5, scheme="spraypass", paths=4).line())
    assert with_paths == {"id": 7, "dst": 1, "size": 1000, "start": 0.5, "scheme": "spraypass", "paths": 4}
    assert "paths" not in json.loads(ScheduledFlow(id=7, dst=1, size=1000, start=0.5).line())


@pytest.mark.parametrize("paths", [0, 257])
def test_a_flow_with_paths_outside_what_a_path_id_names_is_refused(paths):
    with pytest.raises(ValueError, match=f"flow 1: paths must be 1..256 \\(got {paths}\\)"):
        ScheduledFlow(id=1, dst=2, size=1, start=0.0, paths=paths)


def test_incast_flows_on_a_k4_fat_tree_carry_1_path_under_one_edge_2_within_a_pod_and_4_across_pods(tmp_path):
    # k=4: h1 h2 under e1, h3 h4 under e2 (pod 0), h5..h16 in pods 1-3.
    topo = fat_tree(4)
    workload = IncastWorkload(kind="incast", aggregator="h1", flows=[15])
    flows = incast_schedule(Routing(topo), topo.host_names, workload, 15, random.Random(1), start=0.2, first_id=1)
    expected = {"h2": 1, "h3": 2, "h4": 2, **{f"h{i}": 4 for i in range(5, 17)}}
    assert {src: flow.paths for src, flow in flows} == expected
    assert [flow.id for _, flow in flows] == list(range(1, 16)) and {flow.dst for _, flow in flows} == {1}

    by_sender = {src: flow for src, flow in flows}
    lines = write_schedule(tmp_path / "h3.flows", [by_sender["h3"]]).read_text().splitlines()
    assert [json.loads(line)["paths"] for line in lines] == [2]


def test_the_warm_up_opens_as_many_one_packet_connections_per_sender_as_a_round_gives_it_one_sender_after_another():
    topo = fat_tree(4)
    rtt = {f"h{i}": 0.001 * i for i in range(2, 17)}  # wall seconds
    flows = warm_up_schedule(Routing(topo), topo.host_names, "h1", 40, 10e6, rtt.__getitem__, start=0.5,
                             first_id=121)
    workload = IncastWorkload(kind="incast", aggregator="h1", flows=[40])
    round_senders = [src for src, _ in incast_schedule(Routing(topo), topo.host_names, workload, 40, random.Random(3),
                                                       start=0, first_id=1)]
    per_sender = {src: sum(1 for s, _ in flows if s == src) for src in rtt}
    assert set(per_sender.values()) == {3} == {max(round_senders.count(src) for src in rtt)}  # 40 over 15: 2 or 3
    assert [flow.id for _, flow in flows] == list(range(121, 121 + 45))
    assert {(flow.size, flow.dst) for _, flow in flows} == {(1450, 1)}
    starts = {src: flow.start for src, flow in flows}
    # Each sender once the previous one's 3 frames crossed a 10 Mbit/s link and two of its RTTs passed.
    order = sorted(starts, key=starts.get)
    assert starts[order[0]] == 0.5
    for before, after in zip(order, order[1:]):
        assert starts[after] - starts[before] == pytest.approx(3 * 1538 * 8 / 10e6 + 2 * rtt[before])


def test_incast_flows_on_a_leaf_spine_carry_one_path_per_spine_across_leaves():
    topo = leaf_spine(leaves=2, spines=3, hosts_per_leaf=2)  # h1 h2 on l1, h3 h4 on l2
    workload = IncastWorkload(kind="incast", aggregator="h1", flows=[3])
    flows = incast_schedule(Routing(topo), topo.host_names, workload, 3, random.Random(1), start=0.0, first_id=1)
    assert {src: flow.paths for src, flow in flows} == {"h2": 1, "h3": 3, "h4": 3}


def test_w_init_and_slow_time_unit_reach_cchost_only_when_the_config_sets_them():
    base = {"name": "t", "topology": {"kind": "fattree", "k": 4}, "seed": 2}
    default = transport_args(parse_config(base, kernel=NO_MODULES), "h3")
    assert "--w-init" not in default and "--slow-time-unit-us" not in default
    assert default[default.index("--seed") + 1] == "2003"
    given = transport_args(parse_config({**base, "transport": {"w_init": 0.0625, "slow_time_unit_us": 100}},
                                        kernel=NO_MODULES), "h3")
    assert given[given.index("--w-init") + 1] == "0.0625"
    assert given[given.index("--slow-time-unit-us") + 1] == "100.0"


def test_cchost_runs_under_sched_fifo_only_when_the_transport_asks_and_cchost_takes_the_flag():
    base = {"name": "t", "topology": {"kind": "fattree", "k": 4}}
    assert "--realtime-priority" not in transport_args(parse_config(base, kernel=NO_MODULES), "h3")
    config = parse_config({**base, "transport": {"realtime": True}}, kernel=NO_MODULES)
    args = transport_args(config, "h3")
    assert args[args.index("--realtime-priority") + 1] == "1"
    check_args(config, [None])  # cchost --check-args accepts it (a flag it did not know would fail here)


def test_a_scheme_with_its_own_rto_floor_runs_it_and_the_others_run_the_transports():
    config = parse_config({"name": "t", "topology": {"kind": "fattree", "k": 4}, "transport": {"rto_min_ms": 200},
                           "schemes": [{"scheme": "dctcp", "rto_min_ms": 10}, {"scheme": "dctcp+"}]}, kernel=NO_MODULES)
    rto = {scheme: args[args.index("--rto-min-ms") + 1]
           for scheme in ("dctcp", "dctcp+") for args in [transport_args(config, "h3", scheme=scheme)]}
    assert rto == {"dctcp": "10.0", "dctcp+": "200.0"}
    assert "rto_min_ms" not in config.model_dump()["schemes"][1]  # unset: manifests read as before


def test_an_experiments_cchost_argv_has_the_transports_flags_then_the_delay_table_then_the_callers(tmp_path):
    from ccemu.programs.cchost import experiment_command
    config = parse_config({"name": "t", "topology": {"kind": "fattree", "k": 4}, "seed": 2}, kernel=NO_MODULES)
    argv = experiment_command(config, "h3", "dctcp", 5, tmp_path, None, tmp_path / "h3.delays",
                              extra=("--schedule-stdin",), binary=tmp_path / "cchost", duration_s=1.0)
    flags = tuple(transport_args(config, "h3"))
    start = argv.index(flags[0])
    assert tuple(argv[start:start + len(flags) + 3]) == (*flags, "--delays", str(tmp_path / "h3.delays"),
                                                         "--schedule-stdin")
    assert argv[0] == str(tmp_path / "cchost") and argv[argv.index("--scheme") + 1] == "dctcp"
