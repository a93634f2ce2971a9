"""Permutation (SprayPass): every host sends one long flow to another, no two to the same receiver.
One block per scheme; no single bottleneck."""

from __future__ import annotations

import random
from pathlib import Path

from ..model.config import ExperimentConfig, PermutationWorkload
from ..model.workloads import Flow, permutation
from ..results import figures, plotting
from ..results.figures import Tables
from ..results.markdown import table
from ..results.stats import jain_fairness
from .kind import Headline, ScheduledKind


class Permutation(ScheduledKind):
    name = "permutation"
    workload = PermutationWorkload

    def progress_total(self, config: ExperimentConfig, block) -> int:
        return config.topology.counts().hosts

    def flows(self, runner, live, rng: random.Random) -> list[Flow]:
        workload = live.config.workload
        tor_of = None
        if workload.across_tors:
            topo = live.config.topology.build()
            tor_of = {host: topo.attachment(host)[0] for host in live.hosts}
        return permutation(live.hosts, workload.size_bytes, rng, tor_of)

    def summary_lines(self, tables: Tables) -> list[str]:
        return _permutation_lines(tables)

    def headline(self, tables: Tables) -> Headline:
        """The mean flow's throughput and the slowest's (SprayPass's claims read both)."""
        by_scheme = {}
        for scheme in tables.schemes():
            tput = figures.optional(lambda: figures.flow_throughputs_bps(tables, scheme))
            mean = sum(tput) / len(tput) if tput else None
            by_scheme[scheme] = "-" if not tput else (f"{mean / 1e9:.2f} ({mean / _datacenter_link_bps(tables):.2f}; "
                                                      f"slowest {min(tput) / 1e9:.2f})")
        return Headline("Mean flow throughput, Gbit/s at the datacenter rate (share of the link; slowest flow)",
                        by_scheme)

    def points_text(self, tables: Tables) -> str:
        size = tables.config_value("workload.size_bytes")
        return f"one {plotting.plain_bytes(size)} flow per host" if size else ""

    def plots(self, tables: Tables, out: Path, plt) -> list[Path]:
        return _plot_permutation(tables, out, plt, self.where(tables))


def _datacenter_link_bps(tables: Tables) -> float:
    return tables.link_bps * tables.dilation


def _permutation_lines(tables: Tables) -> list[str]:
    cells = []
    dc_link = _datacenter_link_bps(tables)
    for scheme in tables.schemes():
        tput = figures.optional(lambda: figures.flow_throughputs_bps(tables, scheme))
        unfinished = tables.unfinished(scheme)
        if not tput:
            cells.append([scheme, "0", "-", "-", "-", "-", "-", str(unfinished)])
            continue
        mean = sum(tput) / len(tput)
        cells.append([scheme, str(len(tput)), f"{mean / 1e9:.2f}", f"{min(tput) / 1e9:.2f}", f"{max(tput) / 1e9:.2f}",
                      f"{mean / dc_link:.2f}", f"{jain_fairness(tput):.3f}", str(unfinished)])
    lines = ["## Permutation: per-flow throughput", "",
             *table(["scheme", "flows", "mean Gbit/s", "min", "max", "mean / link", "Jain fairness", "unfinished"],
                    cells)]
    lines += ["", "A finished flow's throughput is its size over its FCT, in datacenter Gbit/s.", ""]
    return lines


def _plot_permutation(tables: Tables, out: Path, plt, where: str) -> list[Path]:
    fig, ax = plotting.subplots(plt, figsize=(7, 4))
    schemes = tables.schemes()
    width = 0.8 / max(1, len(schemes))
    for i, scheme in enumerate(schemes):
        # A block with no finished flow (never ran, or every flow cut): no bars, as its summary row has none.
        tput = sorted(figures.optional(lambda: figures.flow_throughputs_bps(tables, scheme)) or [], reverse=True)
        ax.bar([x + i * width for x in range(len(tput))], [t / 1e9 for t in tput], width=width,
               color=plotting.scheme_color(scheme), label=scheme)
    ax.axhline(_datacenter_link_bps(tables) / 1e9, color=plotting.LEVEL_COLOR, linestyle=":", linewidth=1,
               label="link rate")
    ax.set(xlabel="finished flows, fastest first (rank)", ylabel="throughput (Gbit/s, datacenter rate)",
           title=plotting.title("Permutation: each flow's throughput (size / FCT)", where))
    ax.grid(alpha=0.3, axis="y")
    plotting.legend_beside(ax)
    return [plotting.save(fig, out / "flow_throughput.png")]
