"""What became of each point of a sweep, read from its folder alone (wherever the points ran):

    runs/p01/machine      the machine that ran it (written before it started)
    runs/p01/log          its `ccemu experiment` output
    runs/p01/NAME/TIME/   its results bundle
    machines.json         fan-out only: {"points": {machine: [ids]}, "unreachable": {machine:
                          why}, "failed": {machine: task and why}}: the points each machine that
                          answered was given (sweep.yml), the machines that did not answer and
                          those where a task failed (`ccemu sweep`)

`ccemu report SWEEP_DIR` merges them into the sweep's summary.md, points.csv and plots.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..logs import last_line
from ..results.bundle import read_manifest
from ..results.files import printable, read_text
from ..reports.merge import DONE, FAILED, INTERRUPTED, NOT_RUN, Entry, merge, write_points
from .plan import RUNS_DIR, read_plan

MACHINES_FILE = "machines.json"


def is_sweep(directory: Path) -> bool:
    return (directory / "plan.json").is_file()


def bundle_of(run: Path) -> Path | None:
    """The point's bundle: the newest folder under runs/pXX/ with a manifest."""
    manifests = sorted(run.glob("*/*/manifest.json"), key=lambda p: p.parent.name)
    return manifests[-1].parent if manifests else None


def last_said(run: Path) -> str:
    """The last line a point's run printed: ccemu's one-line reason when it failed. Whole (it is the
    reason the sweep's summary gives) and printable (the log may come from another machine)."""
    return printable(last_line(run / "log", most=None))


def entries(directory: Path) -> list[Entry]:
    plan = read_plan(directory)
    machines = json.loads((directory / MACHINES_FILE).read_text()) if (directory / MACHINES_FILE).is_file() else {}
    given_to = {point: name for name, points in machines.get("points", {}).items() for point in points}
    unreachable, failed = machines.get("unreachable", {}), machines.get("failed", {})
    result = []
    for point in plan["points"]:
        run = directory / RUNS_DIR / point["id"]
        machine_file = run / "machine"
        machine = (printable(read_text(machine_file).strip()) if machine_file.is_file()
                   else given_to.get(point["id"], ""))
        bundle = bundle_of(run)
        status, reason, seconds = DONE, "", None
        if bundle is not None:
            try:
                manifest = read_manifest(bundle)
            except (OSError, ValueError) as exc:  # a machine's bundle is a file from elsewhere
                manifest = {"failed": f"its bundle cannot be read: {exc}"}
            seconds = manifest.get("wall_seconds")
            if manifest.get("failed"):
                status, reason = FAILED, f"stopped by an error: {manifest['failed']}"
            elif manifest.get("interrupted"):
                status, reason = INTERRUPTED, "stopped early (its time limit, or Ctrl-C): the tables hold what finished"
            elif manifest.get("unfinished_flows"):
                reason = f"{manifest['unfinished_flows']} flows never finished"
        elif machine_file.is_file():
            status, reason = FAILED, last_said(run) or "no bundle and no output"
        else:
            status = NOT_RUN
            trouble = ([f"{m} unreachable: {why}" for m, why in unreachable.items()]
                       + [f"{m} failed: {why}" for m, why in failed.items()])
            reason = (f"{machine} unreachable: {unreachable[machine]}" if machine in unreachable else
                      f"{machine} failed: {failed[machine]}" if machine in failed else
                      f"{machine} stopped before it" if machine else
                      "no machine ran it: " + "; ".join(trouble) if trouble else "not started")
        result.append(Entry(point["id"], bundle, point["params"], machine, status, reason, seconds))
    return result


def report(directory: Path) -> tuple[Path, list[Entry]]:
    """The sweep's points.csv, summary.md and plots; the summary's path and the points' entries."""
    found = entries(directory)
    write_points(directory, found)
    return merge(directory, found, f"sweep {read_plan(directory)['name']}: {directory.name}"), found
