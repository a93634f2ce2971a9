"""The rows of the bundle's tables, one class per table (bundle.py writes each class's rows to
its CSV; its column lists are these classes'). A row's columns are its block's (BlockKey.columns:
scheme, n, point; the timeline has no n) followed by its own fields in their order, and it says
how it is made from what the run measured, so that every table's row is built in one place."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import TYPE_CHECKING, ClassVar

from ..model.dilation import CREDIT_WIRE_BYTES, DATA_WIRE_BYTES
from ..model.names import host_number
from .stats import size_bucket

if TYPE_CHECKING:
    from ..containers.cgroups import CgroupFigures
    from ..model.dilation import PairDelay
    from ..ports.stats import PortStats
    from .bundle import BlockKey


@dataclass(frozen=True)
class Row:
    """One row of a table: its block, then the table's own fields."""

    table: ClassVar[str]  # the CSV it is a row of (bundle.py: <table>.csv)
    block_columns: ClassVar[tuple[str, ...]] = ("scheme", "n", "point")  # which of BlockKey.columns() it has

    key: "BlockKey"

    @classmethod
    def column_names(cls) -> list[str]:
        """The table's columns, in the CSV's order."""
        return [*cls.block_columns, *(f.name for f in dataclass_fields(cls) if f.name != "key")]

    def as_dict(self) -> dict:
        """The row as the CSV writer takes it (and as the runner's readers of the bundle see it)."""
        block = self.key.columns()
        return {**{name: block[name] for name in self.block_columns},
                **{f.name: getattr(self, f.name) for f in dataclass_fields(self) if f.name != "key"}}


@dataclass(frozen=True)
class FlowRow(Row):
    """flows.csv: one flow; times in wall seconds."""

    table = "flows"

    round: int
    id: int
    src: str
    dst: str
    size: int
    bucket: str
    start: float
    end: float
    fct: float
    ideal_fct: float
    slowdown: float
    retransmits: int
    timeouts: int
    spurious_timeouts: int
    credits_sent: int
    credits_wasted: int
    # DCQCN: CNPs the sender got, flagged CE (its packets were CE-marked) and UE (TCD).
    cnps_ce: int
    cnps_ue: int

    @classmethod
    def of(cls, key: "BlockKey", round_number: int, record: Mapping, ideal_fct_s: float) -> "FlowRow":
        """A sender's flow record (cchost's, with its host as `src_host`) and its ideal FCT."""
        return cls(key, round=round_number, id=record["id"], src=record["src_host"], dst=f"h{record['dst']}",
                   size=record["size"], bucket=size_bucket(record["size"]), start=record["start"],
                   end=record["end"], fct=record["fct"], ideal_fct=round(ideal_fct_s, 6),
                   slowdown=round(record["fct"] / ideal_fct_s, 4) if ideal_fct_s > 0 else 0.0,
                   retransmits=record["retransmits"], timeouts=record["timeouts"],
                   spurious_timeouts=record["spurious_timeouts"], credits_sent=record["credits_sent"],
                   credits_wasted=record["credits_wasted"], cnps_ce=record.get("cnps_ce", 0),
                   cnps_ue=record.get("cnps_ue", 0))


@dataclass(frozen=True)
class RoundRow(Row):
    """rounds.csv: an incast round, or the one round of a block of the other kinds."""

    table = "rounds"

    round: int
    flows: int
    finished: int
    bytes: int
    duration: float  # wall seconds; 0.0 when flows never finished (incast) or none ran
    goodput_bps: int
    unfinished: str  # "src#id ...", or "not run"
    failures: str  # the cchosts that failed, "; "-separated

    @classmethod
    def of(cls, key: "BlockKey", round_number: int, flows: int, records: Iterable[Mapping], duration_s: float,
           unfinished: Iterable[str], failures: Iterable[object]) -> "RoundRow":
        """A round that ran: its finished flows' records, over `duration_s` (goodput: their bytes
        over it; 0 when it is not positive)."""
        records = list(records)
        sent = sum(r["size"] for r in records)
        return cls(key, round=round_number, flows=flows, finished=len(records), bytes=sent,
                   duration=round(duration_s, 6), goodput_bps=round(sent * 8 / duration_s) if duration_s > 0 else 0,
                   unfinished=" ".join(unfinished), failures="; ".join(str(f) for f in failures))

    @classmethod
    def not_run(cls, key: "BlockKey", round_number: int, flows: int, why: str) -> "RoundRow":
        """A round a failure left no way to run: its flows count as unfinished."""
        return cls(key, round=round_number, flows=flows, finished=0, bytes=0, duration=0.0, goodput_bps=0,
                   unfinished="not run", failures=f"not run: {why}")


