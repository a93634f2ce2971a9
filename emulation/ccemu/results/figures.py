"""The figures of each kind of experiment, from a bundle's tables alone: what summary.md shows
and what the papers' claims are compared on (papers.py). Every figure is dilation-free (a
ratio, a slowdown, packets, RTTs) or converted to datacenter time by the bundle's dilation.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..model.dilation import DATA_WIRE_BYTES
from .bundle import read_table
from .stats import percentile

KB = 1000  # the papers' queue tables are in KB


@dataclass
class Tables:
    """A bundle's tables and manifest."""

    manifest: dict
    flows: list[dict]
    rounds: list[dict]
    ports: list[dict]
    rtts: list[dict]
    timeline: list[dict]
    hosts: list[dict] = field(default_factory=list)  # Docker hosts' cgroup figures (none: namespace hosts)

    @classmethod
    def read(cls, directory: Path) -> "Tables":
        manifest = json.loads((directory / "manifest.json").read_text())
        return cls(manifest, *(read_table(directory, name) for name in ("flows", "rounds", "ports", "rtts",
                                                                          "timeline", "hosts")))

    @property
    def kind(self) -> str:
        return self.manifest.get("kind") or (self.manifest["config"].get("workload") or {}).get("kind", "incast")

    @property
    def dilation(self) -> float:
        return float(self.manifest.get("datacenter", {}).get("dilation", 1.0))

    @property
    def link_bps(self) -> float:
        """The emulated (wall) link rate."""
        return float(self.manifest["config"]["link"]["rate_mbps"]) * 1e6

    def schemes(self) -> list[str]:
        return list(dict.fromkeys(row["scheme"] for row in self.rounds))

    def points(self, scheme: str | None = None) -> list[str]:
        return list(dict.fromkeys(r["point"] for r in self.rounds if scheme is None or r["scheme"] == scheme))

    def flows_of(self, scheme: str, point: str | None = None) -> list[dict]:
        return [f for f in self.flows if f["scheme"] == scheme and (point is None or f.get("point", "") == point)]

    def unfinished(self, scheme: str, point: str | None = None) -> int:
        """Flows of the scheme (at the point) that never finished, over its rounds."""
        return sum(int(r["flows"]) - int(r["finished"]) for r in self.rounds
                   if r["scheme"] == scheme and (point is None or r.get("point", "") == point))

    def switch_ports(self, scheme: str, point: str | None = None) -> list[dict]:
        """Ports of switches (not host NICs): where the papers measure queues."""
        return [p for p in self.ports if p["scheme"] == scheme and (point is None or p.get("point", "") == point)
                and not p["node"].startswith("h")]


def load_of(point: str) -> float:
    return float(point.split("=")[1])


# Realistic -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class QueueFigures:
    max_kb: float  # largest queue any switch port reached
    mean_kb: float  # mean queue a packet found at a switch port
    max_packets: float
    mean_packets: float


def queues(tables: Tables, scheme: str, point: str | None = None) -> QueueFigures:
    ports = tables.switch_ports(scheme, point)
    biggest = max((int(p["max_data_queue"]) for p in ports), default=0)
    packets = sum(int(p["data_enqueued"]) for p in ports)
    mean = sum(float(p["mean_data_queue"]) * int(p["data_enqueued"]) for p in ports) / packets if packets else 0.0
    return QueueFigures(biggest / KB, mean / KB, biggest / DATA_WIRE_BYTES, mean / DATA_WIRE_BYTES)


def slowdowns_by_bucket(tables: Tables, scheme: str, point: str) -> dict[str, tuple[int, float, float]]:
    """Bucket -> (flows, mean slowdown, p99 slowdown)."""
    grouped: dict[str, list[float]] = defaultdict(list)
    for f in tables.flows_of(scheme, point):
        grouped[f["bucket"]].append(float(f["slowdown"]))
    order = sorted(grouped, key=lambda bucket: "SMLX".index(bucket[0]))
    return {b: (len(grouped[b]), statistics.fmean(grouped[b]), percentile(grouped[b], 99)) for b in order}


def mean_fct_s(tables: Tables, scheme: str, point: str | None = None, bucket: str | None = None) -> float | None:
    fcts = [float(f["fct"]) for f in tables.flows_of(scheme, point) if bucket is None or f["bucket"] == bucket]
    return statistics.fmean(fcts) if fcts else None


