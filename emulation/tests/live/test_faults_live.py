"""Faults during a run (root; CI runs these): a part of the emulation that dies or fills up while a
block runs is named in one line within seconds, the block ends, the verdict says why, the bundle
keeps what finished, nothing is left behind, and the exit status names the fault (ccemu/cli.py)."""

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from runs import SMALL_INCAST, start_config

pytestmark = pytest.mark.root

EXIT_FABRIC, EXIT_MONITORING, EXIT_DISK_FULL = 6, 7, 9  # ccemu/commands/exits.py
NAMED_WITHIN_S = 2.0  # the blocks look at their cchosts and the fabric every 50 ms
INCAST = dict(seed=1, total_bytes=4_000_000, flows=[4], rounds=2, round_timeout_s=120, hosts="{kind: namespace}")
LOSSLESS_DCQCN = """
name: {name}
topology: {{kind: star, hosts: 5}}
link: {{rate_mbps: 10}}
schemes:
  - scheme: dcqcn
    # A host's NIC holds what its host sends while paused (an RDMA NIC takes data from host memory
    # only when it may send); at the switches' 400 KB a paused NIC would drop.
    port: {{profile: dcqcn, buffer_bytes: 400000, host_buffer_bytes: 4000000,
            lossless: {{xoff_bytes: 30000, xon_bytes: 20000}}}}
workload: {{kind: incast, aggregator: h1, total_bytes: 2000000, flows: [4, 2], rounds: 1, round_timeout_s: 120}}
"""


