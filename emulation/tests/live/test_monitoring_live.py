"""Live metrics of a real run (root; CI runs these): the collector's output passes promtool,
every dashboard panel's query finds the run's series in its Prometheus, and nothing listens
beyond loopback."""

import calendar
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from runs import start_config, start_experiment

from ccemu.metrics.dashboards import DASHBOARD_DIR, dashboards, panel_queries, rendered
from ccemu.metrics.grafana import KINDS, RANGE_PAD_MS
from ccemu.metrics.monitoring import query_range

def listening_sockets_of(pids: set[int]) -> list[str]:
    """Local addresses of the TCP sockets in LISTEN state held by `pids` (root namespace)."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    found = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address = fields[1].split(":")[0]
                found.append(address if width == 32 else ".".join(str(int(address[i:i + 2], 16))
                                                                 for i in (6, 4, 2, 0)))
    return found


def monitoring_pids(state_root: Path) -> set[int]:
    pids = set()
    for state in (state_root / "monitoring").glob("*/state.json"):
        pids |= {p["pid"] for p in json.loads(state.read_text())["processes"]}
    return pids


def wait_for_line(proc, pattern: str, timeout: float = 60) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        match = re.search(pattern, line)
        if match:
            return match
        if not line and proc.poll() is not None:
            break
    pytest.fail(f"no line matching {pattern!r}: {proc.stderr.read() if proc.stderr else ''}")


def test_the_committed_dashboards_are_what_the_generator_writes():
    for uid, dashboard in dashboards().items():
        assert (DASHBOARD_DIR / f"{uid}.json").read_text() == rendered(dashboard), \
            f"dashboards/{uid}.json is stale: run `python -m ccemu.metrics.dashboards write`"


# Small runs of the kinds that have dashboards of their own, on a star (5-10 Mbit/s links with a
# few ms of propagation), each ~12 s of traffic: rates over 5 s windows need several scrapes. The
# realistic one stands for a 50 Mbit/s datacenter at d = 10, so that its goodput in the dashboards
# (per datacenter second) exceeds what its 5 Mbit/s links could carry per wall second. ExpressPass
# for the credit panels, DCTCP for queues that grow past the two histogram buckets the collector
# exports.
SMALL_KINDS = {
    "realistic": """
name: monitored
topology: {kind: star, hosts: 5}
datacenter: {link_gbps: 0.05, link_delay_us: 200, dilation: 10}
schemes: [{scheme: expresspass}, {scheme: dctcp}]
workload: {kind: realistic, cdf: webserver, loads: [0.5], flows: 300, timeout_s: 30}
""",
    "convergence": """
name: monitored
topology: {kind: star, hosts: 4}
datacenter: {link_gbps: 0.01, link_delay_us: 5000, dilation: 1}
schemes: [{scheme: expresspass}, {scheme: dctcp}]
workload: {kind: convergence, receiver: h1, senders: 2, interval_rtts: 200, alphas: [0.5], timeout_s: 30}
""",
    # Lossless ports (PFC pauses, TCD's UE marks) need two switches: TCD marks switch ports only.
    "victim": """
name: monitored
topology: {kind: dumbbell, hosts_per_side: 3}
datacenter: {link_gbps: 0.01, link_delay_us: 1000, dilation: 1}
schemes:
  - {scheme: expresspass}
  - scheme: dcqcn+tcd
    port: {profile: tcd, buffer_bytes: 200000, lossless: {xoff_bytes: 30000, xon_bytes: 20000}}
workload: {kind: victim, victim_senders: [h1], victim_receiver: h5, congesting_senders: [h2], hot_receiver: h4,
           bursters: [h6], flows: 60, burst_bytes: 300000, burst_interval_us: 1000000, timeout_s: 30}
