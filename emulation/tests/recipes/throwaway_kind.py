"""A throwaway kind: CONTRIBUTING.md's "An experiment kind" followed in a copy of the tree by
tests/recipes/recipes.py (copied there as ccemu/kinds/throwaway.py; never imported here). Every host
sends size_bytes to the next host: one block per scheme, no single bottleneck."""

from __future__ import annotations

import random

from ..model.config import ExperimentConfig
from ..model.config.workloads import ThrowawayWorkload
from ..model.workloads import Flow
from ..results import figures
from ..results.figures import Tables
from ..results.markdown import cell, table
from .kind import Headline, ScheduledKind


class Throwaway(ScheduledKind):
    name = "throwaway"
    workload = ThrowawayWorkload

    def progress_total(self, config: ExperimentConfig, block) -> int:
        return config.topology.counts().hosts

    def flows(self, runner, live, rng: random.Random) -> list[Flow]:
        hosts, size = live.hosts, live.config.workload.size_bytes
        return [Flow(src, hosts[(i + 1) % len(hosts)], size) for i, src in enumerate(hosts)]

    def summary_lines(self, tables: Tables) -> list[str]:
        cells = [[scheme, str(_fcts(tables, scheme).flows if _fcts(tables, scheme) else 0),
                  str(tables.unfinished(scheme))] for scheme in tables.schemes()]
        return ["## Throwaway: flows", "", *table(["scheme", "flows", "unfinished"], cells), ""]

    def headline(self, tables: Tables) -> Headline:
        fcts = {scheme: _fcts(tables, scheme) for scheme in tables.schemes()}
        return Headline("FCT p50, ms (datacenter time)",
                        {scheme: cell(1e3 * fct.quantile_s(50) if fct else None) for scheme, fct in fcts.items()})


def _fcts(tables: Tables, scheme: str):
    return figures.optional(lambda: figures.fcts(tables, scheme))
