"""A fabric across an inventory's machines as the commands use it: planned (and refused where a
machine cannot carry its share), checked, held up, and cleaned on every machine."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from ..bench import capacity as bench_capacity
from ..model.config import ConfigError, DoesNotFit, ExperimentConfig
from ..model.partition import Plan
from ..sweeps.machines import Machine, machines_of
from .fabric import SplitFabric, plan_of
from .session import ccemu_on


# What `ccemu clean` may take on one machine before it is called stuck there.
CLEAN_TIMEOUT_S = 300


def machines_plan(config: ExperimentConfig, inventory: Path | None, count: int | None,
                  results: Path) -> tuple[list[Machine], Plan]:
    """(machines, plan) of `config` over an inventory's machines or `count` like this one, each
    judged at this machine's faithful rate (`ccemu bench capacity --results RESULTS`, else its
    datapath's default)."""
    if inventory is not None:
        machines = machines_of(inventory)
    elif count is not None and count >= 1:
        machines = [Machine(f"m{i + 1}", f"m{i + 1}:22") for i in range(count)]
    else:
        raise ConfigError(f"--machines must be at least 1 (got {count})")
    return machines, plan_of(config, machines, bench_capacity.faithful_here(config.fabric, results))


def planned(config: ExperimentConfig, inventory: Path, results: Path) -> tuple[list[Machine], Plan]:
    """(machines, plan) of `config` over `inventory`, the plan printed before anything starts and
    refused in one line (DoesNotFit) when a machine cannot carry its share."""
    machines, plan = machines_plan(config, inventory, None, results)
    print("\n".join(plan.lines()), flush=True)
    if (refusal := plan.refusal()) is not None:
        raise DoesNotFit(refusal)
    return machines, plan


def check_here_or_across(config: ExperimentConfig, across: tuple[list[Machine], Plan] | None) -> bool:
    """The fabric checks (fabric/checks.py) on `config`'s fabric: on this machine, or split over
    `across` (machines, plan) with every machine's part up for the checks and down after."""
    from ..fabric.checks import check_fabric  # loads Mininet: here, not for every command that imports this module

    return check_fabric(config, None if across is None else SplitFabric(config, *across))


def up_across(config: ExperimentConfig, inventory: Path, results: Path) -> None:
    """`ccemu up --inventory`: the fabric over the machines until Ctrl-C / SIGTERM, or until a
    machine is lost (MachineLost, naming it)."""
    machines, plan = planned(config, inventory, results)
    try:
        with SplitFabric(config, machines, plan) as net:
            print(f"fabric of {config.name} is up over {len(machines)} machines ({net.describe_datapath()}); "
                  "waiting for Ctrl-C / SIGTERM", flush=True)
            while net.fault() is None:  # MachineLost once a machine is lost
                time.sleep(0.2)
    except KeyboardInterrupt:
        print("\ntorn down")


def clean_across(inventory: Path) -> bool:
    """`ccemu clean` on each machine of `inventory` (over ssh, one after another), each one's lines
    prefixed with its name; False when one failed or could not run it."""
    clean = True
    for machine in machines_of(inventory):
        try:
            done = subprocess.run(ccemu_on(machine, "clean"), capture_output=True, text=True,
                                  timeout=CLEAN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"{machine.name}: ccemu clean did not finish in {CLEAN_TIMEOUT_S} s")
            clean = False
            continue
        for line in (done.stdout + done.stderr).splitlines():
            print(f"{machine.name}: {line}")
        if done.returncode:
            clean = False
            if not (done.stdout + done.stderr).strip():
                print(f"{machine.name}: ccemu clean could not run there (status {done.returncode})")
    return clean
