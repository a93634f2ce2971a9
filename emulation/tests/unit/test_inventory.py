"""The run inventory: a process is on record before it runs (no SIGKILL can leak one)."""

import json
import signal
import subprocess
import sys
import textwrap
import time

from ccemu.fabric.inventory import Inventory, ProcessRecord, process_start_time


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
