"""`ccemu clean` on this machine: what killed runs left behind, removed by their recorded
inventories (fabric/inventory.py), each run's outcome one line."""

from __future__ import annotations

import sys
from pathlib import Path

from ..containers.engine import EngineError, engine_session, remove_containers, stop_if_unused
from .inventory import Inventory


def clean_here(state_roots: list[Path]) -> bool:
    """Removes every dead run recorded under `state_roots` (a live one is named and left), and the
    dockerd ccemu started once no run uses it; False when something could not be removed, or a
    record could not have been written by ccemu (said, left, and the others cleaned)."""
    clean = True
    skipped: list[str] = []
    runs = [run for root in state_roots for run in Inventory.all_runs(root, skipped)]
    for line in skipped:
        print(f"skipped: {line}")
        clean = False
    dead = []
    for inventory in runs:
        if inventory.orchestrator.alive():
            print(f"{inventory.run_id}: still running (pid {inventory.orchestrator.pid}); stop it first")
        else:
            dead.append(inventory)
    try:
        # Killed runs with Docker hosts: one engine session for all of their containers.
        with engine_session(any(inventory.containers for inventory in dead)):
            for inventory in dead:
                problems = inventory.remove(remove_containers=remove_containers)
                if problems:
                    clean = False
                    print(f"{inventory.run_id}: could not remove: {'; '.join(problems)}")
                else:
                    print(f"{inventory.run_id}: removed {len(inventory.processes)} processes, "
                          f"{len(inventory.containers)} containers and {len(inventory.namespaces)} namespaces' "
                          "contents")
        if stop_if_unused():
            print("stopped the dockerd ccemu had started (no run uses it)")
        elif not runs and not skipped:
            print(f"nothing to clean ({state_roots[0]} holds no runs)")
    except EngineError as exc:
        print(f"ccemu clean: {exc}", file=sys.stderr)
        clean = False
    return clean
