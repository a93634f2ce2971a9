"""Datacenter time on a live fabric: the delay line gives the base RTT an experiment declares, and
the seeds' trends show in small runs of their experiments (generous tolerances: 2 cores)."""

import csv
import json
import statistics
import time

import pytest
from rich.console import Console
from runs import start_config

from ccemu.experiments import runner_for
from ccemu.experiments.base import LiveBlock, stop_all
from ccemu.fabric.net import FabricNet
from ccemu.hosts.cchost import ScheduledFlow, host_number, read_records, write_schedule
from ccemu.model.config import parse_config
from ccemu.results import figures, papers
from ccemu.results.figures import Tables

SCHEMES = """
  - scheme: expresspass
    port: {profile: expresspass, buffer_bytes: 384500}
  - scheme: dctcp
    port: {profile: dctcp, ecn_threshold_bytes: 100000, buffer_bytes: 384500}
"""
EXPRESSPASS_DATACENTER = "{link_gbps: 10, link_delay_us: 4, host_delay_us: 1, dilation: DILATION}"


def run(tmp_path, name, text, timeout=900):
    """Runs the experiment to the end (no monitoring); its bundle's tables."""
    proc, _ = start_config(tmp_path, name, text, "--no-monitoring")
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    (bundle,) = (tmp_path / "results" / name).iterdir()
    print((bundle / "summary.md").read_text())
    assert "dilation" in out and "wall time" in out, out
    return bundle, Tables.read(bundle)


