"""`ccemu experiment` end to end on a small fabric (root; CI runs these)."""

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
from runs import start_experiment as start_incast

from ccemu.polling import wait_until


def start_experiment(tmp_path, total_bytes, flows, rounds, **options):
    run, _ = start_incast(tmp_path, "tiny-incast", 3, total_bytes, flows, rounds, **options)
    return run


def table(bundle, name):
    with open(bundle / f"{name}.csv", newline="") as source:
        return list(csv.DictReader(source))


def only_bundle(tmp_path):
    (bundle,) = (tmp_path / "results" / "tiny-incast").iterdir()
    return bundle


def assert_nothing_left(tmp_path, interfaces_before):
    assert set(os.listdir("/sys/class/net")) == interfaces_before
    assert list((tmp_path / "state").rglob("state.json")) == []  # no run, fabric or monitoring, is left


@pytest.mark.root
def test_an_incast_experiment_leaves_a_bundle_that_puts_the_schemes_side_by_side(tmp_path):
    interfaces_before = set(os.listdir("/sys/class/net"))
    run = start_experiment(tmp_path, 200_000, [2, 8], 2)
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err
    bundle = only_bundle(tmp_path)
    assert f"results: {bundle}" in " ".join(out.split())

    flows, rounds, ports = table(bundle, "flows"), table(bundle, "rounds"), table(bundle, "ports")
    assert len(flows) == 2 * (2 + 8) * 2  # schemes x N x rounds
    assert all(r["unfinished"] == "" for r in rounds)
    assert {f["bucket"] for f in flows} == {"M", "L"}  # 100 KB and 25 KB responses
    # Every scheme answers the same flows: same sources and sizes per N and round.
    same = {(f["n"], f["round"], f["id"], f["src"], f["size"]) for f in flows if f["scheme"] == "expresspass"}
    assert same == {(f["n"], f["round"], f["id"], f["src"], f["size"]) for f in flows if f["scheme"] == "dctcp"}
    expresspass_ports = [p for p in ports if p["scheme"] == "expresspass"]
    assert sum(int(p["data_dropped"]) for p in expresspass_ports) == 0
    manifest = json.loads((bundle / "manifest.json").read_text())
    bound = manifest["expresspass_queue_bound_bytes"]
    assert 0 < max(int(p["max_data_queue"]) for p in expresspass_ports) <= bound
    assert [p["port"] for p in ports if p["bottleneck"] == "1"] == ["s1-eth1"] * 4  # toward the aggregator
    assert sum(int(p["data_marked"]) for p in ports if p["scheme"] == "dctcp") > 0

    # Every fabric has its verdict, with the switch residence measured on the packets it carried.
    blocks = manifest["fidelity"]["blocks"]
    assert [(b["scheme"], b["n"]) for b in blocks] == [("expresspass", 2), ("expresspass", 8), ("dctcp", 2),
                                                        ("dctcp", 8)]
    assert all(0 < b["switch_residence_p50_frames"] <= b["switch_residence_p99_frames"] for b in blocks)
    assert sum(int(p["residence_packets"]) for p in ports) > 0
    assert manifest["unfinished_flows"] == 0 and manifest["host_failures"] == []
    assert manifest["git_commit"] and manifest["versions"]["cchost"].startswith("cchost")
    assert manifest["interrupted"] is False
    summary = (bundle / "summary.md").read_text()
    assert "ExpressPass data queue bound" in summary and "| dctcp | 8 |" in summary
    assert sorted(p.name for p in (bundle / "plots").iterdir()) == ["fct_cdf.png", "incast_vs_n.png",
                                                                    "queue_cdf.png"]
    report = subprocess.run([sys.executable, "-m", "ccemu.cli", "report", str(bundle)], capture_output=True,
                            text=True)
    assert report.returncode == 0 and (bundle / "summary.md").read_text() == summary
    assert_nothing_left(tmp_path, interfaces_before)


def cchost_of(records: Path) -> int | None:
    """The pid of the cchost writing `records` (a path unique to this run's bundle)."""
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
            continue
        if str(records).encode() in argv and argv[0].endswith(b"cchost"):
            return int(entry.name)
    return None


