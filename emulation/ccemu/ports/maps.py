"""Reading the port programs' maps of a live run: per-port counters, queue lengths (real and
ideal) and exact queue histograms, straight from the pinned BPF maps with the bpf(2) system
call (no process per read). Layouts mirror bpf/port.h (port_config's is ports/fields.py's
table); a test checks them against the loader's `--layout`.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import platform
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2.netns import popns, pushns

from .fields import MARKERS, PORT_CONFIG_FIELDS
from .program import PORT_IDS_FILE, PORT_INDEX_FILE, SHAPE_FILE
from .histograms import QUEUE_BUCKETS, RESIDENCE_BUCKETS, histogram_quantile, residence_bucket_bounds
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

class Layout:
    """A struct of bpf/port.h as Python reads it: its fields in order, each with its struct
    format ("Q", "2I", or "<n>s" for a nested struct). `port_loader --layout` prints the C
    offsets; a test compares them with offsets() field by field."""

    def __init__(self, name: str, fields: list[tuple[str, str]]):
        self.name = name
        self.fields = fields
        self.struct = struct.Struct("<" + "".join(fmt for _, fmt in fields))
        self.size = self.struct.size

    def offsets(self) -> dict[str, int]:
        offsets, fmt = {}, "<"
        for name, field_fmt in self.fields:
            offsets[name] = struct.calcsize(fmt)
            fmt += field_fmt
        return offsets

    def unpack(self, raw: bytes) -> dict:
        """Field name -> value (a tuple for arrays, bytes for nested structs)."""
        values, result = iter(self.struct.unpack_from(raw)), {}
        for name, fmt in self.fields:
            count = int(fmt[:-1]) if fmt[:-1] and fmt[-1] != "s" else 1
            result[name] = next(values) if count == 1 else tuple(next(values) for _ in range(count))
        return result


# Per-class arrays are indexed [data, credit] (PORT_CLASS_DATA = 0).
PORT_CONFIG = Layout("port_config", [(f.name, f.struct_format) for f in PORT_CONFIG_FIELDS])
PORT_DEPARTURES = Layout("port_departures", [("bytes", "2Q"), ("packets", "2Q"), ("unparsed_packets", "Q")])
CLASS_STATS = Layout("port_class_stats", [
    ("enqueued_packets", "Q"), ("enqueued_bytes", "Q"), ("dropped_packets", "Q"), ("dropped_bytes", "Q"),
    ("marked_packets", "Q"), ("marked_bytes", "Q"), ("ue_marked_packets", "Q"), ("max_queue_bytes", "Q"),
    ("lag_sum_bytes", "Q"), ("max_lag_bytes", "Q"), ("queue_sum_bytes", "Q"), ("queue_area_lo", "Q"),
    ("queue_area_hi", "Q"), ("queue_histogram", f"{QUEUE_BUCKETS}Q"),
])
RESIDENCE = Layout("port_residence", [
    ("packets", "Q"), ("sum_ns", "Q"), ("max_ns", "Q"), ("untracked_packets", "Q"),
    ("histogram", f"{RESIDENCE_BUCKETS}Q"),
])
PORT_STATE = Layout("port_state", [
    ("lock", "I"), ("pad", "I"), ("last_ns", "Q"), ("queue_mbytes", "2Q"), ("tokens_mbytes", "2Q"),
    ("admitted_bytes", "2Q"), ("window_credits", "I"), ("window_drops", "I"), ("mark_probability_ppm", "I"),
    ("unparsed_packets", "I"), ("reset_residue_bytes", "Q"), ("tcd_state", "I"), ("tcd_decreasing", "I"),
    ("tcd_sample_ns", "Q"), ("tcd_sample_queue", "Q"), ("integral_ns", "Q"), ("integral_queue_bytes", "2Q"),
    ("stats", f"{2 * CLASS_STATS.size}s"),
    ("residence", f"{RESIDENCE.size}s"),
])
PFC_HIST_BUCKETS = 32  # bpf/port.h
PORT_PFC = Layout("port_pfc", [
    ("held_bytes", "q"), ("max_held_bytes", "Q"), ("paused", "Q"), ("paused_since_ns", "Q"), ("resumed_ns", "Q"),
    ("pause_events", "Q"), ("paused_ns", "Q"), ("pause_histogram", f"{PFC_HIST_BUCKETS}Q"),
])
PFC_EVENT = Layout("pfc_event", [("ns", "Q"), ("port_id", "I"), ("pause", "I")])
LAYOUTS = (PORT_CONFIG, PORT_DEPARTURES, CLASS_STATS, RESIDENCE, PORT_PFC, PFC_EVENT, PORT_STATE)
KEY = struct.Struct("<I")

_BPF_SYSCALL = {"x86_64": 321, "aarch64": 280}
_BPF_MAP_LOOKUP_ELEM, _BPF_OBJ_GET = 1, 7
BPF_F_LOCK = 4  # copy a value holding a bpf_spin_lock under that lock: no torn reads
_libc = ctypes.CDLL(None, use_errno=True)


class _ObjGetAttr(ctypes.Structure):
    _fields_ = [("pathname", ctypes.c_uint64), ("bpf_fd", ctypes.c_uint32), ("file_flags", ctypes.c_uint32)]


class _MapElemAttr(ctypes.Structure):
    _fields_ = [("map_fd", ctypes.c_uint32), ("pad", ctypes.c_uint32), ("key", ctypes.c_uint64),
                ("value", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


def _bpf(cmd: int, attr: ctypes.Structure) -> int:
    result = _libc.syscall(_BPF_SYSCALL[platform.machine()], cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


def open_pinned(path: Path) -> int:
    """A file descriptor of the BPF object pinned at `path`."""
    path_bytes = ctypes.create_string_buffer(str(path).encode())
    try:
        return _bpf(_BPF_OBJ_GET, _ObjGetAttr(pathname=ctypes.addressof(path_bytes)))
    except OSError as exc:
        raise OSError(exc.errno, f"opening pinned map {path}: {exc.strerror}") from None


class PinnedMap:
    """A BPF map pinned on a bpffs, looked up by key."""

    def __init__(self, path: Path, value_size: int, flags: int = 0):
        self.fd = open_pinned(path)
        self.value = ctypes.create_string_buffer(value_size)
        self.flags = flags

    def lookup(self, key: int) -> bytes | None:
        key_buf = ctypes.create_string_buffer(KEY.pack(key))
        attr = _MapElemAttr(map_fd=self.fd, key=ctypes.addressof(key_buf), value=ctypes.addressof(self.value),
                            flags=self.flags)
        try:
            _bpf(_BPF_MAP_LOOKUP_ELEM, attr)
        except FileNotFoundError:
            return None
        return self.value.raw

    def close(self) -> None:
        os.close(self.fd)


@dataclass(frozen=True)
class ClassStats:
    enqueued_packets: int
    enqueued_bytes: int
    dropped_packets: int
    dropped_bytes: int
    marked_packets: int  # CE set at this port (a packet already CE is not counted again)
    marked_bytes: int
    ue_marked_packets: int  # TCD's UE set at this port
    max_queue_bytes: int
    lag_sum_bytes: int  # over enqueues, |real - ideal queue|
    max_lag_bytes: int
    queue_sum_bytes: int  # over enqueued frames, the queue each joined (itself included)
    queue_area_byte_ns: int  # the queue's integral over time (both events: enqueues and departures)
    histogram: tuple[int, ...]  # enqueues by queue length after them (queue_bucket_bounds)

    @classmethod
    def unpack(cls, raw: bytes) -> "ClassStats":
        values = CLASS_STATS.unpack(raw)
        histogram = values.pop("queue_histogram")
        area = values.pop("queue_area_lo") + (values.pop("queue_area_hi") << 64)
        return cls(**values, queue_area_byte_ns=area, histogram=histogram)

    @property
    def mean_lag_bytes(self) -> float:
        """How far, on average at an enqueue, the real queue was from an ideal port's."""
        return self.lag_sum_bytes / self.enqueued_packets if self.enqueued_packets else 0.0

    @property
    def mean_queue_per_arrival_bytes(self) -> float:
        """The mean queue an admitted frame joined, itself included (exact)."""
        return self.queue_sum_bytes / self.enqueued_packets if self.enqueued_packets else 0.0

    @property
    def queue_area_byte_s(self) -> float:
        """The queue's integral over wall time, byte x s: / a time span = its time average."""
        return self.queue_area_byte_ns / 1e9