@pytest.mark.root
def test_cchost_sees_the_configured_base_rtt_on_every_path_length_within_10_percent(tmp_path):
    """h1 sends one-packet DCTCP flows (100 bytes: 0.5 % of the shortest RTT on the wire) to a host
    under its ToR, in its pod and in another pod, nine each on one path, 0.2 s apart. An FCT ends
    when the receiver has the byte: one way. The first flow of a path also pays OVS's slow path
    (its datapath flows are new), so the median of the later eight is compared (of four, one run in
    a fresh clone's CI read 1.12 on the 4-link path: two late samples of a shared machine)."""
    config = parse_config({
        "name": "rtt", "topology": {"kind": "fattree", "k": 4}, "fabric": {"ovs_instances": 2},
        "datacenter": {"link_gbps": 10, "link_delay_us": 4, "host_delay_us": 1, "dilation": 1000},
        "schemes": [{"scheme": "dctcp"}], "workload": {"kind": "permutation", "size_bytes": 100}})
    runner = runner_for(config, tmp_path / "results", Console(quiet=True), monitoring=False)
    (spec,) = runner.blocks()
    workdir = tmp_path / "work"
    workdir.mkdir()
    receivers = {"h2": 2, "h3": 4, "h16": 6}  # host: links on the path
    with FabricNet(config.for_scheme(spec.scheme)) as net:
        live = LiveBlock(spec, config.for_scheme(spec.scheme), net, workdir, time.monotonic_ns(),
                         sorted((h.name for h in net.hosts), key=host_number))
        runner._add_missing_delay(live)
        live.epoch = time.monotonic_ns()
        flows = [ScheduledFlow(id=i * 10 + k, dst=host_number(dst), size=100, start=0.5 + 0.2 * k, path_id=0)
                 for i, dst in enumerate(receivers) for k in range(9)]
        procs = [runner.start_cchost(live, dst, duration_s=10) for dst in receivers]
        sender = runner.start_cchost(live, "h1", schedule=write_schedule(workdir / "h1.flows", flows),
                                     exit_when_done=True)
        try:
            assert sender.wait(timeout=30) == 0
        finally:
            stop_all([sender, *procs])
        counters = json.loads((workdir / "h2.counters").read_text())
    records = read_records(workdir / "h1.records")
    assert len(records) == 27 and counters["delayed_packets"] >= 9
    targets = {(r["src"], r["dst"]): r["target_ms"] / 1e3 for r in runner.bundle.rtts}
    for i, (dst, links) in enumerate(receivers.items()):
        target = targets[("h1", dst)]
        assert target == pytest.approx(1000 * 2 * (links * 4 + 2 * 1) * 1e-6)  # the datacenter's RTT, dilated
        one_way = statistics.median(r["fct"] for r in records if r["id"] // 10 == i and r["id"] % 10)
        print(f"h1 -> {dst} ({links} links): configured RTT {target * 1e3:.1f} ms, cchost's 2 x one way "
              f"{2 * one_way * 1e3:.2f} ms ({2 * one_way / target:.3f})")
        assert 2 * one_way / target == pytest.approx(1.0, rel=0.10)


@pytest.mark.root
def test_expresspass_max_queue_does_not_grow_with_load_and_stays_a_fraction_of_dctcps(tmp_path):
    bundle, tables = run(tmp_path, "loads", f"""
name: loads
topology: {{kind: fattree, k: 4}}
datacenter: {EXPRESSPASS_DATACENTER.replace("DILATION", "auto")}
fabric: {{ovs_instances: 2}}
schemes: {SCHEMES}
workload: {{kind: realistic, cdf: webserver, loads: [0.2, 0.8], flows: 200, timeout_s: 60}}
transport: {{alpha: 0.0625, rto_min_ms: 4, control_timeout_ms: 1, persistent_connections: false}}
""")
    peaks = {(s, p): figures.queues(tables, s, p).max_packets for s in ("expresspass", "dctcp")
             for p in ("load=0.2", "load=0.8")}
    print("max switch queue, packets:", {k: round(v, 1) for k, v in peaks.items()})
    # Table 3: ExpressPass's max queue does not grow with load. Its queues here are a few packets,
    # where one packet more is a large ratio: at most 2x, or 10 packets.
    assert peaks["expresspass", "load=0.8"] <= 2 * max(peaks["expresspass", "load=0.2"], 10)
    # ... and DCTCP's is several times larger at every load (on Web Server it is near the buffer
    # at every load, in the paper's Table 3 as here, so it has no room to grow).
    for load in ("load=0.2", "load=0.8"):
        assert peaks["dctcp", load] >= 3 * peaks["expresspass", load]
    assert sum(int(r["flows"]) - int(r["finished"]) for r in tables.rounds) == 0
    # summary.md gives the BDP of the datacenter it stood for, as the paper's (ExpressPass: 42.3).
    bdp = json.loads((bundle / "manifest.json").read_text())["datacenter"]["bdp_packets_max_rtt"]
    assert "BDP at that RTT (packets of 1538 B)" in (bundle / "summary.md").read_text()
    assert bdp == pytest.approx(papers.settings()["realistic"]["bdp_packets"], rel=0.2)


@pytest.mark.root
def test_at_the_dctcp_plus_operating_point_dctcp_times_out_and_falls_below_expresspass_at_64_flows(tmp_path):
    _, tables = run(tmp_path, "incast64", """
name: incast64
topology: {kind: fattree, k: 4}
datacenter: {link_gbps: 1, link_delay_us: 7.5, host_delay_us: 2.5, dilation: 100}
fabric: {ovs_instances: 2}
schemes:
  - scheme: expresspass
    port: {profile: expresspass, buffer_bytes: 128000}
  - scheme: dctcp
    port: {profile: dctcp, ecn_threshold_bytes: 32000, buffer_bytes: 128000}
workload: {kind: incast, aggregator: h1, total_bytes: 1000000, flows: [64], rounds: 2, round_timeout_s: 60}
transport: {alpha: 0.5, rto_min_ms: 10, control_timeout_ms: 1}
""")
    goodput = {s: figures.incast_goodput_fraction(tables, s, 64) for s in ("expresspass", "dctcp")}
    timeouts = {s: figures.incast_timeouts(tables, s, 64) for s in goodput}
    print("goodput / link:", goodput, "timeouts:", timeouts)
    assert timeouts["dctcp"] > 0 and timeouts["expresspass"] == 0
    assert goodput["dctcp"] < goodput["expresspass"]


@pytest.mark.root
def test_a_joining_flow_reaches_its_fair_share_and_the_time_is_counted_in_rtts(tmp_path):
    bundle, tables = run(tmp_path, "join", f"""
name: join
topology: {{kind: fattree, k: 4}}
datacenter: {EXPRESSPASS_DATACENTER.replace("DILATION", "auto")}
fabric: {{ovs_instances: 2}}
schemes: [{{scheme: expresspass, port: {{profile: expresspass, buffer_bytes: 384500}}}}]
workload: {{kind: convergence, receiver: h1, senders: 2, interval_rtts: 60, alphas: [0.5], timeout_s: 30}}
transport: {{control_timeout_ms: 1}}
""")
    seen = figures.convergence(tables, "expresspass", "alpha=0.5", papers.convergence_payload_bps(tables))
    print("RTTs to the fair share after the join:", seen.joins)
    assert seen.rtt_s == pytest.approx(0.052, rel=0.01)  # 52 us x 1000
    # Reached before the interval ended (runs here took 6.75, 9, 17.5 and 24.5 RTTs: the paper's 3
    # is not met, see workloads/reference.yaml's claim and the reproduction report).
    assert seen.joins[0] is not None
    with open(bundle / "timeline.csv") as source:
        samples = list(csv.DictReader(source))
    assert {s["src"] for s in samples} == {f["src"] for f in tables.flows}
    # The joining flow is sized to what half the link carries over one interval: sharing fairly
    # (within the band: +-20 %), it ends about one interval (60 base RTTs) after it started, later
    # by what its ramp to the fair share cost (its RTTs to get there, at less than half the link).
    second = max(tables.flows, key=lambda f: float(f["start"]))
    took = (float(second["end"]) - float(second["start"])) / (60 * seen.rtt_s)
    assert 1 / 1.2 <= took <= 1 / 0.8 + seen.joins[0] / 60, took
    assert "| expresspass | 0.5 | 52.0 |" in (bundle / "summary.md").read_text()
