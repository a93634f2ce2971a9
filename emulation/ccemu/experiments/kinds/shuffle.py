"""Shuffle (ExpressPass's MapReduce shuffle): each of every host's tasks sends size_bytes to every
other host, all at once. One block per scheme; no single bottleneck."""

from __future__ import annotations

import random

from ...model.config import ExperimentConfig, ShuffleWorkload
from ...model.workloads import Flow, shuffle
from ...results import figures
from ...results.figures import Tables
from ...results.markdown import cell
from .kind import ScheduledKind


class Shuffle(ScheduledKind):
    name = "shuffle"
    workload = ShuffleWorkload

    def progress_total(self, config: ExperimentConfig, block) -> int:
        hosts = config.topology.counts().hosts
        return hosts * config.workload.tasks_per_host * (hosts - 1)

    def flows(self, runner, live, rng: random.Random) -> list[Flow]:
        w = live.config.workload
        return shuffle(live.hosts, w.tasks_per_host, w.size_bytes)

    def summary_lines(self, tables: Tables) -> list[str]:
        return _shuffle_lines(tables)


def _shuffle_lines(tables: Tables) -> list[str]:
    lines = ["## Shuffle: FCT quantiles", "", "| scheme | flows | p50 ms | p99 ms | max ms | unfinished |",
             "|---|---|---|---|---|---|"]
    for scheme in tables.schemes():
        fct = figures.optional(lambda: figures.fcts(tables, scheme))
        cells = " | ".join(cell(1e3 * fct.quantile_s(q) if fct else None) for q in (50, 99, 100))
        lines.append(f"| {scheme} | {fct.flows if fct else 0} | {cells} | {tables.unfinished(scheme)} |")
    return lines + ["", "Datacenter time, finished flows.", ""]
