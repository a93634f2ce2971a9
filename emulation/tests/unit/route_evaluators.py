"""How each datapath forwards, evaluated on the very text ccemu hands it, for test_route_agreement.py
(whose docstring says what is evaluated and how)."""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass
from functools import cached_property, lru_cache

from ccemu.fabric.forwarding import route_lines, switch_ids
from ccemu.fabric.openflow import switch_flows
from ccemu.model.routing import PATH_ID_PORTS, PATH_IDS, Routing
from ccemu.model.topology import Topology, fat_tree, leaf_spine
from ccemu.ports.program import ifindex_of, number_ports

# Three spines: not a power of two, so OpenFlow gets one uplink rule per path-id, not masked ones.
TOPOLOGIES = {"fat-tree k=4": fat_tree(4), "fat-tree k=8": fat_tree(8), "leaf-spine 4x2": leaf_spine(4, 2, 4),
              "leaf-spine 4x3": leaf_spine(4, 3, 2)}
PATH_ID_BASE = PATH_ID_PORTS[0]  # cchost's --port-base: it sends path-id p from this + p
NOT_A_HOST = "10.255.255.254"  # an address no host has: no switch has a host route to it
IPPROTO = {"icmp": socket.IPPROTO_ICMP, "tcp": socket.IPPROTO_TCP, "udp": socket.IPPROTO_UDP}
ETH_P_IP, ETH_P_ARP, ETH_P_IPV6 = 0x0800, 0x0806, 0x86DD


def address(ip: str) -> int:
    """An IPv4 address as OpenFlow matches it (a number, most significant byte first)."""
    return int.from_bytes(socket.inet_aton(ip), "big")


@lru_cache(maxsize=None)
def loaded(ip: str) -> int:
    """An IPv4 address as switch.h loads it (ip->daddr: the bytes on the wire as a u32 in this
    machine's byte order) and as port_loader.c keys host_routes with it (inet_pton's s_addr)."""
    return int.from_bytes(socket.inet_aton(ip), sys.byteorder)


def bits_of(bitset: int) -> list[int] | range:
    """The members of a bitset of packets, in order."""
    if not bitset & bitset + 1:  # all of 0..n-1
        return range(bitset.bit_length())
    return [i for i, bit in enumerate(bin(bitset)[:1:-1]) if bit == "1"]


# Packets --------------------------------------------------------------------------------------

PACKET_FIELDS = ("dl_type", "nw_proto", "nw_src", "nw_dst", "tp_src", "tp_dst", "fragment", "in_port")


@dataclass(frozen=True)
class Packets:
    """A batch of packets, field by field: one value where every packet has the same, else a tuple
    of one value per packet. Addresses are dotted strings; `fragment`: 0, or 1 for a fragment (first
    or later); `in_port`: the port it arrived by (OVS port number; 0: none)."""

    count: int
    fields: dict

    @classmethod
    def of(cls, count: int, **fields) -> "Packets":
        defaults = {"dl_type": ETH_P_IP, "nw_proto": IPPROTO["udp"], "tp_dst": PATH_ID_BASE, "fragment": 0,
                    "in_port": 0}
        values = {**defaults, **fields}
        assert set(values) == set(PACKET_FIELDS), set(values) ^ set(PACKET_FIELDS)
        for name, value in values.items():
            assert not isinstance(value, (tuple, list)) or len(value) == count, name
            values[name] = tuple(value) if isinstance(value, list) else value
        return cls(count, values)

    def value(self, name: str, i: int):
        value = self.fields[name]
        return value[i] if isinstance(value, tuple) else value

    def column(self, name: str) -> tuple:
        """The field's value of every packet."""
        value = self.fields[name]
        return value if isinstance(value, tuple) else (value,) * self.count


@lru_cache(maxsize=None)
def matching(values, value: int, mask: int, count: int) -> int:
    """The packets (a bitset) whose field, `values` (one int for all, or one per packet), is
    `value` under `mask`."""
    if isinstance(values, int):
        return (1 << count) - 1 if values & mask == value & mask else 0
    return sum(1 << i for i, v in enumerate(values) if v & mask == value & mask)


# OpenFlow, as OVS evaluates it ------------------------------------------------------------------

