"""Checks of a live fabric: all-pairs reachability and path symmetry read from the
switches' own port counters. Each returns a list of problems (empty = all holds)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from .forwarding import path_id
from .counters import PortKey
from .net import FabricNet
from .protocol import Fabric
from .placement import usable_cpus
from ..model.config import ExperimentConfig
from ..model.routing import PATH_IDS, Routing, symmetry_problems



@dataclass(frozen=True)
class Send:
    dst_ip: str
    path_id: int
    count: int = 1


# Probes per second per CPU ccemu may use. Each probe of an all-pairs check is a flow OVS has
# not seen, so every switch on its way takes it through its slow path (an upcall); sent all at
# once they overflow the upcall queues and measure the check's own overload (a k=16 fabric lost
# ~95 % so on 16 CPUs). Paced at this rate, k=8 here (16 256 probes) loses none.
PROBES_PER_S_PER_CPU = 4000


def run_probes(net: Fabric, plan: dict[str, list[Send]], linger: float = 1.0,
               rate: float | None = None) -> dict[str, Counter]:
    """Send every host's probes of `plan` (from inside the hosts: programs/probe.py), in rounds of
    one probe per sending host, at most `rate` probes per second (default: PROBES_PER_S_PER_CPU
    per CPU), listen up to `linger` seconds more (less once every probe sent has been heard), and
    return what each host of `plan` (hosts with no sends only listen) heard: Counter of
    "<src ip> <path-id>"."""
    rate = rate or PROBES_PER_S_PER_CPU * len(usable_cpus())
    queues = {name: [s for send in sends for s in [send] * send.count] for name, sends in plan.items()}
    planned = sum(len(queue) for queue in queues.values())
    heard: Counter = Counter()
    with net.probes(plan) as probes:
        started, sent = time.monotonic(), 0
        while any(queues.values()):
            for name, queue in queues.items():
                if queue and probes.send(name, queue[-1].dst_ip, queue[-1].path_id):
                    queue.pop()
                    sent += 1
            ahead = sent / rate - (time.monotonic() - started)
            probes.drain(heard, max(0.0, ahead))
        deadline = time.monotonic() + linger
        while sum(heard.values()) < planned and (left := deadline - time.monotonic()) > 0:
            probes.drain(heard, left)
    by_host: dict[str, Counter] = {name: Counter() for name in plan}
    for (host, src, pid), count in heard.items():
        by_host[host][f"{src} {pid}"] += count
    return by_host


def reachability_plan(net: Fabric) -> dict[str, list[Send]]:
    """Every host sends one datagram to every other host. Path-ids rotate over the pairs
    so that together the pairs cross every path the fabric has. Each host's list is in the
    order it is sent (run_probes sends from the end): in round r, host i sends to host i + r,
    so that every host receives one probe per round, and no edge link carries a burst."""
    hosts = net.fabric_topo.hosts
    n = len(hosts)
    return {
        src.name: [Send(hosts[(i + r) % n].ip, (2 * i + r) % PATH_IDS) for r in range(n - 1, 0, -1)]
        for i, src in enumerate(hosts)
    }


@dataclass
class Reachability:
    problems: list[str]  # pairs never delivered
    first_try_losses: int  # datagrams lost on the first attempt but delivered on a retry


def check_reachability(net: Fabric, attempts: int = 3) -> Reachability:
    """All-pairs delivery. A datagram lost once is sent again (up to `attempts` times, each
    slower than the last): the first packet of every new flow takes OVS's slow path, whose
    upcall queue can overflow under load. Only pairs that never deliver are problems."""
    ip_to_name = {h.ip: h.name for h in net.fabric_topo.hosts}
    pending = reachability_plan(net)
    first_try_losses = 0
    rate = PROBES_PER_S_PER_CPU * len(usable_cpus())
    for attempt in range(attempts):
        heard = run_probes(net, {name: pending.get(name, []) for name in net.fabric_topo.host_names},
                           rate=rate / 4 ** attempt)
        missing: dict[str, list[Send]] = {}
        for src, sends in pending.items():
            src_ip = net.fabric_topo.host(src).ip
            for send in sends:
                if heard[ip_to_name[send.dst_ip]][f"{src_ip} {send.path_id}"] < send.count:
                    missing.setdefault(src, []).append(send)
        if attempt == 0:
            first_try_losses = sum(len(s) for s in missing.values())
        pending = missing
        if not pending:
            break
    problems = [
        f"{src} -> {ip_to_name[send.dst_ip]} (path-id {send.path_id}) not delivered in {attempts} attempts"
        for src, sends in pending.items() for send in sends
    ]
    return Reachability(problems, first_try_losses)


def flow_path_id(net: FabricNet, src: str, dst: str, proto: str, sport: int, dport: int) -> int:
    """Path-id the fabric gives a TCP/UDP flow from `src` to `dst` (so its whole path is
    net.routing.path(src, dst, pid)), traced in the first switch without sending (the bpf
    datapath: its own function, mirrored in forwarding.path_id)."""
    if net.forwards_in_bpf:
        return path_id(net.fabric_topo.host(src).ip, net.fabric_topo.host(dst).ip, proto, sport, dport)
    switch, port = net.fabric_topo.attachment(src)
    flow = (f"in_port={port},{proto},nw_src={net.fabric_topo.host(src).ip},nw_dst={net.fabric_topo.host(dst).ip},"
            f"{proto}_src={sport},{proto}_dst={dport}")  # ofproto/trace wants udp_src, not tp_src, for UDP
    return net[switch].instance.traced_path_id(switch, flow)


def _ports_that_counted(before, after, count: int) -> tuple[set[PortKey], set[PortKey], set[PortKey]]:
    """Ports whose rx grew by >= count, whose tx did, and ports that moved by less (strays)."""
    rx, tx, stray = set(), set(), set()
    for key, (rx_after, tx_after) in after.items():
        d_rx, d_tx = rx_after - before[key][0], tx_after - before[key][1]
        if d_rx >= count:
            rx.add(key)
        if d_tx >= count:
            tx.add(key)
        if 0 < d_rx < count or 0 < d_tx < count:
            stray.add(key)
    return rx, tx, stray


def symmetry_pairs(routing: Routing, machine_of: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """The first host with one partner per path length (fat-tree: same edge, same pod, across
    pods): together their paths cross every tier's uplink choices. Every pair and path-id is
    checked on the routing tables (routing.symmetry_problems); these, live. Over several machines
    (`machine_of`: node -> machine), also one partner per path length on each other machine, so
    that the checked paths cross the cut links (tunnels) as well as the local ones."""
    first, *others = routing.topo.host_names
    by_length: dict[tuple[int, str], str] = {}
    for other in others:
        machine = machine_of[other] if machine_of and machine_of[other] != machine_of[first] else ""
        by_length.setdefault((len(routing.path(first, other, 0)), machine), other)
    return [(first, other) for _, other in sorted(by_length.items())]


def check_path_symmetry(net: Fabric, a: str, b: str, path_ids: list[int] | None = None,
                        count: int = 20) -> list[str]:
    """For each path-id: send `count` datagrams a->b, then b->a, and require that the
    switch ports that transmitted the forward packets are exactly those that received the
    reverse ones (and vice versa), and that they are the ports routing predicts."""
    routing = net.routing
    ip = {h.name: h.ip for h in net.fabric_topo.hosts}
    problems = []
    for pid in path_ids if path_ids is not None else range(routing.n_paths(a, b)):
        seen = []
        for src, dst in ((a, b), (b, a)):
            before = net.port_counters()
            # Up to 10 s for the last to arrive (a loaded machine's OVS takes new flows through its
            # slow path late): the counters are read once all are through, not after a guess.
            heard = run_probes(net, {src: [Send(ip[dst], pid, count)], dst: []}, linger=10)
            after = net.port_counters()
            got = heard[dst][f"{ip[src]} {pid}"]
            if got < count:
                problems.append(f"path-id {pid}: {src} -> {dst} delivered {got}/{count}")
            seen.append(_ports_that_counted(before, after, count))
            expected = set(routing.ports_on_path(src, dst, pid))
            if seen[-1][1] != expected:
                problems.append(f"path-id {pid}: {src} -> {dst} left through {sorted(seen[-1][1])}, "
                                f"routing says {sorted(expected)}")
        (fwd_rx, fwd_tx, fwd_stray), (rev_rx, rev_tx, rev_stray) = seen
        if fwd_tx != rev_rx or fwd_rx != rev_tx:
            problems.append(f"path-id {pid}: {a} <-> {b} asymmetric: forward tx {sorted(fwd_tx)} rx "
                            f"{sorted(fwd_rx)}, reverse tx {sorted(rev_tx)} rx {sorted(rev_rx)}")
        if fwd_stray | rev_stray:
            problems.append(f"path-id {pid}: stray packets on {sorted(fwd_stray | rev_stray)}")
    return problems


def check_fabric(config: ExperimentConfig, net=None) -> bool:
    """Bring up, verify, tear down, printing what was found; True if everything held. `net`: the
    fabric to check (a SplitFabric over several machines: machines/fabric.py), FabricNet(config)
    unless given."""
    net = net or FabricNet(config)
    topo = net.fabric_topo
    print(f"{topo.kind}: {len(topo.switches)} switches, {len(topo.hosts)} hosts, {len(topo.links)} links, "
          f"{net.describe_datapath()}")
    started = time.monotonic()
    how, problems = symmetry_problems(net.routing)
    problems = [f"routing tables: {p}" for p in problems]
    print(f"routing tables symmetric for every pair and path-id: {'no' if problems else 'yes'}, {how}, in "
          f"{time.monotonic() - started:.2f} s")
    with net:
        print(f"bring-up   {net.timings.total:6.2f} s  ({_phases(net.timings)})")
        started = time.monotonic()
        reachability = check_reachability(net)
        problems += reachability.problems
        pairs = len(topo.hosts) * (len(topo.hosts) - 1)
        print(f"reachability of {pairs} ordered pairs checked in {time.monotonic() - started:.2f} s "
              f"({reachability.first_try_losses} first datagrams lost and resent)")
        started = time.monotonic()
        pairs = symmetry_pairs(net.routing, net.machine_of)
        for a, b in pairs:
            problems += check_path_symmetry(net, a, b)
        print(f"path symmetry checked on port counters for {len(pairs)} pairs, one per path length "
              f"({', '.join(f'{a} <-> {b}' for a, b in pairs)}), every path-id, in {time.monotonic() - started:.2f} s; "
              f"routing tables: every pair and path-id (above)")
    print(f"teardown   {net.stop_timings.total:6.2f} s  ({_phases(net.stop_timings)})")
    for problem in problems[:50]:
        print(f"FAIL {problem}")
    if len(problems) > 50:
        print(f"... and {len(problems) - 50} more")
    print("OK: all pairs reachable, paths symmetric" if not problems else f"FAILED: {len(problems)} problem(s)")
    return not problems


def _phases(timings) -> str:
    return ", ".join(f"{name} {seconds:.2f}" for name, seconds in timings.phases.items())