@dataclass(frozen=True)
class Residence:
    """Time packets spent inside a switch before leaving through its ports (one port's, or
    several merged): arrival at the switch's ingress port to admission at the egress port."""

    packets: int = 0
    sum_ns: int = 0
    max_ns: int = 0
    untracked_packets: int = 0  # no arrival on record: evicted while they waited (or never seen)
    histogram: tuple[int, ...] = (0,) * RESIDENCE_BUCKETS

    @classmethod
    def unpack(cls, raw: bytes) -> "Residence":
        return cls(**RESIDENCE.unpack(raw))

    @classmethod
    def merged(cls, parts) -> "Residence":
        parts = list(parts)
        return cls(packets=sum(p.packets for p in parts), sum_ns=sum(p.sum_ns for p in parts),
                   max_ns=max((p.max_ns for p in parts), default=0),
                   untracked_packets=sum(p.untracked_packets for p in parts),
                   histogram=tuple(map(sum, zip(*(p.histogram for p in parts)))) if parts
                   else (0,) * RESIDENCE_BUCKETS)

    def quantile_ns(self, q: float) -> float:
        """The q-quantile of residence, interpolated inside its bucket. Untracked packets
        count as the longest residences (the map forgets the oldest arrivals first; the rarer
        other causes, bpf/port.h, make this err on the long side), so a quantile among them is
        reported as the longest residence measured."""
        if not self.packets + self.untracked_packets:
            return 0.0
        return histogram_quantile((*self.histogram, self.untracked_packets), q, self._bounds, self.max_ns)

    def _bounds(self, bucket: int) -> tuple[float, float]:
        if bucket == RESIDENCE_BUCKETS:  # the untracked packets
            return float(self.max_ns), float(self.max_ns)
        return residence_bucket_bounds(bucket)


