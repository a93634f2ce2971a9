"""The packet counters of a fabric's switch ports on this machine, which the path-symmetry check
compares before and after its probes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .ovs import OvsError, parse_port_stats

if TYPE_CHECKING:
    from .net import FabricNet

PortKey = tuple[str, int]  # (switch, OpenFlow port)


def switch_port_counters(net: "FabricNet") -> dict[PortKey, tuple[int, int]]:
    """(switch, port) -> (rx packets, tx packets) of every switch port: OVS's own counters, or
    with the bpf datapath the kernel's (OVS's do not count what it never saw)."""
    if net.forwards_in_bpf:
        return _kernel_port_counters(net)
    dumps = [(switch.name, switch.instance.dump_ports(switch.name)) for switch in net.switches]
    counters = {}
    for name, proc in dumps:
        out, err = proc.communicate()
        if proc.returncode:
            raise OvsError(f"reading port counters of {name}: {err.strip()}")
        for port, stats in parse_port_stats(out).items():
            counters[(name, port)] = stats
    return counters


def _kernel_port_counters(net: "FabricNet") -> dict[PortKey, tuple[int, int]]:
    counters = {}
    for namespace in net.switch_namespaces:
        for link in json.loads(namespace.cmd("ip -s -j link show")):
            switch, _, port = link["ifname"].rpartition("-eth")
            if switch in net.routing.tables and port.isdigit():
                stats = link["stats64"]
                counters[(switch, int(port))] = (stats["rx"]["packets"], stats["tx"]["packets"])
    return counters
