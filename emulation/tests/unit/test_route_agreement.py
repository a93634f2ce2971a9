"""Both datapaths forward alike: OVS's OpenFlow rules (fabric/openflow.py) and the bpf datapath's
routes (fabric/forwarding.py's lines, as `port_loader routes` loads them and ports/bpf/switch.h
reads them) send every packet out of the same switch port, the port named by the routing tables
both come from (model/routing.py). Pure: each representation is evaluated here, on the very text
ccemu hands its datapath, the way that datapath evaluates it; no switch, interface or root.

- OpenFlow, as OVS evaluates it: in each table the matching rule of highest priority wins; two
  matching rules of one priority fail the test (OVS may pick either); a table miss drops (the
  bridges are fail_mode=secure, without a controller); `output` to the port a packet came in by
  drops it (OpenFlow sends there only with the `in_port` action); a fragment is matched with its
  ports 0, the first fragment too (OVS's default fragment handling, `normal`). A match field or an
  action this evaluator does not know fails the test: it cannot say what OVS would do with it.
- bpf, as port_loader.c write_route() parses the lines and switch.h forward() and path_id_of()
  read them: port id -> switch id; a host route by (switch id, destination address), else
  uplinks.ifindex[(path-id / stride) % count].
- Ports: OVS port N of switch S is its interface S-ethN (fabric/net.py: ofport_request=N); the
  bpf datapath names a port by its ifindex, ifindex_of(its id), the ids being number_ports over
  every link's interfaces, as FabricNet numbers them on one machine (ports/program.py).

Neither representation reads a packet's source address or its ingress port to pick a port (the
parsers would let them; a test below holds that none does), so a packet's path depends on its
source host only through the switch it enters by (a test below: every host's, on both): the walks
start at a host of every edge switch (of the k=8 fat-tree, of two pods: walk_sources says why).
Every path-id, 0..PATH_IDS - 1 (model/routing.py PATH_ID_BITS), is sent to every host and to an
address of none, from every switch.

Traffic without a path-id (kernel TCP, other UDP, fragments) gets a symmetric hash on both
datapaths, but not the same hash: switch.h computes its own (evaluated here), OVS computes
multipath(symmetric_l3l4), whose value this test cannot compute. OVS's flow_hash_symmetric_l3l4()
goes through hash_add(), which is CRC32-C on a build with SSE4.2 and murmur otherwise, and it
differs between OVS versions; a copy here would test the copy. What is tested for that traffic:
each datapath routes it as the path-id its hash gives, through the same tables (OVS for every value
its multipath can give). Which path one such flow takes therefore differs between the datapaths.
"""

from __future__ import annotations

import pytest