PROTOCOL_MATCHES = {"ip": (("dl_type", ETH_P_IP),), "tcp": (("dl_type", ETH_P_IP), ("nw_proto", IPPROTO["tcp"])),
                    "udp": (("dl_type", ETH_P_IP), ("nw_proto", IPPROTO["udp"])),
                    "icmp": (("dl_type", ETH_P_IP), ("nw_proto", IPPROTO["icmp"]))}
FIELD_BITS = {"reg0": 32, "tp_src": 16, "tp_dst": 16, "nw_src": 32, "nw_dst": 32, "in_port": 16}
NXM_FIELDS = {"NXM_NX_REG0": "reg0", "NXM_OF_UDP_SRC": "tp_src", "NXM_OF_TCP_SRC": "tp_src",
              "NXM_OF_UDP_DST": "tp_dst", "NXM_OF_TCP_DST": "tp_dst"}
# What OVS lets a rule match (ovs-fields(7) prerequisites): ports of TCP or UDP, addresses of IPv4.
PREREQUISITES = {"tp_src": ("nw_proto", {IPPROTO["tcp"], IPPROTO["udp"]}),
                 "tp_dst": ("nw_proto", {IPPROTO["tcp"], IPPROTO["udp"]}),
                 "nw_src": ("dl_type", {ETH_P_IP}), "nw_dst": ("dl_type", {ETH_P_IP}),
                 "nw_proto": ("dl_type", {ETH_P_IP})}
OVS_DEFAULT_PRIORITY = 32768


@dataclass(frozen=True)
class Rule:
    text: str
    table: int
    priority: int
    matches: tuple  # (field, value, mask)
    actions: tuple  # action texts, in order


