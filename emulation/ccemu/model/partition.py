"""One fabric over several machines: which machine each switch and host runs on, which links are
cut (their ends on two machines: carried by a tunnel, fabric/tunnels.py), and each machine's
forwarding load against what one machine forwards faithfully (pure data, no I/O).

How a topology splits (MaxiNet's and Distrinet's lessons, kept for congestion control):
- hosts stay with the switch they hang off: a host link is never cut, so no host's NIC, delay
  line or RTT depends on the underlay;
- a fat-tree splits by pod (a pod's edge and aggregation switches together: most of its traffic
  stays in the pod), pods dealt to machines in contiguous blocks; a leaf-spine by leaf;
- the top tier (cores, spines) is spread round robin over the machines: every pod talks to every
  core, so a core tier on one machine would carry all cross-pod traffic there (MaxiNet measured it
  become everyone's bottleneck);
- other topologies split by switch (a dumbbell's two sides); a machine must hold at least one
  unit (pod, leaf, switch), so a star cannot be split.

Forwarding load: a switch forwards what its ports send, so a machine's load is the sum of its
switch ports' rates with every port busy (the worst a workload can ask; tunnels' encapsulation is
not counted: not measured). One machine's capacity is what `ccemu bench capacity` measured it to
forward faithfully: 8 cross-pod flows on a k=4 fat-tree, each leaving through 5 switch ports, so
40 busy ports at its faithful rate per link (model/dilation.py's FaithfulRates, the experiments'
share of the benchmark). So a load of 1.0 is the benchmark's own forwarding at that rate: with
userspace OVS (10 Mbit/s per link), k=4 at 5 Mbit/s per link is 1.0 and k=8 (640 switch ports)
8.0, eight machines' worth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from .config.errors import ConfigError
from .topology import Link, Topology, TopologyCounts, pods
from .tunnel import underlay_mtu_needed

# Switch ports the capacity benchmark keeps busy: 8 flows through 5 switches each (bench/capacity.py).
CAPACITY_BUSY_PORTS = 40


class PartitionError(ConfigError):
    """A topology that cannot be split as asked (one line)."""


@dataclass(frozen=True)
class Partition:
    topo: Topology
    machines: tuple[str, ...]
    machine_of: dict[str, str]  # every switch and host -> its machine
    cut: tuple[Link, ...]  # links between switches on two machines, in topology order
    keys: dict[Link, int]  # each cut link's VXLAN network identifier (tunnel_key)

    @classmethod
    def of(cls, topo: Topology, machines: Sequence[str]) -> "Partition":
        """`topo` split over `machines` (names, in order) as the module's doc says."""
        machines = tuple(machines)
        if not machines:
            raise PartitionError("no machines to place the fabric on")
        if len(set(machines)) != len(machines):
            twice = sorted({m for m in machines if machines.count(m) > 1})
            raise PartitionError(f"machines named twice: {', '.join(twice)}")
        units, spread = _units_of(topo)
        if len(machines) > len(units):
            unit = _UNIT_NAMES.get(topo.kind, "switch")
            raise PartitionError(f"a {topo.kind} splits by {unit} and has {len(units)}: it cannot be split over "
                                 f"{len(machines)} machines (each needs one {unit} at least)")
        machine_of: dict[str, str] = {}
        for index, unit in enumerate(units):
            for switch in unit:  # contiguous blocks: unit i of U goes to machine i*M//U
                machine_of[switch] = machines[index * len(machines) // len(units)]
        for index, switch in enumerate(spread):
            machine_of[switch] = machines[index % len(machines)]
        for host in topo.host_names:
            machine_of[host] = machine_of[topo.attachment(host)[0]]
        cut = tuple(link for link in topo.links if machine_of[link.a] != machine_of[link.b])
        return cls(topo, machines, machine_of, cut, {link: key for key, link in enumerate(cut, start=1)})

    def switches_on(self, machine: str) -> list[str]:
        return [s for s in self.topo.switch_names if self.machine_of[s] == machine]

    def hosts_on(self, machine: str) -> list[str]:
        return [h for h in self.topo.host_names if self.machine_of[h] == machine]

    def cut_on(self, machine: str) -> list[Link]:
        return [link for link in self.cut if machine in (self.machine_of[link.a], self.machine_of[link.b])]

    def tunnel_key(self, link: Link) -> int:
        """The VXLAN network identifier of a cut link: its place among the cut links, from 1
        (both machines number the cut links alike: the same topology, the same order)."""
        return self.keys[link]

    def counts_on(self, machine: str) -> TopologyCounts:
        """How much of the fabric `machine` holds (what its own admission judges)."""
        return TopologyCounts.of_part(self.topo, set(self.switches_on(machine)) | set(self.hosts_on(machine)))

    def load_on(self, machine: str, host_port_mbps: float, fabric_port_mbps: float) -> float:
        """Mbit/s the machine's switches forward with every port busy: ports facing hosts at
        `host_port_mbps`, ports between switches at `fabric_port_mbps`."""
        total = 0.0
        for switch in self.switches_on(machine):
            for peer, _ in self.topo.ports(switch).values():
                total += host_port_mbps if self.topo.is_host(peer) else fabric_port_mbps
        return total


_UNIT_NAMES = {"fattree": "pod", "leafspine": "leaf"}


def _units_of(topo: Topology) -> tuple[list[list[str]], list[str]]:
    """(units kept whole on one machine, in order; switches spread round robin)."""
    switches = topo.switch_names
    if topo.kind == "fattree":
        return pods(topo), [s for s in switches if s.startswith("c")]
    if topo.kind == "leafspine":
        return [[s] for s in switches if s.startswith("l")], [s for s in switches if s.startswith("s")]
    return [[s] for s in switches], []


@dataclass(frozen=True)
class MachineShare:
    """One machine's part of a plan, with its load against its capacity."""

    machine: str
    switches: list[str]
    hosts: list[str]
    cut_links: int
    load_mbps: float  # its switches' forwarding with every port busy
    capacity_mbps: float  # what it forwards faithfully: CAPACITY_BUSY_PORTS x its faithful link rate
    capacity_source: str

    @property
    def load(self) -> float:
        """As a multiple of its capacity: above 1, it cannot carry its share faithfully."""
        return self.load_mbps / self.capacity_mbps


@dataclass(frozen=True)
class Plan:
    """A partition with each machine's load: what `ccemu plan` prints and `--inventory` runs."""

    partition: Partition
    shares: list[MachineShare]
    link_mbps: float  # the host links' wall rate
    fabric_mbps: float  # links between switches
    underlay_mtu: int  # what the tunnels need of the machines' network
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, partition: Partition, link_mbps: float, fabric_mbps: float, link_mtu: int,
           capacity: dict[str, tuple[float, str]]) -> "Plan":
        """`capacity`: machine -> (its faithful rate per link in Mbit/s, where that figure comes
        from)."""
        shares = []
        for machine in partition.machines:
            rate, source = capacity[machine]
            shares.append(MachineShare(machine, partition.switches_on(machine), partition.hosts_on(machine),
                                       len(partition.cut_on(machine)),
                                       partition.load_on(machine, link_mbps, fabric_mbps),
                                       CAPACITY_BUSY_PORTS * rate, source))
        return cls(partition, shares, link_mbps, fabric_mbps, underlay_mtu_needed(link_mtu))

    def with_capacities(self, capacity: dict[str, tuple[float, str]]) -> "Plan":
        """The plan with the machines of `capacity` judged against the figures given there
        (machine -> its faithful rate per link, where it comes from), the others as they were."""
        shares = [replace(share, capacity_mbps=CAPACITY_BUSY_PORTS * capacity[share.machine][0],
                          capacity_source=capacity[share.machine][1]) if share.machine in capacity else share
                  for share in self.shares]
        return replace(self, shares=shares)

    @property
    def overloaded(self) -> list[MachineShare]:
        return [share for share in self.shares if share.load > 1.0]

    def refusal(self) -> str | None:
        """One line when a machine cannot carry its share; None when every one can."""
        if not self.overloaded:
            return None
        worst = max(self.overloaded, key=lambda s: s.load)
        needed = _machines_needed(self)
        return (f"{len(self.overloaded)} of {len(self.shares)} machines cannot carry their share faithfully: "
                f"{worst.machine} forwards {worst.load_mbps:g} Mbit/s with every port busy, {worst.load:.2f}x the "
                f"{worst.capacity_mbps:g} it keeps faithful ({worst.capacity_source}); "
                f"{needed} raise the dilation (datacenter.dilation) by {max(s.load for s in self.shares):.2f}x or more")

    def lines(self) -> list[str]:
        """The plan as printed before anything starts."""
        topo, partition = self.partition.topo, self.partition
        out = [f"{topo.kind}: {len(topo.switches)} switches, {len(topo.hosts)} hosts over {len(self.shares)} "
               f"machines; links {self.link_mbps:g} Mbit/s (between switches {self.fabric_mbps:g}); "
               f"{len(partition.cut)} of {len(topo.links) - len(topo.hosts)} links between switches cut "
               f"(VXLAN tunnels; the machines' network must carry {self.underlay_mtu} B packets)"]
        for share in self.shares:
            out.append(f"  {share.machine}: {len(share.switches)} switches ({_ranges(share.switches)}), "
                       f"{len(share.hosts)} hosts ({_ranges(share.hosts)}), {share.cut_links} cut links; "
                       f"forwards {share.load_mbps:g} Mbit/s with every port busy = {share.load:.2f}x its capacity "
                       f"({share.capacity_mbps:g}: {CAPACITY_BUSY_PORTS} busy switch ports at "
                       f"{share.capacity_mbps / CAPACITY_BUSY_PORTS:g} Mbit/s, {share.capacity_source})"
                       + ("  ** over capacity **" if share.load > 1.0 else ""))
        return out


