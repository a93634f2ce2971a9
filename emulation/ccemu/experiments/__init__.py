"""Running an experiment file: the kind of its workload (kinds/, one module per kind, one
registry) says its blocks and which traffic runs them over the one block lifecycle (base.py):
incast.py for incast rounds, flows.py for the kinds whose flows are all known up front."""

from __future__ import annotations

from ..model.config import ExperimentConfig
from .base import ExperimentRunner, WorkloadNotRunnable
from .flows import FlowsRunner
from .incast import IncastRunner
from .kinds import KINDS, Kind, kind

# The traffic a kind's blocks run (Kind.runner names one).
RUNNERS: dict[str, type[ExperimentRunner]] = {"rounds": IncastRunner, "scheduled": FlowsRunner}


def runnable_kind(config: ExperimentConfig, source: str | None = None) -> Kind:
    """The kind of the config's workload; WorkloadNotRunnable (a config error, its line starting
    with `source`, the config's name by default) when it has no workload or no schemes."""
    source = source or config.name
    if config.workload is None:
        raise WorkloadNotRunnable(f"{source}: no workload to run (add a `workload:` section)")
    if not config.schemes:
        raise WorkloadNotRunnable(f"{source}: no schemes to compare (add a `schemes:` list)")
    return kind(config.workload.kind)


def runner_for(config: ExperimentConfig, *args, **kwargs) -> ExperimentRunner:
    """The runner of the config's workload kind (runnable_kind says why there is none)."""
    found = runnable_kind(config)
    return RUNNERS[found.runner](found, config, *args, **kwargs)


__all__ = ["KINDS", "RUNNERS", "ExperimentRunner", "FlowsRunner", "IncastRunner", "WorkloadNotRunnable", "kind",
           "runnable_kind", "runner_for"]