def pause_bucket_bounds_s(bucket: int) -> tuple[float, float]:
    """[low, high) of a pause-duration bucket in seconds (bpf/port.bpf.c pfc_release)."""
    if bucket == 0:
        return 0.0, 2e-6
    return (1 << bucket) * 1e-6, (1 << (bucket + 1)) * 1e-6


@dataclass(frozen=True)
class PortPfc:
    """Lossless mode at one port: what it holds as a switch's ingress, and its pauses as an egress."""

    held_bytes: int = 0  # arrived through this port, still queued in its switch's egress queues
    max_held_bytes: int = 0
    paused: bool = False
    pause_events: int = 0
    paused_s: float = 0.0  # over the pauses that ended, and the one going on
    pause_histogram: tuple[int, ...] = (0,) * PFC_HIST_BUCKETS  # ended pauses by duration

    @classmethod
    def unpack(cls, raw: bytes, now_ns: int) -> "PortPfc":
        v = PORT_PFC.unpack(raw)
        ongoing = max(0, now_ns - v["paused_since_ns"]) if v["paused"] else 0
        return cls(held_bytes=v["held_bytes"], max_held_bytes=v["max_held_bytes"], paused=bool(v["paused"]),
                   pause_events=v["pause_events"], paused_s=(v["paused_ns"] + ongoing) / 1e9,
                   pause_histogram=v["pause_histogram"])


@dataclass(frozen=True)
class PortProgramConfig:
    """A port's struct port_config as the port program holds it (read back from its map)."""

    link_rate_Bps: int
    credit_rate_Bps: int
    buffer_bytes: tuple[int, int]  # data, credit
    ecn_threshold_bytes: int
    credit_mark_window: int
    port_id: int
    peer_port_id: int
    switch_port: bool
    idle_reset_ns: int
    lossless: bool = False
    marker: str = "none"  # ports/fields.py MARKERS

    @property
    def tcd(self) -> bool:
        return self.marker == "tcd"

    @classmethod
    def unpack(cls, raw: bytes) -> "PortProgramConfig":
        v = PORT_CONFIG.unpack(raw)
        markers = list(MARKERS)
        return cls(v["link_rate_Bps"], v["credit_rate_Bps"], v["buffer_bytes"], v["ecn_threshold_bytes"],
                   v["credit_mark_window"], v["port_id"], v["peer_port_id"], bool(v["switch_port"]),
                   v["idle_reset_ns"], bool(v["lossless"]),
                   markers[v["marker"]] if v["marker"] < len(markers) else str(v["marker"]))


@dataclass(frozen=True)
class PortStats:
    node: str
    port: str
    ifindex: int
    config: PortProgramConfig
    queue_bytes: tuple[int, int]  # real queues (data, credit): admitted minus arrived at the peer
    forgotten_bytes: int  # still counted as queued when an idle reset resynced the queue: lost on the way
    ideal_queue_bytes: tuple[float, float]  # an ideal port's (fluid) queues, drained to the time of reading
    mark_probability: float  # SprayPass Pd in force
    unparsed_packets: int
    data: ClassStats
    credit: ClassStats
    residence: Residence  # of the packets leaving through this port (switch ports only)
    arrived_packets: int  # IPv4 packets through this port, from its peer (what left the peer's queue)
    pfc: PortPfc = PortPfc()  # lossless mode's counters (zero elsewhere)
    tcd_state: int = 0  # bpf/port.h TCD_*: the state of the port's last packet

    @classmethod
    def from_json(cls, data: dict) -> "PortStats":
        """A PortStats from its dataclasses.asdict() sent as JSON (another machine's: machines/)."""
        def stats(d: dict) -> ClassStats:
            return ClassStats(**{**d, "histogram": tuple(d["histogram"])})

        config, residence, pfc = data["config"], data["residence"], data["pfc"]
        return cls(**{**data, "config": PortProgramConfig(**{**config, "buffer_bytes": tuple(config["buffer_bytes"])}),
                      "queue_bytes": tuple(data["queue_bytes"]), "ideal_queue_bytes": tuple(data["ideal_queue_bytes"]),
                      "data": stats(data["data"]), "credit": stats(data["credit"]),
                      "residence": Residence(**{**residence, "histogram": tuple(residence["histogram"])}),
                      "pfc": PortPfc(**{**pfc, "pause_histogram": tuple(pfc["pause_histogram"])})})

    @property
    def left_packets(self) -> int:
        """IPv4 packets that reached this port's egress (admitted or dropped)."""
        return (self.data.enqueued_packets + self.data.dropped_packets + self.credit.enqueued_packets +
                self.credit.dropped_packets - self.unparsed_packets)

    @property
    def switch(self) -> str | None:
        """The switch this port belongs to (None for a host's NIC)."""
        return self.port.split("-")[0] if self.config.switch_port else None