@dataclass(frozen=True)
class PortRow(Row):
    """ports.csv: one port over a block. Queues, lags and residue in wire bytes; the data queue's
    exact averages: per arrival (the mean queue an admitted frame joined, itself included) and its
    integral over wall time (byte x s: over a span, its time average); residence: time inside the
    switch before leaving by the port (switch ports only); marks: packets this port set CE on (each
    packet counts once), and UE on (TCD); lossless ports: this port's pauses, and the most its
    ingress held (PFC); the data queue's histogram (bpf/port.h: log-linear buckets from 64 B, four
    per doubling)."""

    table = "ports"

    node: str
    port: str
    bottleneck: int
    data_enqueued: int
    data_dropped: int
    data_marked: int
    max_data_queue: int
    mean_data_queue_arrival: float
    data_queue_byte_s: float
    mean_lag: int
    max_lag: int
    credit_enqueued: int
    credit_dropped: int
    credit_marked: int
    max_credit_queue: int
    mean_credit_lag: int
    max_credit_lag: int
    residence_packets: int
    residence_untracked: int
    residence_p50_us: float
    residence_p99_us: float
    residence_max_us: float
    residue_bytes: int
    data_ue_marked: int
    pause_events: int
    paused_s: float
    max_held_bytes: int
    # A cut link's port (a fabric over several machines): frames the network between the machines
    # lost after they left this port (its tunnel sent them, the far machine's never took them).
    tunnel_lost: int
    histogram: str  # the data queue's histogram, counts space-separated (ports/maps.py queue_bucket_bounds)

    @classmethod
    def of(cls, key: "BlockKey", p: "PortStats", bottleneck: bool, tunnel_lost: int = 0) -> "PortRow":
        """A port's figures as read once the block's queues drained."""
        return cls(key, node=p.node, port=p.port, bottleneck=int(bottleneck),
                   data_enqueued=p.data.enqueued_packets, data_dropped=p.data.dropped_packets,
                   data_marked=p.data.marked_packets, max_data_queue=p.data.max_queue_bytes,
                   mean_data_queue_arrival=round(p.data.mean_queue_per_arrival_bytes, 2),
                   data_queue_byte_s=round(p.data.queue_area_byte_s, 9),
                   mean_lag=round(p.data.mean_lag_bytes), max_lag=p.data.max_lag_bytes,
                   credit_enqueued=p.credit.enqueued_packets, credit_dropped=p.credit.dropped_packets,
                   credit_marked=p.credit.marked_packets, max_credit_queue=p.credit.max_queue_bytes,
                   mean_credit_lag=round(p.credit.mean_lag_bytes), max_credit_lag=p.credit.max_lag_bytes,
                   residence_packets=p.residence.packets, residence_untracked=p.residence.untracked_packets,
                   residence_p50_us=round(p.residence.quantile_ns(0.5) / 1e3, 1),
                   residence_p99_us=round(p.residence.quantile_ns(0.99) / 1e3, 1),
                   residence_max_us=round(p.residence.max_ns / 1e3, 1), residue_bytes=sum(p.queue_bytes),
                   data_ue_marked=p.data.ue_marked_packets, pause_events=p.pfc.pause_events,
                   paused_s=round(p.pfc.paused_s, 6), max_held_bytes=p.pfc.max_held_bytes, tunnel_lost=tunnel_lost,
                   histogram=" ".join(map(str, p.data.histogram)))