def split_top_level(text: str) -> list[str]:
    """`text` split at the commas outside parentheses and brackets (actions carry both)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def parse_rule(text: str) -> Rule:
    """One rule in `ovs-ofctl add-flows` syntax."""
    head, sep, actions = text.partition("actions=")
    if not sep:
        raise ValueError(f"{text}: no actions")
    table, priority, matches = 0, OVS_DEFAULT_PRIORITY, []
    for item in filter(None, head.split(",")):
        name, eq, value = item.partition("=")
        if not eq:
            if name not in PROTOCOL_MATCHES:
                raise ValueError(f"{text}: {name!r} is no protocol this evaluator knows")
            matches += [(field, number, (1 << 16) - 1) for field, number in PROTOCOL_MATCHES[name]]
        elif name == "table":
            table = int(value)
        elif name == "priority":
            priority = int(value)
        elif name in ("nw_src", "nw_dst"):
            ip, _, prefix = value.partition("/")
            length = int(prefix or 32)
            matches.append((name, address(ip), (0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF))
        elif name in FIELD_BITS:
            number, _, mask = value.partition("/")
            matches.append((name, int(number, 0), int(mask, 0) if mask else (1 << FIELD_BITS[name]) - 1))
        else:
            raise ValueError(f"{text}: {name!r} is no match field this evaluator knows")
    fields = {field: number for field, number, _ in matches}
    for field, _, _ in matches:
        if field in PREREQUISITES:
            needed, allowed = PREREQUISITES[field]
            if fields.get(needed) not in allowed:
                raise ValueError(f"{text}: {field} without its prerequisite {needed} (ovs-ofctl refuses it)")
    return Rule(text, table, priority, tuple(matches), tuple(split_top_level(actions)))


def field_bits(spec: str) -> tuple[str, int, int]:
    """"NXM_NX_REG0[0..7]" -> ("reg0", 0, 8): the field, its lowest bit, the bits."""
    name, _, bits = spec.partition("[")
    low, _, high = bits.rstrip("]").partition("..")
    return NXM_FIELDS[name], int(low), int(high) - int(low) + 1


@dataclass
class Forwarded:
    """What a switch did with each packet of a batch: the port it left by (None: dropped), the MAC
    written over its destination (None: none), and for OpenFlow the multipath fields that gave its
    path-id (None: its path-id came from no hash)."""

    ports: list
    macs: list
    hashed: list


class OpenFlowSwitch:
    """One switch's rules (fabric/openflow.py switch_flows), looked up as OVS does."""

    def __init__(self, flows: list[str]):
        self.rules = [parse_rule(flow) for flow in flows]
        self.tables: dict[int, list[list[Rule]]] = {}
        for table in sorted({rule.table for rule in self.rules}):
            rules = [rule for rule in self.rules if rule.table == table]
            self.tables[table] = [[r for r in rules if r.priority == p]
                                  for p in sorted({r.priority for r in rules}, reverse=True)]

    def forward(self, packets: Packets, multipath=None) -> Forwarded:
        """`multipath(i, fields, n_links)`: the link OVS's multipath action picks for packet i (the
        hash OVS computes is not evaluated here: see the module's docstring)."""
        n = packets.count
        # OVS's view of a packet: a fragment's ports are 0 (fragment handling `normal`).
        view = dict(packets.fields)
        for name in ("nw_src", "nw_dst"):
            ips = packets.fields[name]
            view[name] = address(ips) if isinstance(ips, str) else tuple(map(address, ips))
        for name in ("tp_src", "tp_dst"):
            if packets.fields["fragment"]:
                view[name] = tuple(0 if packets.value("fragment", i) else packets.value(name, i) for i in range(n))
        state = {"view": view, "reg0": [0] * n, "out": Forwarded([None] * n, [None] * n, [None] * n),
                 "multipath": multipath, "packets": packets}
        self._lookup(0, (1 << n) - 1, state)
        return state["out"]

    def _lookup(self, table: int, live: int, state: dict) -> None:
        view, n = state["view"], state["packets"].count
        view["reg0"] = tuple(state["reg0"])
        decided, winners = 0, []
        for rules in self.tables.get(table, []):
            level = 0
            for rule in rules:
                hit = live & ~decided
                for field, value, mask in rule.matches:
                    hit &= matching(view[field], value, mask, n)
                if hit & level:
                    first = next(r.text for r in rules if r is not rule and matching_all(r, view, n) & hit)
                    raise AssertionError(f"two rules of priority {rule.priority} match one packet: {first} and "
                                         f"{rule.text}")
                level |= hit
                if hit:
                    winners.append((rule, hit))
            decided |= level
            if decided == live:
                break
        for rule, hit in winners:  # matched first, then acted: an action changes what later rules would see
            self._act(rule, hit, state)

    def _act(self, rule: Rule, hit: int, state: dict) -> None:
        packets, out, reg0 = state["packets"], state["out"], state["reg0"]
        for action in rule.actions:
            kind, _, arg = action.partition(":")
            if kind == "output":
                port, in_ports = int(arg), packets.column("in_port")
                # OpenFlow sends no packet back out of the port it came in by.
                members = [i for i in bits_of(hit) if in_ports[i] != port]
                assert all(out.ports[i] is None for i in members), f"{rule.text}: a second output"
                for i in members:
                    out.ports[i] = port
            elif kind == "mod_dl_dst":
                for i in bits_of(hit):
                    out.macs[i] = arg
            elif kind == "move":
                source, _, target = arg.partition("->")
                (src, src_low, width), (dst, dst_low, dst_width) = field_bits(source), field_bits(target)
                assert dst == "reg0" and width == dst_width, action
                for i in bits_of(hit):
                    moved = state["view"][src] if isinstance(state["view"][src], int) else state["view"][src][i]
                    moved = moved >> src_low & ((1 << width) - 1)
                    reg0[i] = reg0[i] & ~(((1 << width) - 1) << dst_low) | moved << dst_low
            elif action.startswith("multipath(") and action.endswith(")"):
                fields, basis, algorithm, n_links, _, target = action[len("multipath("):-1].split(",", 5)
                dst, dst_low, width = field_bits(target)
                assert dst == "reg0" and int(n_links) <= 1 << width and algorithm == "modulo_n", action
                for i in bits_of(hit):
                    link = state["multipath"](i, fields, int(n_links))
                    assert 0 <= link < int(n_links)
                    reg0[i] = reg0[i] & ~(((1 << width) - 1) << dst_low) | link << dst_low
                    out.hashed[i] = fields
            elif action.startswith("resubmit(,") and action.endswith(")"):
                self._lookup(int(action[len("resubmit(,"):-1]), hit, state)
            elif action == "drop":
                pass
            else:
                raise ValueError(f"{rule.text}: {action!r} is no action this evaluator knows")