# read_drained: what has not moved for this long (and this many frame times) is not coming.
STEADY_S, STEADY_FRAMES = 0.5, 4
MAX_DRAIN_WAIT_S = 60.0
_SETTLED = (0, 0)


def switch_packets(ports: list[PortStats]) -> tuple[int, int]:
    """(IPv4 packets that arrived at switch ports, IPv4 packets that reached a switch port's egress)."""
    switch_ports = [p for p in ports if p.config.switch_port]
    return sum(p.arrived_packets for p in switch_ports), sum(p.left_packets for p in switch_ports)


def _in_flight(ports: list[PortStats]) -> tuple[int, int]:
    """(bytes in queues, packets inside switches): (0, 0) once everything has arrived."""
    arrived, left = switch_packets(ports)
    return sum(sum(p.queue_bytes) for p in ports), arrived - left


def _ipv4_packets(departures: dict) -> int:
    return sum(departures["packets"]) - departures["unparsed_packets"]


def drain(queues_mbytes: tuple[int, int], elapsed_ns: int, config: PortProgramConfig) -> tuple[float, float]:
    """The fluid model of bpf/port.bpf.c: credits drain first (capped), data gets the rest.
    Returns (data, credit) in bytes."""
    data, credit = queues_mbytes
    link = elapsed_ns * config.link_rate_Bps / 1e6
    credit_drained = min(credit, elapsed_ns * config.credit_rate_Bps / 1e6, link)
    return max(0.0, data - (link - credit_drained)) / 1000, (credit - credit_drained) / 1000


class PortMaps:
    """The port maps of one run (keeps them open between reads)."""

    def __init__(self, state_dir: Path):
        self.index: dict[str, dict[str, int]] = json.loads((state_dir / PORT_INDEX_FILE).read_text())
        self.port_ids: dict[str, int] = json.loads((state_dir / PORT_IDS_FILE).read_text())
        # The host links' port (its frame time: residences in frame times).
        self.shape = PortShape.from_json(json.loads((state_dir / SHAPE_FILE).read_text()))
        bpffs = state_dir.resolve() / "bpffs"
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
        result = []
        for node, ports in self.index.items():
            for port, ifindex in ports.items():
                port_id = self.port_ids[port]
                raw_config = self.configs.lookup(port_id)
                if raw_config is None:
                    continue
                config = PortProgramConfig.unpack(raw_config)
                # Departures first: they only grow, so a queue read after them is never low.
                raw_departures = self.departures.lookup(config.port_id)
                raw_arrivals = self.departures.lookup(config.peer_port_id)
                raw_state = self.states.lookup(port_id)
                raw_pfc = self.pfc.lookup(config.port_id)
                now = ktime_ns()
                if raw_state is None or raw_departures is None or raw_arrivals is None:
                    continue
                departed = PORT_DEPARTURES.unpack(raw_departures)["bytes"]
                state = PORT_STATE.unpack(raw_state)
                admitted = state["admitted_bytes"]
                stats = [ClassStats.unpack(state["stats"][i * CLASS_STATS.size:][:CLASS_STATS.size]) for i in (0, 1)]
                result.append(PortStats(
                    node=node, port=port, ifindex=ifindex, config=config,
                    queue_bytes=(max(0, admitted[0] - departed[0]), max(0, admitted[1] - departed[1])),
                    forgotten_bytes=state["reset_residue_bytes"],
                    ideal_queue_bytes=drain(state["queue_mbytes"], max(0, now - state["last_ns"]), config),
                    mark_probability=state["mark_probability_ppm"] / 1e6, unparsed_packets=state["unparsed_packets"],
                    data=stats[0], credit=stats[1], residence=Residence.unpack(state["residence"]),
                    arrived_packets=_ipv4_packets(PORT_DEPARTURES.unpack(raw_arrivals)),
                    pfc=PortPfc.unpack(raw_pfc, now) if raw_pfc is not None else PortPfc(),
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
