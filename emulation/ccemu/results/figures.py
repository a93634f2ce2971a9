"""The figures of every kind of experiment, from a bundle's tables alone, each defined once: summary.md's
tables and plots (reports/report.py), a sweep's side-by-side table (reports/merge.py) and the papers' claims
(papers.py) all read them here, so a summary never contradicts itself. Every figure is dilation-free
(a ratio, a slowdown, packets, RTTs) or in datacenter time (wall time / the bundle's dilation).

Missing data is never a number: a figure with nothing to stand on raises NoData (the tables print
"-", the claims say "not comparable" with its message). Flows that did not finish are left out of
every FCT, slowdown and throughput figure, and counted beside it (Tables.unfinished); a claim that
pools them is not comparable (papers.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ..model import schemes
from ..model.dilation import DATA_WIRE_BYTES, PAYLOAD_BYTES
from . import files
from .bundle import block_label, point_values, read_manifest, read_table
from .stats import BUCKETS, percentile, wilson_interval

KB = 1000  # the papers' queue tables are in KB


class NoData(Exception):
    """The bundle holds nothing a figure can be computed from; str() says what is missing."""


T = TypeVar("T")


def optional(figure: Callable[[], T]) -> T | None:
    """A figure, or None where the bundle has nothing to compute it from (tables print "-")."""
    try:
        return figure()
    except NoData:
        return None


@dataclass
class Tables:
    """A bundle's tables and manifest. A block is (scheme, n, point): n is incast's N (0 for the
    other kinds), point the sweep's value of the other kinds ("load=0.6", "alpha=0.5"; "" for none).
    Selections take None as "any"."""

    manifest: dict
    flows: list[dict]
    rounds: list[dict]
    ports: list[dict]
    rtts: list[dict]
    timeline: list[dict]
    hosts: list[dict] = field(default_factory=list)  # Docker hosts' cgroup figures (none: namespace hosts)
    transport: list[dict] = field(default_factory=list)  # cchost's counters per host and block (bundle.py)

    @classmethod
    def read(cls, directory: Path) -> "Tables":
        """A bundle's tables, once it holds nothing but regular files and folders (files.py)."""
        files.check_bundle(directory)
        return cls(read_manifest(directory), *(read_table(directory, name) for name in (
            "flows", "rounds", "ports", "rtts", "timeline", "hosts", "transport")))

    @property
    def kind(self) -> str:
        return self.manifest.get("kind") or (self.manifest["config"].get("workload") or {}).get("kind", "incast")

    @property
    def dilation(self) -> float:
        return float((self.manifest.get("datacenter") or {}).get("dilation") or 1.0)  # null: not dilated

    @property
    def link_bps(self) -> float:
        """The emulated (wall) link rate."""
        return float(self.manifest["config"]["link"]["rate_mbps"]) * 1e6

    def schemes(self) -> list[str]:
        return list(dict.fromkeys(row["scheme"] for row in self.rounds))

    def points(self, scheme: str | None = None) -> list[str]:
        return list(dict.fromkeys(r["point"] for r in self.rounds if scheme is None or r["scheme"] == scheme))

    def ns(self, scheme: str | None = None) -> list[int]:
        return sorted({_n(r) for r in self.rounds if scheme is None or r["scheme"] == scheme})

    def blocks(self, scheme: str | None = None) -> list[tuple[str, int, str]]:
        """(scheme, n, point) of every block that ran, in the order they ran."""
        return list(dict.fromkeys((r["scheme"], _n(r), r.get("point") or "") for r in self.rounds
                                  if scheme is None or r["scheme"] == scheme))

    def rounds_of(self, scheme: str, point: str | None = None, n: int | None = None) -> list[dict]:
        return [r for r in self.rounds if _in(r, scheme, point, n)]

    @property
    def warmup_flows(self) -> int:
        """The first flows of every block (flow ids count from 1 in start order) that ran only to
        fill the fabric (realistic's workload.warmup_flows): no figure counts them."""
        return int((self.manifest["config"].get("workload") or {}).get("warmup_flows") or 0)

    def flows_of(self, scheme: str, point: str | None = None, n: int | None = None) -> list[dict]:
        """The measured flows that finished (a flow's row is written when it finishes): those after
        the warm-up."""
        warmup = self.warmup_flows
        return [f for f in self.flows if _in(f, scheme, point, n) and (not warmup or int(f["id"]) > warmup)]

    def unfinished(self, scheme: str, point: str | None = None, n: int | None = None) -> int:
        """Flows of the selection that never finished, over its rounds."""
        return sum(int(r["flows"]) - int(r["finished"]) for r in self.rounds_of(scheme, point, n))

    def missing_records(self, scheme: str, point: str | None = None, n: int | None = None) -> int:
        """Flows the rounds count as finished whose row flows.csv lacks (a cut or edited table)."""
        return max(0, sum(int(r["finished"]) for r in self.rounds_of(scheme, point, n))
                   - sum(_in(f, scheme, point, n) for f in self.flows))

    def ports_of(self, scheme: str, point: str | None = None, n: int | None = None) -> list[dict]:
        """Every port's row of the selection: switch ports and host NICs."""
        return [p for p in self.ports if _in(p, scheme, point, n)]

    def switch_ports(self, scheme: str, point: str | None = None, n: int | None = None) -> list[dict]:
        """Ports of switches (not host NICs): where the papers measure queues."""
        return [p for p in self.ports if _in(p, scheme, point, n) and not p["node"].startswith("h")]

    def verdict(self, scheme: str, n: int, point: str) -> str | None:
        """The block's fidelity verdict (PASS, WARN, FAIL); None: the bundle has none for it."""
        for block in (self.manifest.get("fidelity") or {}).get("blocks", []):
            if (block.get("scheme"), _n(block), block.get("point") or "") == (scheme, n, point):
                return block.get("status")
        return None

    def config_value(self, dotted: str):
        """A value of the run's config by its dotted key ("workload.cdf"); None if unset. A scheme's
        setting by its name, "schemes.dctcp.params.min_window_segments", is the one its hosts ran:
        unset, cchost's default for a parameter and the transport's RTO floor for its own."""
        config = self.manifest.get("config") or {}
        head, *rest = dotted.split(".")
        if head == "schemes" and len(rest) >= 2:
            return _scheme_setting(config, rest[0], rest[1:])
        return _walk(config, [head, *rest])

    def port_buffer_bytes(self, scheme: str) -> int:
        for s in self.manifest["config"]["schemes"]:
            if s["scheme"] == scheme:
                return int(s["port"]["buffer_bytes"])
        raise NoData(f"the config has no port of {scheme}")