@dataclass(frozen=True)
class RttRow(Row):
    """rtts.csv: a host pair's idle RTT through the fabric, the RTT it stands for (propagation),
    the delay each end added, and the serialization the pair's packets pay on top, store-and-forward
    at every link: a full frame (1538 B) from src to dst, and a minimum frame (84 B: the credit or
    ack that answers it) back (wall milliseconds)."""

    table = "rtts"

    src: str
    dst: str
    links: int
    floor_ms: float
    target_ms: float
    added_one_way_ms: float
    frame_there_ms: float
    answer_back_ms: float

    @classmethod
    def of(cls, key: "BlockKey", pair: "PairDelay", links: int) -> "RttRow":
        return cls(key, src=pair.src, dst=pair.dst, links=links, floor_ms=round(pair.floor_rtt_s * 1e3, 3),
                   target_ms=round(pair.target_rtt_s * 1e3, 3), added_one_way_ms=round(pair.added_one_way_s * 1e3, 3),
                   frame_there_ms=round(pair.there.ns_per_byte * DATA_WIRE_BYTES / 1e6, 4),
                   answer_back_ms=round(pair.back.ns_per_byte * CREDIT_WIRE_BYTES / 1e6, 4))


@dataclass(frozen=True)
class TimelineRow(Row):
    """timeline.csv: the bytes a flow had delivered at time t (seconds after the block's epoch, as
    flows.csv), sampled at its receiver (cchost --progress)."""

    table = "timeline"
    block_columns = ("scheme", "point")

    t: float
    src: str
    id: int
    bytes: int

    @classmethod
    def of(cls, key: "BlockKey", sample: Mapping) -> "TimelineRow":
        """One line of a --progress file."""
        return cls(key, t=sample["t"], src=f"h{sample['src']}", id=sample["id"], bytes=sample["bytes"])


@dataclass(frozen=True)
class TransportRow(Row):
    """transport.csv: what a host's cchost counted over a block, beyond its flows' records: the
    credits it sent (as a receiver), those that reached it (as a sender) and those of them it had
    nothing to send for, including credits that arrived after their flow's record was written
    (ns2-xpass counts those too: ExpressPass Fig. 20's waste)."""

    table = "transport"

    host: str
    credits_sent: int
    credits_received: int
    credits_wasted: int

    @classmethod
    def per_host(cls, key: "BlockKey", counters: Iterable[tuple[str, Mapping]]) -> list["TransportRow"]:
        """One row per host, summed over its cchosts' counters ((host, counters) as
        results/records.py counters_under gives them), in host order."""
        totals: dict[str, list[int]] = {}
        for host, c in counters:
            total = totals.setdefault(host, [0, 0, 0])
            total[0] += c["sent_packets"]["credit"]
            total[1] += c["received_packets"]["credit"]
            total[2] += c["credits_wasted"]
        return [cls(key, host, *total) for host, total in sorted(totals.items(), key=lambda item: host_number(item[0]))]


@dataclass(frozen=True)
class HostRow(Row):
    """hosts.csv (Docker hosts only): what a block's container counted (its cgroups), with its
    limits ("": none)."""

    table = "hosts"

    host: str
    image: str
    cpus: float | str
    memory_mb: int | str
    cpu_seconds: float
    periods: int
    throttled_periods: int
    throttled_seconds: float
    memory_bytes: int
    memory_peak_bytes: int

    @classmethod
    def of(cls, key: "BlockKey", host: str, image: str, cpus: float | None, memory_mb: int | None,
           figures: "CgroupFigures") -> "HostRow":
        counted = {name: round(value, 6) if isinstance(value, float) else value
                   for name, value in figures.as_row().items()}
        return cls(key, host=host, image=image, cpus=cpus or "", memory_mb=memory_mb or "", **counted)


# Every table, in the order the bundle writes them.
ROWS: tuple[type[Row], ...] = (FlowRow, RoundRow, PortRow, RttRow, TimelineRow, HostRow, TransportRow)
