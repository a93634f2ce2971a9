"""Static OpenFlow rules that implement routing.Routing on Open vSwitch (pure text).

Table 0 puts the packet's path-id into reg0: the low PATH_ID_BITS of the UDP source port
for UDP from one of ccemu's path-id ports, a symmetric hash of addresses and ports for every
other IPv4 packet (the hash is the same for A->B and B->A, so kernel TCP, other UDP and ping
get symmetric paths too). Everything
that is not IPv4 is dropped: hosts use static ARP and have IPv6 off.

Table 1 forwards: host routes by destination address, then the uplink that the switch's
tier picks for the path-id. Uplink choices are written as masked reg0 matches when the
uplink count and stride are powers of two, otherwise as one rule per path-id value. Hosts
address every packet to the fabric's gateway MAC (model/topology.py GATEWAY_MAC); the switch
a host hangs off writes the host's MAC in.
"""

from __future__ import annotations

from ..model.routing import PATH_ID_BITS, PATH_ID_PORT_MASK, PATH_ID_PORTS, PATH_IDS, SwitchRoutes
from ..model.topology import Topology

PATH_ID_FIELD = f"NXM_NX_REG0[0..{PATH_ID_BITS - 1}]"


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def uplink_rules(routes: SwitchRoutes) -> list[str]:
    if not routes.uplinks:
        return []
    fan, stride = len(routes.uplinks), routes.stride
    if _is_power_of_two(fan) and _is_power_of_two(stride) and fan * stride <= PATH_IDS:
        mask = (fan - 1) * stride
        return [
            f"table=1,priority=100,reg0={i * stride:#x}/{mask:#x},actions=output:{port}"
            for i, port in enumerate(routes.uplinks)
        ]
    return [
        f"table=1,priority=100,reg0={pid},actions=output:{routes.uplink_for(pid)}"
        for pid in range(PATH_IDS)
    ]


def switch_flows(topo: Topology, routes: SwitchRoutes) -> list[str]:
    """Every rule of one switch, in `ovs-ofctl add-flows` syntax."""
    flows = [
        f"table=0,priority=100,udp,tp_src={PATH_ID_PORTS[0]:#x}/{PATH_ID_PORT_MASK:#x},"
        f"actions=move:NXM_OF_UDP_SRC[0..{PATH_ID_BITS - 1}]->{PATH_ID_FIELD},resubmit(,1)",
        # +udp: without it OVS hashes the ports of TCP and SCTP only (lib/flow.c flow_hash_symmetric_l3l4), and
        # every UDP flow between two hosts would take one path where the bpf datapath (switch.h) spreads them.
        f"table=0,priority=90,ip,actions=multipath(symmetric_l3l4+udp,0,modulo_n,{PATH_IDS},0,{PATH_ID_FIELD}),"
        "resubmit(,1)",
        "table=0,priority=0,actions=drop",
    ]
    flows += [
        f"table=1,priority=200,ip,nw_dst={topo.host(host).ip},actions="
        + (f"mod_dl_dst:{topo.host(host).mac}," if topo.attachment(host) == (routes.switch, port) else "")
        + f"output:{port}"
        for host, port in sorted(routes.host_ports.items())
    ]
    flows += uplink_rules(routes)
    flows.append("table=1,priority=0,actions=drop")
    return flows