def _walk(value, keys: list[str]):
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _scheme_setting(config: dict, scheme: str, keys: list[str]):
    entry = next((s for s in config.get("schemes") or [] if isinstance(s, dict) and s.get("scheme") == scheme), None)
    if entry is None:
        return None
    value = _walk(entry, keys)
    if value is None and keys == ["rto_min_ms"]:
        return _walk(config, ["transport", "rto_min_ms"])
    if value is None and len(keys) == 2 and keys[0] == "params":
        param = schemes.params(scheme).get(keys[1]) if scheme in schemes.names() else None
        return param.default if param is not None else None
    return value


def _n(row: dict) -> int:
    value = row.get("n")
    return int(float(value)) if value not in ("", None) else 0


def _in(row: dict, scheme: str, point: str | None, n: int | None) -> bool:
    return (row["scheme"] == scheme and (point is None or (row.get("point") or "") == point)
            and (n is None or _n(row) == n))


def load_of(point: str) -> float:
    """The load of a realistic block's point ("load=0.6")."""
    try:
        load = dict(point_values(point)).get("load")
    except ValueError:
        load = None
    if load is None:
        raise NoData(f"{point!r} is not a load")
    return load


def label(scheme: str, point: str | None = None, n: int | None = None) -> str:
    return block_label(scheme, n or 0, point or "")


# Flows: FCTs, slowdowns, throughputs ----------------------------------------------------------

@dataclass(frozen=True)
class FctFigures:
    """The finished flows' FCTs (datacenter seconds) and slowdowns (dilation-free)."""

    flows: int
    mean_s: float
    p50_s: float
    p99_s: float
    max_s: float
    slowdown_mean: float | None  # None: no flow had an ideal FCT to compare with
    slowdown_p50: float | None
    slowdown_p99: float | None

    def quantile_s(self, q: float) -> float:
        return {50: self.p50_s, 99: self.p99_s, 100: self.max_s}[q]


