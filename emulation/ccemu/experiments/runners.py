"""The runner of each kind's traffic (Kind.runner names one)."""

from __future__ import annotations

from ..kinds import runnable_kind
from ..model.config import ExperimentConfig
from .base import ExperimentRunner
from .flows import FlowsRunner
from .incast import IncastRunner

# The traffic a kind's blocks run (Kind.runner names one).
RUNNERS: dict[str, type[ExperimentRunner]] = {"rounds": IncastRunner, "scheduled": FlowsRunner}


def runner_for(config: ExperimentConfig, *args, **kwargs) -> ExperimentRunner:
    """The runner of the config's workload kind (runnable_kind says why there is none)."""
    found = runnable_kind(config)
    return RUNNERS[found.runner](found, config, *args, **kwargs)