""",
}


@pytest.mark.root
@pytest.mark.parametrize("kind", ["incast", *SMALL_KINDS])
def test_a_monitored_run_feeds_every_panel_of_its_kinds_dashboards_and_listens_on_loopback_only(tmp_path, kind):
    if kind == "incast":  # in Docker hosts (one CPU-limited) for the hosts dashboard's cgroup panels
        run, env = start_experiment(tmp_path, "monitored", 5, 1_000_000, [2, 8], 2,
                                    hosts="{kind: docker, per_host: {h2: {cpus: 0.5, memory_mb: 256}}}")
    else:
        run, env = start_config(tmp_path, "monitored", SMALL_KINDS[kind])
    try:
        collector_port = int(wait_for_line(run, r"collector 127\.0\.0\.1:(\d+)/metrics").group(1))
        deadline = time.monotonic() + 60
        exposition = b""
        while b"ccemu_port_queue_length_bytes_bucket{" not in exposition and time.monotonic() < deadline:
            time.sleep(0.5)  # until a fabric is up and a queue has built
            with urllib.request.urlopen(f"http://127.0.0.1:{collector_port}/metrics", timeout=10) as response:
                exposition = response.read()
        listening = listening_sockets_of({run.pid} | monitoring_pids(tmp_path / "state"))
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    assert b"ccemu_port_queue_bytes{" in exposition and b"ccemu_port_queue_length_bytes_bucket{" in exposition
    check = subprocess.run(["promtool", "check", "metrics"], input=exposition, capture_output=True)
    assert check.returncode == 0 and not check.stdout.strip() and not check.stderr.strip(), check
    assert len(listening) >= 2 and set(listening) == {"127.0.0.1"}, listening

    (bundle,) = (tmp_path / "results" / "monitored").iterdir()
    manifest = json.loads((bundle / "manifest.json").read_text())
    cost = manifest["monitoring"]
    print(f"collector: {cost['scrapes']} scrapes, {cost['collector_cpu_seconds']} CPU s, "
          f"Prometheus {cost['prometheus_cpu_seconds']} CPU s, over {cost['seconds']} s")
    assert cost["scrapes"] >= cost["seconds"] * 0.5

    before = bundle_tree(bundle)
    monitor = subprocess.Popen([sys.executable, "-m", "ccemu.cli", "monitor", str(bundle), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = wait_for_line(monitor, r"(http://127\.0\.0\.1:\d+)").group(1)
        # UTC stamps: timegm (mktime - timezone was an hour off wherever summer time was in force).
        start = calendar.timegm(time.strptime(manifest["started"], "%Y-%m-%dT%H:%M:%SZ"))
        end = calendar.timegm(time.strptime(manifest["finished"], "%Y-%m-%dT%H:%M:%SZ")) + 2
        # Then the dashboards' links, on the run's own time range.
        fabric_link = wait_for_line(monitor, r"ccemu-fabric +(http://\S+)").group(1)
        assert f"var-experiment=monitored&from={start * 1000 - RANGE_PAD_MS}&to=" in fabric_link
        assert set(listening_sockets_of(monitoring_pids(tmp_path / "state"))) == {"127.0.0.1"}
        empty = []
        boards = {uid: board for uid, board in dashboards().items() if kind in KINDS[uid]}
        assert len(boards) >= 4
        for uid, dashboard in boards.items():
            for title, expression in panel_queries(dashboard):
                concrete = (expression.replace("$experiment", "monitored").replace("$scheme", ".*")
                            .replace("$n", ".*").replace("$point", ".*").replace("$__rate_interval", "5s"))
                if not query_range(url, concrete, start, end):
                    empty.append(f"{uid} / {title}: {concrete}")
        assert empty == []
        if kind == "realistic":  # per datacenter second: beyond what a 5 Mbit/s link carries per wall second
            (goodput,) = [t["expr"] for p in dashboards()["ccemu-transport"]["panels"] for t in p["targets"]
                          if p["title"] == "Goodput per receiving host"]
            concrete = (goodput.replace("$experiment", "monitored").replace("$scheme", ".*").replace("$n", ".*")
                        .replace("$point", ".*").replace("$__rate_interval", "5s"))
            peak = max(float(v) for series in query_range(url, concrete, start, end) for _, v in series["values"])
            assert 1.2 * 5e6 < peak <= 1.05 * 5e7, peak
    finally:
        monitor.send_signal(2)
        monitor.wait(timeout=30)
    assert list((tmp_path / "state").rglob("state.json")) == []
    assert bundle_tree(bundle) == before  # served from a copy: viewing changed nothing


def bundle_tree(bundle: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(bundle)): (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(bundle.rglob("*"))}