def fcts(tables: Tables, scheme: str, point: str | None = None, n: int | None = None,
         bucket: str | None = None) -> FctFigures:
    """FCT figures of the selection's finished flows (of one size bucket, or all)."""
    flows = [f for f in tables.flows_of(scheme, point, n) if bucket is None or f["bucket"] == bucket]
    if not flows:
        raise NoData(f"no {bucket + ' ' if bucket else ''}flow of {label(scheme, point, n)} finished")
    times = [float(f["fct"]) / tables.dilation for f in flows]
    # An empty (or 0) slowdown: the flow had no ideal FCT to compare with.
    slow = [float(f["slowdown"]) for f in flows if f.get("slowdown") and float(f["slowdown"]) > 0]
    return FctFigures(len(times), statistics.fmean(times), percentile(times, 50), percentile(times, 99), max(times),
                      statistics.fmean(slow) if slow else None, percentile(slow, 50) if slow else None,
                      percentile(slow, 99) if slow else None)


def slowdowns_by_bucket(tables: Tables, scheme: str, point: str) -> dict[str, FctFigures]:
    """Size bucket -> FCT figures of its finished flows, buckets in order (empty ones left out)."""
    present = {f["bucket"] for f in tables.flows_of(scheme, point)}
    return {b: fcts(tables, scheme, point, bucket=b) for b, _, _ in BUCKETS if b in present}


def flow_throughputs_bps(tables: Tables, scheme: str, point: str | None = None) -> list[float]:
    """Each finished flow's throughput in datacenter bit/s (size / FCT, the FCT in datacenter time)."""
    rates = [int(f["size"]) * 8 / (float(f["fct"]) / tables.dilation) for f in tables.flows_of(scheme, point)
             if float(f["fct"]) > 0]
    if not rates:
        raise NoData(f"no flow of {label(scheme, point)} finished")
    return rates


def credit_waste(tables: Tables, scheme: str, point: str | None = None, n: int | None = None) -> float:
    """Credits that reached a sender with nothing left to send, of all credits that reached it: ExpressPass
    Fig. 20's "ratio of credit waste from the sender" (seed 000 line 125). ns2-xpass counts a credit as
    wasted at the sender whenever it arrives after the flow's last data, also once the flow has closed;
    a credit dropped on its way never reaches the sender and is not counted. The hosts' counters of the
    selection's blocks (transport.csv), not the flow records: credits arriving after a flow's record
    was written are counted only there."""
    rows = [r for r in tables.transport if _in(r, scheme, point, n)]
    if not rows:
        raise NoData(f"{label(scheme, point, n)} has no transport counters (a bundle from before they were recorded)")
    received = sum(int(r["credits_received"]) for r in rows)
    if not received:
        raise NoData(f"no credit of {label(scheme, point, n)} reached a sender")
    return sum(int(r["credits_wasted"]) for r in rows) / received


# Queues ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class QueueFigures:
    """Data queues of a set of ports, in bytes on the wire, from the port programs' exact sums."""

    max_bytes: int  # largest data queue any of the ports reached
    mean_bytes: float  # per arrival: the mean queue an admitted frame joined (itself included), over all their frames
    # Over time: each port's queue averaged over the block's traffic span, then over the ports (None: no span).
    time_mean_bytes: float | None

    @property
    def max_kb(self) -> float:
        return self.max_bytes / KB

    @property
    def mean_kb(self) -> float:
        return self.mean_bytes / KB

    @property
    def time_mean_kb(self) -> float | None:
        return None if self.time_mean_bytes is None else self.time_mean_bytes / KB

    @property
    def max_packets(self) -> float:
        return self.max_bytes / DATA_WIRE_BYTES

    @property
    def mean_packets(self) -> float:
        return self.mean_bytes / DATA_WIRE_BYTES

    @property
    def time_mean_packets(self) -> float | None:
        return None if self.time_mean_bytes is None else self.time_mean_bytes / DATA_WIRE_BYTES