def matching_all(rule: Rule, view: dict, n: int) -> int:
    hit = (1 << n) - 1
    for field, value, mask in rule.matches:
        hit &= matching(view[field], value, mask, n)
    return hit


# The bpf datapath, as switch.h reads port_loader's maps --------------------------------------

SWITCH_MAX_UPLINKS = 16  # port.h


def switch_h_ports(proto: int, sport: int, dport: int, fragment: int) -> tuple[int, int]:
    """The ports path_id_of() reads: none (0, 0) of a fragment (frag_off & 0x3fff: MF or an offset)
    or of a protocol other than UDP and TCP."""
    return (sport, dport) if proto in (IPPROTO["udp"], IPPROTO["tcp"]) and not fragment else (0, 0)


def switch_h_port_path_id(proto: int, sport: int, dport: int, fragment: int) -> int | None:
    """path_id_of()'s first branch: the path-id a UDP source port in ccemu's range carries; None."""
    sport, _ = switch_h_ports(proto, sport, dport, fragment)
    if proto == IPPROTO["udp"] and sport & 0xE000 == 0xA000:  # port.h PATH_ID_PORT_MASK, PATH_ID_PORT_BASE
        return sport & 255  # PATH_IDS - 1
    return None


def switch_h_path_id(src: str, dst: str, proto: int, sport: int, dport: int, fragment: int) -> int:
    """switch.h path_id_of(), written out from it: the path-id of the UDP source port, else
    (saddr ^ daddr ^ (sport ^ dport) ^ protocol) through murmur3's finalizer, in u32 arithmetic."""
    carried = switch_h_port_path_id(proto, sport, dport, fragment)
    if carried is not None:
        return carried
    sport, dport = switch_h_ports(proto, sport, dport, fragment)
    value = loaded(src) ^ loaded(dst) ^ (sport ^ dport) ^ proto
    value ^= value >> 16
    value = value * 0x85EBCA6B & 0xFFFFFFFF
    value ^= value >> 13
    value = value * 0xC2B2AE35 & 0xFFFFFFFF
    value ^= value >> 16
    return value & 255  # PATH_IDS - 1


@dataclass(frozen=True)
class Uplinks:
    stride: int
    ifindexes: tuple


class BpfRoutes:
    """The maps `port_loader routes` fills from fabric/forwarding.py's lines (write_route())."""

    def __init__(self, lines: list[str]):
        self.port_switch: dict[int, int] = {}
        self.uplinks: dict[int, Uplinks] = {}
        self.hosts: dict[tuple[int, int], tuple[int, str | None]] = {}
        for line in lines:
            kind, *fields = line.split()
            if kind == "port":
                port, switch = map(int, fields)
                assert switch and len(fields) == 2, line
                self.port_switch[port] = switch
            elif kind == "uplinks":
                switch, stride, *ifindexes = map(int, fields)
                assert switch and stride and 1 <= len(ifindexes) <= SWITCH_MAX_UPLINKS, line
                self.uplinks[switch] = Uplinks(stride, tuple(ifindexes))
            elif kind == "host":
                switch, ip, ifindex, mac = fields
                assert int(switch), line
                self.hosts[(int(switch), loaded(ip))] = (int(ifindex), None if mac == "-" else mac)
            else:
                raise ValueError(f"not a route: {line}")

    def forward(self, port_id: int, packets: Packets) -> Forwarded:
        """switch_ingress() at the port with id `port_id`: the ifindex each packet is redirected to
        (None: dropped, TC_ACT_SHOT); "pass" where the port is no switch's (TC_ACT_OK: to its
        namespace)."""
        n = packets.count
        out = Forwarded([None] * n, [None] * n, [None] * n)
        switch = self.port_switch.get(port_id, 0)
        if not switch:
            out.ports = ["pass"] * n
            return out
        uplinks = self.uplinks.get(switch)
        columns = zip(*map(packets.column, ("dl_type", "nw_dst", "nw_src", "nw_proto", "tp_src", "tp_dst", "fragment")))
        routes = {}  # destination -> its host route: looked up once per address of the batch
        for i, (dl_type, dst, src, proto, sport, dport, fragment) in enumerate(columns):
            if dl_type != ETH_P_IP:
                continue  # parse(): ip_offset -1, then TC_ACT_SHOT
            if dst not in routes:
                routes[dst] = self.hosts.get((switch, loaded(dst)))
            if routes[dst] is not None:
                out.ports[i], out.macs[i] = routes[dst]
            elif uplinks is not None:  # else no route: TC_ACT_SHOT
                pid = switch_h_path_id(src, dst, proto, sport, dport, fragment)
                pick = pid // uplinks.stride % len(uplinks.ifindexes)
                out.ports[i] = uplinks.ifindexes[pick & (SWITCH_MAX_UPLINKS - 1)]
        return out


