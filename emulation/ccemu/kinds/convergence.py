"""Convergence: senders join one receiver one by one and leave in reverse order; each joining flow's
RTTs to its fair share. Its blocks: one per scheme, and per initial rate alpha for the credit schemes;
its bottleneck: the receiver's link. It records each flow's delivered bytes over time (timeline.csv)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from ..model.config import CREDIT_SCHEMES, ConvergenceWorkload, ExperimentConfig
from ..model.dilation import CREDITED_PAYLOAD_SHARE
from ..model.workloads import Flow, convergence
from ..results import convergence_figures, figures, plotting
from ..results.bundle import BlockKey, point_values
from ..results.figures import Tables
from ..results.markdown import cell, table
from ..results.rows import TimelineRow
from .blocks import BlockSpec, WorkloadNotRunnable
from .kind import Headline, ScheduledKind

PROGRESS_EVERY_MS = 10  # wall: convergence samples each flow's delivered bytes this often


class Convergence(ScheduledKind):
    name = "convergence"
    workload = ConvergenceWorkload

    def blocks(self, config: ExperimentConfig):
        return [BlockSpec(s, BlockKey(s.scheme, (("alpha", a),) if a is not None else ()))
                for s in config.schemes
                for a in (config.workload.alphas if s.scheme in CREDIT_SCHEMES else [None])]

    def progress_total(self, config: ExperimentConfig, block) -> int:
        return config.workload.senders_of(block.scheme.scheme)

    def bottleneck_host(self, config: ExperimentConfig) -> str:
        return config.workload.receiver

    def flows(self, runner, live, rng: random.Random) -> list[Flow]:
        w = live.config.workload
        senders = self.senders(runner, live)
        rtt = max(live.base_rtt_s(src, w.receiver) for src in senders)
        interval = w.interval_rtts_of(live.spec.scheme.scheme) * rtt
        link_bps = live.config.link.rate_mbps * 1e6
        return convergence(w.receiver, senders, interval, link_bps / 8 * CREDITED_PAYLOAD_SHARE)

    def senders(self, runner, live) -> list[str]:
        """Senders as far from the receiver as any host (on a fat-tree: other pods), spread over
        them: every flow has the same base RTT (a flow with a shorter one updates its rate more
        often and takes more than its share, which is not what the figure shows), and the flows
        share only the receiver's link."""
        w = live.config.workload
        others = [h for h in live.hosts if h != w.receiver]
        farthest = max(len(live.net.routing.path(h, w.receiver, 0)) for h in others)
        far = [h for h in others if len(live.net.routing.path(h, w.receiver, 0)) == farthest]
        scheme = live.spec.scheme.scheme
        wanted = w.senders_of(scheme)
        if wanted > len(far):
            key = f"per_scheme.{scheme}.senders" if scheme in w.per_scheme else "senders"
            raise WorkloadNotRunnable(f"{runner.config.name}: workload.{key}: {wanted} senders at the same distance "
                                      f"from {w.receiver} need that many hosts (the topology has {len(far)})")
        step = len(far) / wanted
        return [far[int(i * step)] for i in range(wanted)]

    def receiver_args(self, live, host: str) -> tuple[str, ...]:
        return ("--progress", str(live.workdir / f"{host}.progress"), "--progress-every-ms", str(PROGRESS_EVERY_MS))

    def after_traffic(self, runner, live, receivers: set[str]) -> None:
        """Each received flow's delivered bytes over time (t: seconds after the epoch, as flows.csv)."""
        for host in sorted(receivers):
            path = live.workdir / f"{host}.progress"
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                if line.strip():
                    runner.bundle.add(TimelineRow.of(live.spec.key, json.loads(line)))

    def summary_lines(self, tables: Tables) -> list[str]:
        return _convergence_lines(tables)

    def headline(self, tables: Tables) -> Headline:
        """Each block's median RTTs to the fair share, in the reading its scheme's paper labels (figures.py): the
        credit schemes' until the joining flow reached it, the others' until every flow converged."""
        by_scheme = {}
        for scheme in tables.schemes():
            medians = []
            for point in tables.points(scheme):
                seen = figures.optional(lambda: convergence_figures.convergence(tables, scheme, point))
                joins = (seen.reached if scheme in CREDIT_SCHEMES else seen.converged) if seen else []
                medians.append(cell(seen.median(joins) if seen else None, "{:.1f}")
                               + (f" at {point.replace('=', ' ')}" if point else ""))
            by_scheme[scheme] = ", ".join(medians)
        return Headline("RTTs to the fair share, median over the joining flows (credit schemes: until the joiner "
                        "reached it; the others: until every flow converged; -: not within the run)", by_scheme)

    def points_text(self, tables: Tables) -> str:
        receiver = tables.config_value("workload.receiver")
        return f"senders joining one by one toward {receiver}" if receiver else ""

    def plots(self, tables: Tables, out: Path, plt) -> list[Path]:
        return _plot_convergence(tables, out, plt, self.where(tables))


def _joins(joins: list[float | None], room: list[float]) -> str:
    return ", ".join(f"> {r:.0f}" if j is None else f"{j:.1f}" for j, r in zip(joins, room))


