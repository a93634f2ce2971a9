"""Admission: whether this machine can bring up a valid config's fabric, judged on the machine
that brings it up, just before it does (a sweep's worker judges itself, not its controller).

The config model is pure (model/config/); what it cannot know lives here: the machine's memory,
tasks, namespaces and open files against footprint.py's estimate, the port ids the port program
can number, and the CPUs Docker limits may ask for. A refusal is one line naming the key to change.
"""

from __future__ import annotations

import os

from ..model.config import ConfigError, DoesNotFit, ExperimentConfig
from ..model.topology import TopologyCounts
from .footprint import MachineLimits, refusal


def admit(config: ExperimentConfig, source: str = "config", machine: MachineLimits | None = None,
          cpus: int | None = None, share: TopologyCounts | None = None, whose: str = "") -> ExperimentConfig:
    """`config` if this machine (`machine` and `cpus` probed unless given) can run it; else
    DoesNotFit (its fabric) or ConfigError (a host limit beyond the machine: exit status 2, as
    when the schema judged it) naming the key."""
    cpus = cpus if cpus is not None else os.cpu_count() or 1
    limits = [(("hosts", "cpus"), config.hosts.cpus)]
    limits += [(("hosts", "per_host", name, "cpus"), own.cpus) for name, own in config.hosts.per_host.items()]
    for loc, wanted in limits:
        if wanted is not None and wanted > cpus:
            raise ConfigError(f"{source}: {'.'.join(loc)}: this machine has {cpus} CPUs (got {wanted:g})")
    found = refusal(config, machine or MachineLimits.probe(), share, f"{whose}'s share of " if whose else "")
    if found:
        raise DoesNotFit(f"{source}: {'.'.join(found.loc)}: {found.message}")
    return config


def admit_share(config: ExperimentConfig, share: TopologyCounts, machine: str) -> ExperimentConfig:
    """admit() of the part of a fabric split over several machines that this one holds (`share`:
    its hosts, switches and links, a cut link's wire end counted as the link's other end), judged
    on this machine, which is `machine` of the inventory."""
    return admit(config, f"machine {machine}", share=share, whose=f"machine {machine}")