from ccemu.fabric.forwarding import path_id as forwarding_path_id
from ccemu.model.routing import PATH_IDS
from route_evaluators import (DATAPATHS, ETH_P_ARP, ETH_P_IPV6, IPPROTO, PATH_ID_BASE, TOPOLOGIES, Packets, fabric,
                              switch_h_path_id, switch_h_port_path_id, tables_port, walk_sources)


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_every_switch_sends_every_destination_and_path_id_out_of_the_port_the_tables_name_on_both_datapaths(name):
    net = fabric(name)
    wrong = []
    for (switch, ip), decided in net.decisions.items():
        host = net.host_at.get(ip)
        ports = tuple(tables_port(net.routing, switch, host, pid) for pid in range(PATH_IDS))
        # At the switch a host hangs off, its MAC is written over the gateway's.
        macs = (net.topo.host(host).mac if host and net.topo.attachment(host)[0] == switch else None,) * PATH_IDS
        for datapath, decision in decided.items():
            for pid in range(PATH_IDS) if (decision.ports, decision.macs) != (ports, macs) else ():
                if (decision.ports[pid], decision.macs[pid]) != (ports[pid], macs[pid]):
                    wrong.append(f"{datapath}: {switch} sends to {host or ip} with path-id {pid} out of port "
                                 f"{decision.ports[pid]} writing MAC {decision.macs[pid]}; the tables: port "
                                 f"{ports[pid]}, MAC {macs[pid]}")
    assert not wrong, f"{len(wrong)} disagreements, first: " + "; ".join(wrong[:4])


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_no_rule_or_route_reads_the_source_address_or_the_ingress_port(name):
    """What lets every switch's decisions be taken once per destination, and the walks start at
    one host per switch: where a packet leaves a switch depends on its destination and path-id
    alone (and on its source port, which carries the path-id)."""
    net = fabric(name)
    for switch, rules in net.openflow.items():
        read = {field for rule in rules.rules for field, _, _ in rule.matches}
        assert read <= {"dl_type", "nw_proto", "nw_dst", "tp_src", "reg0"}, (switch, read)
        assert all(rule.table == 0 or not any(a.startswith("multipath") for a in rule.actions) for rule in rules.rules)
    assert {line.split()[0] for line in net.lines} == {"port", "uplinks", "host"}  # none names a source


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_every_switch_port_is_its_switchs_and_every_hosts_packets_enter_at_its_switch_on_both_datapaths(name):
    net = fabric(name)
    for switch in net.topo.switch_names:
        for port in net.topo.ports(switch):
            assert net.bpf.port_switch[net.port_id(switch, port)] == net.switch_id[switch], (switch, port)
    for host in net.topo.host_names:
        assert net.port_id(host, 1) not in net.bpf.port_switch  # a host's NIC: its packets go to its namespace
        for datapath in DATAPATHS:
            assert net.peer(datapath, host, 1) == net.topo.attachment(host), (datapath, host)


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_a_packet_of_every_path_id_crosses_the_switches_and_ports_of_its_routing_path_on_both_datapaths(name):
    net = fabric(name)
    wrong = []
    for src in walk_sources(net):
        for ip, dst in net.destinations():
            if dst == src:
                continue
            walked = {datapath: net.walk(datapath, src, ip) for datapath in DATAPATHS}
            for pid in range(PATH_IDS):
                if dst is not None:
                    expected = (tuple(net.routing.ports_on_path(src, dst, pid)), dst)
                else:  # no host: up the path-id's uplinks to a switch with none, dropped there
                    switch, hops = net.topo.attachment(src)[0], []
                    while net.routing.tables[switch].uplinks:
                        hops.append((switch, net.routing.tables[switch].uplink_for(pid)))
                        switch = net.topo.ports(switch)[hops[-1][1]][0]
                    expected = (tuple(hops), ("dropped at", switch))
                for datapath, ends in walked.items():
                    if ends[pid] != expected:
                        wrong.append(f"{datapath}: {src} to {dst or ip} path-id {pid}: hops and end {ends[pid]}; "
                                     f"the tables: {expected}")
    assert not wrong, f"{len(wrong)} walks off their path, first: " + "; ".join(wrong[:4])


def test_a_udp_source_port_carries_a_path_id_on_one_datapath_exactly_where_it_does_on_the_other():
    """Every source port of UDP and TCP, whole datagrams and fragments: OVS takes the path-id from
    the port (its multipath never runs) exactly where switch.h does, the same path-id; elsewhere
    both hash, and each routes by the path-id its hash gives."""
    net = fabric("fat-tree k=4")
    switch, src, dst = "e1", "h1", "h16"  # e1 climbs to h16 by the path-id's uplink
    routes, arrival = net.routing.tables[switch], net.port_id(switch, 1)
    ports = range(1 << 16)
    for proto in ("udp", "tcp"):
        for fragment in (0, 1):
            packets = Packets.of(len(ports), nw_proto=IPPROTO[proto], nw_src=net.topo.host(src).ip,
                                 nw_dst=net.topo.host(dst).ip, tp_src=list(ports), tp_dst=5201, fragment=fragment)
            ovs = net.openflow[switch].forward(packets, multipath=lambda i, fields, links: (i * 7 + 3) % links)
            bpf = net.bpf.forward(arrival, packets)
            carried = {sport for sport in ports if sport & 0xE000 == PATH_ID_BASE} if (proto, fragment) == ("udp", 0) \
                else set()
            assert {sport for sport in ports if ovs.hashed[sport] is None} == carried, (proto, fragment)
            assert {sport for sport in ports if switch_h_port_path_id(IPPROTO[proto], sport, 5201, fragment)
                    is not None} == carried, (proto, fragment)
            for sport in ports:
                ovs_pid = sport & (PATH_IDS - 1) if sport in carried else (sport * 7 + 3) % PATH_IDS
                bpf_pid = switch_h_path_id(net.topo.host(src).ip, net.topo.host(dst).ip, IPPROTO[proto], sport, 5201,
                                           fragment)
                assert ovs.ports[sport] == routes.uplink_for(ovs_pid), (proto, fragment, sport)
                assert net.bpf_port(switch, bpf.ports[sport]) == routes.uplink_for(bpf_pid), (proto, fragment, sport)