def credit_waste(tables: Tables, scheme: str, point: str | None = None) -> float | None:
    flows = tables.flows_of(scheme, point)
    sent = sum(int(f["credits_sent"]) for f in flows)
    return sum(int(f["credits_wasted"]) for f in flows) / sent if sent else None


# Permutation ---------------------------------------------------------------------------------

def flow_throughputs_bps(tables: Tables, scheme: str) -> list[float]:
    """Each flow's throughput in datacenter bit/s (size / FCT, the FCT in datacenter time)."""
    return [int(f["size"]) * 8 / (float(f["fct"]) / tables.dilation) for f in tables.flows_of(scheme)
            if float(f["fct"]) > 0]


# Shuffle -------------------------------------------------------------------------------------

def fct_quantile_s(tables: Tables, scheme: str, q: float) -> float | None:
    """FCT quantile (0-100; 100 = max) in datacenter seconds."""
    fcts = [float(f["fct"]) / tables.dilation for f in tables.flows_of(scheme)]
    return percentile(fcts, q) if fcts else None


# Convergence ---------------------------------------------------------------------------------

CONVERGENCE_BAND = 0.2  # every flow within +-20 % of the fair share ...
CONVERGENCE_WINDOW_RTTS = 2  # ... over a window this long (fewer packets would be all noise) ...
CONVERGENCE_HOLD_RTTS = 4  # ... for every such window that starts within this long (not a passing crossing)


def bytes_at(samples: list[tuple[float, int]], t: float) -> float:
    """Cumulative bytes at time t, linear between samples (0 before the first)."""
    if not samples or t <= samples[0][0]:
        return 0.0 if not samples or t < samples[0][0] else float(samples[0][1])
    for (t0, b0), (t1, b1) in zip(samples, samples[1:]):
        if t0 <= t <= t1:
            return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else float(b1)
    return float(samples[-1][1])


def base_rtt_s(tables: Tables, scheme: str, point: str, dst: str) -> float:
    """The longest base RTT (wall) toward `dst` in the block's rtts table."""
    rows = [r for r in tables.rtts if r["scheme"] == scheme and r.get("point", "") == point and dst in (r["src"],
                                                                                                      r["dst"])]
    return max((max(float(r["floor_ms"]), float(r["target_ms"])) / 1e3 for r in rows), default=0.0)


@dataclass(frozen=True)
class Convergence:
    joins: list[float | None]  # RTTs each joining flow (after the first) took to reach fair share; None: never
    rtt_s: float  # wall

    @property
    def median_rtts(self) -> float | None:
        reached = [j for j in self.joins if j is not None]
        return statistics.median(reached) if reached and len(reached) * 2 > len(self.joins) else None


def convergence(tables: Tables, scheme: str, point: str, payload_bps: float) -> Convergence | None:
    """For each flow that joins (the 2nd..Nth start), how many base RTTs after its start every
    running flow's throughput, over a forward window of CONVERGENCE_WINDOW_RTTS, is first within
    CONVERGENCE_BAND of the fair share of `payload_bps` (wall), and stays so for every window
    that starts within the next CONVERGENCE_HOLD_RTTS."""
    flows = sorted(tables.flows_of(scheme, point), key=lambda f: float(f["start"]))
    samples: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for s in tables.timeline:
        if s["scheme"] == scheme and s["point"] == point:
            samples[f"{s['src']}#{s['id']}"].append((float(s["t"]), int(s["bytes"])))
    if len(flows) < 2 or not samples:
        return None
    rtt = base_rtt_s(tables, scheme, point, flows[0]["dst"])
    if rtt <= 0:
        return None
    window = CONVERGENCE_WINDOW_RTTS * rtt
    first = float(flows[0]["start"])
    # Timeline samples and flow starts are both seconds after the block's epoch.
    series = {f"{f['src']}#{f['id']}": sorted((t - first, b) for t, b in samples.get(f"{f['src']}#{f['id']}", []))
              for f in flows}
    starts = [float(f["start"]) - first for f in flows]
    ends = [float(f["end"]) - first for f in flows]
    joins: list[float | None] = []
    for k in range(1, len(flows)):
        join, until = starts[k], starts[k + 1] if k + 1 < len(flows) else min(ends[:k + 1])
        step = rtt / 4
        fair_at = [_fair(series, starts, ends, t, window, payload_bps)
                   for t in _steps(join, until - window, step)]
        hold = round(CONVERGENCE_HOLD_RTTS * rtt / step)
        reached = next((i * step / rtt for i in range(len(fair_at) - hold) if all(fair_at[i:i + hold + 1])), None)
        joins.append(reached)
    return Convergence(joins, rtt)