def _machines_needed(plan: Plan) -> str:
    """What would fit: as many machines as the load needs, where the topology allows it."""
    total = sum(s.load_mbps for s in plan.shares)
    smallest = min(s.capacity_mbps for s in plan.shares)
    needed = -(-total // smallest)
    units = len(_units_of(plan.partition.topo)[0])
    if needed <= units and needed > len(plan.shares):
        return f"use {int(needed)} machines or more (of this capacity), or"
    return ""


def _ranges(names: list[str]) -> str:
    """e1, e2, e3, a1 -> 'e1-e3, a1': names of a letter and a number, runs shortened."""
    runs: list[list[tuple[str, int]]] = []
    for name in names:
        letters = name.rstrip("0123456789")
        number = int(name[len(letters):])
        if runs and runs[-1][-1][0] == letters and runs[-1][-1][1] + 1 == number:
            runs[-1].append((letters, number))
        else:
            runs.append([(letters, number)])
    return ", ".join(f"{r[0][0]}{r[0][1]}" + (f"-{r[-1][0]}{r[-1][1]}" if len(r) > 1 else "") for r in runs)


@dataclass(frozen=True)
class MachinePart:
    """What one machine builds of a partitioned fabric: its switches and hosts, its links, and a
    tunnel for each of its cut links to the machine at the other end."""

    partition: Partition
    machine: str
    addresses: dict[str, str]  # machine -> its IPv4 address on the machines' network (the tunnels' ends)
    vni_base: int  # the run's first VXLAN network identifier (the controller's random choice: tunnel.vni_base)

    def vni(self, link: Link) -> int:
        """The VXLAN network identifier of cut link `link` in this run: the run's base plus its
        key, so that two runs sharing a machine never share one."""
        return self.vni_base + self.partition.tunnel_key(link) - 1

    def vni_range(self) -> tuple[int, int]:
        """(first, last) identifier of the run's tunnels (every machine's)."""
        return self.vni_base, self.vni_base + len(self.partition.cut) - 1

    def far_machines(self) -> list[str]:
        """The machines this one tunnels to, in name order."""
        return sorted({self.far_end(link) for link in self.partition.cut_on(self.machine)})

    def far_addresses(self) -> list[str]:
        """The addresses of the machines this one tunnels to: the only sources its tunnels take."""
        return sorted(self.addresses[far] for far in self.far_machines())

    def holds(self, node: str) -> bool:
        return self.partition.machine_of[node] == self.machine

    def far_end(self, link: Link) -> str:
        """The machine at the other end of a cut link of this machine."""
        a, b = self.partition.machine_of[link.a], self.partition.machine_of[link.b]
        return b if a == self.machine else a