def udp_datagrams_sent(pid: int) -> int | None:
    """UDP datagrams sent in the network namespace of `pid` (a host's: its cchost's), or None."""
    try:
        lines = [line.split() for line in Path(f"/proc/{pid}/net/snmp").read_text().splitlines()
                 if line.startswith("Udp:")]
    except (FileNotFoundError, ProcessLookupError):
        return None
    names, values = lines[0], lines[1]
    return int(values[names.index("OutDatagrams")])


@pytest.mark.root
def test_a_sender_killed_mid_round_is_named_at_once_its_round_ends_and_the_run_exits_non_zero(tmp_path):
    interfaces_before = set(os.listdir("/sys/class/net"))
    run = start_experiment(tmp_path, 4_000_000, [4], 1, round_timeout_s=120)
    deadline = time.monotonic() + 60
    victim = None
    while victim is None:
        assert time.monotonic() < deadline and run.poll() is None, "no sender started"
        # A sender of round 1 (its flows are written there as they are handed to its cchost).
        schedules = sorted((tmp_path / "results").glob("*/*/work/expresspass-N4/round1-*.flows"))
        records = [s.with_name(s.stem.removeprefix("round1-") + ".records") for s in schedules]
        victim = next((pid for pid in map(cchost_of, records) if pid), None)
        time.sleep(0.05)
    # Signalled through a pidfd: the cchost found, not whatever the kernel gives its pid to if it ended.
    pidfd = os.pidfd_open(victim)
    (victim_records,) = [r for r in records if cchost_of(r) == victim]
    host = victim_records.stem
    said = f"expresspass N=4 round 1: {host}'s cchost (sender) killed by SIGKILL"
    lines: list[tuple[float, str]] = []  # (when, line) of the run's output
    reader = threading.Thread(target=lambda: lines.extend((time.monotonic(), line) for line in run.stdout))
    reader.start()
    # Mid-round: the victim's flow under way (it sent 100 datagrams of its ~700), waited for rather
    # than slept for (its cchost may start late on a loaded machine). None: it is gone already, which
    # the signal below reports (ProcessLookupError).
    assert wait_until(lambda: (udp_datagrams_sent(victim) or 10**9) >= 100, 60, 0.02), "the victim sent nothing"
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)
    killed_at = time.monotonic()

    run.wait(timeout=180)
    reader.join(timeout=10)
    err = run.stderr.read()

    # Named at once; the round ended soon after (not at its 120 s timeout) and the rest ran.
    (named_at,) = [when for when, line in lines if said in " ".join(line.split())]
    assert named_at - killed_at < 2
    assert time.monotonic() - killed_at < 60
    assert run.returncode == 4, err  # EXIT_UNFINISHED
    bundle = only_bundle(tmp_path)
    (expresspass_round,) = [r for r in table(bundle, "rounds") if r["scheme"] == "expresspass"]
    assert expresspass_round["failures"].startswith(f"{host}'s cchost (sender) killed by SIGKILL")
    assert int(expresspass_round["finished"]) < int(expresspass_round["flows"])
    assert [r["unfinished"] for r in table(bundle, "rounds") if r["scheme"] == "dctcp"] == [""]
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert [(f["host"], f["role"], f["status"]) for f in manifest["host_failures"]] == \
        [(host, "sender", "killed by SIGKILL")]
    assert manifest["fidelity"]["status"] != "PASS"
    assert any(f"{host}'s cchost (sender) killed by SIGKILL" in r for r in manifest["fidelity"]["reasons"])
    assert f"{host}'s cchost (sender) killed by SIGKILL" in (bundle / "summary.md").read_text()
    assert_nothing_left(tmp_path, interfaces_before)


@pytest.mark.root
def test_ctrl_c_stops_the_experiment_cleanly_and_keeps_what_was_done(tmp_path):
    interfaces_before = set(os.listdir("/sys/class/net"))
    run = start_experiment(tmp_path, 1_000_000, [2, 4, 8, 16], 3)
    deadline = time.monotonic() + 120
    while not list((tmp_path / "results").glob("*/*/work/*/round2-*.flows")):  # round 1 is done
        assert time.monotonic() < deadline and run.poll() is None, "no round finished"
        time.sleep(0.2)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 130, err
    bundle = only_bundle(tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["interrupted"] is True
    assert 0 < len(table(bundle, "rounds")) < 2 * 4 * 3
    assert "**Interrupted**" in (bundle / "summary.md").read_text()
    assert_nothing_left(tmp_path, interfaces_before)
