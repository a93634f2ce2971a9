"""The filter in front of a run's tunnels: VXLAN packets carrying the run's network identifiers are
taken only from the machines at the far ends of its cut links (SECURITY.md).

The kernel's VXLAN socket listens on UDP 4789 on every address of the machine and takes a packet
from any source whose identifier (VNI) names one of its devices: any host on the machines' network
could put frames into the emulated fabric. So each machine's part of a run adds, before its first
tunnel, one iptables chain of its own (CCEMU-VX-<the run's first VNI, hex>): RETURN for each far
machine's address, DROP for the rest; and one rule at the head of INPUT sends it the UDP 4789
packets whose VNI (the 24 bits after the VXLAN header's first 4 bytes) is in the run's range.
Packets of other runs (their own ranges) and anything else pass untouched. The chain is recorded
in the run's inventory before it is made, and removed with the run (or by `ccemu clean`).

It filters; it does not hide: what crosses the machines' network is readable there. The network
between the machines must be trusted, or encrypted (WireGuard between them, the tunnels' addresses
being the WireGuard ones): SECURITY.md.
"""

from __future__ import annotations

import re
import subprocess

from ..model.tunnel import VXLAN_PORT

CHAIN_PREFIX = "CCEMU-VX-"
CHAIN = re.compile(r"CCEMU-VX-[0-9a-f]{6}")
# From the IPv4 header's length to the UDP header, then the VXLAN header's second word: VNI << 8.
_VNI_AT = "0>>22&0x3C@12>>8"


class FirewallError(RuntimeError):
    """The filter cannot be made (one line)."""


def chain_name(first_vni: int) -> str:
    return f"{CHAIN_PREFIX}{first_vni:06x}"


def is_chain(name: object) -> bool:
    """Whether `name` is one ccemu makes (a record naming anything else is not acted on)."""
    return isinstance(name, str) and CHAIN.fullmatch(name) is not None


def _iptables(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["iptables", "-w", *args], capture_output=True, text=True)


def _jump(chain: str, first_vni: int, last_vni: int) -> list[str]:
    """The INPUT rule's match and target: the run's tunnels' packets, to its chain."""
    return ["-p", "udp", "--dport", str(VXLAN_PORT), "-m", "u32", "--u32", f"{_VNI_AT}={first_vni}:{last_vni}",
            "-m", "comment", "--comment", "ccemu tunnels", "-j", chain]


def install(chain: str, sources: list[str], first_vni: int, last_vni: int) -> None:
    """The chain, its rules, then the jump at the head of INPUT (so nothing passes half-filtered)."""
    steps = [["-N", chain], *(["-A", chain, "-s", source, "-j", "RETURN"] for source in sources),
             ["-A", chain, "-j", "DROP"], ["-I", "INPUT", "1", *_jump(chain, first_vni, last_vni)]]
    for step in steps:
        done = _iptables(*step)
        if done.returncode:
            raise FirewallError(f"filtering the tunnels' packets (iptables {' '.join(step)}): "
                                f"{done.stderr.strip() or 'failed'}")


def remove(chain: str) -> list[str]:
    """Remove the jumps to `chain` and the chain; what could not be removed (empty: done, or it was
    never made)."""
    if not is_chain(chain):
        return [f"{chain!r} is not a chain ccemu makes: left alone"]
    listed = _iptables("-L", "INPUT", "-n", "--line-numbers")
    if listed.returncode:
        return [f"cannot list INPUT to remove the jump to {chain}: {listed.stderr.strip()}"]
    numbers = [int(line.split()[0]) for line in listed.stdout.splitlines()[2:]
               if len(line.split()) > 1 and line.split()[1] == chain]
    problems = []
    for number in sorted(numbers, reverse=True):
        if (done := _iptables("-D", "INPUT", str(number))).returncode:
            problems.append(f"cannot remove INPUT rule {number} (to {chain}): {done.stderr.strip()}")
    if _iptables("-S", chain).returncode == 0:  # it exists
        for step in (["-F", chain], ["-X", chain]):
            if (done := _iptables(*step)).returncode:
                problems.append(f"cannot remove chain {chain}: {done.stderr.strip()}")
    return problems