class Run:
    """`ccemu experiment` of a config, its output lines timed as they come."""

    def __init__(self, tmp_path: Path, name: str, text: str, *flags: str):
        self.tmp_path, self.name = tmp_path, name
        self.interfaces_before = set(os.listdir("/sys/class/net"))
        self.process, _ = start_config(tmp_path, name, text, *flags)
        self.lines: list[tuple[float, str]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append((time.monotonic(), " ".join(line.split())))

    def wait_for(self, condition, what: str, timeout: float = 120):
        """Until `condition()` is truthy (returned), while the run goes on."""
        deadline = time.monotonic() + timeout
        while not (found := condition()):
            assert time.monotonic() < deadline, f"{what} within {timeout} s"
            assert self.process.poll() is None, f"the run ended before {what}: {self.process.stderr.read()}"
            time.sleep(0.05)
        return found

    def round_started(self, scheme: str, n: int, round_number: int = 1) -> bool:
        results = self.tmp_path / "results"
        return bool(list(results.glob(f"*/*/work/{scheme}-N{n}/round{round_number}-*.flows")))

    def kill(self, what: str) -> float:
        """SIGKILL to the process the run's inventory recorded as `what`; when it was sent."""
        pid = self.wait_for(lambda: recorded_pid(self.tmp_path / "state", what), f"{what} recorded")
        os.kill(pid, signal.SIGKILL)
        return time.monotonic()

    def finish(self, timeout: float = 300) -> str:
        """The run's stderr, once it exited."""
        self.process.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return self.process.stderr.read()

    def said_at(self, text: str) -> float:
        """When the run first said `text` (the verdict at the end may say it again)."""
        said = [when for when, line in self.lines if text in line]
        assert said, f"never said {text!r}: {[line for _, line in self.lines]}"
        return said[0]

    def bundle(self, results: Path | None = None) -> Path:
        (bundle,) = ((results or self.tmp_path / "results") / self.name).iterdir()
        return bundle

    def assert_nothing_left(self) -> None:
        assert set(os.listdir("/sys/class/net")) == self.interfaces_before
        assert list((self.tmp_path / "state").rglob("state.json")) == []  # no fabric, no monitoring left


def recorded_pid(state_root: Path, what: str) -> int | None:
    """The pid a run's inventory recorded for the process `what` (e.g. "ovs-vswitchd #0"; ending
    in "*": the first whose name starts with the rest)."""
    for state in state_root.rglob("state.json"):
        try:
            processes = json.loads(state.read_text())["processes"]
        except (OSError, ValueError, KeyError):
            continue  # being written
        for process in processes:
            if process["what"] == what or what.endswith("*") and process["what"].startswith(what[:-1]):
                return process["pid"]
    return None


def table(bundle: Path, name: str) -> list[dict]:
    with open(bundle / f"{name}.csv", newline="") as source:
        return list(csv.DictReader(source))


def last_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert lines and "Traceback" not in stderr, stderr
    return lines[-1]


def test_an_ovs_vswitchd_killed_mid_block_is_named_at_once_its_block_fails_and_the_next_block_runs(tmp_path):
    # Open vSwitch forwards (the default here is the bpf datapath, which has no daemon to lose).
    run = Run(tmp_path, "ovs-dies", SMALL_INCAST.format(name="ovs-dies", **INCAST) + "fabric: {datapath: ovs}\n")
    run.wait_for(lambda: run.round_started("expresspass", 4), "expresspass's round 1")
    killed_at = run.kill("ovs-vswitchd #0")  # its flows start START_DELAY_S (0.2 s) after their schedule
    err = run.finish()

    said = "expresspass N=4: ovs-vswitchd #0 killed by SIGKILL"
    assert run.said_at(said) - killed_at < NAMED_WITHIN_S
    assert run.process.returncode == EXIT_FABRIC, err
    assert last_line(err).startswith("ccemu: the emulation failed under 1 block(s), which ended early (first, "
                                     "expresspass N=4: ovs-vswitchd #0 killed by SIGKILL")
    bundle = run.bundle()
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert [(f["scheme"], f["n"], f["what"].split(" (")[0]) for f in manifest["faults"]] == \
        [("expresspass", 4, "ovs-vswitchd #0 killed by SIGKILL")]
    statuses = {b["scheme"]: b["status"] for b in manifest["fidelity"]["blocks"]}
    assert statuses["expresspass"] == "FAIL" and manifest["fidelity"]["status"] == "FAIL"
    assert any("ovs-vswitchd #0 killed by SIGKILL" in r and "the block ended there" in r
               for r in manifest["fidelity"]["reasons"])
    rounds = table(bundle, "rounds")
    # The killed block's second round never ran; the next block (a fresh fabric) ran whole.
    assert [r["failures"] for r in rounds if r["scheme"] == "expresspass" and r["round"] == "2"] == \
        [f"not run: {manifest['faults'][0]['what']}"]
    assert [r["unfinished"] for r in rounds if r["scheme"] == "dctcp"] == ["", ""]
    assert "ovs-vswitchd #0 killed by SIGKILL" in (bundle / "summary.md").read_text()
    run.assert_nothing_left()


def test_prometheus_killed_mid_run_is_named_at_once_and_the_run_finishes_whole_with_a_warning(tmp_path):
    run = Run(tmp_path, "prometheus-dies", SMALL_INCAST.format(name="prometheus-dies", **INCAST))
    run.wait_for(lambda: run.round_started("expresspass", 4), "expresspass's round 1")
    killed_at = run.kill("prometheus")
    err = run.finish()

    assert run.said_at("live metrics: prometheus killed by SIGKILL") - killed_at < NAMED_WITHIN_S
    assert run.process.returncode == EXIT_MONITORING, err
    assert last_line(err).startswith("ccemu: live metrics: prometheus killed by SIGKILL")
    bundle = run.bundle()
    manifest = json.loads((bundle / "manifest.json").read_text())
    # What the bundle measures does not come from Prometheus: every round of both schemes finished.
    assert [r["unfinished"] for r in table(bundle, "rounds")] == [""] * 4 and manifest["faults"] == []
    assert manifest["monitoring"]["lost"].startswith("prometheus killed by SIGKILL")
    assert manifest["fidelity"]["status"] != "PASS"
    assert any(r.startswith("the run: WARN: live metrics: prometheus killed by SIGKILL")
               for r in manifest["fidelity"]["reasons"])
    run.assert_nothing_left()


def test_the_pfc_pause_agent_killed_mid_block_fails_that_block_and_plain_dcqcn_runs_the_next_lossless(tmp_path):
    run = Run(tmp_path, "agent-dies", LOSSLESS_DCQCN.format(name="agent-dies"))
    run.wait_for(lambda: run.round_started("dcqcn", 4), "dcqcn's round 1")
    killed_at = run.kill("pfc pause agent")
    err = run.finish()

    assert run.said_at("dcqcn N=4: the PFC pause agent killed by SIGKILL") - killed_at < NAMED_WITHIN_S
    assert run.process.returncode == EXIT_FABRIC, err
    bundle = run.bundle()
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert [(f["n"], f["what"].split(" (")[0]) for f in manifest["faults"]] == \
        [(4, "the PFC pause agent killed by SIGKILL")]
    assert {b["n"]: b["status"] for b in manifest["fidelity"]["blocks"]}[4] == "FAIL"
    assert manifest["pause_agent"]["dcqcn N=4"]["died"] == "killed by SIGKILL"  # its figures up to then
    # N=2, on a fresh fabric with its own agent: plain DCQCN over lossless ports, every flow
    # finished, nothing dropped, every pause its agent carried out resumed.
    (second,) = [r for r in table(bundle, "rounds") if r["n"] == "2"]
    assert second["unfinished"] == "" and int(second["finished"]) == 2
    assert sum(int(p["data_dropped"]) for p in table(bundle, "ports") if p["n"] == "2") == 0
    agent = manifest["pause_agent"]["dcqcn N=2"]
    assert agent["pauses"] == agent["resumes"] and "died" not in agent
    run.assert_nothing_left()


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of 40 MiB for the results (mounted here; unmounted after, whatever happened)."""
    folder = tmp_path / "small-disk"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def fill(folder: Path) -> None:
    """Write to `folder` until its disk refuses more."""
    with open(folder / "filler", "wb") as filler:
        chunk = b"\0" * (1 << 20)
        try:
            while True:
                filler.write(chunk)
                filler.flush()
        except OSError:
            pass


def test_a_results_disk_that_fills_mid_block_stops_the_run_and_the_bundle_keeps_what_finished(tmp_path, small_disk):
    results = small_disk / "results"
    config = SMALL_INCAST.format(name="disk-fills", **{**INCAST, "flows": [2, 4], "rounds": 1})
    run = Run(tmp_path, "disk-fills", config, "--results", str(results))
    run.wait_for(lambda: list(results.glob("*/*/work/expresspass-N4/round1-*.flows")), "expresspass N=4's round 1")
    fill(small_disk)
    filled_at = time.monotonic()
    err = run.finish()

    assert run.said_at("expresspass N=4: the results folder's disk is full") - filled_at < NAMED_WITHIN_S
    assert run.process.returncode == EXIT_DISK_FULL, err
    bundle = run.bundle(results)
    line = last_line(err)
    assert line.startswith("ccemu: the results folder's disk is full (")
    assert line.endswith(f"during expresspass N=4: the run stopped there; the bundle keeps what finished: {bundle}")
    # Written with the room the run kept for it: N=2 whole, N=4 partial, dctcp never started.
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["failed"].startswith("the results folder's disk is full")
    assert [(f["n"], f["disk_full"]) for f in manifest["faults"]] == [(4, True)]
    rounds = table(bundle, "rounds")
    assert [(r["scheme"], r["n"], r["unfinished"]) for r in rounds][0] == ("expresspass", "2", "")
    assert {r["scheme"] for r in rounds} == {"expresspass"}
    assert (bundle / "summary.md").exists()
    run.assert_nothing_left()


def test_a_results_disk_without_room_for_a_bundle_is_one_line_before_anything_starts(tmp_path, small_disk):
    fill(small_disk)
    interfaces = set(os.listdir("/sys/class/net"))
    config = tmp_path / "no-room.yaml"
    config.write_text(SMALL_INCAST.format(name="no-room", **INCAST))
    result = subprocess.run([sys.executable, "-m", "ccemu.cli", "experiment", str(config), "--skip-check",
                             "--results", str(small_disk / "results")], capture_output=True, text=True,
                            env={**os.environ, "CCEMU_STATE_ROOT": str(tmp_path / "state")}, timeout=120)
    assert result.returncode == EXIT_DISK_FULL, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"ccemu: the results folder {small_disk / 'results'} has less than 16 MiB free")
    assert line.endswith("nothing was started")
    assert [p for p in small_disk.rglob("*") if p.is_file()] == [small_disk / "filler"]  # no bundle
    assert set(os.listdir("/sys/class/net")) == interfaces


def test_sigterm_stops_an_experiment_like_ctrl_c_keeping_what_finished_with_status_143(tmp_path):
    config = SMALL_INCAST.format(name="terminated", **{**INCAST, "total_bytes": 1_000_000, "flows": [2, 4, 8],
                                                       "rounds": 3})
    run = Run(tmp_path, "terminated", config)
    run.wait_for(lambda: run.round_started("expresspass", 2, 2), "expresspass's round 2")  # round 1 is done
    run.process.send_signal(signal.SIGTERM)
    err = run.finish(timeout=120)

    assert run.process.returncode == 128 + signal.SIGTERM, err
    assert last_line(err) == "ccemu: stopped by SIGTERM (what was up is torn down)"
    bundle = run.bundle()
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["interrupted"] is True
    assert 0 < len(table(bundle, "rounds")) < 2 * 3 * 3
    assert "**Interrupted**" in (bundle / "summary.md").read_text()
    run.assert_nothing_left()


def test_sigterm_to_a_benchmark_tears_its_fabric_down_and_leaves_nothing(tmp_path):
    interfaces = set(os.listdir("/sys/class/net"))
    state = tmp_path / "state"
    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "bringup.py"
    process = subprocess.Popen([sys.executable, str(bench), "--k", "4", "--docker-k"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "CCEMU_STATE_ROOT": str(state)})
    deadline = time.monotonic() + 120
    while recorded_pid(state, "shell of *") is None:  # its first fabric is coming up
        assert time.monotonic() < deadline and process.poll() is None, "no fabric came up"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)

    assert process.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == "benchmarks/bringup.py: stopped by SIGTERM (what was up is torn down)"
    assert "Traceback" not in err
    assert list(state.rglob("state.json")) == []
    assert set(os.listdir("/sys/class/net")) == interfaces
