"""Shuffle (ExpressPass's MapReduce shuffle): each of every host's tasks sends size_bytes to every
other host, all at once. One block per scheme; no single bottleneck."""

from __future__ import annotations

import random

from ..model.config import ExperimentConfig, ShuffleWorkload
from ..model.workloads import Flow, shuffle
from ..results import figures, plotting
from ..results.figures import Tables
from ..results.markdown import cell, table
from .kind import Headline, ScheduledKind


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

    def headline(self, tables: Tables) -> Headline:
        """The tail: ExpressPass's shuffle claim is its 99th percentile (and maximum) FCT against DCTCP's."""
        by_scheme = {}
        for scheme in tables.schemes():
            fct = figures.optional(lambda: figures.fcts(tables, scheme))
            by_scheme[scheme] = cell(1e3 * fct.p99_s if fct else None)
        return Headline("FCT p99, ms (datacenter time)", by_scheme)

    def points_text(self, tables: Tables) -> str:
        tasks, size = tables.config_value("workload.tasks_per_host"), tables.config_value("workload.size_bytes")
        return f"{tasks} tasks per host, {plotting.plain_bytes(size)} to every other host" if tasks and size else ""


def _shuffle_lines(tables: Tables) -> list[str]:
    cells = []
    for scheme in tables.schemes():
        fct = figures.optional(lambda: figures.fcts(tables, scheme))
        cells.append([scheme, str(fct.flows if fct else 0),
                      *(cell(1e3 * fct.quantile_s(q) if fct else None) for q in (50, 99, 100)),
                      str(tables.unfinished(scheme))])
    return ["## Shuffle: FCT quantiles", "",
            *table(["scheme", "flows", "p50 ms", "p99 ms", "max ms", "unfinished"], cells),
            "", "Datacenter time, finished flows.", ""]
