"""Cut links: the wire between two switches on two machines is a VXLAN tunnel over the machines'
own network, one per link (its key: Partition.tunnel_key).

A cut link's half on each machine: the switch's port is a veth like any other (same name, same
ifindex, the same port model: HTB at the port's rate, the port program's queue, marks and
residence), and its peer is the link's *wire end* in the machine's wire namespace, which hands
every frame to the link's VXLAN device and back (wire_tc_lines). So a switch forwards to a cut
link as to any port, routing and its symmetry proof do not know a link was cut, and the port
program keeps its own books: a port's real queue is what it admitted minus what its peer's ingress
counted as arrived (ports/bpf/port.bpf.c arrive()), and on a cut link the peer's ingress that
counts is the wire end's, on the same machine, right after the packet left the port's qdisc, as a
veth peer's is on a local link. (The first design made the switch's port the VXLAN device itself:
its departures were then counted on the other machine, its real queue never drained, and it
dropped what exceeded its buffer: 8 s of TCP from h1 to h9 got 0.38 Mbit/s of an ideal 4.71; the
live test that found it holds this design to 0.9 of the ideal.) The wire end has no qdisc (the
ports at both ends shape) and is no port of the fabric's index.

Deliberate difference from the issue's wording ("an OVS tunnel port"): the tunnel is the kernel's
VXLAN device, not an OVS `type=vxlan` port. OVS's userspace datapath encapsulates inside
ovs-vswitchd, where no port program could count departures, and its tunnels route through an
underlay bridge of OVS's own; with OVS's kernel datapath, its vxlan port is this same kernel VXLAN.
The bpf datapath (fabric.datapath: bpf) forwards to the switch's veth unchanged.

The VXLAN device is created from the machine's namespace, where its network is, and moved into the
wire namespace at birth: its UDP socket stays where it was made (the kernel's link-netns).
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
import subprocess
import tempfile

from ..model.config import ExperimentConfig
from ..model.partition import MachinePart
from ..model.topology import Link
from ..model.tunnel import VXLAN_PORT, mtu_problem, source_port, underlay_mtu_needed


class AcrossMachinesError(RuntimeError):
    """A fabric that cannot be split as asked, or a machine whose network cannot carry it (one line)."""


WIRE_NAMESPACE = "wire0"


def wire_end(key: int) -> str:
    """The interface the switch's port of cut link `key` is paired with."""
    return f"wire{key}"


def tunnel_line(key: int, mtu: int, namespace_pid: int, part: MachinePart, link: Link) -> str:
    """The `ip -batch` line that makes cut link `key`'s VXLAN device (named by its key, identified
    by the run's VNI for it), from this machine's address to the far end's, in the namespace of
    `namespace_pid`. No learning: the device has one remote."""
    far = part.far_end(link)
    port = source_port(key)  # a range of one: [port, port + 1)
    return (f"link add name vx{key} mtu {mtu} netns {namespace_pid} type vxlan id {part.vni(link)} "
            f"local {part.addresses[part.machine]} remote {part.addresses[far]} dstport {VXLAN_PORT} nolearning "
            f"srcport {port} {port + 1}")


def wire_shell_lines(keys: list[int]) -> list[str]:
    """The wire namespace's commands once its tunnels exist: no offload on a tunnel or its wire end.
    The VXLAN device merges the frames it takes from the network (GRO, on by default), and a merged
    64 KB frame would reach the switch's port as one packet that its queue drops or marks whole;
    and a segmentation offload would carry one the other way."""
    return [f"ethtool -K {dev} gro off gso off tso off > /dev/null" for key in keys
            for dev in (f"vx{key}", wire_end(key))]


def tunnel_counters(wire_namespace) -> dict[str, list[int]]:
    """{key: [frames its tunnel sent to the network, frames it took from it]} of the tunnels in
    `wire_namespace` (a node with cmd(): the wire namespace's shell). Read from the devices' own
    counters: a frame the network between the machines loses is sent on one machine and never
    taken on the other (SplitFabric.tunnel_losses)."""
    shown = json.loads(wire_namespace.cmd("ip -j -s link show type vxlan"))
    return {link["ifname"].removeprefix("vx"): [link["stats64"]["tx"]["packets"], link["stats64"]["rx"]["packets"]]
            for link in shown if link["ifname"].startswith("vx")}


def wire_ip_lines(keys: list[int]) -> list[str]:
    """The wire namespace's `ip -batch` lines after its wire ends are up: the tunnels up."""
    return [f"link set vx{key} up" for key in keys]


def wire_tc_lines(keys: list[int]) -> list[str]:
    """The wire namespace's `tc -batch` lines: each wire end and its tunnel hand every frame to
    each other at ingress (u32 matching all, mirred redirect). At the wire end this filter comes
    after the port program's (preference 1), which counts the frame as departed from the switch's
    port and gives no verdict (ports/bpf/port.bpf.c port_ingress). No bridge: a Linux bridge's own
    stack sent frames of its own into the fabric (a check saw them as stray packets on cut links)."""
    lines = []
    for key in keys:
        for dev, to, pref in ((wire_end(key), f"vx{key}", 2), (f"vx{key}", wire_end(key), 1)):
            lines += [f"qdisc add dev {dev} clsact",
                      f"filter add dev {dev} ingress pref {pref} u32 match u32 0 0 action mirred egress redirect "
                      f"dev {to}"]
    return lines


TUNNEL_PINGS = 100  # per machine pair and block (0.2 s): the p99 is the 99th, not the greatest
TUNNEL_PING_INTERVAL_S = 0.002
_RTT = re.compile(r"time=([0-9.]+) ms")


