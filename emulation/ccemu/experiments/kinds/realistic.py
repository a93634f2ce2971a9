"""Realistic: Poisson flow arrivals between random host pairs at a load, sizes from a CDF (the
ExpressPass and SprayPass realistic workloads). Its blocks: one per scheme and load; no single
bottleneck."""

from __future__ import annotations

import random
from pathlib import Path

from ...model.config import ExperimentConfig, RealisticWorkload
from ...model.workloads import Flow, FlowSizeCdf, poisson_flows
from ...results import figures
from ...results.bundle import BlockKey
from ...results.figures import Tables
from ...results.markdown import cell, or_, save
from ..blocks import BlockSpec
from .kind import ScheduledKind


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

    def plots(self, tables: Tables, out: Path, plt) -> list[Path]:
        return _plot_realistic(tables, out, plt)


def _realistic_lines(tables: Tables) -> list[str]:
    lines = ["## Realistic workload: FCT slowdown per size bucket and load; switch queues", "",
             "| scheme | load | flows | unfinished | mean FCT ms | slowdown mean | p99 | S | M | L | XL | "
             "max queue KB (pkts) | mean queue over time KB (pkts) | mean queue at arrival KB (pkts) | data drops | "
             "credit waste |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for scheme in tables.schemes():
        for point in sorted(tables.points(scheme), key=figures.load_of):
            fct = figures.optional(lambda: figures.fcts(tables, scheme, point))
            buckets = figures.slowdowns_by_bucket(tables, scheme, point)
            q = figures.optional(lambda: figures.queues(tables, scheme, point))
            waste = figures.optional(lambda: figures.credit_waste(tables, scheme, point))
            lines.append(
                f"| {scheme} | {figures.load_of(point):g} | {fct.flows if fct else 0} | "
                f"{tables.unfinished(scheme, point)} | {cell(1e3 * fct.mean_s if fct else None, '{:.3f}')} | "
                f"{cell(fct and fct.slowdown_mean)} | {cell(fct and fct.slowdown_p99)} | "
                + " | ".join(cell(buckets[b].slowdown_mean) if b in buckets else "-" for b in ("S", "M", "L", "XL"))
                + f" | {f'{q.max_kb:.1f} ({q.max_packets:.1f})' if q else '-'} | "
                f"{f'{q.time_mean_kb:.3f} ({q.time_mean_packets:.3f})' if q and q.time_mean_kb is not None else '-'} | "
                f"{f'{q.mean_kb:.2f} ({q.mean_packets:.2f})' if q else '-'} | "
                f"{sum(int(p['data_dropped']) for p in tables.switch_ports(scheme, point))} | "
                f"{cell(waste, '{:.1%}')} |")
    lines += ["", "Slowdown = FCT / the flow's ideal FCT (half its pair's base RTT plus its bytes at the link rate: "
              "sent at once, alone; an FCT ends when the receiver has every byte): "
              "dilation-free; S/M/L/XL: mean slowdown per size bucket; finished flows only (unfinished: counted "
              "apart). Queues over every switch port (not host NICs), in KB and in full frames, from the port "
              "programs' exact sums: the largest any port reached; each port's queue averaged over time (from the "
              "first flow's start to the last one's end), then over the ports (ExpressPass Table 3's average: the "
              "claims read this one); and the mean queue a data frame joined on arrival, itself included, over every "
              "port's frames.", ""]
    return lines


def _plot_realistic(tables: Tables, out: Path, plt) -> list[Path]:
    buckets, nan = ("S", "M", "L", "XL"), float("nan")
    fig, axes = plt.subplots(1, len(tables.points()) or 1, figsize=(4 * max(1, len(tables.points())), 3.6),
                             sharey=True, squeeze=False)
    for ax, point in zip(axes[0], sorted(tables.points(), key=figures.load_of)):
        for scheme in tables.schemes():
            by = figures.slowdowns_by_bucket(tables, scheme, point)
            ax.plot(buckets, [or_(by[b].slowdown_mean, nan) if b in by else nan for b in buckets], marker="o",
                    label=scheme)
        ax.set(title=f"load {figures.load_of(point):g}", xlabel="flow size bucket", yscale="log")
        ax.grid(alpha=0.3)
    axes[0][0].set(ylabel="mean FCT slowdown")
    axes[0][-1].legend()
    written = [save(fig, out / "slowdown_by_size.png")]

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for scheme in tables.schemes():
        points = sorted(tables.points(scheme), key=figures.load_of)
        loads = [figures.load_of(p) for p in points]
        seen = [figures.optional(lambda p=p: figures.queues(tables, scheme, p)) for p in points]
        left.plot(loads, [q.max_kb if q else nan for q in seen], marker="o", label=scheme)
        right.plot(loads, [or_(q.time_mean_kb, nan) if q else nan for q in seen], marker="o",
                   label=f"{scheme} over time")
        right.plot(loads, [q.mean_kb if q else nan for q in seen], marker="x", linestyle="--",
                   label=f"{scheme} at arrival")
    left.set(xlabel="load", ylabel="max switch queue (KB)", title="Max queue vs load", ylim=(0, None))
    right.set(xlabel="load", ylabel="mean switch queue (KB)", title="Mean queue vs load", ylim=(0, None))
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    return written + [save(fig, out / "queue_vs_load.png")]
