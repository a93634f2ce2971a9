"""One port as its namespace configures it: the `ip -batch` lines, shell commands (ethtool),
`tc -batch` lines and port_loader config line of one interface, from its shape (ports/tc.py)
and its ids (ports/program.py). Mininet's split: interfaces know how to configure themselves,
and fabric/net.py only batches what they say, one `ip -batch`, `tc -batch` and loader call per
namespace.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from .program import PortIds
from .tc import PortShape, port_program_line, port_qdiscs


@dataclass(frozen=True)
class PortCommands:
    """What configures one port, by the tool that runs it."""

    ip: tuple[str, ...]  # `ip -batch` lines
    shell: tuple[str, ...]  # commands of their own (ethtool)
    tc: tuple[str, ...]  # `tc -batch` lines
    program: str  # its line in port_loader's attach config (ports/fields.py)


def configure_wire_end(name: str, ids: PortIds, shape: PortShape, switch_port: bool = False) -> PortCommands:
    """The wire end of a cut link (fabric/tunnels.py): up, no qdisc of its own (the wire does not
    shape: the ports at both ends do), and the port program, whose ingress counts what its peer
    (the switch's port) sent as having left that port's queue, as a veth peer's does on a local
    link. It is never a switch port."""
    return PortCommands(ip=(f"link set {name} up",), shell=(), tc=(),
                        program=port_program_line(name, shape, ids.port_id, ids.peer_port_id, False))


def configure(name: str, ids: PortIds, shape: PortShape, switch_port: bool) -> PortCommands:
    """Port `name`: up, its qdisc tree and its port program config. A host's NIC also sends
    whole, checksummed frames: the userspace datapath forwards what it reads from a socket as is,
    and a checksum left to offload, or a TSO super-frame, would arrive broken."""
    shell = () if switch_port else (f"ethtool -K {shlex.quote(name)} tx off tso off gso off > /dev/null",)
    return PortCommands(ip=(f"link set {name} up",), shell=shell, tc=tuple(port_qdiscs(name, shape)),
                        program=port_program_line(name, shape, ids.port_id, ids.peer_port_id, switch_port))
