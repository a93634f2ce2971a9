"""The kinds of experiment: one module each, and KINDS, the one registry (name -> kind) that every
list of kinds derives from (the config's WORKLOAD_KINDS is held equal to it by a unit test; the
CLI's reproduced experiments, the dashboards, the summary, the plots and the papers' claims read
KINDS). A name that is not in it is an error naming the known ones, never a fallback (`kind()`).

Adding an experiment kind: CONTRIBUTING.md's checklist ("An experiment kind"), every file to touch;
tests/unit/test_recipes.py follows it for a throwaway kind.
"""

from __future__ import annotations

from ..model.config import ExperimentConfig
from .blocks import WorkloadNotRunnable
from .convergence import Convergence
from .incast import Incast
from .kind import Kind, ScheduledKind
from .permutation import Permutation
from .realistic import Realistic
from .shuffle import Shuffle
from .victim import Victim

KINDS: dict[str, Kind] = {kind.name: kind for kind in (Incast(), Realistic(), Permutation(), Shuffle(),
                                                        Convergence(), Victim())}


class UnknownKind(KeyError):
    def __str__(self) -> str:
        return self.args[0]


def kind(name: str) -> Kind:
    """The kind called `name`; UnknownKind (a KeyError) naming the known ones otherwise."""
    try:
        return KINDS[name]
    except KeyError:
        raise UnknownKind(f"no experiment kind {name!r} (known: {', '.join(KINDS)})") from None


def runnable_kind(config: ExperimentConfig, source: str | None = None) -> Kind:
    """The kind of the config's workload; WorkloadNotRunnable (a config error, its line starting
    with `source`, the config's name by default) when it has no workload or no schemes."""
    source = source or config.name
    if config.workload is None:
        raise WorkloadNotRunnable(f"{source}: no workload to run (add a `workload:` section)")
    if not config.schemes:
        raise WorkloadNotRunnable(f"{source}: no schemes to compare (add a `schemes:` list)")
    return kind(config.workload.kind)


__all__ = ["KINDS", "Kind", "ScheduledKind", "UnknownKind", "WorkloadNotRunnable", "kind", "runnable_kind"]
