"""The one interface of a live fabric, whether one machine runs it all (fabric/net.py FabricNet) or
several machines each run a part (machines/fabric.py SplitFabric): what the checks, the delay plan,
the block lifecycle and the collector ask of it. Callers ask; they never test which it is
(tests/unit/test_fabric_protocol.py holds both to it)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

if TYPE_CHECKING:
    from ..model.config import ExperimentConfig
    from ..model.routing import Routing
    from ..model.topology import Topology
    from ..ports.stats import PortStats
    from ..ports.tc import PortShape
    from .counters import PortKey
    from .lifecycle import Timings


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
    hosts: list  # each with its .name
    port_shape: "PortShape"  # the host links' ports
    image: str | None  # Docker hosts: the image they run
    pause_agent_figures: dict | None  # the PFC pause agent's, once the fabric stopped it
    timings: "Timings"  # of its bring-up
    stop_timings: "Timings"  # of its tear-down

    def __getitem__(self, host: str):
        """The host named `host`: runs commands there (a Mininet node, or a machine's)."""

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

    # What only a fabric over several machines has to say; one machine's answers: OneMachine.
    containers: dict
    round_trips: int  # requests its parts answered: what control cost

    @property
    def cpu_shares_now(self) -> Callable[[], tuple[float, float] | None] | None:
        """The collector's CPU figures, where they are not this machine's: (steal, busy) shares."""

    def cpu_over_block(self) -> tuple[float, float] | None:
        """(steal share, busy share) of the worst machine over the block, where not this machine's."""

    def tunnel_spread_us(self) -> tuple[float, str] | None:
        """The worst one-way delay spread of the tunnels between machines on the idle fabric, and where."""

    def watch_tunnels(self) -> None:
        """Starts measuring the tunnels' round trips under the block's traffic."""

    def tunnel_spread_under_traffic_us(self) -> tuple[float, str] | None:
        """As tunnel_spread_us, over the round trips since watch_tunnels."""

    def tunnel_losses(self) -> dict[str, tuple[int, int, str]]:
        """Per switch port a cut link leaves by: (frames sent between the machines, lost, far port)."""

    def clock_error_us(self) -> tuple[float, str] | None:
        """How far one machine's clock may be from another's by the block's end, and which."""

    def __enter__(self) -> "Fabric": ...

    def __exit__(self, *exc) -> None: ...


class OneMachine:
    """A fabric that one machine runs answers the Fabric questions about machines: no tunnels
    between machines, nothing to fetch, no control requests, the CPU figures this machine's
    (the runner and the collector read them themselves)."""

    round_trips = 0
    cpu_shares_now = None

    def collect(self) -> None:
        """The runners read what the hosts wrote here, in place."""

    def cpu_over_block(self) -> None:
        return None

    def tunnel_spread_us(self) -> None:
        return None

    def watch_tunnels(self) -> None:
        """Nothing to watch."""

    def tunnel_spread_under_traffic_us(self) -> None:
        return None

    def tunnel_losses(self) -> dict[str, tuple[int, int, str]]:
        return {}

    def clock_error_us(self) -> None:
        return None
