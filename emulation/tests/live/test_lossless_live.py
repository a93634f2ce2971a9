"""Lossless ports on live fabrics (root; CI runs these): PFC's pauses (ports/pfc.py) and TCD's
marks (bpf/port.bpf.c)."""

import json
import os
import subprocess
import sys
import time

import pytest

from ccemu.fabric.net import FabricNet
from ccemu.model.config import parse_config
from ccemu.polling import wait_until
from ccemu.ports import pfc
from ccemu.ports.maps import PortMaps
from test_ports_live import result, start_receiver, start_sender

RATE_MBPS = 10
PAYLOAD = 1000
WIRE = PAYLOAD + 8 + 20 + 14 + 24
LINE_PPS = RATE_MBPS * 1e6 / 8 / WIRE
XOFF, XON, HEADROOM = 30_000, 20_000, 15_380


def fabric(tmp_path, topology, port, **link):
    config = parse_config({"name": "lossless", "topology": topology, "link": {"rate_mbps": RATE_MBPS, **link},
                           "port": port})
    return FabricNet(config, state_root=tmp_path)


def ports_by_name(net):
    with PortMaps(net.inventory.state_dir) as maps:
        return {p.port: p for p in maps.read_drained()}


def agent_stats(net):
    return json.loads((net.inventory.state_dir / pfc.STATS_FILE).read_text())


def qdisc_drops(net, node, port):
    out = net[node].cmd(f"tc -s qdisc show dev {port}") if node in net.nameToNode else ""
    return sum(int(part.split()[0].rstrip(",")) for part in out.split("dropped ")[1:])


@pytest.mark.root
def test_a_2_to_1_overload_into_a_lossless_port_pauses_its_senders_drops_nothing_and_drains(tmp_path):
    port = {"profile": "droptail", "buffer_bytes": 200_000,
            "lossless": {"xoff_bytes": XOFF, "xon_bytes": XON, "headroom_bytes": HEADROOM}}
    with fabric(tmp_path, {"kind": "star", "hosts": 3}, port) as net:
        receiver = start_receiver(net, "h3", 12)
        senders = [start_sender(net, h, "h3", LINE_PPS, 3, "--size", str(PAYLOAD)) for h in ("h1", "h2")]
        # Congestion spread upstream while the overload lasts: looked for until the senders end (one
        # reading after a fixed sleep could come before they started, on a machine other work holds).
        spread = False
        while not spread and any(s.poll() is None for s in senders):
            with PortMaps(net.inventory.state_dir) as maps:
                during = {p.port: p for p in maps.read()}
            spread = any(during[n].pfc.paused or during[n].queue_bytes[0] > 0 for n in ("h1-eth1", "h2-eth1"))
            time.sleep(0.02)
        sent = [result(s) for s in senders]
        got = result(receiver)
        after = ports_by_name(net)
        shown = subprocess.run([sys.executable, "-m", "ccemu.cli", "ports", "--run", net.run_id], capture_output=True,
                               text=True, env={**os.environ, "CCEMU_STATE_ROOT": str(tmp_path)})
        # The agent writes its figures every pfc.STATS_EVERY_S: wait for those that count every pause
        # the programs decided (its figures of a second ago may miss the last), then judge them.
        pauses = sum(p.pfc.pause_events for p in after.values())
        wait_until(lambda: (a := agent_stats(net))["pauses"] + a["superseded"] == pauses, 10, 0.1)
        agent = agent_stats(net)
        host_qdisc_drops = {h: qdisc_drops(net, h, f"{h}-eth1") for h in ("h1", "h2")}

    print(f"\npause reaction: {agent['reaction_frames']} frame times ({agent['reaction_ms']} ms); "
          f"{agent['pauses']} pauses, {agent['resumes']} resumes")
    # `ccemu ports` shows the pauses: the senders' NICs, each with its count.
    assert shown.returncode == 0, shown.stderr
    lossless = shown.stdout[shown.stdout.index("lossless ports"):]
    for nic in ("h1-eth1", "h2-eth1"):
        (row,) = [line for line in lossless.splitlines() if f" {nic} " in line]
        assert f" {after[nic].pfc.pause_events} " in row, row
    nics = [after["h1-eth1"], after["h2-eth1"]]
    # Zero drops anywhere: every datagram arrived, no port program dropped, no host qdisc either.
    assert got["packets"] == sum(s["sent"] for s in sent)
    assert all(p.data.dropped_packets == 0 for p in after.values())
    assert host_qdisc_drops == {"h1": 0, "h2": 0}
    # The senders' NICs were paused, and their queues grew: congestion spread upstream.
    assert all(p.pfc.pause_events > 0 for p in nics)
    assert all(p.data.max_queue_bytes > 10 * WIRE for p in nics)
    assert spread
    # An ingress held at most xoff plus what came while its pause took effect.
    assert all(0 < after[f"s1-eth{i}"].pfc.max_held_bytes <= XOFF + HEADROOM for i in (1, 2))
    # The congested port's queue held both ingresses' share, more than one xoff.
    assert after["s1-eth3"].data.max_queue_bytes > XOFF
    # After the overload: every queue drained, nothing held, nothing paused, every pause resumed.
    assert all(p.queue_bytes == (0, 0) and p.pfc.held_bytes == 0 and not p.pfc.paused for p in after.values())
    # Every pause the programs decided was carried out (or undone before the agent came to it),
    # and every gate closed was opened again.
    assert agent["pauses"] == agent["resumes"] and agent["pauses"] + agent["superseded"] == pauses
    assert agent["failures"] == [] and agent["unknown_ports"] == 0
    assert sum(sum(p.pfc.pause_histogram) for p in after.values()) == pauses


