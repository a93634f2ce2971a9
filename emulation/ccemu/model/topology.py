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


# Every host has its address alone (/32) and one route to the rest of 10.0.0.0/8: through a
# gateway that is never on the wire. Its one static ARP entry gives every packet the gateway's
# MAC as destination; the switch a host hangs off writes the host's own MAC in at the last hop
# (fabric/openflow.py). So a host holds one neighbour entry, not one per other host (k=16: 1023).
HOST_PREFIX_LEN = 32
FABRIC_PREFIX = "10.0.0.0/8"
GATEWAY_IP = "169.254.0.1"  # link-local: no host address can be it
GATEWAY_MAC = "02:ff:00:00:00:01"  # host MACs are 02:00:00:...


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


@dataclass(frozen=True)
class TopologyCounts:
    """How big a topology is, from its parameters alone: validating a config must not build
    (a k=400 fat-tree has 16 million hosts). The factories' twins below give these; tests
    check them against what the factories build."""

    hosts: int
    switches: int
    links: int
    # Runs of (switches, ports each) in switch order, the order FabricNet deals switches
    # out to OVS instances.
    switch_ports: tuple[tuple[int, int], ...]
    # (hosts, links to other switches) of every switch hosts hang off, where all have the same;
    # None where they differ or hosts' switches have no uplinks (a star). A load "on the ToR
    # uplinks" (ExpressPass's realistic workloads) is defined through it.
    tor: tuple[int, int] | None = None

    @classmethod
    def of(cls, topo: Topology) -> "TopologyCounts":
        """Counted on a built topology (what the formulas must agree with)."""
        runs = _runs(*((1, len(topo.ports(switch.name))) for switch in topo.switches))
        tors = {switch for switch, _ in map(topo.attachment, topo.host_names)}
        shapes = {(sum(topo.is_host(peer) for peer, _ in topo.ports(tor).values()),
                   sum(not topo.is_host(peer) for peer, _ in topo.ports(tor).values())) for tor in tors}
        tor = next(iter(shapes)) if len(shapes) == 1 and next(iter(shapes))[1] else None
        return cls(len(topo.hosts), len(topo.switches), len(topo.links), runs, tor)

    @classmethod
    def of_part(cls, topo: Topology, nodes: set[str]) -> "TopologyCounts":
        """The part of a built topology made of `nodes` (a machine's share of a split fabric): its
        hosts and switches, and every link with an end among them (a link cut at the part's edge
        has both its veth ends on this side too: the switch's port and the wire end)."""
        switches = [s.name for s in topo.switches if s.name in nodes]
        runs = _runs(*((1, len(topo.ports(switch))) for switch in switches))
        links = sum(link.a in nodes or link.b in nodes for link in topo.links)
        return cls(sum(h in nodes for h in topo.host_names), len(switches), links, runs)

    @property
    def interfaces(self) -> int:
        """Both ends of every link: the fabric's veth ends, each a port of the port program."""
        return 2 * self.links

    @property
    def max_switch_ports(self) -> int:
        return max(ports for _, ports in self.switch_ports)

    def max_ports_of_an_instance(self, instances: int) -> int:
        """The most switch ports one of `instances` OVS instances holds when switch i goes to
        instance i * instances // switches (FabricNet.instance_of). Loops over the
        instances: call it on counts whose size is already known to be sane."""
        bounds = [0]
        for count, ports in self.switch_ports:
            bounds.append(bounds[-1] + count)

        def ports_before(switch: int) -> int:
            """Ports of switches 0..switch-1."""
            total = 0
            for (count, ports), start in zip(self.switch_ports, bounds):
                total += max(0, min(count, switch - start)) * ports
            return total

        # Instance i's first switch is the smallest j with j * instances // switches == i.
        firsts = [-(-i * self.switches // instances) for i in range(instances + 1)]
        return max(ports_before(end) - ports_before(start) for start, end in zip(firsts, firsts[1:]))


def fat_tree_counts(k: int, hosts_per_edge: int | None = None, uplinks: int | None = None) -> TopologyCounts:
    """fat_tree(k, hosts_per_edge, uplinks) without building it: k pods of k/2 edge switches (hosts
    and uplinks) and `uplinks` aggregation switches (k ports), then uplinks x k/2 cores (k ports).
    With the defaults (k/2 each), Al-Fares's k^3/4 hosts and 5k^2/4 switches of k ports."""
    half = k // 2
    hosts_per_edge, uplinks = hosts_per_edge or half, uplinks or half
    edges, aggs, cores = k * half, k * uplinks, uplinks * half
    hosts = edges * hosts_per_edge
    return TopologyCounts(hosts=hosts, switches=edges + aggs + cores, links=hosts + edges * uplinks + aggs * half,
                          switch_ports=_runs((edges, hosts_per_edge + uplinks), (aggs, k), (cores, k)),
                          tor=(hosts_per_edge, uplinks))


def fat_tree(k: int, hosts_per_edge: int | None = None, uplinks: int | None = None) -> Topology:
    """The k-ary fat-tree of Al-Fares et al.: k pods of k/2 edge and k/2 aggregation
    switches, (k/2)^2 cores, k^3/4 hosts. `hosts_per_edge` and `uplinks` (the aggregation
    switches of a pod, each edge's uplinks; both k/2 by default) oversubscribe it at the ToR by
    count, as ExpressPass's 3:1 fat-tree does (k=8, 6 hosts over 2 uplinks: 8 cores, 16
    aggregation and 32 edge switches, 192 hosts); each aggregation switch keeps k/2 links up,
    so a pod's uplinks still reach k/2 x uplinks cores.

    Uplink i of every edge switch goes to aggregation switch i of its pod, and uplink i of
    aggregation switch j goes to core j*k/2+i, so "uplink index" means the same thing in
    every pod: the property symmetric path-id routing relies on.
    """
    if k < 2 or k % 2:
        raise TopologyError(f"fat-tree k must be even and >= 2, got {k}")
    for name, value in (("hosts_per_edge", hosts_per_edge), ("uplinks", uplinks)):
        if value is not None and value < 1:
            raise TopologyError(f"fat-tree {name} must be >= 1, got {value}")
    half = k // 2
    hosts_per_edge, uplinks = hosts_per_edge or half, uplinks or half
    topo = Topology(kind="fattree")
    edges = [[topo.add_switch(f"e{pod * half + i + 1}") for i in range(half)] for pod in range(k)]
    aggs = [[topo.add_switch(f"a{pod * uplinks + j + 1}") for j in range(uplinks)] for pod in range(k)]
    cores = [topo.add_switch(f"c{c + 1}") for c in range(uplinks * half)]
    for pod in range(k):
        for edge in edges[pod]:
            for _ in range(hosts_per_edge):
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


def pods(topo: Topology) -> list[list[str]]:
    """A fat-tree's pods: each its edge then aggregation switches, in switch order (the
    switches that stay connected without the cores)."""
    in_pod = [s for s in topo.switch_names if s[0] in "ea"]
    pod_of = {s: i for i, s in enumerate(in_pod)}
    parent = list(range(len(in_pod)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for link in topo.links:
        if link.a in pod_of and link.b in pod_of:
            parent[root(pod_of[link.a])] = root(pod_of[link.b])
    grouped: dict[int, list[str]] = {}
    for s in in_pod:
        grouped.setdefault(root(pod_of[s]), []).append(s)
    return sorted(grouped.values(), key=lambda pod: topo.switch_names.index(pod[0]))


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


def leaf_spine_counts(leaves: int, spines: int, hosts_per_leaf: int) -> TopologyCounts:
    """leaf_spine(...) without building it: leaves (hosts and one uplink per spine) first,
    then spines (one port per leaf)."""
    return TopologyCounts(hosts=leaves * hosts_per_leaf, switches=leaves + spines,
                          links=leaves * (hosts_per_leaf + spines),
                          switch_ports=_runs((leaves, hosts_per_leaf + spines), (spines, leaves)),
                          tor=(hosts_per_leaf, spines))


def _runs(*runs: tuple[int, int]) -> tuple[tuple[int, int], ...]:
    """Neighbouring runs of switches with equal port counts merged into one."""
    merged: list[tuple[int, int]] = []
    for count, ports in runs:
        if merged and merged[-1][1] == ports:
            merged[-1] = (merged[-1][0] + count, ports)
        else:
            merged.append((count, ports))
    return tuple(merged)


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


def dumbbell_counts(hosts_per_side: int) -> TopologyCounts:
    """dumbbell(...) without building it: two switches with their hosts and the bottleneck."""
    return TopologyCounts(hosts=2 * hosts_per_side, switches=2, links=2 * hosts_per_side + 1,
                          switch_ports=((2, hosts_per_side + 1),), tor=(hosts_per_side, 1))


def star(hosts: int) -> Topology:
    """One switch, `hosts` hosts."""
    if hosts < 2:
        raise TopologyError(f"star needs >= 2 hosts, got {hosts}")
    topo = Topology(kind="star")
    switch = topo.add_switch("s1")
    for _ in range(hosts):
        topo.add_link(switch, topo.add_host())
    return topo


def star_counts(hosts: int) -> TopologyCounts:
    """star(...) without building it."""
    return TopologyCounts(hosts=hosts, switches=1, links=hosts, switch_ports=((1, hosts),))
