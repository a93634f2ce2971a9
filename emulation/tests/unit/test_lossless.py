"""Lossless ports without root: the config's rules, the pause agent's netlink message and ring
buffer reading, the victim workload."""

import random
import statistics
import struct

import pytest

from ccemu.model.kernel import KernelFeatures
from ccemu.model.config import ConfigError, parse_config
from ccemu.model.workloads import FlowSizeCdf, victim_flows
from ccemu.ports.layouts import PFC_EVENT
from ccemu.ports.pfc import KICK_FRAME, RINGBUF_BUSY, RINGBUF_DISCARD, RingBuffer, gate_message
from ccemu.ports.tc import PortShape

NO_MODULES = KernelFeatures(openvswitch=False)


def config(**sections):
    return {"name": "t", "topology": {"kind": "dumbbell", "hosts_per_side": 2}, "link": {"rate_mbps": 10},
            **sections}


@pytest.mark.parametrize("data, message", [
    (config(port={"profile": "dcqcn", "lossless": {"xoff_bytes": 1000, "xon_bytes": 1000}}),
     "config: port.lossless.xon_bytes: must be below xoff_bytes (1000) (got 1000)"),
    (config(port={"profile": "droptail", "buffer_bytes": 100_000,
                  "lossless": {"xoff_bytes": 90_000, "xon_bytes": 80_000}}),
     "config: port.buffer_bytes: a lossless port holds xoff_bytes + headroom_bytes (105380) from one ingress "
     "(got 100000)"),
    (config(port={"profile": "expresspass", "buffer_bytes": 400_000, "lossless": {}}),
     "config: port.lossless: expresspass ports drop excess credits by design: no PFC"),
    (config(port={"profile": "tcd", "buffer_bytes": 500_000}),
     "config: port.buffer_bytes: a lossless port of a 3-port switch holds xoff_bytes + headroom_bytes from each of "
     "the other 2 ports: at least 670760 (got 500000)"),
    (config(port={"profile": "dcqcn", "kmin_bytes": 300_000}),
     "config: port.kmin_bytes: must be below kmax_bytes (200000) (got 300000)"),
    (config(link={"rate_mbps": 10, "host_shares": {"h1": 1.5}}),
     "config: link.host_shares: h1: a share must be in (0, 1] (got 1.5)"),
    (config(link={"rate_mbps": 10, "host_shares": {"h9": 0.5}}),
     "config: link.host_shares.h9: the topology has h1..h4"),
    (config(workload={"kind": "victim", "victim_senders": ["h1"], "victim_receiver": "h3", "congesting_senders": ["h2"],
                      "hot_receiver": "h4", "bursters": ["h3"]}),
     "config: workload.bursters: h3 is already one of victim_receiver: each host has one role"),
    (config(workload={"kind": "victim", "victim_senders": ["h1"], "victim_receiver": "h3", "congesting_senders": ["h2"],
                      "hot_receiver": "h4", "bursters": ["h5"]}),
     "config: workload.bursters: the topology has h1..h4 (got h5)"),
])
def test_a_bad_lossless_config_names_the_key_and_the_rule_in_one_line(data, message):
    with pytest.raises(ConfigError) as error:
        parse_config(data, kernel=NO_MODULES)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_dcqcn_and_tcd_schemes_run_on_their_lossless_profiles_by_default():
    parsed = parse_config(config(schemes=[{"scheme": "dcqcn"}, {"scheme": "dcqcn+tcd"}]), kernel=NO_MODULES)
    dcqcn, tcd = (s.port for s in parsed.schemes)
    assert (dcqcn.profile, tcd.profile) == ("dcqcn", "tcd")
    assert (dcqcn.lossless.xoff_bytes, dcqcn.lossless.xon_bytes) == (320_000, 318_000)
    assert (dcqcn.kmin_bytes, dcqcn.kmax_bytes, dcqcn.pmax) == (5_000, 200_000, 0.01)
    assert tcd.epsilon == 0.05 and tcd.lossless is not None
    assert parsed.link.host_rate_mbps("h1") == 10


def attrs(payload: bytes) -> dict[int, bytes]:
    """Netlink attributes (type -> payload) of one nesting level."""
    found, offset = {}, 0
    while offset < len(payload):
        length, kind = struct.unpack_from("<HH", payload, offset)
        found[kind] = payload[offset + 4:offset + length]
        offset += (length + 3) & ~3
    return found


@pytest.mark.parametrize("paused, rate_Bps, burst", [(True, 1, 1514), (False, 12_500_000, 2 * 1538)])
def test_the_gate_message_changes_the_ports_tbf_to_8_bits_a_second_or_ten_times_the_link(paused, rate_Bps, burst):
    shape = PortShape(rate_mbps=10, buffer_bytes=200_000, mtu=1500, lossless=True, xoff_bytes=30_000,
                      xon_bytes=20_000)
    message = gate_message(7, shape, paused)
    length, kind, flags = struct.unpack_from("<IHH", message)
    assert (length, kind, flags) == (len(message), 36, 1 | 4)  # RTM_NEWQDISC, request + ack: a change
    family, ifindex, handle, parent = struct.unpack_from("<BxxxiII", message, 16)
    assert (ifindex, handle, parent) == (7, 0x200000, 0x10020)
    top = attrs(message[36:])
    assert top[1] == b"tbf\0"
    options = attrs(top[2])
    assert struct.unpack("<Q", options[4])[0] == rate_Bps  # TCA_TBF_RATE64
    assert struct.unpack("<I", options[6])[0] == burst  # TCA_TBF_BURST
    limit = struct.unpack_from("<I", options[1], 24)[0]  # tc_tbf_qopt.limit, after two rate specs
    assert limit == 200_000 + 4 * 1514