def flow_packets(net) -> int:
    """Data packets admitted so far at s2 -> h3."""
    with PortMaps(net.inventory.state_dir) as maps:
        (port,) = [p for p in maps.read() if p.port == "s2-eth1"]
    return port.data.enqueued_packets


@pytest.mark.root
def test_tcd_marks_the_congested_port_ce_the_paused_port_upstream_ue_and_an_uncongested_port_nothing(tmp_path):
    """Seed 004's single congestion point (5.1.1-5.1.2) on a dumbbell: h1 -> h3 at 0.7 of the line
    rate and a burst h4 -> h3 at line rate congest s2 -> h3. PFC keeps the burst to what h1 leaves
    (0.3), so h1's flow holds 0.7 of that port's queue and its ingress pauses s1 -> s2, which is not
    congested (it carries 0.8 of its rate). The victim h2 -> h4 crosses only that paused port and the
    uncongested s2 -> h4."""
    port = {"profile": "tcd", "buffer_bytes": 400_000, "threshold_bytes": 15_000,
            "lossless": {"xoff_bytes": XOFF, "xon_bytes": XON, "headroom_bytes": HEADROOM}}
    with fabric(tmp_path, {"kind": "dumbbell", "hosts_per_side": 2}, port) as net:
        receivers = {h: start_receiver(net, h, 14) for h in ("h3", "h4")}
        flow = start_sender(net, "h1", "h3", 0.7 * LINE_PPS, 6, "--size", str(PAYLOAD), "--ecn", "2")
        victim = start_sender(net, "h2", "h4", LINE_PPS / 10, 6, "--size", str(PAYLOAD), "--ecn", "2",
                              "--sport", str(0xB001))
        # The burst comes once h1's flow has held the congested port for a second (a second of it
        # through s2 -> h3), however long the senders took to start.
        assert wait_until(lambda: flow_packets(net) >= 0.7 * LINE_PPS, 30, 0.02)
        burst = start_sender(net, "h4", "h3", LINE_PPS, 3, "--size", str(PAYLOAD), "--ecn", "2", "--sport", str(0xB002))
        sent = {"flow": result(flow), "victim": result(victim), "burst": result(burst)}
        got = {h: result(r) for h, r in receivers.items()}
        after = ports_by_name(net)
        agent = agent_stats(net)

    congested, paused, uncongested = after["s2-eth1"], after["s1-eth3"], after["s2-eth2"]
    print(f"\ncongested s2->h3: CE {congested.data.marked_packets} UE {congested.data.ue_marked_packets}; "
          f"paused s1->s2: CE {paused.data.marked_packets} UE {paused.data.ue_marked_packets} "
          f"({paused.pfc.pause_events} pauses, {paused.pfc.paused_s:.2f} s); uncongested s2->h4: "
          f"CE {uncongested.data.marked_packets} UE {uncongested.data.ue_marked_packets}; victim received "
          f"{got['h4']}; pause reaction {agent['reaction_frames']} frame times")
    assert got["h4"]["packets"] == sent["victim"]["sent"]
    assert got["h3"]["packets"] == sent["flow"]["sent"] + sent["burst"]["sent"]
    assert paused.pfc.pause_events > 0
    assert congested.data.marked_packets > 0
    assert paused.data.ue_marked_packets > 0 and paused.data.marked_packets == 0
    assert uncongested.data.marked_packets == uncongested.data.ue_marked_packets == 0
    # The victim is not taken for congested: UE marks, never CE.
    assert got["h4"]["ce"] == 0 and got["h4"]["ue"] > 0
    assert all(p.data.dropped_packets == 0 for p in after.values())


def gate_of(node, port) -> str:
    """The TBF line of `port`'s gate, as the kernel shows it now (tc shows its FIFO limit as the
    latency it makes at its rate: `lat`)."""
    (line,) = [line for line in node.cmd(f"tc qdisc show dev {port}").splitlines() if " tbf " in line]
    return line


@pytest.mark.root
def test_a_host_nic_with_its_own_buffer_and_rate_keeps_them_across_its_pauses_and_resumes(tmp_path):
    """PFC with link.host_shares and port.host_buffer_bytes: the pause agent resumes each port with
    its own gate (its FIFO limit is the NIC's buffer), not the switch ports' one."""
    nic_buffer = 400_000
    port = {"profile": "droptail", "buffer_bytes": 200_000, "host_buffer_bytes": nic_buffer,
            "lossless": {"xoff_bytes": XOFF, "xon_bytes": XON, "headroom_bytes": HEADROOM}}
    with fabric(tmp_path, {"kind": "star", "hosts": 3}, port, host_shares={"h1": 0.8}) as net:
        before = gate_of(net["h1"], "h1-eth1")
        switch_port = gate_of(net["s1"], "s1-eth3")
        receiver = start_receiver(net, "h3", 12)
        senders = [start_sender(net, h, "h3", LINE_PPS, 3, "--size", str(PAYLOAD)) for h in ("h1", "h2")]
        sent = [result(s) for s in senders]
        got = result(receiver)
        after = ports_by_name(net)
        assert after["h1-eth1"].pfc.pause_events > 0, {p: s.pfc.pause_events for p, s in after.items()}
        assert wait_until(lambda: agent_stats(net)["resumes"] >= after["h1-eth1"].pfc.pause_events, 10, 0.1)
        resumed = gate_of(net["h1"], "h1-eth1")

    # The NIC's gate, as made from its own shape, holds twice the switch port's (400 KB, not 200 KB).
    assert before.split(" lat ")[1] != switch_port.split(" lat ")[1], (before, switch_port)
    assert resumed == before  # the same gate, open, after its pauses
    assert got["packets"] == sum(s["sent"] for s in sent)
    assert all(p.data.dropped_packets == 0 for p in after.values())
