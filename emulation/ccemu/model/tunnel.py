"""What a cut link's tunnel asks of the machines' own network (pure: figures and one check).

A cut link is carried as VXLAN (RFC 7348): each inner frame as sent (the link's MTU plus its
14 B Ethernet header; preamble, gap and FCS are not carried) gains an outer IPv4 header (20 B), UDP
(8 B) and the VXLAN header (8 B). The machines' network must carry the result unfragmented: the
kernel's VXLAN device does not fragment (a frame that does not fit is dropped), so a path MTU below
it loses every full-size data frame while credits and probes pass, which no reachability check
would see.
"""

from __future__ import annotations

import secrets

VXLAN_PORT = 4789  # IANA's
VNI_LIMIT = 1 << 24  # a VXLAN network identifier is 24 bits
INNER_ETHERNET = 14
VXLAN_OVERHEAD = 20 + 8 + 8  # outer IPv4, UDP, VXLAN


def underlay_mtu_needed(link_mtu: int) -> int:
    """The machines' network's MTU a link of `link_mtu` needs when cut (1500 -> 1550)."""
    return link_mtu + INNER_ETHERNET + VXLAN_OVERHEAD


def mtu_problem(machine: str, peer: str, peer_address: str, device: str, mtu: int, link_mtu: int) -> str | None:
    """One line when the device `machine` reaches `peer` through carries less than the tunnels
    need; None when it carries enough."""
    needed = underlay_mtu_needed(link_mtu)
    if mtu >= needed:
        return None
    return (f"{machine}: its network to {peer} ({peer_address}, over {device}) carries {mtu} B packets; the tunnels "
            f"of links of MTU {link_mtu} need {needed} ({link_mtu} + {INNER_ETHERNET} B of Ethernet + "
            f"{VXLAN_OVERHEAD} B of VXLAN): raise it on both machines and every switch between them "
            f"(`ip link set {device} mtu {needed}` or more), or lower link.mtu to "
            f"{mtu - INNER_ETHERNET - VXLAN_OVERHEAD}")


def vni_base(links: int) -> int:
    """A run's first VXLAN network identifier, at random, its `links` identifiers all valid (1 to
    2^24 - 1): two runs on one machine share the kernel's socket on VXLAN_PORT, which tells their
    tunnels apart by identifier alone, so fixed ones (1..N) would collide, and a stranger would
    know which to forge."""
    if not 0 <= links < VNI_LIMIT:
        raise ValueError(f"{links} tunnels: more than VXLAN's {VNI_LIMIT - 1} identifiers")
    return 1 + secrets.randbelow(VNI_LIMIT - max(links, 1))  # the last: base + links - 1 < VNI_LIMIT


SOURCE_PORTS = (49152, 65536)  # the dynamic range (RFC 6335): each cut link's outer UDP source port


def source_port(key: int) -> int:
    """Cut link `key`'s outer UDP source port, the same for all its frames. The kernel's default
    hashes each inner flow to a port of its own, and a network between the machines that spreads
    flows over paths (ECMP) could then reorder one link's frames across its flows: a wire never
    does. Links past the range's size share ports (and a path), which costs nothing of a wire's."""
    low, high = SOURCE_PORTS
    return low + (key - 1) % (high - low)
