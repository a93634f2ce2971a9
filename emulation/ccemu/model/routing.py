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

    def _distances_from(self, host: str) -> dict[str, int]:
        """Hop counts from `host` through switches only (hosts are not transit nodes)."""
        dist = {host: 0}
        queue = deque([host])
        while queue:
            node = queue.popleft()
            if node != host and self.topo.is_host(node):
                continue
            for peer, _ in self.topo.ports(node).values():
                if peer not in dist:
                    dist[peer] = dist[node] + 1
                    queue.append(peer)
        return dist

    def _build_tables(self) -> dict[str, SwitchRoutes]:
        topo = self.topo
        dist = {h: self._distances_from(h) for h in topo.host_names}
        host_ports: dict[str, dict[str, int]] = {s: {} for s in topo.switch_names}
        uplinks: dict[str, tuple[int, ...]] = {s: () for s in topo.switch_names}
        tier: dict[str, int] = {}
        for switch in topo.switch_names:
            if any(switch not in dist[h] for h in topo.host_names):
                raise TopologyError(f"switch {switch} cannot reach every host")
            tier[switch] = min(dist[h][switch] for h in topo.host_names) - 1
            ports = topo.ports(switch)
            for dst in topo.host_names:
                here = dist[dst][switch]
                next_hops = tuple(
                    port for port, (peer, _) in ports.items()
                    if dist[dst].get(peer) == here - 1 and (peer == dst or not topo.is_host(peer))
                )
                if len(next_hops) == 1:
                    host_ports[switch][dst] = next_hops[0]
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
    """Every (pair, path-id) whose reverse path is not the forward path reversed."""
    problems = []
    hosts = routing.topo.host_names
    for i, a in enumerate(hosts):
        for b in hosts[i + 1:]:
            for pid in range(routing.n_paths(a, b)):
                forward, reverse = routing.path(a, b, pid), routing.path(b, a, pid)
                if forward != reverse[::-1]:
                    problems.append(f"{a} -> {b} path-id {pid}: {forward} but back {reverse}")
    return problems
