"""Kernel-TCP load across a k=4 fat-tree: 8 cross-pod iperf3 pairs (h1..h8 -> h9..h16), each
on a path of its own. Each pair's client port is chosen (by asking OVS which path-id it would
hash the flow to) so that no two flows share a link: a shortfall is then the emulator's, not
ECMP's. Used by the capacity benchmark and by the fidelity tests that overload a fabric."""

from __future__ import annotations

import json
import subprocess
import time

from ..fabric.net import FabricNet
from ..fabric.checks import flow_path_id

TCP_PAYLOAD_PER_WIRE_FRAME = 1448 / 1538  # MSS with timestamps / (1500 + 14 + 24)
IPERF_PORT = 5201
FIRST_CLIENT_PORT = 30000  # below ccemu's path-id ports (transport/wire-format.md)
PAIRS = [(f"h{i}", f"h{i + 8}") for i in range(1, 9)]


def disjoint_client_ports(net: FabricNet) -> dict[tuple[str, str], int]:
    """A client port per pair such that no two flows leave through the same switch port."""
    used: set[tuple[str, int]] = set()
    chosen = {}
    for src, dst in PAIRS:
        for cport in range(FIRST_CLIENT_PORT, FIRST_CLIENT_PORT + 512):
            pid = flow_path_id(net, src, dst, "tcp", cport, IPERF_PORT)
            ports = set(net.routing.ports_on_path(src, dst, pid))
            if not ports & used:
                used |= ports
                chosen[(src, dst)] = cport
                break
        else:
            raise RuntimeError(f"no client port gives {src} -> {dst} a path of its own")
    return chosen


def run_pairs(net: FabricNet, seconds: float, on_start=None) -> dict[tuple[str, str], float]:
    """Run the 8 pairs for `seconds` at once; goodput per pair in Mbit/s. `on_start` is called
    once every client runs (e.g. to start measuring)."""
    cports = disjoint_client_ports(net)
    servers = [net[dst].popen(["iperf3", "-s", "-1", "-p", str(IPERF_PORT)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _, dst in PAIRS]
    try:
        time.sleep(0.5)
        clients = {
            (src, dst): net[src].popen(["iperf3", "-c", net[dst].IP(), "-p", str(IPERF_PORT), "--cport",
                                        str(cports[(src, dst)]), "-t", str(seconds), "-J"])
            for src, dst in PAIRS
        }
        if on_start:
            on_start()
        results = {}
        for pair, proc in clients.items():
            out, _ = proc.communicate(timeout=seconds + 30)
            report = json.loads(out)
            if "error" in report:
                raise RuntimeError(f"iperf3 {pair}: {report['error']}")
            results[pair] = report["end"]["sum_received"]["bits_per_second"] / 1e6
        for proc in servers:
            proc.wait(timeout=10)
        return results
    finally:
        for proc in servers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
