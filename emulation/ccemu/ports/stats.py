"""What a port program's maps say about its port, as values: no map is read here (ports/maps.py
reads them live; another machine's arrive as JSON, PortStats.from_json), so the results layer
judges them without touching the machine."""

from __future__ import annotations

from dataclasses import dataclass

from .fields import MARKERS
from .histograms import RESIDENCE_BUCKETS, histogram_quantile, residence_bucket_bounds
from .layouts import CLASS_STATS, PFC_HIST_BUCKETS, PORT_CONFIG, PORT_PFC, RESIDENCE


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


def switch_packets(ports: list[PortStats]) -> tuple[int, int]:
    """(IPv4 packets that arrived at switch ports, IPv4 packets that reached a switch port's egress)."""
    switch_ports = [p for p in ports if p.config.switch_port]
    return sum(p.arrived_packets for p in switch_ports), sum(p.left_packets for p in switch_ports)


def drain(queues_mbytes: tuple[int, int], elapsed_ns: int, config: PortProgramConfig) -> tuple[float, float]:
    """The fluid model of bpf/port.bpf.c: credits drain first (capped), data gets the rest.
    Returns (data, credit) in bytes."""
    data, credit = queues_mbytes
    link = elapsed_ns * config.link_rate_Bps / 1e6
    credit_drained = min(credit, elapsed_ns * config.credit_rate_Bps / 1e6, link)
    return max(0.0, data - (link - credit_drained)) / 1000, (credit - credit_drained) / 1000