# One topology, as each datapath is handed it ----------------------------------------------------

DATAPATHS = ("OpenFlow", "bpf")


@dataclass(frozen=True)
class Decision:
    """What one switch does with packets of every path-id toward one destination: per path-id, the
    topology port it leaves by (None: dropped) and the MAC written in (None: none)."""

    ports: tuple
    macs: tuple

    @cached_property
    def by_port(self) -> dict:
        """Port -> the path-ids (a bitset) that leave by it."""
        groups: dict = {}
        for pid, port in enumerate(self.ports):
            groups[port] = groups.get(port, 0) | 1 << pid
        return groups


class Fabric:
    """A topology's routing tables, the OpenFlow rules and bpf routes ccemu makes of them, and how
    each datapath's port names map back to the topology's (switch, port)."""

    def __init__(self, topo: Topology, flows: dict | None = None, lines: list | None = None):
        self.topo = topo
        self.routing = Routing(topo)
        self.ids = number_ports(link.interface_names() for link in topo.links)
        self.flows = flows or {s: switch_flows(topo, self.routing.tables[s]) for s in topo.switch_names}
        self.lines = route_lines(self.routing, self.ids) if lines is None else lines
        self.openflow = {switch: OpenFlowSwitch(flows) for switch, flows in self.flows.items()}
        self.bpf = BpfRoutes(self.lines)
        self.switch_id = switch_ids(self.routing)
        self.switch_of_id = {number: switch for switch, number in self.switch_id.items()}
        self.interface_of_ifindex = {ifindex_of(ids.port_id): name for name, ids in self.ids.items()}
        self.interface_of_id = {ids.port_id: name for name, ids in self.ids.items()}
        self.node_of = {}  # interface name -> (node, port)
        for link in topo.links:
            a, b = link.interface_names()
            self.node_of[a], self.node_of[b] = (link.a, link.a_port), (link.b, link.b_port)
        self.host_at = {host.ip: host.name for host in topo.hosts}

    def port_id(self, node: str, port: int) -> int:
        return self.ids[f"{node}-eth{port}"].port_id

    def bpf_port(self, switch: str, ifindex) -> int | None:
        """The topology's number of the port `switch` redirects to (None: dropped). It must be one of
        the switch's own: bpf_redirect() looks the ifindex up in the switch's namespace."""
        if ifindex is None:
            return None
        node, port = self.node_of[self.interface_of_ifindex[ifindex]]
        assert node == switch, f"{switch} redirects to ifindex {ifindex}, a port of {node}"
        return port

    def peer(self, datapath: str, node: str, port: int) -> tuple[str, int]:
        """Where a packet sent out of `node`'s port arrives. OpenFlow: port N of a bridge is the
        interface NODE-ethN, whose link the topology names. bpf: the redirect's ifindex is the
        interface's; the veth hands the packet to its peer (PortIds.peer_port_id), whose ingress
        program forwards it if the port lines give that port a switch, else it reaches the port's
        namespace: a host."""
        if datapath == "OpenFlow":
            return self.topo.ports(node)[port]
        peer_id = self.ids[f"{node}-eth{port}"].peer_port_id
        peer, peer_port = self.node_of[self.interface_of_id[peer_id]]
        switch_id = self.bpf.port_switch.get(peer_id)
        assert (self.switch_of_id[switch_id] if switch_id else None) == (None if self.topo.is_host(peer) else peer)
        return peer, peer_port

    def destinations(self) -> list[tuple[str, str | None]]:
        """(address, host) of every host, and an address of none."""
        return [(host.ip, host.name) for host in self.topo.hosts] + [(NOT_A_HOST, None)]

    @cached_property
    def decisions(self) -> dict:
        """(switch, destination address) -> datapath -> Decision, for packets of every path-id as
        cchost sends them (from any host: no rule or route reads the source, a test holds), arriving
        by the switch's first port (only the bpf datapath reads which: to know the switch)."""
        table = {}
        source = self.topo.hosts[0].ip
        for switch in self.topo.switch_names:
            arrival = self.port_id(switch, min(self.topo.ports(switch)))
            for ip, _ in self.destinations():
                packets = path_id_packets(source, ip)
                ovs, bpf = self.openflow[switch].forward(packets), self.bpf.forward(arrival, packets)
                ports = {ifindex: self.bpf_port(switch, ifindex) for ifindex in set(bpf.ports)}
                table[(switch, ip)] = {"OpenFlow": Decision(tuple(ovs.ports), tuple(ovs.macs)),
                                       "bpf": Decision(tuple(map(ports.get, bpf.ports)), tuple(bpf.macs))}
        return table

    def walk(self, datapath: str, src: str, ip: str) -> list:
        """Packets of every path-id from host `src` to `ip`, hop by hop through `datapath`'s
        decisions: per path-id, ((switch, port) of every hop, where it ended: a host's name or
        ("dropped at", switch)). No rule or route reads the port a packet came in by (a test holds),
        so each switch's decisions (`decisions`, taken at its first port) hold at every port but for
        one thing, applied here: OpenFlow drops a packet its rules send back out of the port it came
        in by, where the bpf datapath would send it back."""
        switch, in_port = self.peer(datapath, src, 1)
        walked = [None] * PATH_IDS
        stack = [(switch, in_port, (1 << PATH_IDS) - 1, ())]
        while stack:
            switch, in_port, group, hops = stack.pop()
            assert len(hops) <= len(self.topo.switches), f"a forwarding loop: {hops}"
            for port, pids in self.decisions[(switch, ip)][datapath].by_port.items():
                pids &= group
                if not pids:
                    continue
                if port is None or (datapath == "OpenFlow" and port == in_port):
                    ended = (hops, ("dropped at", switch))
                else:
                    peer, peer_port = self.peer(datapath, switch, port)
                    if not self.topo.is_host(peer):
                        stack.append((peer, peer_port, pids, hops + ((switch, port),)))
                        continue
                    ended = (hops + ((switch, port),), peer)
                for pid in bits_of(pids):
                    walked[pid] = ended
        return walked


