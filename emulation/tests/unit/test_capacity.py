import json
import time

import pytest
import yaml

from ccemu.bench import capacity
from ccemu.reports.report import capacity_line
from ccemu.fabric.placement import Placement, place
from ccemu.model.config import parse_config


def run(variant, rate, worst, aggregate=100.0):
    return {"variant": variant, "rate_mbps": rate, "ratios": [worst, 0.99], "aggregate_mbps": aggregate,
            "placement": f"{variant} placement", "ovs_cpu": 0.9, "steal": 0.0, "idle_rtt_ms": 3.0,
            "residence_p50_frames": 0.5, "residence_p99_frames": 2.0, "worst_switch_p99_frames": 2.5,
            "switch_lost_packets": 0}


def test_capacity_is_the_highest_rate_before_the_first_that_fails_not_a_lucky_one_past_it():
    runs = [run("2", 5, 0.99, 40), run("2", 10, 0.96, 75), run("2", 15, 0.80), run("2", 25, 0.97)]
    assert capacity.capacity_of(runs, "2") == (10, 75)
    assert capacity.capacity_of([run("1", 5, 0.5)], "1") == (None, None)


def test_the_table_puts_variants_side_by_side_with_their_capacity_last():
    runs = [run("1", 5, 0.99, 40), run("1", 10, 0.80), run("1 pinned", 5, 0.99, 40), run("1 pinned", 10, 0.97, 80)]
    table = capacity.capacity_table(runs, ["1", "1 pinned"]).splitlines()
    assert table[2] == "| 5 | 0.990 | 0.990 |"
    assert table[3] == "| 10 | 0.800 | 0.970 |"
    assert table[4] == "| **every pair >= 0.95 up to** | **5** | **10** |"
    assert table[5] == "| aggregate Mbit/s there | 40 | 80 |"


def test_an_experiment_quotes_the_latest_measurement_beside_its_own_rate(tmp_path):
    runs = [run("auto pinned", 10, 0.97, 80), run("auto pinned", 15, 0.9)]
    out = capacity.write(tmp_path, runs, ["auto pinned"], 10)
    assert (tmp_path / "capacity" / "latest").resolve() == out.resolve()
    measured = capacity.latest(tmp_path)
    assert measured["capacity_mbps"] == 10 and json.loads((out / "capacity.json").read_text())["runs"] == runs
    assert "up to 10 Mbit/s per link; this experiment runs 10 Mbit/s per link, within it" in \
        capacity_line(measured, 10)
    assert "**above it**" in capacity_line(measured, 25)
    assert capacity.latest(tmp_path / "none") is None


def test_pinned_placement_puts_one_instance_per_usable_cpu_round_robin_and_false_pins_none():
    config = parse_config({"name": "x", "topology": {"kind": "fattree", "k": 4},
                           "fabric": {"ovs_instances": 3, "pin_ovs": True}})
    assert place(config.fabric, 20, [2, 5]) == Placement((2, 5, 2))
    assert str(place(config.fabric, 20, [2, 5])) == "3 OVS instances pinned to CPUs 2,5,2"
    unpinned = parse_config({"name": "x", "topology": {"kind": "fattree", "k": 4},
                             "fabric": {"ovs_instances": 3, "pin_ovs": False}})
    assert str(place(unpinned.fabric, 20, [2, 5])) == "3 OVS instances, unpinned"


def test_auto_placement_pins_only_on_machines_of_at_least_eight_cpus():
    config = parse_config({"name": "x", "topology": {"kind": "fattree", "k": 4}, "fabric": {"ovs_instances": 4}})
    assert not place(config.fabric, 20, [0, 1]).pinned
    assert place(config.fabric, 20, list(range(8))) == Placement((0, 1, 2, 3))


