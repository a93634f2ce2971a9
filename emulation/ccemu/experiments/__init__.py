"""Running an experiment file: the kind of its workload (kinds/, one module per kind, one
registry) says its blocks and which traffic runs them over the one block lifecycle (base.py):
incast.py for incast rounds, flows.py for the kinds whose flows are all known up front."""

from __future__ import annotations

from ..model.config import ExperimentConfig
from .base import ExperimentRunner, WorkloadNotRunnable
from .flows import FlowsRunner
from .incast import IncastRunner
from .kinds import KINDS, kind

# The traffic a kind's blocks run (Kind.runner names one).
RUNNERS: dict[str, type[ExperimentRunner]] = {"rounds": IncastRunner, "scheduled": FlowsRunner}


def runner_for(config: ExperimentConfig, *args, **kwargs) -> ExperimentRunner:
    """The runner of the config's workload kind; WorkloadNotRunnable (a config error) when the
    config has no workload."""
    if config.workload is None:
        raise WorkloadNotRunnable(f"{config.name}: no workload to run (add a `workload:` section)")
    found = kind(config.workload.kind)
    return RUNNERS[found.runner](found, config, *args, **kwargs)


__all__ = ["KINDS", "RUNNERS", "ExperimentRunner", "FlowsRunner", "IncastRunner", "WorkloadNotRunnable", "kind",
           "runner_for"]
