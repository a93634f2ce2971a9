"""The routes of the bpf datapath (`fabric.datapath: bpf`, ports/bpf/switch.h), from
routing.Routing: the same forwarding fabric/openflow.py gives OVS, as `port_loader routes` lines
(pure text).

    port PORT_ID SWITCH_ID                  every switch port: the switch it belongs to
    uplinks SWITCH_ID STRIDE IFINDEX...     a switch's ECMP uplinks, in SwitchRoutes order
    host SWITCH_ID ADDRESS IFINDEX MAC|-    the one port toward a host; MAC at the host's own switch

Switch ids count from 1 in topology order (0 is "no switch" in the map). Ports are named by
the ifindex the fabric gives them (ports/program.py ifindex_of), which is what bpf_redirect
takes.
"""

from __future__ import annotations

import socket
import sys

from ..model.routing import PATH_ID_PORT_MASK, PATH_ID_PORTS, PATH_IDS, Routing
from ..ports.program import PortIds, ifindex_of

MAX_UPLINKS = 16  # ports/bpf/port.h SWITCH_MAX_UPLINKS


PROTOCOLS = {"tcp": socket.IPPROTO_TCP, "udp": socket.IPPROTO_UDP}


def path_id(src_ip: str, dst_ip: str, proto: str, sport: int, dport: int) -> int:
    """The path-id switch.h path_id_of() gives a TCP or UDP packet: its source port's low bits
    for a ccemu path-id port, else the symmetric hash, computed as the program computes it (the
    addresses as the u32 it loads in this machine's byte order, the ports in host order)."""
    protocol = PROTOCOLS[proto]
    if protocol == socket.IPPROTO_UDP and sport & PATH_ID_PORT_MASK == PATH_ID_PORTS[0]:
        return sport & (PATH_IDS - 1)
    saddr, daddr = (int.from_bytes(socket.inet_aton(ip), sys.byteorder) for ip in (src_ip, dst_ip))
    hash_ = saddr ^ daddr ^ sport ^ dport ^ protocol
    hash_ ^= hash_ >> 16
    hash_ = hash_ * 0x85EBCA6B & 0xFFFFFFFF
    hash_ ^= hash_ >> 13
    hash_ = hash_ * 0xC2B2AE35 & 0xFFFFFFFF
    hash_ ^= hash_ >> 16
    return hash_ & (PATH_IDS - 1)


def switch_ids(routing: Routing) -> dict[str, int]:
    return {switch: number for number, switch in enumerate(routing.topo.switch_names, start=1)}


def host_route_count(routing: Routing) -> int:
    """Entries of the host_routes map the run needs (port_loader load sizes it with this)."""
    return sum(len(routes.host_ports) for routes in routing.tables.values())


def route_lines(routing: Routing, port_ids: dict[str, PortIds], switches: list[str] | None = None) -> list[str]:
    """The routes of every switch, or of `switches` (a machine's, of a fabric over several)."""
    topo = routing.topo

    def ifindex(switch: str, port: int) -> int:
        return ifindex_of(port_ids[f"{switch}-eth{port}"].port_id)

    lines = []
    for switch, number in switch_ids(routing).items():
        if switches is not None and switch not in switches:
            continue
        routes = routing.tables[switch]
        lines += [f"port {port_ids[f'{switch}-eth{port}'].port_id} {number}" for port in sorted(topo.ports(switch))]
        if routes.uplinks:
            if len(routes.uplinks) > MAX_UPLINKS:
                raise ValueError(f"switch {switch} has {len(routes.uplinks)} uplinks: the bpf datapath takes at most "
                                 f"{MAX_UPLINKS}")
            lines.append(f"uplinks {number} {routes.stride} "
                         + " ".join(str(ifindex(switch, port)) for port in routes.uplinks))
        for host, port in sorted(routes.host_ports.items()):
            spec = topo.host(host)
            mac = spec.mac if topo.attachment(host) == (switch, port) else "-"
            lines.append(f"host {number} {spec.ip} {ifindex(switch, port)} {mac}")
    return lines
