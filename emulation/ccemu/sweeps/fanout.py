"""A planned sweep across the machines of an Ansible inventory: playbooks/sweep.yml run through
ansible-runner, its events turned into a line per point (started, done, failed, where) and per
machine that does not answer. The playbook fetches every bundle back; the caller merges."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

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
    _started: dict[str, float] = field(default_factory=dict)  # machine -> when its current point began
    _queue: dict[str, list[str]] = field(default_factory=dict)  # machine -> its points not started yet

    def event(self, event: dict) -> bool:
        data = event.get("event_data", {})
        host, kind = data.get("host", ""), event.get("event", "")
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
        given = json.loads((self.directory / MACHINES_FILE).read_text()).get("points", {})
        for machine, points in given.items():
            self._queue[machine] = list(points)
            self._next(machine)

    def _next(self, machine: str) -> None:
        if self._queue.get(machine):
            point = self._queue[machine].pop(0)
            self._started[machine] = time.monotonic()
            self.say(f"{point}: running on {machine}")

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
    merge to name."""
    import ansible_runner

    if not inventory.is_file():
        raise FanoutError(f"--inventory {inventory}: no such file")
    progress = Progress(directory, say, len(read_plan(directory)["points"]))
    # ansible-runner's own folder (its env, artifacts): a temporary one, removed after.
    with tempfile.TemporaryDirectory(prefix="ccemu-sweep-runner-") as private:
        venv_bin = str(Path(sys.executable).parent)
        result = ansible_runner.run(
            private_data_dir=private,
            playbook=str(PLAYBOOKS / "sweep.yml"),
            inventory=str(inventory.resolve()),
            extravars={"ccemu_sweep_dir": str(directory.resolve()), "ccemu_sweep_merge": False},
            envvars={"ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"),
                     "PATH": venv_bin + os.pathsep + os.environ.get("PATH", "")},
            event_handler=progress.event,
            quiet=True,
            # The events' stdout: the playbook's own output, kept for --debug.
            suppress_env_files=True,
        )
        if result.status not in ("successful", "failed"):
            raise FanoutError(f"ansible-playbook {result.status} (rc {result.rc}): "
                              f"{_one_line(result.stdout.read()[-500:]) if result.stdout else ''}")
    machines_file = directory / MACHINES_FILE
    machines = json.loads(machines_file.read_text()) if machines_file.is_file() else {}
    machines["unreachable"], machines["failed"] = progress.unreachable, progress.failed
    machines_file.write_text(json.dumps(machines, indent=2) + "\n")
    return progress
