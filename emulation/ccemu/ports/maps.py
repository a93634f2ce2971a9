"""Reading the port programs' maps of a live run: per-port counters, queue lengths (real and
ideal) and exact queue histograms, straight from the pinned BPF maps through libbpf (ports/libbpf.py:
one batch per map, no process per read), into ports/stats.py's values by ports/layouts.py's structs.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2.netns import popns, pushns

from .layouts import PORT_CONFIG, PORT_DEPARTURES, PORT_PFC, PORT_STATE, CLASS_STATS
from .libbpf import BPF_F_LOCK, PinnedMap
from .program import PORT_IDS_FILE, PORT_INDEX_FILE, SHAPE_FILE
from .stats import ClassStats, PortPfc, PortProgramConfig, PortStats, Residence, drain, switch_packets
from .tc import WIRE_OVERHEAD_BYTES, PortShape

DATA_FIFO_HANDLE = 0x200000  # qdisc 20: (ports/tc.py port_qdiscs)


@functools.cache
def _time_namespace_offset_ns() -> int:
    """How far this process's CLOCK_MONOTONIC runs ahead of the kernel's (a time namespace's
    offset: a machine of the across-machines tests has one; 0 outside one)."""
    try:
        lines = Path("/proc/self/timens_offsets").read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        clock, seconds, nanoseconds = line.split()
        if clock == "monotonic":
            return int(seconds) * 1_000_000_000 + int(nanoseconds)
    return 0


def ktime_ns() -> int:
    """Now on the port program's clock (bpf_ktime_get_ns: the kernel's CLOCK_MONOTONIC, which a
    time namespace does not move)."""
    return time.monotonic_ns() - _time_namespace_offset_ns()


# read_drained: what has not moved for this long (and this many frame times) is not coming.
STEADY_S, STEADY_FRAMES = 0.5, 4
MAX_DRAIN_WAIT_S = 60.0
_SETTLED = (0, 0)

def _in_flight(ports: list[PortStats]) -> tuple[int, int]:
    """(bytes in queues, packets inside switches): (0, 0) once everything has arrived."""
    arrived, left = switch_packets(ports)
    return sum(sum(p.queue_bytes) for p in ports), arrived - left


def _ipv4_packets(departures: dict) -> int:
    return sum(departures["packets"]) - departures["unparsed_packets"]

class PortMaps:
    """The port maps of one run (keeps them open between reads)."""

    def __init__(self, state_dir: Path):
        self.index: dict[str, dict[str, int]] = json.loads((state_dir / PORT_INDEX_FILE).read_text())
        self.port_ids: dict[str, int] = json.loads((state_dir / PORT_IDS_FILE).read_text())
        # The host links' port (its frame time: residences in frame times).
        self.shape = PortShape.from_json(json.loads((state_dir / SHAPE_FILE).read_text()))
        bpffs = state_dir.resolve() / "bpffs"
        # port_config and port_state hold the run's ids, 0 .. max (ports/program.py load_command).
        self._config_entries = max(self.port_ids.values(), default=-1) + 1
        self._maps: list[PinnedMap] = []
        try:
            self.departures = self._open(bpffs / "port_departures", PORT_DEPARTURES.size)
            self.pfc = self._open(bpffs / "port_pfc", PORT_PFC.size)
            self.configs = self._open(bpffs / "port_config", PORT_CONFIG.size)
            self.states = self._open(bpffs / "port_state", PORT_STATE.size, flags=BPF_F_LOCK)
        except OSError:
            self.close()
            raise

    def _open(self, path: Path, value_size: int, flags: int = 0) -> PinnedMap:
        self._maps.append(PinnedMap(path, value_size, flags))
        return self._maps[-1]

    @property
    def frame_ns(self) -> float:
        """Time one full frame takes on a link."""
        return self.shape.frame_ns

    def read(self) -> list[PortStats]:
        """Every port's counters: each map read in one batch over the run's port ids (the
        run-wide maps, departures and PFC, hold 65536 entries; only the ids this run's ports and
        their peers use are read)."""
        raw_configs = self.configs.first(self._config_entries)
        configs = {port_id: PortProgramConfig.unpack(raw_configs[port_id])
                   for port_id in self.port_ids.values() if port_id < len(raw_configs)}
        used = max((max(c.port_id, c.peer_port_id) for c in configs.values()), default=-1) + 1
        # Departures first: they only grow, so a queue read after them is never low.
        departures = self.departures.first(used)
        states = self.states.first(self._config_entries)
        pfcs = self.pfc.first(used)
        now = ktime_ns()
        result = []
        for node, ports in self.index.items():
            for port, ifindex in ports.items():
                port_id = self.port_ids[port]
                config = configs.get(port_id)
                if config is None or port_id >= len(states):
                    continue
                departed = PORT_DEPARTURES.unpack(departures[config.port_id])["bytes"]
                state = PORT_STATE.unpack(states[port_id])
                admitted = state["admitted_bytes"]
                stats = [ClassStats.unpack(state["stats"][i * CLASS_STATS.size:][:CLASS_STATS.size]) for i in (0, 1)]
                result.append(PortStats(
                    node=node, port=port, ifindex=ifindex, config=config,
                    queue_bytes=(max(0, admitted[0] - departed[0]), max(0, admitted[1] - departed[1])),
                    forgotten_bytes=state["reset_residue_bytes"],
                    ideal_queue_bytes=drain(state["queue_mbytes"], max(0, now - state["last_ns"]), config),
                    mark_probability=state["mark_probability_ppm"] / 1e6, unparsed_packets=state["unparsed_packets"],
                    data=stats[0], credit=stats[1], residence=Residence.unpack(state["residence"]),
                    arrived_packets=_ipv4_packets(PORT_DEPARTURES.unpack(departures[config.peer_port_id])),
                    pfc=PortPfc.unpack(pfcs[config.port_id], now),
                    tcd_state=state["tcd_state"],
                ))
        return result

    def read_drained(self, poll_s: float = 0.05) -> list[PortStats]:
        """read() once the traffic has stopped and everything in flight has arrived: every
        real queue empty and every packet that entered a switch out of it. Otherwise once
        nothing has changed for a while (what is left was lost on the way), at the latest
        after the ports' idle reset (or a minute)."""
        steady_s = max(STEADY_S, STEADY_FRAMES * self.frame_ns / 1e9)  # a slow link's frame takes long
        ports = self.read()
        deadline = time.monotonic() + min(MAX_DRAIN_WAIT_S,
                                          max((p.config.idle_reset_ns for p in ports), default=0) / 1e9)
        last, changed = _in_flight(ports), time.monotonic()
        while last != _SETTLED and time.monotonic() - changed < steady_s and time.monotonic() < deadline:
            time.sleep(poll_s)
            ports = self.read()
            if _in_flight(ports) != last:
                last, changed = _in_flight(ports), time.monotonic()
        return ports

    def close(self) -> None:
        for pinned in self._maps:
            pinned.close()
        self._maps.clear()

    def __enter__(self) -> "PortMaps":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def netlink_of(pid: int) -> IPRoute:
    """A netlink socket in the network namespace of `pid` (a socket stays in the namespace
    it was made in, so no process is needed to talk to it)."""
    pushns(f"/proc/{pid}/ns/net")
    try:
        return IPRoute()
    finally:
        popns()


