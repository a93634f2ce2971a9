"""The one interface of a live fabric, whether one machine runs it all (fabric/net.py FabricNet) or
several machines each run a part (machines/fabric.py SplitFabric): what the checks, the delay plan,
the block lifecycle and the collector ask of it. Callers ask; they never test which it is
(tests/unit/test_fabric_protocol.py holds both to it)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Iterable, Protocol

if TYPE_CHECKING:
    from ..model.config import ExperimentConfig
    from ..model.routing import Routing
    from ..model.topology import Topology
    from ..ports.stats import PortStats
    from .counters import PortKey


class HostProbes(Protocol):
    """The probe sockets of some hosts (programs/probe.py Probes, machines/fabric.py SplitProbes)."""

    def send(self, src: str, dst_ip: str, path_id: int) -> bool: ...

    def drain(self, heard: Counter, timeout: float = 0.0) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> "HostProbes": ...

    def __exit__(self, *exc) -> None: ...


class Fabric(Protocol):
    config: "ExperimentConfig"
    run_id: str | None
    fabric_topo: "Topology"
    routing: "Routing"

    @property
    def machine_of(self) -> dict[str, str] | None:
        """node -> the machine that runs it; None: all on this one."""

    def describe_datapath(self) -> str:
        """What forwards, for a line of the log."""

    def fault(self) -> str | None:
        """What failed under the running block (a daemon died, a machine was lost), or None."""

    def collect(self) -> None:
        """Brings the fabric's view of its processes up to date (one request per machine when split)."""

    def live_ports(self):
        """The ports' maps, open for reading while the block runs (its read() gives PortStats)."""

    def drained_ports(self) -> tuple[list["PortStats"], float]:
        """Every port's stats once its queues have drained, and one frame's time in ns."""

    def probes(self, names: Iterable[str]) -> HostProbes:
        """Probe sockets in the hosts `names` (fabric/checks.py)."""

    def port_counters(self) -> dict["PortKey", tuple[int, int]]:
        """(switch, port) -> (rx packets, tx packets) of every switch port."""

    def idle_rtts(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], float]:
        """Median idle RTT in seconds (wall) of each (src, dst) pair."""

    def __enter__(self) -> "Fabric": ...

    def __exit__(self, *exc) -> None: ...
