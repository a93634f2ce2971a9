"""Symmetric multipath routing by path-id, derived from a Topology (pure, no I/O).

Every switch forwards a packet either
- toward a destination reachable through exactly one shortest-path next hop (a "host
  route": downward in a tree), or
- up one of its ECMP uplinks, picked by the packet's path-id alone:
  ``uplinks[(path_id // stride) % len(uplinks)]`` where ``stride`` is the product of the
  uplink counts of the tiers below.

Because the pick depends only on the path-id and the tier, and uplink i means the same
thing in every pod (see topology.fat_tree), the packet A->B and the packet B->A with the
same path-id climb to the same top switch through mirror-image links: the reverse path is
the forward path reversed. ``path()`` follows these very tables, so tests of it test what
the switches do.

The path-id is carried in the low PATH_ID_BITS of the UDP source port when that port is one
of ccemu's path-id ports (PATH_ID_PORTS; see transport/wire-format.md); every other packet
(other UDP, TCP, ICMP) gets a symmetric hash of its addresses and ports, so it too takes the
same path both ways.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import cached_property
from math import prod

from .topology import Topology, TopologyError

PATH_ID_BITS = 8
PATH_IDS = 1 << PATH_ID_BITS
# UDP source ports that carry a path-id: 0xA000-0xBFFF (cchost binds 0xA000 + path-id). The
# hosts reserve them (ip_local_reserved_ports), so no ephemeral port of another program falls
# in here and gets routed by a "path-id" that is only its port number.
PATH_ID_PORTS = (0xA000, 0xBFFF)
PATH_ID_PORT_MASK = 0xE000  # the bits every port of the range shares (0xA000 = 0b101 then 13 free bits)


@dataclass(frozen=True)
class SwitchRoutes:
    switch: str
    tier: int  # 0 = switches with hosts attached, counting up
    host_ports: dict[str, int]  # destination host -> the one port toward it
    uplinks: tuple[int, ...]  # ECMP ports for every other destination, in port order
    stride: int  # product of the uplink counts of lower tiers

    def uplink_for(self, path_id: int) -> int:
        return self.uplinks[(path_id // self.stride) % len(self.uplinks)]

    def port_toward(self, host: str, path_id: int) -> int:
        if host in self.host_ports:
            return self.host_ports[host]
        if not self.uplinks:
            raise TopologyError(f"switch {self.switch} has no route to {host}")
        return self.uplink_for(path_id)


class Routing:
    """Forwarding tables of every switch, and the paths they produce."""

    def __init__(self, topo: Topology):
        self.topo = topo
        self.tables: dict[str, SwitchRoutes] = self._build_tables()

    def _distances_from(self, edge: str) -> dict[str, int]:
        """Hop counts from switch `edge` to every switch, through switches only (hosts are not
        transit nodes)."""
        dist = {edge: 0}
        queue = deque([edge])
        while queue:
            node = queue.popleft()
            for _, peer in self._switch_ports[node]:
                if peer not in dist:
                    dist[peer] = dist[node] + 1
                    queue.append(peer)
        return dist

    @cached_property
    def _switch_ports(self) -> dict[str, list[tuple[int, str]]]:
        """Switch -> (port, peer switch) of its links to other switches."""
        hosts = set(self.topo.host_names)
        return {
            switch: [(port, peer) for port, (peer, _) in self.topo.ports(switch).items() if peer not in hosts]
            for switch in self.topo.switch_names
        }

    def _build_tables(self) -> dict[str, SwitchRoutes]:
        """Hosts are single-homed, so a host's distance to a switch is its edge switch's plus
        one, and every switch but that edge reaches it through the same next hops as the
        edge's other hosts: the tables are worked out once per edge switch, not per host
        (k=16: 128 searches, not 1024)."""
        topo = self.topo
        hosts_of: dict[str, list[str]] = {}
        for host in topo.host_names:
            hosts_of.setdefault(topo.attachment(host)[0], []).append(host)
        dist = {edge: self._distances_from(edge) for edge in hosts_of}
        host_ports: dict[str, dict[str, int]] = {s: {} for s in topo.switch_names}
        uplinks: dict[str, tuple[int, ...]] = {s: () for s in topo.switch_names}
        tier: dict[str, int] = {}
        for switch in topo.switch_names:
            if any(switch not in dist[edge] for edge in hosts_of):
                raise TopologyError(f"switch {switch} cannot reach every host")
            tier[switch] = min(dist[edge][switch] for edge in hosts_of)
            for edge, hosts in hosts_of.items():
                if edge == switch:
                    for port, (peer, _) in topo.ports(switch).items():
                        if peer in hosts:
                            host_ports[switch][peer] = port
                    continue
                toward, closer = dist[edge], dist[edge][switch] - 1
                next_hops = tuple(port for port, peer in self._switch_ports[switch] if toward[peer] == closer)
                if len(next_hops) == 1:
                    host_ports[switch].update(dict.fromkeys(hosts, next_hops[0]))
                elif uplinks[switch] and uplinks[switch] != next_hops:
                    raise TopologyError(
                        f"switch {switch} has different equal-cost port sets toward different "
                        "hosts; path-id routing needs one uplink set per switch"
                    )
                else:
                    uplinks[switch] = next_hops
        fan_out: dict[int, int] = {}
        for switch, ups in uplinks.items():
            if ups and fan_out.setdefault(tier[switch], len(ups)) != len(ups):
                raise TopologyError(f"tier {tier[switch]} switches differ in uplink count")
        return {
            s: SwitchRoutes(
                switch=s,
                tier=tier[s],
                host_ports=host_ports[s],
                uplinks=uplinks[s],
                stride=prod(fan_out.get(t, 1) for t in range(tier[s])),
            )
            for s in topo.switch_names
        }

    @cached_property
    def _peer(self) -> dict[tuple[str, int], str]:
        return {
            (node, port): peer
            for node in self.topo.switch_names
            for port, (peer, _) in self.topo.ports(node).items()
        }

    def path(self, src: str, dst: str, path_id: int) -> tuple[str, ...]:
        """Switches a packet from `src` to `dst` with `path_id` crosses, in order."""
        if not 0 <= path_id < PATH_IDS:
            raise ValueError(f"path_id {path_id} outside 0..{PATH_IDS - 1}")
        switch, _ = self.topo.attachment(src)
        hops = [switch]
        for _ in range(len(self.tables)):
            nxt = self._peer[(switch, self.tables[switch].port_toward(dst, path_id))]
            if nxt == dst:
                return tuple(hops)
            switch = nxt
            hops.append(switch)
        raise TopologyError(f"forwarding loop from {src} to {dst} with path-id {path_id}")

    def n_paths(self, src: str, dst: str) -> int:
        """Distinct paths between two hosts: path-ids p and p mod n_paths take the same one."""
        path = self.path(src, dst, 0)
        up = [s for s in path if dst not in self.tables[s].host_ports]
        return prod(len(self.tables[s].uplinks) for s in up)

    def paths(self, src: str, dst: str) -> list[tuple[str, ...]]:
        return [self.path(src, dst, p) for p in range(self.n_paths(src, dst))]

    def ports_on_path(self, src: str, dst: str, path_id: int) -> list[tuple[str, int]]:
        """(switch, egress port) of every hop, for checking paths against port counters."""
        return [(s, self.tables[s].port_toward(dst, path_id)) for s in self.path(src, dst, path_id)]


def asymmetric_paths(routing: Routing) -> list[str]:
    """Every (pair, path-id) whose reverse path is not the forward path reversed, by walking
    them all: hosts squared times paths (k=16: 33 million walks). prove_symmetric proves the
    same from the tables' structure; the tests check the two agree."""
    problems = []
    hosts = routing.topo.host_names
    for i, a in enumerate(hosts):
        for b in hosts[i + 1:]:
            for pid in range(routing.n_paths(a, b)):
                forward, reverse = routing.path(a, b, pid), routing.path(b, a, pid)
                if forward != reverse[::-1]:
                    problems.append(f"{a} -> {b} path-id {pid}: {forward} but back {reverse}")
    return problems


