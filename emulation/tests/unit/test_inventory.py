"""The run inventory: a process is on record before it runs (no SIGKILL can leak one)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ccemu.fabric import inventory as inventory_module
from ccemu.fabric.inventory import Inventory, ProcessRecord
from ccemu.fabric.namespaces import process_start_time


def test_a_spawned_command_runs_only_once_its_record_is_saved(tmp_path):
    inventory = Inventory.create("run", tmp_path)
    proc = inventory.spawn("reader", ["sh", "-c", f"cat {inventory.state_dir / 'state.json'}"],
                           stdout=subprocess.PIPE, text=True)
    seen = json.loads(proc.communicate(timeout=10)[0])
    assert [(p["pid"], p["what"]) for p in seen["processes"]] == [(proc.pid, "reader")]
    assert proc.returncode == 0


def test_a_spawned_command_never_runs_when_the_orchestrator_dies_before_recording_it(tmp_path):
    marker = tmp_path / "ran"
    orchestrator = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from ccemu.fabric.inventory import Inventory
        inventory = Inventory.create("run", Path({str(tmp_path)!r}))
        # SIGKILLed between starting the child and saving its record:
        inventory.add_process = lambda pid, what: (print(pid, flush=True), os.kill(os.getpid(), signal.SIGKILL))
        inventory.spawn("toucher", ["touch", {str(marker)!r}])
    """)
    run = subprocess.run([sys.executable, "-c", orchestrator], capture_output=True, text=True, timeout=30)
    assert run.returncode == -signal.SIGKILL
    child = int(run.stdout.split()[0])
    # It reads EOF and exits. Told apart by its start time from a process the kernel gives its pid to
    # next; the deadline only has to tell "exits" from "keeps waiting" (generous: a shared machine).
    started = process_start_time(child)
    deadline = time.monotonic() + 30
    while started is not None and process_start_time(child) == started:
        assert time.monotonic() < deadline, "the gated child kept waiting"
        time.sleep(0.05)
    assert not marker.exists()


def test_a_recorded_process_is_signalled_only_while_its_start_time_matches(tmp_path):
    proc = subprocess.Popen(["sleep", "30"])
    try:
        stale = ProcessRecord(proc.pid, ProcessRecord.of(proc.pid, "sleep").start_time - 1, "an older process")
        stale.signal(signal.SIGKILL)
        assert proc.poll() is None
        ProcessRecord.of(proc.pid, "sleep").signal(signal.SIGKILL)
        assert proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_containers_are_on_record_by_name_before_they_are_created_and_by_id_once_they_are(tmp_path):
    inventory = Inventory.create("run-1a2b3c", tmp_path)
    inventory.add_containers(["ccemu-run-1a2b3c-h1", "ccemu-run-1a2b3c-h2"])
    saved = json.loads((inventory.state_dir / "state.json").read_text())
    assert saved["containers"] == [{"name": "ccemu-run-1a2b3c-h1", "id": None},
                                   {"name": "ccemu-run-1a2b3c-h2", "id": None}]
    inventory.container_created({"ccemu-run-1a2b3c-h2": "f00d"})  # h1's creation failed
    loaded = Inventory.load(inventory.state_dir)
    assert [(c.name, c.id) for c in loaded.containers] == [("ccemu-run-1a2b3c-h1", None),
                                                           ("ccemu-run-1a2b3c-h2", "f00d")]
    legacy = {k: v for k, v in saved.items() if k != "containers"}  # a state.json of a run before Docker hosts
    assert Inventory.of_state(legacy, tmp_path).containers == []


def test_a_record_naming_a_process_ccemu_did_not_start_does_not_have_it_stopped(tmp_path):
    inventory = Inventory.create("run-1a2b3c", tmp_path)
    ours = inventory.spawn("ours", ["sleep", "60"])
    foreign = subprocess.Popen(["sleep", "60"])  # sshd, say: a crafted record names its pid and start time
    try:
        inventory.add_process(foreign.pid, "sshd, say")
        problems = Inventory.load(inventory.state_dir).remove()
        assert ours.wait(timeout=10) == -signal.SIGTERM
        assert foreign.poll() is None
        assert problems == [f"sshd, say (pid {foreign.pid}) is not a process of run-1a2b3c (it started without "
                            "CCEMU_RUN=run-1a2b3c): left alone"]
    finally:
        for proc in (ours, foreign):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_process_caught_in_the_middle_of_its_exec_is_read_again_not_taken_for_another(monkeypatch):
    # A spawned process execs its program just after it is released; mid-exec it shows no environment.
    reads = iter([b"", b"", b"PATH=/bin\0CCEMU_RUN=run-1a2b3c\0"])
    monkeypatch.setattr(inventory_module, "_environ_of", lambda pid: next(reads))
    assert ProcessRecord(pid=1234, start_time=1, what="ours").carries("run-1a2b3c")