def traffic_span_s(tables: Tables, scheme: str, point: str | None = None, n: int | None = None) -> float:
    """Wall seconds from the block's first flow start to its last flow end: the span a queue's time
    average is over (what the papers' simulations average over is their run; ccemu's blocks start and
    end idle, and the idle time outside the traffic would only dilute the average)."""
    flows = [f for f in tables.flows_of(scheme, point, n) if f.get("start") not in (None, "")
             and f.get("end") not in (None, "")]
    if not flows:
        raise NoData(f"no flow of {label(scheme, point, n)} finished with its times: no span to average its queues "
                     "over")
    span = max(float(f["end"]) for f in flows) - min(float(f["start"]) for f in flows)
    if span <= 0:
        raise NoData(f"the flows of {label(scheme, point, n)} span no time")
    return span


def queue_ports(tables: Tables, scheme: str, point: str | None = None, n: int | None = None) -> list[dict]:
    """The ports whose queues an experiment's figures show: the bottleneck port where the kind has
    one (incast, convergence, victim: the port toward the hot receiver), every switch port otherwise
    (realistic, permutation, shuffle: ExpressPass Table 3 takes every switch port)."""
    ports = tables.switch_ports(scheme, point, n)
    bottleneck = [p for p in ports if str(p.get("bottleneck")) == "1"]
    return bottleneck or ports


def queues(tables: Tables, scheme: str, point: str | None = None, n: int | None = None,
           ports: list[dict] | None = None) -> QueueFigures:
    """Max and mean data queues over `ports` (default: queue_ports)."""
    ports = queue_ports(tables, scheme, point, n) if ports is None else ports
    if not ports:
        raise NoData(f"ports.csv has no switch port of {label(scheme, point, n)}")
    if "mean_data_queue_arrival" not in ports[0]:
        raise NoData("ports.csv has no exact queue averages (a bundle from before they were recorded, whose mean "
                     "was the histogram's bucket midpoints)")
    biggest = max(int(p["max_data_queue"]) for p in ports)
    packets = sum(int(p["data_enqueued"]) for p in ports)
    if not packets:
        raise NoData(f"no data packet reached a switch port of {label(scheme, point, n)}")
    per_arrival = sum(float(p["mean_data_queue_arrival"]) * int(p["data_enqueued"]) for p in ports) / packets
    span = optional(lambda: traffic_span_s(tables, scheme, point, n))
    over_time = sum(float(p["data_queue_byte_s"]) for p in ports) / span / len(ports) if span else None
    return QueueFigures(biggest, per_arrival, over_time)


# Incast ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class IncastFigures:
    """One scheme at one N, over its rounds."""

    rounds: int
    finished_rounds: int  # rounds whose every response arrived
    goodput_bps: float | None  # wall: bytes of the finished rounds / their time; None: none finished
    round_mean_s: float | None  # datacenter: a finished round's duration (the query's completion time)
    timeouts: int
    transmissions: int  # data packets sent, first copies and retransmissions
    # Each flow's timeouts among its own transmissions. Seed 002 Table I counts "the times of
    # timeouts among all times of transmissions for one flow randomly selected" (line 117): one
    # flow's share, whose expectation is the mean of these; pooling every flow's packets weighs a
    # flow by its transmissions instead.
    flow_timeout_shares: tuple[float, ...] = ()

    @property
    def timeout_share(self) -> float | None:
        """Timeouts among every flow's transmissions together (pooled)."""
        return self.timeouts / self.transmissions if self.transmissions else None

    @property
    def flow_timeout_share(self) -> float | None:
        """A flow's timeouts among its transmissions, averaged over the flows: the paper's share of
        one flow picked at random, in expectation."""
        return statistics.fmean(self.flow_timeout_shares) if self.flow_timeout_shares else None


def settled(tables: Tables, rows: list[dict]) -> list[dict]:
    """The rounds (or their flows) after the config's workload.settle_rounds: what the incast figures
    count."""
    first = 1 + int(tables.config_value("workload.settle_rounds") or 0)
    return [r for r in rows if int(r["round"]) >= first]


def finished_rounds(rounds: list[dict]) -> list[dict]:
    """The rounds whose every flow finished (an unfinished one has no end)."""
    return [r for r in rounds if int(r["finished"]) == int(r["flows"]) and float(r.get("duration") or 0) > 0]


def goodput_bps(rounds: list[dict]) -> float | None:
    """Goodput as an application doing back-to-back requests sees it (the DCTCP+ paper's incast): the
    bytes of the finished rounds over the time they took, wall; None: none finished."""
    done = finished_rounds(rounds)
    seconds = sum(float(r["duration"]) for r in done)
    return sum(int(r["bytes"]) for r in done) * 8 / seconds if done else None