def test_the_kick_frame_is_a_minimum_mac_control_frame():
    assert len(KICK_FRAME) == 60 and KICK_FRAME[12:14] == b"\x88\x08"


def record(event: bytes, flags: int = 0) -> bytes:
    return struct.pack("<II", len(event) | flags, 0) + event + bytes(-len(event) % 8)


def test_the_ring_buffer_yields_submitted_records_skips_discarded_ones_and_stops_at_a_busy_one():
    size, page = 128, 16
    events = [PFC_EVENT.struct.pack(1000 + i, 3 + i, i % 2) for i in range(3)]
    data = record(events[0]) + record(events[1], RINGBUF_DISCARD) + record(events[2]) + record(events[0], RINGBUF_BUSY)
    producer = bytearray(page + 2 * size)
    produced = len(data)
    struct.pack_into("<Q", producer, 0, produced)
    producer[page:page + len(data)] = data
    consumer = bytearray(page)
    ring = RingBuffer(consumer, producer, size, page)
    assert ring.records() == [events[0], events[2]]
    consumed = struct.unpack_from("<Q", consumer)[0]
    assert consumed == 3 * 24  # up to the busy one, which is read next time
    producer[page + consumed:page + consumed + 4] = struct.pack("<I", len(events[0]))
    assert ring.records() == [events[0]] and struct.unpack_from("<Q", consumer)[0] == produced
    assert PFC_EVENT.unpack(events[1]) == {"ns": 1001, "port_id": 4, "pause": 1}


def test_victim_flows_go_to_their_receiver_and_bursts_leave_at_the_same_instants():
    cdf = FlowSizeCdf.named("webserver")
    flows = victim_flows(["h1"], "h10", ["h2"], "h9", ["h11", "h12", "h13"], cdf, 0.3, 10e6, 50, 64_000, 0.5,
                         random.Random(1))
    assert len(flows.victims) == 50 and {(f.src, f.dst) for f in flows.victims} == {("h1", "h10")}
    assert len(flows.congesting) == 50 and {(f.src, f.dst) for f in flows.congesting} == {("h2", "h9")}
    end = max(f.start for f in flows.victims + flows.congesting)
    starts = sorted({f.start for f in flows.bursts})
    assert starts == [i * 0.5 for i in range(len(starts))] and starts[-1] <= end < starts[-1] + 0.5
    assert all(sorted(f.src for f in flows.bursts if f.start == t) == ["h11", "h12", "h13"] for t in starts)
    assert all(f.dst == "h9" and f.size == 64_000 for f in flows.bursts)
    # Each sender offers `load` of the link: 50 flows of the CDF's mean take about 50 * mean / (0.3 * rate).
    span = max(f.start for f in flows.victims)
    assert span == pytest.approx(50 * cdf.mean() * 8 / (0.3 * 10e6), rel=0.5)
    assert flows.all() == sorted(flows.all(), key=lambda f: f.start)


def test_bursts_drawn_from_a_cdf_in_exponential_rounds_keep_every_burster_on_the_same_instants():
    cdf, hadoop = FlowSizeCdf.named("webserver"), FlowSizeCdf.named("hadoop")
    bursters = [f"h{i}" for i in range(11, 26)]  # the paper's fifteen
    flows = victim_flows(["h1"], "h10", ["h2"], "h9", bursters, cdf, 0.3, 10e6, 2000, 64_000, 0.05,
                         random.Random(1), burst_cdf=hadoop, exponential_rounds=True)
    periodic = victim_flows(["h1"], "h10", ["h2"], "h9", bursters, cdf, 0.3, 10e6, 2000, 64_000, 0.05,
                            random.Random(1))
    assert flows.victims == periodic.victims and flows.congesting == periodic.congesting
    senders_at: dict[float, list[str]] = {}
    for f in flows.bursts:
        senders_at.setdefault(f.start, []).append(f.src)
    starts = sorted(senders_at)
    assert all(sorted(senders) == sorted(bursters) for senders in senders_at.values())
    gaps = [b - a for a, b in zip([0.0, *starts], starts)]
    assert statistics.fmean(gaps) == pytest.approx(0.05, rel=0.15) and statistics.stdev(gaps) > 0.5 * 0.05
    sizes = [f.size for f in flows.bursts]
    assert len(set(sizes)) > 1000 and sum(s < 120_000 for s in sizes) / len(sizes) == pytest.approx(
        0.9, abs=0.03)


def test_a_victim_workload_takes_fixed_bursts_or_drawn_ones_not_both():
    with pytest.raises(ConfigError, match="workload.burst_cdf: bursts are burst_bytes or draws from burst_cdf"):
        parse_config({"name": "t", "topology": {"kind": "dumbbell", "hosts_per_side": 8}, "workload": {
            "kind": "victim", "burst_bytes": 1000, "burst_cdf": "hadoop"}}, kernel=NO_MODULES)


def test_pyroute2s_tbf_cannot_carry_the_closed_gate_so_the_agent_builds_its_own_message():
    """pfc.gate_message says why it is hand-built; when pyroute2 learns TCA_TBF_BURST this fails,
    and the agent can use it instead."""
    from pyroute2.netlink.rtnl.tcmsg import sched_tbf

    assert "TCA_TBF_BURST" not in [name for name, _ in sched_tbf.options.nla_map]
