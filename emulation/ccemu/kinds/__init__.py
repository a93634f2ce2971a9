"""The kinds of experiment: one module each, and KINDS, the one registry (name -> kind) that every
list of kinds derives from (the config's WORKLOAD_KINDS is held equal to it by a unit test; the
CLI's reproduced experiments, the dashboards, the summary, the plots and the papers' claims read
KINDS). A name that is not in it is an error naming the known ones, never a fallback (`kind()`).

Adding an experiment kind
-------------------------
1. model/config/workloads.py: its pydantic model (a Workload), `kind: Literal["NAME"]`, with a
   `busy_links()` and, where it names hosts, a `fit()`; add it to the WorkloadConfig union and to
   WORKLOAD_KINDS (pydantic needs both at import).
2. experiments/kinds/NAME.py: a Kind subclass (kind.py) that names the model, its blocks (a
   BlockKey per scheme and point), its progress, its bottleneck host, its summary lines and plots;
   its traffic is ScheduledKind's (flows known up front: `flows()`) or a runner of its own (as
   incast's, experiments/incast.py, named by `runner` in experiments/__init__.py's RUNNERS).
3. Here: import it and add one line to KINDS.
4. workloads/experiments/NAME.yaml: the experiment `make experiment NAME=...` and
   `ccemu reproduce` run (the reproduced experiments are the kinds' names).
Optional: workloads/reference.yaml (its claims and setting: papers.py accepts the name already), a
dashboard of its own (metrics/dashboards.py KINDS, the one per-dashboard list).
"""

from __future__ import annotations

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


__all__ = ["KINDS", "Kind", "ScheduledKind", "UnknownKind", "kind"]