@pytest.mark.parametrize("name", ["fat-tree k=4", "leaf-spine 4x3"])
def test_openflow_routes_traffic_without_a_path_id_as_the_path_id_its_multipath_picks_whatever_it_picks(name):
    """OVS's hash is not evaluated (module docstring); whichever of its values multipath picks, the
    packet leaves every switch by the port the tables name for that path-id, and the hash is one of
    OVS's symmetric ones over every path-id."""
    net = fabric(name)
    source = net.topo.hosts[0].ip
    for proto, sport in (("tcp", 40000), ("udp", 5201), ("icmp", 0)):
        for switch in net.topo.switch_names:
            for ip, host in net.destinations():
                packets = Packets.of(PATH_IDS, nw_proto=IPPROTO[proto], nw_src=source, nw_dst=ip, tp_src=sport,
                                     tp_dst=5201)
                picks = []

                def multipath(i, fields, links):
                    picks.append((fields, links))
                    return i
                ovs = net.openflow[switch].forward(packets, multipath=multipath)
                assert ovs.ports == [tables_port(net.routing, switch, host, pid) for pid in range(PATH_IDS)]
                assert set(picks) <= {("symmetric_l3l4", PATH_IDS), ("symmetric_l3l4+udp", PATH_IDS)}


def test_the_bpf_datapath_routes_traffic_without_a_path_id_as_its_hash_says_the_same_way_both_ways():
    """Kernel TCP, other UDP and ping between every two hosts: each hop of the bpf datapath is the
    tables' for the path-id switch.h's hash gives, the reverse flow gets the same path-id, and
    forwarding.path_id (what the fabric checks predict the bpf datapath's paths with) is that hash."""
    net = fabric("fat-tree k=4")
    flows = [("tcp", 40000 + i, 5201) for i in range(3)] + [("udp", 33000, 5201), ("icmp", 0, 0)]
    for a in net.topo.hosts:
        for b in net.topo.hosts:
            if a == b:
                continue
            for proto, sport, dport in flows:
                pid = switch_h_path_id(a.ip, b.ip, IPPROTO[proto], sport, dport, 0)
                assert switch_h_path_id(b.ip, a.ip, IPPROTO[proto], dport, sport, 0) == pid
                if proto != "icmp":
                    assert forwarding_path_id(a.ip, b.ip, proto, sport, dport) == pid
                packet = Packets.of(1, nw_proto=IPPROTO[proto], nw_src=a.ip, nw_dst=b.ip, tp_src=sport, tp_dst=dport)
                in_port = net.topo.attachment(a.name)[1]
                for switch, port in net.routing.ports_on_path(a.name, b.name, pid):
                    (ifindex,) = net.bpf.forward(net.port_id(switch, in_port), packet).ports
                    assert net.bpf_port(switch, ifindex) == port, (a.name, b.name, proto, switch)
                    in_port = net.topo.ports(switch)[port][1]


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_both_datapaths_drop_everything_that_is_not_ipv4_at_every_switch(name):
    net = fabric(name)
    packets = Packets.of(2, dl_type=[ETH_P_ARP, ETH_P_IPV6], nw_src=net.topo.hosts[0].ip, nw_dst=net.topo.hosts[-1].ip,
                         tp_src=PATH_ID_BASE)
    for switch in net.topo.switch_names:
        assert net.openflow[switch].forward(packets).ports == [None, None]
        assert net.bpf.forward(net.port_id(switch, 1), packets).ports == [None, None]


def test_both_datapaths_hash_the_ports_of_udp_that_carries_no_path_id():
    """What each hash reads of a UDP datagram from a port that carries no path-id (iperf3 -u, any
    other UDP). switch.h: addresses, protocol and both ports. OVS's multipath(symmetric_l3l4):
    addresses and protocol, and ports of TCP and SCTP only (lib/flow.c
    flow_hash_symmetric_l3l4(flow, basis, inc_udp_ports=false); symmetric_l3l4+udp includes them,
    which openflow.py asks for: under plain symmetric_l3l4 every such UDP flow between two hosts took
    one path under OVS, and spread under bpf)."""
    net = fabric("fat-tree k=4")
    (hashing,) = [action for rule in net.openflow["e1"].rules for action in rule.actions
                  if action.startswith("multipath(")]
    ovs_reads_udp_ports = hashing.split("(")[1].split(",")[0] == "symmetric_l3l4+udp"
    a, b = net.topo.hosts[0].ip, net.topo.hosts[-1].ip
    bpf_reads_udp_ports = len({switch_h_path_id(a, b, IPPROTO["udp"], sport, 5201, 0)
                               for sport in range(33000, 33100)}) > 1
    assert ovs_reads_udp_ports == bpf_reads_udp_ports
