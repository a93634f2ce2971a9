"""Deploying the port program (bpf/port.bpf.c) on a fabric.

The programs are loaded once per run, with the run's maps, pinned in the run's private bpffs
(<state>/bpffs/), and attached in every network namespace of the run (every host, every OVS
instance). Ports are numbered here for the whole run; the maps are keyed by these ids, and the
programs find a packet's port id by its ifindex: ifindexes repeat across namespaces, so the
fabric creates every port with an ifindex of its own, ifindex_of(its id). The loader is built by
`make setup` into build/bpf/.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


REPO_ROOT = Path(__file__).resolve().parents[3]
BPF_BUILD_DIR = Path(os.environ.get("CCEMU_BPF_DIR", REPO_ROOT / "build" / "bpf"))
PORT_INDEX_FILE = "ports.json"  # in the run's state dir: node -> port name -> ifindex
PORT_IDS_FILE = "port_ids.json"  # in the run's state dir: port name -> its id in the run's maps
# In the run's state dir: the PortShape of the ports facing hosts (tc.py as_json). Every port of a run
# has the same but for the rate of ports between switches (link.fabric_share): readers take their
# frame time (maps.py) or gate settings (pfc.py) from it.
SHAPE_FILE = "shape.json"


# A port's ifindex is this plus its id: above what the kernel hands out in a new namespace (it
# counts from 1, and OVS's own devices take the next free numbers), below 2^31.
IFINDEX_BASE = 1 << 20


def ifindex_of(port_id: int) -> int:
    return IFINDEX_BASE + port_id


class PortProgramMissing(RuntimeError):
    pass


@dataclass(frozen=True)
class PortIds:
    """A port's id in the run and its peer's: the port at the other end of its link."""

    port_id: int
    peer_port_id: int


def number_ports(links: Iterable[tuple[str, str]]) -> dict[str, PortIds]:
    """Ids for every interface of the fabric's links, from 1 in name order (0 is no port)."""
    peers = {}
    for a, b in links:
        for port, peer in ((a, b), (b, a)):
            if port in peers:
                raise ValueError(f"interface {port} is on two links")
            peers[port] = peer
    ids = {port: number for number, port in enumerate(sorted(peers), start=1)}
    return {port: PortIds(ids[port], ids[peer]) for port, peer in peers.items()}


@dataclass(frozen=True)
class PortProgram:
    object_file: Path
    loader: Path

    @classmethod
    def built(cls) -> "PortProgram":
        program = cls(BPF_BUILD_DIR / "port.bpf.o", BPF_BUILD_DIR / "port_loader")
        missing = [str(p) for p in (program.object_file, program.loader) if not p.exists()]
        if missing:
            raise PortProgramMissing(f"the port program is not built ({', '.join(missing)} missing): run `make setup`")
        return program

    def load_command(self, bpffs: Path, ids: dict[str, PortIds], switch_ports: int, host_routes: int = 0) -> list[str]:
        """The command that loads the programs for the run, its maps sized for `ids`, the
        residences of `switch_ports` and `host_routes` routes (the bpf datapath's; 0 when OVS
        forwards), pinned in `bpffs`."""
        port_ids = max(ids.port_id for ids in ids.values()) + 1
        return [str(self.loader), "load", str(self.object_file), str(bpffs), str(port_ids), str(switch_ports),
                str(host_routes)]

    def routes_command(self, bpffs: Path, routes: Path) -> list[str]:
        """The command that writes the bpf datapath's routes (fabric/forwarding.py lines in `routes`)."""
        return [str(self.loader), "routes", str(bpffs), str(routes)]

    def attach_command(self, bpffs: Path, config: Path, forward: bool = False) -> str:
        """Shell command that, run inside a namespace, attaches the run's programs to the ports of
        `config` (their lines, ports/interface.py) and prints "attached <ifname> <ifindex>" per
        port. `forward`: the switch ports' ingress programs forward (the bpf datapath)."""
        return (f"{shlex.quote(str(self.loader))} attach {shlex.quote(str(bpffs))} {shlex.quote(str(config))}"
                + (" forward" if forward else ""))


def parse_attached(output: str) -> dict[str, int]:
    """ifname -> ifindex from the loader's "attached" lines."""
    ports = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "attached":
            ports[parts[1]] = int(parts[2])
    return ports
