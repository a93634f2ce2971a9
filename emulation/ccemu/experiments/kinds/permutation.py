"""Permutation (SprayPass): every host sends one long flow to another, no two to the same receiver.
One block per scheme; no single bottleneck."""

from __future__ import annotations

import random
from pathlib import Path

from ...model.config import ExperimentConfig, PermutationWorkload
from ...model.workloads import Flow, permutation
from ...results import figures
from ...results.figures import Tables
from ...results.markdown import save
from ...results.stats import jain_fairness
from .kind import ScheduledKind


class Permutation(ScheduledKind):
    name = "permutation"
    workload = PermutationWorkload

    def progress_total(self, config: ExperimentConfig, block) -> int:
        return config.topology.counts().hosts

    def flows(self, runner, live, rng: random.Random) -> list[Flow]:
        return permutation(live.hosts, live.config.workload.size_bytes, rng)

    def summary_lines(self, tables: Tables) -> list[str]:
        return _permutation_lines(tables)

    def plots(self, tables: Tables, out: Path, plt) -> list[Path]:
        return _plot_permutation(tables, out, plt)


def _permutation_lines(tables: Tables) -> list[str]:
    lines = ["## Permutation: per-flow throughput", "",
             "| scheme | flows | mean Gbit/s | min | max | mean / link | Jain fairness | unfinished |",
             "|---|---|---|---|---|---|---|---|"]
    dc_link = tables.link_bps * tables.dilation
    for scheme in tables.schemes():
        tput = figures.optional(lambda: figures.flow_throughputs_bps(tables, scheme))
        unfinished = tables.unfinished(scheme)
        if not tput:
            lines.append(f"| {scheme} | 0 | - | - | - | - | - | {unfinished} |")
            continue
        mean = sum(tput) / len(tput)
        lines.append(f"| {scheme} | {len(tput)} | {mean / 1e9:.2f} | {min(tput) / 1e9:.2f} | {max(tput) / 1e9:.2f} | "
                     f"{mean / dc_link:.2f} | {jain_fairness(tput):.3f} | {unfinished} |")
    lines += ["", "A finished flow's throughput is its size over its FCT, in datacenter Gbit/s.", ""]
    return lines


def _plot_permutation(tables: Tables, out: Path, plt) -> list[Path]:
    fig, ax = plt.subplots(figsize=(7, 4))
    schemes = tables.schemes()
    width = 0.8 / max(1, len(schemes))
    for i, scheme in enumerate(schemes):
        # A block with no finished flow (never ran, or every flow cut): no bars, as its summary row has none.
        tput = sorted(figures.optional(lambda: figures.flow_throughputs_bps(tables, scheme)) or [], reverse=True)
        ax.bar([x + i * width for x in range(len(tput))], [t / 1e9 for t in tput], width=width, label=scheme)
    ax.set(xlabel="flows, fastest first", ylabel="throughput (Gbit/s, datacenter)", title="Permutation")
    ax.grid(alpha=0.3, axis="y")
    ax.legend()
    return [save(fig, out / "flow_throughput.png")]
