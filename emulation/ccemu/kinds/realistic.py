"""Realistic: Poisson flow arrivals between random host pairs at a load, sizes from a CDF (the
ExpressPass and SprayPass realistic workloads). Its blocks: one per scheme and load; no single
bottleneck."""

from __future__ import annotations

import random
from pathlib import Path

from ..model.config import ExperimentConfig, RealisticWorkload
from ..model.workloads import Flow, FlowSizeCdf, poisson_flows
from ..results import figures, plotting
from ..results.bundle import BlockKey
from ..results.figures import Tables
from ..results.markdown import cell, or_, table
from ..results.stats import BUCKETS
from .blocks import BlockSpec
from .kind import Headline, ScheduledKind


class Realistic(ScheduledKind):
    name = "realistic"
    workload = RealisticWorkload
    fct_by_bucket = False  # its own table has them, per load

    def blocks(self, config: ExperimentConfig):
        return [BlockSpec(s, BlockKey(s.scheme, (("load", load),))) for s in config.schemes
                for load in config.workload.loads]

    def progress_total(self, config: ExperimentConfig, block) -> int:
        return config.workload.flows

    def manifest_extra(self, config: ExperimentConfig) -> dict:
        return {"mean_flow_bytes": FlowSizeCdf.named(config.workload.cdf).mean()}

    def flows(self, runner, live, rng: random.Random) -> list[Flow]:
        w, config = live.config.workload, runner.config
        load = w.host_link_load(live.spec.key.value("load"), config.topology.counts(), config.link.fabric_share)
        # wall: inter-arrivals come out dilated
        return poisson_flows(live.hosts, FlowSizeCdf.named(w.cdf), load, live.config.link.rate_mbps * 1e6, w.flows,
                             rng)

    def summary_lines(self, tables: Tables) -> list[str]:
        return _realistic_lines(tables)

    def headline(self, tables: Tables) -> Headline:
        """The mean FCT slowdown at every load (the papers' Fig. 19 and SprayPass's Table III read FCTs per load)."""
        loads = sorted(tables.points(), key=figures.load_of)
        by_scheme = {}
        for scheme in tables.schemes():
            seen = [figures.optional(lambda p=p: figures.fcts(tables, scheme, p)) for p in loads]
            by_scheme[scheme] = " / ".join(cell(f.slowdown_mean if f else None) for f in seen)
        return Headline("Mean FCT slowdown (FCT / ideal FCT) at load "
                        + " / ".join(f"{figures.load_of(p):g}" for p in loads), by_scheme)

    def points_text(self, tables: Tables) -> str:
        cdf = tables.config_value("workload.cdf")
        loads = ", ".join(f"{figures.load_of(p):g}" for p in sorted(tables.points(), key=figures.load_of))
        return ", ".join(part for part in (f"{cdf} flow sizes" if cdf else "", f"loads {loads}" if loads else "")
                         if part)

    def plots(self, tables: Tables, out: Path, plt) -> list[Path]:
        return _plot_realistic(tables, out, plt, self.where(tables))


REALISTIC_COLUMNS = ["scheme", "load", "flows", "unfinished", "mean FCT ms", "slowdown mean", "p99", "S", "M", "L",
                     "XL", "max queue KB (pkts)", "mean queue over time KB (pkts)", "mean queue at arrival KB (pkts)",
                     "data drops", "credit waste"]


