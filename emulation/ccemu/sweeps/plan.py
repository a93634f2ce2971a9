"""A sweep file and the points it stands for, validated before anything runs.

A sweep is one experiment file (the base) run at every point of a parameter grid:

    name: incast-n                 # optional: the file's name without .yaml
    experiment: incast             # workloads/experiments/incast.yaml, or a path from this file
    set:                           # optional: changes every point makes to the base
      workload.rounds: 1
    grid:                          # every combination is a point, in this order
      scheme: [expresspass, dctcp] # special: keeps only these of the base's schemes
      workload.flows: [8, 32]      # a key of the experiment file, dotted
    monitoring: false              # optional: Prometheus and the collector per point (default true)
    check: true                    # optional: the fabric check before each point (default true)
    timeout_s: 3600                # optional: wall seconds a point may take (default: no limit);
                                   # then it is interrupted (SIGINT: it tears its fabric down and
                                   # writes what finished), and killed 120 s later if still there

A value in `set` and `grid` replaces the base's value at its dotted key (sections missing from
the base are created). Where the base holds a list and a grid value is not one (`workload.flows: 8`
against `flows: [8, 32, 64]`), the value stands for a list of one: a grid of N is then a list of
Ns, not a list of lists (model/config/overrides.py's rules, which `ccemu experiment --set` and
`--schemes` share). Every point is validated as an experiment file before anything starts,
and a bad sweep is one line naming the point and the key (`sweep.yaml: point p01
(workload.flowz=8): workload.flowz: unknown key`).

The plan is a folder (results/sweeps/NAME/TIME/) that holds the sweep file, plan.json and one
experiment file per point (points/p01.yaml: `ccemu experiment points/p01.yaml` runs it alone).
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import Field, ValidationError

from ..model.config import EXPERIMENTS_DIR, ConfigError, parse_config, read_yaml
from ..model.config.base import Section
from ..model.config.errors import describe
from ..model.config.overrides import changed
from ..model.config.workloads import MAX_WAIT_S
from ..model.names import Name
from ..model.excerpt import shown
from ..reports.merge import cell_text

PLAN_FILE = "plan.json"
POINTS_DIR = "points"
# Where each point's output goes (runs/p01/: its bundle, log and the machine that ran it), here
# and on the machines of an inventory alike.
RUNS_DIR = "runs"
# Points per sweep file: 10 000 already takes ~15 s to validate and plans 10 000 files.
MAX_POINTS = 10_000
# After a point's time limit: how long its SIGINT teardown may take before it is killed (a kill
# leaves its fabric to `ccemu clean`).
KILL_AFTER_S = 120


class SweepError(ConfigError):
    """A bad sweep file; str() is the one line to show."""


class SweepFile(Section):  # a Section: unknown keys refused, no bool where a number is meant
    name: Name | None = None
    experiment: str
    set: dict[str, object] = {}
    grid: dict[str, list[object]]
    monitoring: bool = True
    check: bool = True
    timeout_s: float | None = Field(None, gt=0, le=MAX_WAIT_S)


def _value_text(value: object) -> str:
    """A grid value as a point's description shows it: as in the tables, or quoted and cut when it
    is long or holds what a line cannot (a newline)."""
    text = cell_text(value)
    return text if len(text) <= 40 and text.isprintable() else shown(value, 40)


@dataclass(frozen=True)
class Point:
    id: str
    params: dict[str, object]  # grid key -> this point's value
    config: dict               # the experiment file of the point (validated)

    def describe(self) -> str:
        return ", ".join(f"{key}={_value_text(value)}" for key, value in self.params.items())


@dataclass(frozen=True)
class Sweep:
    name: str
    source: Path
    base: Path
    points: list[Point]
    monitoring: bool
    check: bool
    timeout_s: float | None

    def prefix(self) -> list[str]:
        """What runs a point's `ccemu experiment` (here or on a machine): coreutils' timeout when the
        sweep limits a point's time."""
        if self.timeout_s is None:
            return []
        return ["timeout", "--signal=INT", f"--kill-after={KILL_AFTER_S}", f"{self.timeout_s:g}"]

    def experiment_args(self, point_file: str, results: str) -> list[str]:
        """The `ccemu experiment` arguments of a point (after the program), here or on a machine."""
        return ["experiment", point_file, "--results", results, *([] if self.monitoring else ["--no-monitoring"]),
                *([] if self.check else ["--skip-check"])]


