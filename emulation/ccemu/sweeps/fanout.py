"""A planned sweep across the machines of an Ansible inventory: playbooks/sweep.yml run through
ansible-runner, its events turned into a line per point (started, done, failed, where) and per
machine that does not answer. The playbook fetches every bundle back; the caller merges.

Ctrl-C (or SIGTERM) cancels the playbook (ansible-runner kills ansible-playbook and its ssh
connections); the points already running on machines go on there: each is a `ccemu experiment`
that tears its own fabric down, and its output stays in the machine's sweep folder."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..interrupts import Stopped
from .outcome import MACHINES_FILE
from .plan import read_plan

PLAYBOOKS = Path(__file__).resolve().parents[3] / "playbooks"
RUN_TASK = "Run the machine's points one after another"


class FanoutError(RuntimeError):
    """The playbook could not run at all (not a point failing: those are in the summary)."""


@dataclass
class Progress:
    """What the playbook's events said so far."""

    directory: Path
    say: Callable[[str], None]
    total: int
    unreachable: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # machine -> the task that failed there (not a point)
    finished: int = 0
    ran_points: bool = False  # the playbook got as far as running points
    output: list[str] = field(default_factory=list)  # ansible-playbook's own lines (errors outside tasks)
    running: dict[str, str] = field(default_factory=dict)  # machine -> the point it runs now
    _started: dict[str, float] = field(default_factory=dict)  # machine -> when its current point began
    _queue: dict[str, list[str]] = field(default_factory=dict)  # machine -> its points not started yet

    def event(self, event: dict) -> bool:
        data = event.get("event_data", {})
        host, kind = data.get("host", ""), event.get("event", "")
        if kind == "verbose" and event.get("stdout", "").strip():
            self.output.append(_one_line(event["stdout"]))
        if kind == "runner_on_unreachable":
            self.unreachable[host] = _one_line(data.get("res", {}).get("msg", "no answer"))
            self.say(f"{host}: unreachable ({self.unreachable[host]})")
        elif kind == "playbook_on_task_start" and data.get("task") == RUN_TASK:
            self._start_machines()
        elif kind in ("runner_item_on_ok", "runner_item_on_failed") and data.get("task") == RUN_TASK:
            self._point_finished(host, data.get("res", {}))
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            self.failed[host] = f"{data.get('task')}: {_one_line(data.get('res', {}).get('msg', ''))}"
            self.say(f"{host}: FAILED: {self.failed[host]}")
        return True

    def _start_machines(self) -> None:
        self.ran_points = True
        given = json.loads((self.directory / MACHINES_FILE).read_text()).get("points", {})
        for machine, points in given.items():
            self._queue[machine] = list(points)
            self._next(machine)

    def _next(self, machine: str) -> None:
        if self._queue.get(machine):
            point = self.running[machine] = self._queue[machine].pop(0)
            self._started[machine] = time.monotonic()
            self.say(f"{point}: running on {machine}")
        else:
            self.running.pop(machine, None)

    def _point_finished(self, machine: str, result: dict) -> None:
        self.finished += 1
        point = (result.get("item") or {}).get("id", "?")
        seconds = time.monotonic() - self._started.get(machine, time.monotonic())
        status = result.get("rc")
        self.say(f"{point}: {'done' if status == 0 else f'exit status {status}'} on {machine} in {seconds:.0f} s "
                 f"({self.finished}/{self.total} points finished)")
        self._next(machine)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:300]


def run_across(directory: Path, inventory: Path, say: Callable[[str], None]) -> Progress:
    """Run the planned sweep in `directory` on `inventory`'s machines; what happened. The
    machines that did not answer, and those where a task failed, go to machines.json for the
    merge to name. FanoutError: the playbook ran no point and no machine says why."""
    import ansible_runner

    progress = Progress(directory, say, len(read_plan(directory)["points"]))
    cancelled = []

    def cancel(signum, frame):
        cancelled.append(signum)

    # ansible-playbook runs in a terminal of its own (pexpect): Ctrl-C reaches only us. We ask
    # ansible-runner to cancel it rather than unwinding through its loop with the child alive.
    previous = {sig: signal.signal(sig, cancel) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        # ansible-runner's own folder (its env, artifacts): a temporary one, removed after.
        with tempfile.TemporaryDirectory(prefix="ccemu-sweep-runner-") as private:
            result = ansible_runner.run(
                private_data_dir=private,
                playbook=str(PLAYBOOKS / "sweep.yml"),
                inventory=str(inventory.resolve()),
                extravars={"ccemu_sweep_dir": str(directory.resolve()), "ccemu_sweep_merge": False},
                envvars={"ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
                         "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")},
                event_handler=progress.event,
                cancel_callback=lambda: bool(cancelled),
                quiet=True,
                suppress_env_files=True,  # nothing of ours in its env/ folder
            )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    machines_file = directory / MACHINES_FILE
    machines = json.loads(machines_file.read_text()) if machines_file.is_file() else {}
    machines["unreachable"], machines["failed"] = progress.unreachable, progress.failed
    machines_file.write_text(json.dumps(machines, indent=2) + "\n")
    if result.status == "canceled":
        still = ", ".join(f"{point} on {machine}" for machine, point in progress.running.items())
        say("interrupted" + (f": still running on their machines, where they finish and tear their fabrics down "
                             f"(output in ccemu_sweep_remote_root there): {still}" if still else ""))
        raise Stopped(cancelled[0])
    if not progress.ran_points and not progress.unreachable and not progress.failed:
        # The line that says why, most telling first (a broken inventory is only warned about, and
        # then matches no machine).
        telling = [next((line for line in progress.output if mark in line), None)
                   for mark in ("ERROR", "Unable to parse", "provided hosts list is empty")]
        why = next((line for line in telling if line), progress.output[-1] if progress.output else "no output")
        raise FanoutError(f"ansible-playbook ran no point ({result.status}, exit status {result.rc}) on {inventory}: "
                          f"{why}")
    return progress