def test_a_process_that_keeps_no_environment_does_not_carry_the_mark(monkeypatch):
    monkeypatch.setattr(inventory_module, "_environ_of", lambda pid: b"")
    monkeypatch.setattr(inventory_module, "MID_EXEC_WAIT_S", 0.05)
    assert not ProcessRecord(pid=1234, start_time=1, what="foreign").carries("run-1a2b3c")


def state(run_id: str, **changes) -> dict:
    return {"run_id": run_id, "orchestrator": {"pid": 99999999, "start_time": 1, "what": "orchestrator"},
            "processes": [], "namespaces": [], "mounts": [], "containers": [], "filters": [], **changes}


@pytest.mark.parametrize("name, make, why", [
    ("not-json", lambda d: (d / "state.json").write_text("{"), "not JSON"),
    ("a-link", lambda d: (d / "state.json").symlink_to(d.parent / "good" / "state.json"),
     "cannot be read without following a link"),
    ("writable", lambda d: ((d / "state.json").write_text(json.dumps(state("writable"))),
                            (d / "state.json").chmod(0o666)), "someone else could have written it"),
    ("renamed", lambda d: (d / "state.json").write_text(json.dumps(state("good"))), "is not its folder's name"),
    ("mount", lambda d: (d / "state.json").write_text(json.dumps(state("mount", mounts=["/etc"]))),
     "mount '/etc' is not inside the run's folder"),
    ("climb", lambda d: (d / "state.json").write_text(json.dumps(state("climb", mounts=[f"{d}/../../etc"]))),
     "is not inside the run's folder"),
    ("container", lambda d: (d / "state.json").write_text(json.dumps(state("container", containers=[
        {"name": "ccemu-other-run-h1", "id": None}]))),
     "container 'ccemu-other-run-h1' is not named for run container"),
    ("pid", lambda d: (d / "state.json").write_text(json.dumps(state("pid", processes=[
        {"pid": "1; reboot", "start_time": 1, "what": "x"}]))), "'1; reboot' is not a count"),
    ("init", lambda d: (d / "state.json").write_text(json.dumps(state("init", processes=[
        {"pid": 1, "start_time": 1, "what": "x"}]))), "pid 1 is not a process ccemu starts"),
    ("what", lambda d: (d / "state.json").write_text(json.dumps(state("what", processes=[
        {"pid": 4242, "start_time": 1, "what": "x\n\x1b[2Jroot# "}]))), "is not one printable line"),
    ("shape", lambda d: (d / "state.json").write_text(json.dumps({"run_id": "shape"})), "not a run's record"),
])
def test_a_state_file_ccemu_could_not_have_written_is_skipped_in_one_line_and_the_other_runs_are_read(
        tmp_path, name, make, why):
    good = Inventory.create("good", tmp_path)
    (tmp_path / name).mkdir()
    make(tmp_path / name)
    skipped: list[str] = []
    assert [run.run_id for run in Inventory.all_runs(tmp_path, skipped)] == ["good"]
    assert len(skipped) == 1 and skipped[0].startswith(f"{tmp_path / name}") and why in skipped[0], skipped
    assert "\n" not in skipped[0]
    good.remove()


def test_a_state_folder_others_can_write_is_not_read(tmp_path):
    Inventory.create("good", tmp_path)
    tmp_path.chmod(0o777)
    skipped: list[str] = []
    assert Inventory.all_runs(tmp_path, skipped) == []
    assert skipped == [f"{tmp_path}: owned by uid {os.geteuid()} with mode 777: someone else could have written it: "
                       "no run under it read"]