def prove_symmetric(routing: Routing, limit: int = 20) -> list[str]:
    """Proves from the tables' structure that every pair's reverse path, for every path-id, is
    its forward path reversed, or names the rules that fail (at most `limit`). Its cost grows
    with edge switches times paths (k=16: ~10 000 climbs, well under a second), not with hosts
    squared times paths as asymmetric_paths.

    A climb is the walk up from an edge switch E (a switch with hosts) taking uplink choice c_i
    at depth i. The rules, checked over every climb:
    1. At every switch, all hosts of one edge switch are routed alike (at their edge: each
       through its own port). So edge switches, not hosts, need be followed.
    2. Depth is tier: the switch a climb reaches at depth i is in tier i, so a path-id makes
       the same choice c_i = (path_id // stride_i) % fan_i at depth i on every climb.
    3. A switch routes down (a host route) exactly to the edges whose climbs reach it, and a
       switch no climb leaves (no uplinks) routes down to every edge.
    4. Every edge whose climbs reach a switch X reaches it by the same choices.
    5. Down retraces up: where a climb from E steps from Y to X, X's host route to E's hosts is
       the link back to Y.
    Then for hosts a, b (edges A, B) and a path-id with choices c: a's packet climbs until the
    first switch X that has a host route to b (tables: host route first, else the path-id's
    uplink). By 3, B's climbs reach X; by 4, B's climb with the same choices does, at the same
    depth. The reverse climb cannot turn earlier, at some Y: by 3 and 4 a's climb would pass Y
    first and, by 3, turn there. By 5 (and 3 on the way) the way down from X is B's climb
    reversed. So a -> b is A's climb then B's reversed, and b -> a the mirror image."""
    topo, tables = routing.topo, routing.tables
    problems: list[str] = []
    hosts_of: dict[str, list[str]] = {}
    for host in topo.host_names:
        hosts_of.setdefault(topo.attachment(host)[0], []).append(host)
    edge_of = {host: edge for edge, hosts in hosts_of.items() for host in hosts}
    # Rule 1, and each switch's down routes per edge switch.
    covers: dict[str, dict[str, int]] = {}  # switch -> edge -> the port of its host route to that edge's hosts
    for switch, routes in tables.items():
        by_edge: dict[str, set[int]] = {}
        for host, port in routes.host_ports.items():
            by_edge.setdefault(edge_of[host], set()).add(port)
        covers[switch] = {}
        for edge, ports in by_edge.items():
            if edge == switch:
                wrong = [h for h in hosts_of[edge] if routes.host_ports.get(h) != topo.attachment(h)[1]]
                if wrong:
                    problems.append(f"rule 1: edge {switch} does not route {wrong[0]} through its own port")
                covers[switch][edge] = -1  # each host through its own port
            elif len(ports) > 1 or any(h not in routes.host_ports for h in hosts_of[edge]):
                problems.append(f"rule 1: {switch} routes the hosts of {edge} differently")
            else:
                covers[switch][edge] = next(iter(ports))
    fans: dict[int, int] = {}
    reached: dict[str, dict[str, set[tuple[int, ...]]]] = {s: {} for s in tables}  # switch -> edge -> choices
    climbs = [(edge, edge, ()) for edge in hosts_of]
    while climbs and len(problems) < limit:
        edge, switch, choices = climbs.pop()
        routes = tables[switch]
        reached[switch].setdefault(edge, set()).add(choices)
        if routes.tier != len(choices):  # rule 2
            problems.append(f"rule 2: the climb from {edge} by uplinks {list(choices)} reaches {switch} of tier "
                            f"{routes.tier} at depth {len(choices)}")
            continue
        if routes.uplinks and fans.setdefault(routes.tier, len(routes.uplinks)) != len(routes.uplinks):
            problems.append(f"rule 2: tier {routes.tier} switches differ in uplink count ({switch})")
            continue
        ports = topo.ports(switch)
        for choice, port in enumerate(routes.uplinks):
            upper, upper_port = ports[port]
            back = covers[upper].get(edge)
            if back != upper_port:  # rule 5
                problems.append(f"rule 5: {upper} routes the hosts of {edge} through port {back}, not back to {switch} "
                                f"(its port {upper_port}) where their climb came from")
            climbs.append((edge, upper, choices + (choice,)))
    for switch, by_edge in reached.items():
        if len(problems) >= limit:
            break
        if set(by_edge) != set(covers[switch]) or (not tables[switch].uplinks and len(covers[switch]) != len(hosts_of)):
            problems.append(f"rule 3: {switch} routes down to {len(covers[switch])} edge switches but the climbs of "
                            f"{len(by_edge)} reach it" + ("" if tables[switch].uplinks else f" (of {len(hosts_of)})"))
        if len({frozenset(c) for c in by_edge.values()}) > 1:
            problems.append(f"rule 4: edge switches reach {switch} by different uplink choices")
    return problems[:limit]


# Path walks asymmetric_paths may take when the structural proof does not apply (~1 s).
EXHAUSTIVE_WALKS_MAX = 200_000


def symmetry_problems(routing: Routing) -> tuple[str, list[str]]:
    """How the routing tables were found symmetric, and what is not: by prove_symmetric's rules
    (fat-trees, leaf-spines, stars), else by walking every pair and path-id where that is cheap
    (a dumbbell's middle link is a host route that no climb reaches: rule 3 does not hold,
    yet it is symmetric), else the rules that failed."""
    broken = prove_symmetric(routing)
    if not broken:
        return "proved from the tables' structure", []
    hosts = len(routing.topo.hosts)
    paths = prod({routes.tier: len(routes.uplinks) or 1 for routes in routing.tables.values()}.values())
    if hosts * (hosts - 1) // 2 * paths <= EXHAUSTIVE_WALKS_MAX:
        return "every pair and path-id walked", asymmetric_paths(routing)
    return "structural rules failed (too many pairs to walk)", broken