def _convergence_lines(tables: Tables) -> list[str]:
    cells = []
    for scheme in tables.schemes():
        for point in tables.points(scheme):
            alpha = dict(point_values(point)).get("alpha")
            alpha = "-" if alpha is None else f"{alpha:g}"
            try:
                seen = convergence_figures.convergence(tables, scheme, point)
            except figures.NoData as missing:  # what is missing: the timeline, the base RTT, a second flow
                cells.append([scheme, alpha, "-", str(missing), "-", "-", "-"])
                continue
            cells.append([scheme, alpha, f"{seen.rtt_s / tables.dilation * 1e6:.1f}",
                          _joins(seen.reached, seen.reached_room), cell(seen.median(seen.reached), "{:.1f}"),
                          _joins(seen.converged, seen.room), cell(seen.median(seen.converged), "{:.1f}")])
    lines = ["## Convergence: RTTs to the fair share after each flow joins", "",
             *table(["scheme", "alpha", "base RTT us", "reached, per joining flow (RTTs)", "median",
                     "converged, per joining flow (RTTs)", "median"], cells)]
    reading = convergence_figures
    band = f"+-{reading.CONVERGENCE_BAND:.0%}"
    lines += ["", "Reached (the credit schemes' figures label this, and their claims read it): base RTTs from a "
              f"flow's start until its throughput over {reading.REACHED_WINDOW_RTTS:g} base RTTs first is at least "
              f"{1 - reading.CONVERGENCE_BAND:.0%} of its fair share (the link's payload rate / the running flows). "
              f"Converged (DCTCP's claim reads it): until every running flow's throughput over "
              f"{reading.CONVERGENCE_WINDOW_RTTS:g} base RTTs is within {band} of its fair share, and stays so "
              f"{reading.CONVERGENCE_HOLD_RTTS:g} RTTs: DCTCP's flows cross their shares on the way and send in "
              "bursts that alternate RTT by RTT, which a short window reads as convergence. Both read at the "
              "window's middle (ccemu/results/convergence_figures.py says where each number comes from). "
              "\"> x\": not within the x RTTs the "
              "flow had before the next join or leave (for converged, its hold must fit). Bytes sampled at the "
              "receiver by cchost --progress, rates over the real intervals between samples, never above the link "
              f"(plots/throughput_timeline.png: {reading.PLOT_WINDOW_RTTS:g}-RTT windows).", ""]
    return lines


def _plot_convergence(tables: Tables, out: Path, plt, where: str) -> list[Path]:
    blocks = [(s, p) for s in tables.schemes() for p in tables.points(s)]
    if not blocks or not tables.timeline:
        return []
    # Each block on its own time axis: DCTCP's flows join hundreds of RTTs apart, the credit schemes' tens.
    fig, axes = plotting.subplots(plt, len(blocks), 1, figsize=(9, 2.5 * len(blocks) + 0.6), squeeze=False)
    d, payload = tables.dilation, convergence_figures.convergence_payload_bps(tables)
    for ax, (scheme, point) in zip(axes[:, 0], blocks):
        flows = sorted(tables.flows_of(scheme, point), key=lambda f: float(f["start"]))
        rtt = convergence_figures.base_rtt_s(tables, scheme, point, flows[0]["dst"]) if flows else 0.0
        first = float(flows[0]["start"]) if flows else 0.0

        def ms(t: float) -> float:  # wall seconds after the epoch -> datacenter ms after the first start
            return (t - first) / d * 1e3

        # Throughput over windows of PLOT_WINDOW_RTTS (or 50 ms of wall time without a base RTT), as the
        # readings compute theirs, datacenter Gbit/s, at each window's middle; a gap (NaN) breaks the line.
        window = convergence_figures.PLOT_WINDOW_RTTS * rtt or 0.05
        rates = convergence_figures.flow_rates(tables, scheme, point, window)
        order = [f"{f['src']}#{f['id']}" for f in flows]
        names = [k for k in order if k in rates] + sorted(set(rates) - set(order))
        starts = {f"{f['src']}#{f['id']}": float(f["start"]) for f in flows}
        for name, color in zip(names, plotting.shades(scheme, len(names))):
            joined = f", joined at {ms(starts[name]):.1f} ms" if name in starts else ""
            ax.plot([ms(r.t) for r in rates[name]], [r.bytes_per_s * 8 * d / 1e9 for r in rates[name]],
                    color=color, linewidth=1, label=f"{name}{joined}")
        # The fair share the readings judge against: the flows' payload rate over the flows running.
        events = sorted({float(f["start"]) for f in flows} | {float(f["end"]) for f in flows})
        running = [sum(float(f["start"]) <= t < float(f["end"]) for f in flows) for t in events]
        ax.step([ms(t) for t in events], [payload * d / n / 1e9 if n else float("nan") for n in running],
                where="post", color=plotting.LEVEL_COLOR, linestyle="--", linewidth=1, label="fair share")
        ax.set(ylabel="Gbit/s (datacenter)", title=f"{scheme} {point.replace('=', ' ')}".strip(), ylim=(0, None))
        ax.grid(alpha=0.3)
        plotting.legend_beside(ax)
    axes[-1, 0].set(xlabel="time since the block's first flow started (ms, datacenter time)")
    fig.suptitle(plotting.title(f"Convergence: each flow's throughput at the receiver, over "
                                f"{convergence_figures.PLOT_WINDOW_RTTS:g}-RTT windows", where))
    return [plotting.save(fig, out / "throughput_timeline.png")]