def round_mean_s(tables: Tables, rounds: list[dict]) -> float | None:
    """A finished round's mean duration, datacenter seconds (the query's completion time); None: none
    finished."""
    done = finished_rounds(rounds)
    return sum(float(r["duration"]) for r in done) / len(done) / tables.dilation if done else None


def incast(tables: Tables, scheme: str, n: int) -> IncastFigures:
    """One scheme at one N: goodput (goodput_bps), a round's duration, timeouts among transmissions,
    over the settled rounds (`settled`); every round counted, the unfinished ones apart."""
    every = tables.rounds_of(scheme, n=n)
    if not every:
        raise NoData(f"{label(scheme, n=n)} did not run")
    rounds, flows = settled(tables, every), settled(tables, tables.flows_of(scheme, n=n))
    # Per flow: its timeouts, and its data packets sent (first copies and retransmissions).
    sent = [(int(f["timeouts"]), math.ceil(int(f["size"]) / PAYLOAD_BYTES) + int(f["retransmits"])) for f in flows]
    return IncastFigures(
        rounds=len(every), finished_rounds=len(finished_rounds(every)), goodput_bps=goodput_bps(rounds),
        round_mean_s=round_mean_s(tables, rounds),
        timeouts=sum(t for t, _ in sent), transmissions=sum(n for _, n in sent),
        flow_timeout_shares=tuple(t / n for t, n in sent if n))


def incast_collapse_n(tables: Tables, scheme: str) -> tuple[int, int] | None:
    """Between which two N of the run the scheme's goodput first falls below half of its best N's:
    (the last N above, the first N below); None: at no N of the run."""
    goodput = {}
    for n in tables.ns(scheme):
        g = incast(tables, scheme, n).goodput_bps
        if g is None:
            raise NoData(f"no round of {label(scheme, n=n)} finished")
        goodput[n] = g
    best = max(goodput.values())
    ns = sorted(goodput)
    for before, n in zip([0] + ns, ns):
        if goodput[n] < best / 2:
            return before, n
    return None


# Convergence -------------------------------------------------------------------------------------
#
@dataclass(frozen=True)
class VictimFigures:
    """TCD's victim scenario (seed 004, 5.1.3), one scheme: the victims' finished flows (from the
    victim senders to their receiver, whose link is never congested) and whether they were taken
    for congested (a CE-flagged CNP came back: a packet of theirs was CE-marked on the way)."""

    flows: int
    ce_marked: int  # victim flows with a CE mark
    ue_marked: int  # victim flows with a UE mark (TCD: crossed a paused, not congested, port)
    mean_slowdown: float
    p99_slowdown: float
    mean_fct_s: float  # datacenter

    @property
    def ce_fraction(self) -> float:
        return self.ce_marked / self.flows

    @property
    def ce_interval(self) -> tuple[float, float]:
        """95 % interval of the marked share (Wilson): how far a run of this many victims pins it."""
        return wilson_interval(self.ce_marked, self.flows)


def victim_flows(tables: Tables, scheme: str) -> list[dict]:
    workload = tables.manifest["config"].get("workload") or {}
    senders, receiver = workload.get("victim_senders", []), workload.get("victim_receiver")
    return [f for f in tables.flows_of(scheme) if f["src"] in senders and f["dst"] == receiver]


def victims(tables: Tables, scheme: str) -> VictimFigures:
    flows = victim_flows(tables, scheme)
    if not flows:
        raise NoData(f"no victim flow of {scheme} finished")
    if any(f.get("cnps_ce") in (None, "") for f in flows):
        raise NoData(f"flows.csv has no CNP counts for {scheme}'s victim flows (a bundle from before they were kept)")
    slowdowns = [float(f["slowdown"]) for f in flows]
    return VictimFigures(
        flows=len(flows), ce_marked=sum(int(f["cnps_ce"]) > 0 for f in flows),
        ue_marked=sum(int(f.get("cnps_ue") or 0) > 0 for f in flows),
        mean_slowdown=statistics.fmean(slowdowns), p99_slowdown=percentile(slowdowns, 99),
        mean_fct_s=statistics.fmean(float(f["fct"]) for f in flows) / tables.dilation)
