"""Cut links: the wire between two switches on two machines is a VXLAN tunnel over the machines'
own network, one per link (its key: Partition.tunnel_key), and the switch's port on each side IS
the tunnel's device, named and numbered as the veth end it stands for (`s9-eth3`, the ifindex the
port programs key it by). So the port model (HTB at the port's rate, the port program's queue,
marks and residence) runs on the switch's egress port exactly as on a local link, the switch
forwards to it as to any port, and routing, its tables and its symmetry proof do not know a link
was cut.

Deliberate difference from the issue's wording ("an OVS tunnel port"): the device is the kernel's
VXLAN, attached to the switch as any port, not an OVS `type=vxlan` port. OVS's userspace datapath
encapsulates inside ovs-vswitchd, on no device a qdisc or tc program can sit on, so the port model
could not stay on the egress port; with OVS's kernel datapath, its vxlan port is this same kernel
VXLAN. It also needs no underlay bridge inside OVS (the userspace datapath's tunnels route through
one), and the bpf datapath (fabric.datapath: bpf) forwards to it unchanged.

The device is created from the machine's namespace, where its network is, and moved into its
switch's namespace at birth: its UDP socket stays where it was made (the kernel's link-netns), so
the tunnel reaches the other machine while the port lives with its switch.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess

from ..model.config import ExperimentConfig
from ..model.partition import MachinePart
from ..model.topology import Link
from ..model.tunnel import VXLAN_PORT, mtu_problem, underlay_mtu_needed


class AcrossMachinesError(RuntimeError):
    """A fabric that cannot be split as asked, or a machine whose network cannot carry it (one line)."""


def tunnel_line(name: str, ifindex: int, mtu: int, namespace_pid: int, part: MachinePart, link: Link) -> str:
    """The `ip -batch` line that makes a cut link's port: a VXLAN device keyed by the link, from
    this machine's address to the far end's, in the namespace of `namespace_pid`. No learning: the
    device has one remote, and a switch never asks it where an address is."""
    far = part.far_end(link)
    return (f"link add name {name} index {ifindex} mtu {mtu} netns {namespace_pid} type vxlan "
            f"id {part.partition.tunnel_key(link)} local {part.addresses[part.machine]} "
            f"remote {part.addresses[far]} dstport {VXLAN_PORT} nolearning")


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
    fars = sorted({part.far_end(link) for link in part.partition.cut_on(part.machine)})
    for far in fars:
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