def load_sweep(path: Path, raw: object = None) -> Sweep:
    """The validated sweep; SweepError (one line) otherwise. `raw`: the file's data, where the
    caller read it already."""
    raw = read_yaml(path) if raw is None else raw
    if not isinstance(raw, dict):
        raise SweepError(f"{path}: expected a mapping of keys at the top level")
    try:
        sweep = SweepFile.model_validate(raw)
    except ValidationError as exc:  # in the experiment files' words (model/config/errors.py)
        raise SweepError(f"{path}: {describe(exc.errors()[0], union_tags=set())}") from None
    if not sweep.grid:
        raise SweepError(f"{path}: grid: needs at least one key (a point per combination of its values)")
    for key, values in sweep.grid.items():
        if not values:
            raise SweepError(f"{path}: grid.{key}: needs at least one value")
    # Counted before any point is built: each is validated (about 1.5 ms) and planned as a file.
    count = math.prod(len(values) for values in sweep.grid.values())
    if count > MAX_POINTS:
        sizes = " x ".join(f"{len(values)} {key}" for key, values in sweep.grid.items())
        raise SweepError(f"{path}: grid: {sizes} is {count} points: at most {MAX_POINTS} (split the sweep)")
    base = _base_file(path, sweep.experiment)
    try:
        base_config = read_yaml(base)
    except ConfigError as exc:
        raise SweepError(f"{path}: experiment: {exc}") from None
    if not isinstance(base_config, dict):
        raise SweepError(f"{path}: experiment: {base} is not an experiment file (no mapping of keys at its top level)")
    name = sweep.name or path.stem
    fixed = dict(base_config)
    for key, value in sweep.set.items():
        fixed = _changed(fixed, key, value, f"{path}: set.{key}")
    combos = list(itertools.product(*sweep.grid.values()))
    width = max(2, len(str(len(combos))))
    points = []
    for number, values in enumerate(combos, start=1):
        point_id = f"p{number:0{width}d}"
        params = dict(zip(sweep.grid, values))
        config = {**fixed, "name": f"{name}-{point_id}"}
        for key, value in params.items():
            config = _changed(config, key, value, f"{path}: grid.{key}")
        point = Point(point_id, params, config)
        parse_config(config, source=f"{path}: point {point_id} ({point.describe()})")
        points.append(point)
    return Sweep(name, path, base, points, sweep.monitoring, sweep.check, sweep.timeout_s)


def _base_file(path: Path, experiment: str) -> Path:
    """`experiment:` as a name of workloads/experiments/ or a path from the sweep file."""
    named = "/" not in experiment and not experiment.endswith(".yaml")
    candidate = EXPERIMENTS_DIR / f"{experiment}.yaml" if named else path.parent / experiment
    if candidate.is_file():
        return candidate.resolve()
    known = " ".join(sorted(p.stem for p in EXPERIMENTS_DIR.glob("*.yaml")))
    raise SweepError(f"{path}: experiment: no experiment {experiment!r} (a name of workloads/experiments/: "
                     f"{known}; or a path from the sweep file)")


def _changed(config: dict, key: str, value: object, where: str) -> dict:
    """`config` with `value` at the dotted `key`, as model/config/overrides.py changes a file."""
    if key == "name":  # each point is named <sweep>-pNN, which would silently win
        raise SweepError(f"{where}: the sweep names its points (<sweep name>-p01, ...): set the sweep's own `name:`")
    return changed(config, key, value, where)


def write_plan(sweep: Sweep, results_root: Path) -> Path:
    """The sweep's folder under RESULTS/sweeps/NAME/TIME/ with its points' experiment files."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    (results_root / "sweeps" / sweep.name).mkdir(parents=True, exist_ok=True)
    directory, again = results_root / "sweeps" / sweep.name / stamp, 1
    while True:  # two sweeps of one name in the same second get folders of their own
        try:
            directory.mkdir()
            break
        except FileExistsError:
            again += 1
            directory = directory.with_name(f"{stamp}-{again}")
    (directory / POINTS_DIR).mkdir()
    shutil.copy(sweep.source, directory / "sweep.yaml")
    for point in sweep.points:
        (directory / POINTS_DIR / f"{point.id}.yaml").write_text(
            f"# {sweep.name} point {point.id}: {point.describe()} (from {sweep.base.name})\n"
            + yaml.safe_dump(point.config, sort_keys=False))
    plan = {"name": sweep.name, "base": str(sweep.base), "monitoring": sweep.monitoring, "check": sweep.check,
            "prefix": sweep.prefix(),
            "points": [{"id": p.id, "params": {k: cell_text(v) for k, v in p.params.items()},
                        "file": f"{POINTS_DIR}/{p.id}.yaml",
                        "args": sweep.experiment_args(f"{POINTS_DIR}/{p.id}.yaml", f"{RUNS_DIR}/{p.id}")}
                       for p in sweep.points]}
    (directory / PLAN_FILE).write_text(json.dumps(plan, indent=2) + "\n")
    return directory


def read_plan(directory: Path) -> dict:
    return json.loads((directory / PLAN_FILE).read_text())