FABRICS: dict[str, Fabric] = {}


def fabric(name: str) -> Fabric:
    if name not in FABRICS:
        FABRICS[name] = Fabric(TOPOLOGIES[name])
    return FABRICS[name]


def path_id_packets(src: str, dst: str, **fields) -> Packets:
    """A packet of every path-id from `src` to `dst` as cchost sends them: UDP from its port base + p."""
    return Packets.of(PATH_IDS, nw_src=src, nw_dst=dst, tp_src=[PATH_ID_BASE + p for p in range(PATH_IDS)], **fields)


def tables_port(routing: Routing, switch: str, host: str | None, pid: int) -> int | None:
    """The port the routing tables name: the host route, else the path-id's uplink; None: none."""
    routes = routing.tables[switch]
    if host is not None:
        return routes.port_toward(host, pid)
    return routes.uplink_for(pid) if routes.uplinks else None


def walk_sources(net: Fabric) -> list[str]:
    """A host under every edge switch (where a packet enters is all its source changes: see the
    module's docstring); of the k=8 fat-tree, under those of its first and last pod only, to keep
    the walks under a second: between them they cross every core and every pod's aggregation and
    edge switches on the way down, and the test before checks every switch's every decision."""
    sources = {}
    for host in net.topo.host_names:
        sources.setdefault(net.topo.attachment(host)[0], host)
    hosts = list(sources.values())
    if net.topo.kind == "fattree" and len(sources) > 16:
        per_pod = len(net.topo.hosts) // len(sources)  # k/2 hosts per edge switch, k/2 edge switches per pod
        return hosts[:per_pod] + hosts[-per_pod:]  # edge switches are numbered pod by pod
    return hosts


# Tests ----------------------------------------------------------------------------------------

