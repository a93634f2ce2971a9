"""`ccemu report` and `ccemu sweep`: bundles reported and merged, sweeps planned, run and merged."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .. import interrupts
from ..experiments.validation import judged_sweep
from .common import require_root
from .exits import EXIT_BAD_CONFIG, EXIT_FAILED


def cmd_report(args) -> int:
    from ..results.files import BundleFileError
    from ..reports.merge import entries_of_bundles, merge, write_points
    from ..reports.report import report
    from ..sweeps import outcome

    for bundle in args.bundles:
        if not (bundle / "manifest.json").exists() and not outcome.is_sweep(bundle):
            print(f"ccemu report: {bundle} is not a results bundle (no manifest.json) nor a sweep (no plan.json)",
                  file=sys.stderr)
            return EXIT_FAILED
    if len(args.bundles) == 1 and args.out is None:
        bundle = args.bundles[0]
        try:
            summary = outcome.report(bundle)[0] if outcome.is_sweep(bundle) else report(bundle)
        except BundleFileError as exc:  # a link, a device, a manifest's name that is not a name
            print(f"ccemu report: {exc}", file=sys.stderr)
            return EXIT_FAILED
        print(f"wrote {summary} and {bundle / 'plots'}/")
        return 0
    if any(outcome.is_sweep(bundle) for bundle in args.bundles):
        print("ccemu report: a sweep's folder is merged into itself: give it alone and without --out",
              file=sys.stderr)
        return EXIT_BAD_CONFIG
    out = args.out or Path("results") / "merged" / time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    entries = entries_of_bundles(args.bundles)
    write_points(out, entries)
    summary = merge(out, entries, f"{len(entries)} bundles side by side")
    print(f"wrote {summary}, {out / 'points.csv'}, {out / 'blocks.csv'} and {out / 'plots'}/")
    return 0


def cmd_sweep(args) -> int:
    """Plan (every point validated first), run here or across the inventory, merge, and say
    which points did not run and why, and which machines did not answer."""
    from ..sweeps import outcome
    from ..sweeps.plan import load_sweep, write_plan

    sweep = load_sweep(args.sweep)
    if args.inventory is not None and not args.inventory.is_file():
        print(f"ccemu sweep: --inventory {args.inventory}: no such file", file=sys.stderr)
        return EXIT_BAD_CONFIG
    judged_sweep(sweep, args.inventory)  # before a plan is written
    if args.inventory is None and not args.plan_only:
        require_root("sweep")  # an inventory's machines run them as root there
    directory = write_plan(sweep, args.results)
    if args.plan_only:
        print(directory)
        return 0

    def say(line: str) -> None:
        print(f"sweep {sweep.name}: {line}", flush=True)

    where = f"across {args.inventory}" if args.inventory else "here, one after another"
    say(f"{len(sweep.points)} points of {sweep.base.name}, {where}; folder {directory}")
    unreachable: dict[str, str] = {}
    try:
        if args.inventory is None:
            from ..sweeps.local import run_here
            run_here(directory, say)
        else:
            from ..sweeps.fanout import run_across
            unreachable = run_across(directory, args.inventory, say).unreachable
    except KeyboardInterrupt as stop:
        if args.inventory is None:
            raise  # here, the running point was torn down
        print(f"ccemu sweep: {interrupts.said(stop)} (what finished is merged; points running on machines go on "
              "there)", file=sys.stderr)
        return interrupts.exit_status(stop)
    finally:  # also after Ctrl-C: what finished is merged
        summary, entries = outcome.report(directory)
    done = [e for e in entries if e.status == "done"]
    say(f"{len(done)} of {len(entries)} points done; summary {summary}")
    problems = [f"{e.label} {e.status} ({e.reason})" for e in entries if e.status != "done"]
    # A machine that did not answer fails the sweep even when the others ran its share: the
    # inventory is not what it says.
    problems += [f"{machine} unreachable ({why})" for machine, why in unreachable.items()]
    if problems:
        print(f"ccemu sweep: {len(entries) - len(done)} of {len(entries)} points did not finish"
              + (f", {len(unreachable)} machine(s) did not answer" if unreachable else "") + ": "
              + "; ".join(problems), file=sys.stderr)
        return EXIT_FAILED
    return 0