def tunnel_rtts_us(address: str, size: int) -> list[float]:
    """Round trips in us of `size`-byte packets (a full data frame as its tunnel carries it, Don't
    Fragment set) to another machine over the machines' network: what every cut link between the
    two crosses."""
    done = subprocess.run(["ping", "-n", "-M", "do", "-c", str(TUNNEL_PINGS), "-i", str(TUNNEL_PING_INTERVAL_S),
                           "-W", "1", "-s", str(size - 28), address], capture_output=True, text=True)
    return [float(match) * 1e3 for match in _RTT.findall(done.stdout)]


TUNNEL_WATCH_INTERVAL_S = 0.01  # under traffic: 100 pings a second per machine pair, a few kbit/s


class TunnelWatch:
    """Round trips to each far machine measured all through a block's traffic (tunnel_rtts_us
    measures the idle network, before it): what the tunnels' own traffic, and anything else on the
    machines' network, adds to their delay. One `ping` per far machine, owned here and ended by
    stop() (SIGTERM to exactly those processes); their output goes to unnamed files."""

    def __init__(self, addresses: dict[str, str], size: int):
        self.pings: dict[str, tuple[subprocess.Popen, object]] = {}
        for far, address in addresses.items():
            out = tempfile.TemporaryFile(mode="w+")
            self.pings[far] = (subprocess.Popen(
                ["ping", "-n", "-M", "do", "-i", str(TUNNEL_WATCH_INTERVAL_S), "-W", "1", "-s", str(size - 28),
                 address], stdout=out, stderr=subprocess.DEVNULL), out)

    def stop(self) -> dict[str, list[float]]:
        """{far machine: its round trips in us} since the start; the pings ended."""
        found = {}
        for far, (ping, out) in self.pings.items():
            ping.terminate()
            ping.wait()
            out.seek(0)
            found[far] = [float(match) * 1e3 for match in _RTT.findall(out.read())]
            out.close()
        self.pings = {}
        return found


def spread_us(rtts_us: list[float]) -> float | None:
    """A tunnel's one-way delay spread: (p99 - least) of its round trips, halved (both ways add
    theirs); None without a round trip."""
    if not rtts_us:
        return None
    ordered = sorted(rtts_us)
    p99 = ordered[math.ceil(0.99 * len(ordered)) - 1]  # nearest rank
    return (p99 - ordered[0]) / 2


def refused_across_machines(config: ExperimentConfig) -> None:
    """What is not built for a fabric over several machines, refused before anything starts."""
    if any(port.lossless is not None for port in [config.port, *(scheme.port for scheme in config.schemes)]):
        # A pause crosses the cut link: the pause agent of one machine would gate a port of the other.
        raise AcrossMachinesError(f"{config.name}: lossless ports (PFC) across machines are not built yet: a pause "
                                  "must reach the upstream port on the other machine; run it on one machine")
    if config.hosts.kind == "docker":
        raise AcrossMachinesError(f"{config.name}: Docker hosts across machines are not built yet (hosts.kind: "
                                  "docker); use namespace hosts")


def underlay_device(address: str) -> tuple[str, int, str]:
    """(device, its MTU, our source address) this machine reaches `address` through."""
    done = subprocess.run(["ip", "-j", "route", "get", address], capture_output=True, text=True)
    if done.returncode:
        raise AcrossMachinesError(f"no route to {address}: {done.stderr.strip()}")
    route = json.loads(done.stdout)[0]
    shown = subprocess.run(["ip", "-j", "link", "show", "dev", route["dev"]], capture_output=True, text=True,
                           check=True)
    return route["dev"], json.loads(shown.stdout)[0]["mtu"], route.get("prefsrc", "")


def carries_whole(address: str, size: int) -> bool:
    """Whether an IPv4 packet of `size` bytes reaches `address` and back unfragmented (a ping with
    Don't Fragment set): the whole path's MTU, switches between the machines included."""
    done = subprocess.run(["ping", "-n", "-q", "-M", "do", "-c", "1", "-W", "2", "-s", str(size - 28), address],
                          capture_output=True, text=True)
    return done.returncode == 0


def underlay_problems(part: MachinePart, link_mtu: int) -> list[str]:
    """Each far machine this one must tunnel to, checked: reachable, over a network that carries
    the tunnels' packets whole, and from the address the others were told is ours."""
    problems = []
    for far in part.far_machines():
        address = part.addresses[far]
        try:
            ipaddress.IPv4Address(address)
            device, mtu, source = underlay_device(address)
        except (ValueError, AcrossMachinesError) as exc:
            problems.append(f"{part.machine}: cannot reach {far} at {address} ({exc})")
            continue
        if device == "lo":
            problems.append(f"{part.machine}: {far}'s address {address} is this machine's own")
            continue
        if source and source != part.addresses[part.machine]:
            problems.append(f"{part.machine}: reaches {far} from {source}, not from its own address "
                            f"{part.addresses[part.machine]} (ccemu_underlay_address)")
        if (problem := mtu_problem(part.machine, far, address, device, mtu, link_mtu)) is not None:
            problems.append(problem)
        elif not carries_whole(address, underlay_mtu_needed(link_mtu)):
            problems.append(f"{part.machine}: a {underlay_mtu_needed(link_mtu)} B packet with Don't Fragment set does "
                            f"not reach {far} ({address}) and back: the network between them carries less (or "
                            "drops ICMP echo); raise its MTU on every switch between them")
    return problems
