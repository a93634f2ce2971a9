"""A sweep's points one after another on this machine (`ccemu sweep SWEEP.yaml` without an
inventory): each point is `ccemu experiment points/pXX.yaml` in a process of its own, as it
would run on any machine of an inventory, its output in runs/pXX/log."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from .outcome import bundle_of, last_said
from .plan import RUNS_DIR, read_plan

# coreutils' timeout exits with this when the point ran out of the sweep's timeout_s.
TIMED_OUT = 124


def run_here(directory: Path, say: Callable[[str], None]) -> None:
    """Every point of the planned sweep in `directory`; a point that fails does not stop the
    others. Ctrl-C stops the running point (its ccemu tears its fabric down) and the sweep."""
    plan = read_plan(directory)
    machine = socket.gethostname()
    total = len(plan["points"])
    for number, point in enumerate(plan["points"], start=1):
        run = directory / RUNS_DIR / point["id"]
        run.mkdir(parents=True, exist_ok=True)
        (run / "machine").write_text(machine + "\n")
        params = ", ".join(f"{k}={v}" for k, v in point["params"].items())
        say(f"point {number}/{total} {point['id']} ({params}): running on {machine}")
        started = time.monotonic()
        with open(run / "log", "w") as log:
            proc = subprocess.Popen([*plan["prefix"], sys.executable, "-m", "ccemu.cli", *point["args"]], cwd=directory,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                status = proc.wait()
            except KeyboardInterrupt:
                # In a session of its own the point missed the terminal's SIGINT: pass it on and
                # let it tear down before we stop.
                proc.send_signal(signal.SIGINT)
                proc.wait()
                raise
        seconds = time.monotonic() - started
        bundle = bundle_of(run)
        if bundle is not None:
            manifest = json.loads((bundle / "manifest.json").read_text())
            verdict = manifest.get("fidelity", {}).get("status", "unknown")
            ended = ("stopped at its time limit" if status == TIMED_OUT else "interrupted") \
                if manifest.get("interrupted") else "done"
            say(f"point {number}/{total} {point['id']}: {ended} in {seconds:.0f} s, fidelity {verdict}"
                + (f" (exit status {status}: {last_said(run)})" if status and status != TIMED_OUT else ""))
        else:
            say(f"point {number}/{total} {point['id']}: FAILED in {seconds:.0f} s: {last_said(run)}")
