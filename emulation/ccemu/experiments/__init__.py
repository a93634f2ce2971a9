"""Running an experiment file: one runner per workload kind over one shared block lifecycle
(base.py): incast.py for incast rounds, flows.py for the kinds whose flows are all known up
front (realistic, permutation, shuffle, convergence)."""

from __future__ import annotations

from ..model.config import ExperimentConfig, IncastWorkload
from .base import ExperimentRunner, WorkloadNotRunnable
from .flows import FLOWS_KINDS, FlowsRunner
from .incast import IncastRunner


def runner_for(config: ExperimentConfig, *args, **kwargs) -> ExperimentRunner:
    """The runner of the config's workload kind; WorkloadNotRunnable when it has none."""
    if isinstance(config.workload, IncastWorkload):
        return IncastRunner(config, *args, **kwargs)
    if isinstance(config.workload, FLOWS_KINDS):
        return FlowsRunner(config, *args, **kwargs)
    raise WorkloadNotRunnable(f"{config.name}: no workload to run (add a `workload:` section)")


__all__ = ["ExperimentRunner", "FlowsRunner", "IncastRunner", "WorkloadNotRunnable", "runner_for"]