def _steps(start: float, stop: float, step: float) -> list[float]:
    return [start + i * step for i in range(int((stop - start) / step) + 1)] if stop >= start else []


def _fair(series: dict[str, list[tuple[float, int]]], starts: list[float], ends: list[float], t: float,
          window: float, payload_bps: float) -> bool:
    """Whether every flow running through [t, t + window] got its fair share, within the band."""
    running = [key for key, s, e in zip(series, starts, ends) if s <= t and e >= t + window]
    if not running:
        return False
    fair = payload_bps / 8 * window / len(running)
    return all(abs(bytes_at(series[key], t + window) - bytes_at(series[key], t) - fair) <= CONVERGENCE_BAND * fair
               for key in running)


# Incast --------------------------------------------------------------------------------------

def incast_goodput_fraction(tables: Tables, scheme: str, n_min: int) -> float | None:
    """Mean goodput of the rounds with N >= n_min, as a fraction of the link rate; a round with
    unfinished flows counts as 0 (its response never completed)."""
    rounds = [r for r in tables.rounds if r["scheme"] == scheme and int(r["n"]) >= n_min]
    return statistics.fmean(float(r["goodput_bps"]) for r in rounds) / tables.link_bps if rounds else None


def incast_timeouts(tables: Tables, scheme: str, n_min: int) -> int | None:
    flows = [f for f in tables.flows_of(scheme) if int(f["n"]) >= n_min]
    return sum(int(f["timeouts"]) for f in flows) if flows else None


def incast_collapse_n(tables: Tables, scheme: str) -> int | None:
    """The smallest N whose goodput falls below half of the scheme's best N's (None: never); an
    unfinished round counts as 0."""
    by_n: dict[int, list[float]] = defaultdict(list)
    for r in tables.rounds:
        if r["scheme"] == scheme:
            by_n[int(r["n"])].append(float(r["goodput_bps"]))
    means = {n: statistics.fmean(v) for n, v in sorted(by_n.items())}
    if not means:
        return None
    best = max(means.values())
    return next((n for n, g in means.items() if g < best / 2), None)


@dataclass(frozen=True)
class VictimFigures:
    """TCD's victim scenario (seed 004, 5.1.3), one scheme: the victims' flows (from the victim
    senders to their receiver, whose link is never congested) and whether they were taken for
    congested (a CE-flagged CNP came back: a packet of theirs was CE-marked on the way)."""

    flows: int
    ce_marked: int  # victim flows with a CE mark
    ue_marked: int  # victim flows with a UE mark (TCD: crossed a paused, not congested, port)
    mean_slowdown: float
    p99_slowdown: float
    mean_fct_s: float  # wall

    @property
    def ce_fraction(self) -> float:
        return self.ce_marked / self.flows if self.flows else 0.0


def victim_flows(tables: Tables, scheme: str) -> list[dict]:
    workload = tables.manifest["config"].get("workload") or {}
    senders, receiver = workload.get("victim_senders", []), workload.get("victim_receiver")
    return [f for f in tables.flows_of(scheme) if f["src"] in senders and f["dst"] == receiver]


def victims(tables: Tables, scheme: str) -> VictimFigures | None:
    flows = victim_flows(tables, scheme)
    if not flows:
        return None
    slowdowns = [float(f["slowdown"]) for f in flows]
    return VictimFigures(
        flows=len(flows), ce_marked=sum(int(f.get("cnps_ce") or 0) > 0 for f in flows),
        ue_marked=sum(int(f.get("cnps_ue") or 0) > 0 for f in flows),
        mean_slowdown=statistics.fmean(slowdowns), p99_slowdown=percentile(slowdowns, 99),
        mean_fct_s=statistics.fmean(float(f["fct"]) for f in flows))
