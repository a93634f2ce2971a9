"""`ccemu reproduce`'s run: every experiment one after another, each with its own bundle, one
failing not stopping the others; what became of each (results/reproduction.py's Run) for the
report."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from ..model.config import ExperimentConfig
from ..model.dilation import FaithfulRates
from ..results.reproduction import Run
from ..results.space import ResultsDiskFull
from .runners import runner_for


def run_all(configs: dict[str, ExperimentConfig], dilation_from: dict[str, FaithfulRates | None], results: Path,
            console: Console, repeats: int = 1,
            monitoring: bool = True) -> tuple[list[Run], KeyboardInterrupt | None]:
    """Runs each named config `repeats` times (repeat r with seed + r - 1: independent draws of
    the workload too); the runs, and the Ctrl-C or SIGTERM that ended them, if one did (the last
    run says so)."""
    runs: list[Run] = []
    interrupted: KeyboardInterrupt | None = None
    planned = [(name, config, repeat) for name, config in configs.items() for repeat in range(1, repeats + 1)]
    for i, (name, config, repeat) in enumerate(planned, start=1):
        if repeats > 1:
            config = config.model_copy(update={"seed": config.seed + repeat - 1})
        label = f"{name}, run {repeat} of {repeats} (seed {config.seed})" if repeats > 1 else name
        console.rule(f"reproduce {i}/{len(planned)}: {label}")
        began = time.monotonic()
        runner = runner_for(config, results, console, monitoring=monitoring,
                            dilation_from=dilation_from[name])
        try:
            bundle = runner.run()
            fault = f"{runner.faults[0].block.describe()}: {runner.faults[0].what}" if runner.faults else ""
            runs.append(Run(name, bundle, time.monotonic() - began, fault, repeat=repeat))
        except KeyboardInterrupt as stop:
            interrupted = stop
            bundle = runner.bundle.dir if (runner.bundle.dir / "manifest.json").exists() else None
            runs.append(Run(name, bundle, time.monotonic() - began, "interrupted", repeat))
            break
        except ResultsDiskFull:
            raise  # the next experiments could not write theirs either
        except Exception as exc:  # one experiment failing does not stop the others
            bundle = runner.bundle.dir if (runner.bundle.dir / "manifest.json").exists() else None
            runs.append(Run(name, bundle, time.monotonic() - began, " ".join(str(exc).split()), repeat))
            console.print(f"[red]reproduce: {label} failed: {exc}[/red]")
    return runs, interrupted