def data_fifo_backlog_wire_bytes(netlink: IPRoute, ifindex: int) -> int:
    """Real backlog of a port's data FIFO, counted as the wire counts it."""
    for qdisc in netlink.get_qdiscs(index=ifindex):
        if qdisc["handle"] == DATA_FIFO_HANDLE:
            queue = qdisc.get_attr("TCA_STATS2").get_attr("TCA_STATS_QUEUE")
            return queue["backlog"] + WIRE_OVERHEAD_BYTES * queue["qlen"]
    raise LookupError(f"no data FIFO (qdisc 20:) on ifindex {ifindex}")


def queue_minus_backlog(maps: PortMaps, node: str, port: str, namespace_pid: int, samples: int,
                        interval_s: float) -> list[float]:
    """Samples of (the port program's data queue - the data FIFO's backlog from netlink, as
    `tc -s qdisc` shows it) of one port, in bytes. The backlog is read between two reads of
    the program's queue, and compared with their mean."""
    ifindex = maps.index[node][port]
    netlink = netlink_of(namespace_pid)

    def measured() -> float:
        (queue,) = [p.queue_bytes[0] for p in maps.read() if (p.node, p.port) == (node, port)]
        return queue

    differences = []
    try:
        for _ in range(samples):
            before = measured()
            backlog = data_fifo_backlog_wire_bytes(netlink, ifindex)
            differences.append((before + measured()) / 2 - backlog)
            time.sleep(interval_s)
    finally:
        netlink.close()
    return differences