def _realistic_lines(tables: Tables) -> list[str]:
    cells = []
    for scheme in tables.schemes():
        for point in sorted(tables.points(scheme), key=figures.load_of):
            fct = figures.optional(lambda: figures.fcts(tables, scheme, point))
            buckets = figures.slowdowns_by_bucket(tables, scheme, point)
            q = figures.optional(lambda: figures.queues(tables, scheme, point))
            waste = figures.optional(lambda: figures.credit_waste(tables, scheme, point))
            cells.append([
                scheme, f"{figures.load_of(point):g}", str(fct.flows if fct else 0),
                str(tables.unfinished(scheme, point)),
                cell(1e3 * fct.mean_s if fct else None, "{:.3f}"), cell(fct and fct.slowdown_mean),
                cell(fct and fct.slowdown_p99),
                *(cell(buckets[b].slowdown_mean) if b in buckets else "-" for b in ("S", "M", "L", "XL")),
                f"{q.max_kb:.1f} ({q.max_packets:.1f})" if q else "-",
                f"{q.time_mean_kb:.3f} ({q.time_mean_packets:.3f})" if q and q.time_mean_kb is not None else "-",
                f"{q.mean_kb:.2f} ({q.mean_packets:.2f})" if q else "-",
                str(sum(int(p["data_dropped"]) for p in tables.switch_ports(scheme, point))), cell(waste, "{:.1%}")])
    # Three tables: the flows' FCTs, their slowdown per size bucket, the switch queues.
    lines = ["## Realistic workload: FCT slowdown per size bucket and load; switch queues", "",
             *table(REALISTIC_COLUMNS, cells, keys=2, breaks=("S", "max queue KB (pkts)"))]
    if tables.warmup_flows:
        lines += ["", f"Warm-up: the first {tables.warmup_flows} flows of each load (by start) ran to fill the fabric "
                      "and are in no FCT figure (flows.csv keeps them); the queues are over the whole load's run."]
    lines += ["", "Slowdown = FCT / the flow's ideal FCT (half its pair's base RTT plus its bytes at the link rate: "
              "sent at once, alone; an FCT ends when the receiver has every byte): "
              "dilation-free; S/M/L/XL: mean slowdown per size bucket; finished flows only (unfinished: counted "
              "apart). Queues over every switch port (not host NICs), in KB and in full frames, from the port "
              "programs' exact sums: the largest any port reached; each port's queue averaged over time (from the "
              "first flow's start to the last one's end), then over the ports (ExpressPass Table 3's average: the "
              "claims read this one); and the mean queue a data frame joined on arrival, itself included, over every "
              "port's frames.", ""]
    return lines


def _plot_realistic(tables: Tables, out: Path, plt, where: str) -> list[Path]:
    buckets, nan = ("S", "M", "L", "XL"), float("nan")
    points = sorted(tables.points(), key=figures.load_of)
    fig, axes = plotting.subplots(plt, 1, len(points) or 1, figsize=(4 * max(1, len(points)), 3.8), sharey=True,
                             squeeze=False)
    for ax, point in zip(axes[0], points):
        for scheme in tables.schemes():
            by = figures.slowdowns_by_bucket(tables, scheme, point)
            ax.plot(buckets, [or_(by[b].slowdown_mean, nan) if b in by else nan for b in buckets], marker="o",
                    color=plotting.scheme_color(scheme), label=scheme)
        ax.set(title=f"load {figures.load_of(point):g}", xlabel="flow size bucket (bytes: in the title)",
               yscale="log")
        ax.grid(alpha=0.3)
    plotting.plain_log_ticks(axes[0][0], "y")
    axes[0][0].set(ylabel="mean FCT slowdown (FCT / ideal FCT; log scale)")
    sizes = ", ".join(f"{name} under {plotting.plain_bytes(high)}" if not low else
                      f"{name} over {plotting.plain_bytes(low)}" if high == float("inf") else
                      f"{name} {plotting.plain_bytes(low)}-{plotting.plain_bytes(high)}" for name, low, high in BUCKETS)
    fig.suptitle(plotting.title(f"Mean FCT slowdown per flow size ({sizes})", where))
    plotting.legend_below(fig, axes[0])
    written = [plotting.save(fig, out / "slowdown_by_size.png")]

    fig, (left, right) = plotting.subplots(plt, 1, 2, figsize=(10, 4))
    for scheme in tables.schemes():
        color = plotting.scheme_color(scheme)
        mine = sorted(tables.points(scheme), key=figures.load_of)
        loads = [figures.load_of(p) for p in mine]
        seen = [figures.optional(lambda p=p: figures.queues(tables, scheme, p)) for p in mine]
        left.plot(loads, [q.max_kb if q else nan for q in seen], marker="o", color=color, label=scheme)
        right.plot(loads, [or_(q.time_mean_kb, nan) if q else nan for q in seen], marker="o", color=color,
                   label=f"{scheme} over time")
        right.plot(loads, [q.mean_kb if q else nan for q in seen], marker="x", linestyle="--", color=color,
                   label=f"{scheme} at arrival")
    plotting.mark_levels(left, plotting.queue_levels(tables), axis="y")  # before the limits: they take it in
    left.set(ylabel="max switch queue (KB on the wire)", title="Largest queue of any switch port", ylim=(0, None))
    right.set(ylabel="mean switch queue (KB on the wire)", ylim=(0, None),
              title="Mean queue: over time (solid), at a frame's arrival (dashed)")
    loaded = {"tor_uplinks": "the ToR uplinks'", "host_links": "the host links'"}.get(
        tables.config_value("workload.load_on"), "the loaded links'")
    for ax in (left, right):
        ax.set(xlabel=f"offered load (share of {loaded} rate)")
        ax.grid(alpha=0.3)
    fig.suptitle(plotting.title("Switch queues against load", where))
    plotting.legend_below(fig, [left])
    return written + [plotting.save(fig, out / "queue_vs_load.png")]
