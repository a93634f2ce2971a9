"""Faults during a run, the parts that need no fabric: signals unwind (and a second one does not cut
the teardown short), a full results disk is refused or named, a dead Prometheus is said once, and a
block the emulation failed under is judged FAIL. (tests/live/test_faults_live.py runs them live.)"""

import errno
import io
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from ccemu import interrupts
from ccemu.commands import exits
from ccemu.metrics.monitoring import MonitoringSession
from ccemu.results import fidelity, space
from ccemu.results.bundle import Bundle

EMULATION = Path(__file__).resolve().parents[2]
SCRIPT = textwrap.dedent("""
    import sys, time
    from ccemu import interrupts

    def main():
        try:
            print("ready", flush=True)
            time.sleep(60)
        finally:
            print("tearing down", flush=True)
            sys.stdin.readline()  # the teardown: until the test says it may end
            print("torn down", flush=True)

    interrupts.run_script(main, "bench")
""")


def start_script() -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=EMULATION)
    assert read_line(process.stdout) == "ready"
    return process


def read_line(stream, timeout: float = 30) -> str:
    assert select.select([stream], [], [], timeout)[0], f"nothing within {timeout} s"
    return stream.readline().strip()


@pytest.mark.parametrize("sig, said", [(signal.SIGTERM, "stopped by SIGTERM"), (signal.SIGINT, "interrupted")])
def test_a_script_stopped_by_a_signal_runs_its_teardown_and_exits_128_plus_the_signal(sig, said):
    process = start_script()
    process.send_signal(sig)
    assert read_line(process.stdout) == "tearing down"
    out, err = process.communicate("go\n", timeout=30)
    assert out.strip() == "torn down"
    assert process.returncode == 128 + sig
    assert err.strip() == f"bench: {said} (what was up is torn down)"


def test_a_second_signal_while_tearing_down_is_said_and_the_teardown_runs_to_its_end():
    process = start_script()
    process.send_signal(signal.SIGTERM)
    assert read_line(process.stdout) == "tearing down"
    for second in (signal.SIGTERM, signal.SIGINT):
        process.send_signal(second)
        assert read_line(process.stderr) == (f"bench: {second.name} while stopping: the teardown goes on (SIGKILL "
                                             "ends it; `ccemu clean` then removes what is left)")
    out, err = process.communicate("go\n", timeout=30)
    assert out.strip() == "torn down"  # not cut short
    assert process.returncode == 128 + signal.SIGTERM  # the first signal's
    assert err.strip() == "bench: stopped by SIGTERM (what was up is torn down)"


def test_a_keyboard_interrupt_python_raised_itself_counts_as_ctrl_c():
    assert interrupts.exit_status(KeyboardInterrupt()) == 130 and interrupts.said(KeyboardInterrupt()) == "interrupted"
    assert interrupts.exit_status(interrupts.Stopped(signal.SIGTERM)) == 143


def test_a_results_folder_without_room_for_the_reserve_refuses_the_run_and_keeps_no_bundle(tmp_path, monkeypatch):
    def no_room(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(space.os, "posix_fallocate", no_room)
    with pytest.raises(space.ResultsDiskFull, match=f"^the results folder {tmp_path} has less than 16 MiB free "
                                                    r"\(\d+ KiB\): free some space or give --results another "
                                                    "folder; nothing was started$"):
        Bundle(tmp_path, "experiment")
    assert list(tmp_path.iterdir()) == []


def test_a_bundle_holds_its_reserve_until_it_writes_its_tables(tmp_path):
    bundle = Bundle(tmp_path, "experiment")
    reserve = bundle.dir / space.RESERVE_FILE
    assert reserve.stat().st_blocks * 512 >= space.RESERVE_BYTES  # allocated, not a hole
    bundle.write_tables()
    assert not reserve.exists() and (bundle.dir / "flows.csv").exists()


@pytest.mark.parametrize("free, said", [
    (space.FULL_BELOW_BYTES, None),
    (space.FULL_BELOW_BYTES - 1, "the results folder's disk is full (1023 KiB free under {})"),
    (0, "the results folder's disk is full (0 KiB free under {})"),
])
def test_the_results_disk_counts_as_full_below_a_mebibyte(tmp_path, monkeypatch, free, said):
    monkeypatch.setattr(space.shutil, "disk_usage", lambda path: SimpleNamespace(total=1 << 30, used=0, free=free))
    assert space.full(tmp_path) == (said.format(tmp_path) if said else None)


def test_no_space_left_anywhere_is_one_line_with_the_disk_full_status(capsys):
    status = exits.one_line(OSError(errno.ENOSPC, "No space left on device", "/results/x/flows.csv"))
    assert status == exits.EXIT_DISK_FULL == 9
    assert capsys.readouterr().err == ("ccemu: no space left to write /results/x/flows.csv (No space left on device): "
                                       "free some space; what was up is torn down\n")
    assert exits.one_line(space.ResultsDiskFull("full")) == exits.EXIT_DISK_FULL


def test_a_prometheus_that_died_is_said_once_and_kept_for_the_verdict(tmp_path):
    out = io.StringIO()
    session = MonitoringSession(tmp_path, "x", Console(file=out, width=300), on=False)
    died = []
    session.prometheus = SimpleNamespace(died=lambda: died[0] if died else None)
    session.check()
    assert session.lost is None and out.getvalue() == ""
    died.append("prometheus killed by SIGKILL")
    session.check()
    session.check()
    assert session.lost.startswith("prometheus killed by SIGKILL, 0 s into the run: the live metrics (and the "
                                   "bundle's Prometheus data) end there")
    assert out.getvalue().count("live metrics: prometheus killed by SIGKILL") == 1


def test_a_block_the_emulation_failed_under_is_judged_fail_whatever_its_figures():
    seen = fidelity.Observation(steal=0.0, busy=0.1, frame_bytes=1538,
                                faults=["ovs-vswitchd #0 killed by SIGKILL: the block ended there"])
    verdict = fidelity.judge(seen)
    assert verdict.status == fidelity.FAIL
    assert verdict.reasons == ["FAIL: ovs-vswitchd #0 killed by SIGKILL: the block ended there"]
    assert fidelity.judge(fidelity.Observation(steal=0.0, busy=0.1, frame_bytes=1538)).status == fidelity.PASS


def test_namespaces_entered_only_part_way_exit_with_the_fabric_status_as_before_they_had_a_module_of_their_own(capsys):
    from ccemu.fabric.namespaces import NamespaceError

    assert exits.one_line(NamespaceError("entering the namespaces failed part way")) == exits.EXIT_FABRIC
    assert capsys.readouterr().err.startswith("ccemu: entering the namespaces failed part way")
