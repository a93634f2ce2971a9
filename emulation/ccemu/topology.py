"""Topologies as pure data: hosts, switches, links with port numbers.

Nothing here touches the system; the fabric module instantiates a Topology, the routing
module derives forwarding from it, and tests inspect it without root.

Naming keeps every interface name ("<node>-eth<port>") within Linux's 15 characters:
hosts are h1..hN, fat-tree switches are c (core), a (aggregation) and e (edge), leaf-spine
switches are l and s, single-tier topologies use s1, s2.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class TopologyError(ValueError):
    """A topology that cannot be built as asked."""


@dataclass(frozen=True)
class Host:
    name: str
    index: int  # 1-based, stable: derives the addresses
    ip: str
    mac: str


@dataclass(frozen=True)
class Switch:
    name: str
    dpid: int


@dataclass(frozen=True)
class Link:
    """A point-to-point link: `a` port `a_port` <-> `b` port `b_port`."""

    a: str
    a_port: int
    b: str
    b_port: int

    def interface_names(self) -> tuple[str, str]:
        return f"{self.a}-eth{self.a_port}", f"{self.b}-eth{self.b_port}"


def host_addresses(index: int) -> tuple[str, str]:
    """IPv4 and MAC address of host number `index` (1-based) in 10.0.0.0/8."""
    if not 1 <= index < 1 << 24:
        raise TopologyError(f"host index {index} does not fit in 10.0.0.0/8")
    ip = f"10.{index >> 16 & 0xFF}.{index >> 8 & 0xFF}.{index & 0xFF}"
    mac = "02:00:00:{:02x}:{:02x}:{:02x}".format(index >> 16 & 0xFF, index >> 8 & 0xFF, index & 0xFF)
    return ip, mac


HOST_PREFIX_LEN = 8


@dataclass
class Topology:
    """Nodes and links; build with the add_* methods or one of the factories below."""

    kind: str
    hosts: list[Host] = field(default_factory=list)
    switches: list[Switch] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    _host_index: dict[str, Host] = field(default_factory=dict, repr=False)
    _peers: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict, repr=False)

    def add_host(self) -> str:
        index = len(self.hosts) + 1
        ip, mac = host_addresses(index)
        host = Host(name=f"h{index}", index=index, ip=ip, mac=mac)
        self._add_node(host.name)
        self.hosts.append(host)
        return host.name

    def add_switch(self, name: str) -> str:
        self._add_node(name)
        self.switches.append(Switch(name=name, dpid=len(self.switches) + 1))
        return name

    def add_link(self, a: str, b: str) -> Link:
        """Connect the next free ports of `a` and `b` (ports count from 1 per node)."""
        for node in (a, b):
            if node not in self._peers:
                raise TopologyError(f"link to unknown node {node!r}")
        link = Link(a, len(self._peers[a]) + 1, b, len(self._peers[b]) + 1)
        self._peers[a][link.a_port] = (b, link.b_port)
        self._peers[b][link.b_port] = (a, link.a_port)
        self.links.append(link)
        return link

    def _add_node(self, name: str) -> None:
        if name in self._peers:
            raise TopologyError(f"node name {name!r} used twice")
        self._peers[name] = {}

    # Queries -------------------------------------------------------------------------

    @property
    def host_names(self) -> list[str]:
        return [h.name for h in self.hosts]

    @property
    def switch_names(self) -> list[str]:
        return [s.name for s in self.switches]

    def host(self, name: str) -> Host:
        return self._hosts_by_name()[name]

    def is_host(self, name: str) -> bool:
        return name in self._hosts_by_name()

    def _hosts_by_name(self) -> dict[str, Host]:
        if len(self._host_index) != len(self.hosts):
            self._host_index = {h.name: h for h in self.hosts}
        return self._host_index

    def ports(self, node: str) -> dict[int, tuple[str, int]]:
        """Port number -> (peer node, peer port) for every link of `node`, in port order."""
        return dict(self._peers[node])

    def attachment(self, host: str) -> tuple[str, int]:
        """(switch, switch port) a host is plugged into."""
        ((_, (switch, port)),) = self.ports(host).items()
        return switch, port


def fat_tree(k: int) -> Topology:
    """The k-ary fat-tree of Al-Fares et al.: k pods of k/2 edge and k/2 aggregation
    switches, (k/2)^2 cores, k^3/4 hosts.

    Uplink i of every edge switch goes to aggregation switch i of its pod, and uplink i of
    aggregation switch j goes to core j*k/2+i, so "uplink index" means the same thing in
    every pod: the property symmetric path-id routing relies on.
    """
    if k < 2 or k % 2:
        raise TopologyError(f"fat-tree k must be even and >= 2, got {k}")
    half = k // 2
    topo = Topology(kind="fattree")
    edges = [[topo.add_switch(f"e{pod * half + i + 1}") for i in range(half)] for pod in range(k)]
    aggs = [[topo.add_switch(f"a{pod * half + j + 1}") for j in range(half)] for pod in range(k)]
    cores = [topo.add_switch(f"c{c + 1}") for c in range(half * half)]
    for pod in range(k):
        for edge in edges[pod]:
            for _ in range(half):
                topo.add_link(edge, topo.add_host())
    for pod in range(k):
        for edge in edges[pod]:
            for agg in aggs[pod]:
                topo.add_link(edge, agg)
    # Core ports are numbered by pod (port p+1 leads to pod p), so links go pod by pod.
    for pod in range(k):
        for j, agg in enumerate(aggs[pod]):
            for i in range(half):
                topo.add_link(agg, cores[j * half + i])
    return topo


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int) -> Topology:
    """Two tiers: every leaf connects to every spine; leaf uplink i goes to spine i."""
    for name, value in (("leaves", leaves), ("spines", spines), ("hosts_per_leaf", hosts_per_leaf)):
        if value < 1:
            raise TopologyError(f"leaf-spine {name} must be >= 1, got {value}")
    topo = Topology(kind="leafspine")
    leaf_names = [topo.add_switch(f"l{i + 1}") for i in range(leaves)]
    spine_names = [topo.add_switch(f"s{i + 1}") for i in range(spines)]
    for leaf in leaf_names:
        for _ in range(hosts_per_leaf):
            topo.add_link(leaf, topo.add_host())
    for leaf in leaf_names:
        for spine in spine_names:
            topo.add_link(leaf, spine)
    return topo


def dumbbell(hosts_per_side: int) -> Topology:
    """Two switches joined by one bottleneck link, `hosts_per_side` hosts on each."""
    if hosts_per_side < 1:
        raise TopologyError(f"dumbbell hosts_per_side must be >= 1, got {hosts_per_side}")
    topo = Topology(kind="dumbbell")
    left, right = topo.add_switch("s1"), topo.add_switch("s2")
    for switch in (left, right):
        for _ in range(hosts_per_side):
            topo.add_link(switch, topo.add_host())
    topo.add_link(left, right)
    return topo


def star(hosts: int) -> Topology:
    """One switch, `hosts` hosts."""
    if hosts < 2:
        raise TopologyError(f"star needs >= 2 hosts, got {hosts}")
    topo = Topology(kind="star")
    switch = topo.add_switch("s1")
    for _ in range(hosts):
        topo.add_link(switch, topo.add_host())
    return topo