def test_dilation_auto_follows_the_capacity_measured_for_the_experiments_placement(tmp_path):
    from ccemu.experiments.validation import load_experiment
    from ccemu.fabric.placement import usable_cpus
    from ccemu.model.config import EXPERIMENTS_DIR
    from ccemu.model.dilation import DEFAULT_FAITHFUL

    path = EXPERIMENTS_DIR / "realistic.yaml"  # 10 Gbit/s links, about 5 busy: auto
    # Nothing measured here: each datapath's default (OVS: 40 Mbit/s in all; bpf: 150, half of 4 x 75).
    for datapath, dilation in (("ovs", 2000), ("bpf", 400)):
        data = {**yaml.safe_load(path.read_text()), "fabric": {"datapath": datapath}}
        (tmp_path / f"{datapath}.yaml").write_text(yaml.safe_dump(data))
        config, used = load_experiment(tmp_path / f"{datapath}.yaml", tmp_path)
        assert config.datacenter.dilation == dilation and used == DEFAULT_FAITHFUL[datapath]
    path = tmp_path / "ovs.yaml"  # what follows: userspace OVS, whose experiments keep what the benchmark measures
    config, used = load_experiment(path, tmp_path)
    variant = capacity.variant_of(config.fabric, len(usable_cpus()))
    written = capacity.write(tmp_path, [run(variant, 20, 0.97, 150), run(variant, 25, 0.96, 180),
                                        run(variant, 50, 0.5), run("another placement", 50, 0.99)],
                             [variant, "another placement"], 10)
    # The day it was written on, as it says (today's date read again here differs across midnight UTC).
    when = json.loads((written / "capacity.json").read_text())["when"]
    assert when in {time.strftime('%Y-%m-%d', time.gmtime(t)) for t in (time.time() - 60, time.time())}
    config, used = load_experiment(path, tmp_path)
    # 25 Mbit/s per link and 100 in all (4 x, as OVS's 10 and 40): realistic keeps about 5 links busy,
    # so 20 Mbit/s each, d = 500 (at 10 and 40: 8 each, 1250, rounded up to 2000).
    assert (used.link_mbps, used.aggregate_mbps) == (25, 100) and config.datacenter.dilation == 500
    assert f"`ccemu bench capacity` of {when}, {variant}: every pair >= 0.95 " \
           f"up to 25 Mbit/s per link" == used.source
    assert config.link.rate_mbps == 20
    # Measured with another CPU count (a results folder from another machine): not this machine's.
    assert capacity.faithful_rates(config.fabric, tmp_path, cpus=len(usable_cpus()) + 1) is None
    # A later benchmark of other placements only does not hide it; a later one of the same placement wins.
    later = tmp_path / "capacity" / "29991231-235958"
    later.mkdir()
    (later / "capacity.json").write_text(json.dumps({"when": "later", "cpus": usable_cpus(), "capacities": {
        "another placement": {"rate_mbps": 50}}}))
    assert capacity.faithful_rates(config.fabric, tmp_path).link_mbps == 25
    latest = tmp_path / "capacity" / "29991231-235959"
    latest.mkdir()
    # A later run at one rate that passed (a profile, say) says only "at least": it does not hide it either.
    (latest / "capacity.json").write_text(json.dumps({"when": "latest", "cpus": usable_cpus(), "capacities": {
        variant: {"rate_mbps": 10}}, "runs": [run(variant, 10, 0.99)]}))
    assert capacity.faithful_rates(config.fabric, tmp_path).link_mbps == 25
    (latest / "capacity.json").write_text(json.dumps({"when": "latest", "cpus": usable_cpus(), "capacities": {
        variant: {"rate_mbps": 10}}, "runs": [run(variant, 10, 0.99), run(variant, 15, 0.9)]}))
    assert capacity.faithful_rates(config.fabric, tmp_path).source.startswith("`ccemu bench capacity` of latest")
    # The bpf datapath's experiments keep half of what its benchmark measured
    # (dilation.EXPERIMENTS_SHARE_OF_CAPACITY).
    (latest / "capacity.json").write_text(json.dumps({"when": "latest", "cpus": usable_cpus(), "capacities": {
        "bpf": {"rate_mbps": 75}}, "runs": [run("bpf", 100, 0.82)]}))
    bpf = load_experiment(tmp_path / "bpf.yaml", tmp_path)[1]
    assert (bpf.link_mbps, bpf.aggregate_mbps) == pytest.approx((37.5, 150))
    assert bpf.source.endswith("up to 75 Mbit/s per link")
    # A file that gives its dilation keeps it, and says nothing was resolved.
    assert load_experiment(EXPERIMENTS_DIR / "incast.yaml", tmp_path)[1] is None


def test_the_bpf_datapath_is_one_variant_whatever_the_ovs_placement_and_auto_picks_it_without_the_ovs_module():
    from argparse import Namespace

    from ccemu.model.kernel import KernelFeatures
    from ccemu.model.config import FabricConfig

    args = Namespace(pinned="both", instances=["1", "auto"], ovs_allocator=["glibc", "jemalloc"], datapath=["bpf"])
    assert [str(v) for v in capacity.variants_of(args)] == ["bpf"]
    args.datapath = ["ovs", "bpf"]
    assert len(capacity.variants_of(args)) == 2 * 2 * 2 + 1
    no_module, module = KernelFeatures(openvswitch=False), KernelFeatures(openvswitch=True)
    assert capacity.variant_of(FabricConfig(), 2, no_module) == "bpf"
    assert capacity.variant_of(FabricConfig(ovs_instances=2), 2, module) == "2"
    assert capacity.variant_of(FabricConfig(datapath="ovs"), 2, no_module) == "auto"
    assert capacity.variant_of(FabricConfig(datapath="bpf", ovs_instances=2, pin_ovs=True), 16, module) == "bpf"
