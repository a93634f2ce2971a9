"""Where a run is in Grafana: the dashboards a run feeds, the links that open each on the run's
time range (a finished run is older than their default, the last 15 minutes), and the command
that starts docker/compose.yml's Grafana on the run's Prometheus. `python -m ccemu.metrics.grafana
links BUNDLE` prints a bundle's links (`make replay`).

Apart from dashboards.py so that a run prints these without loading the dashboards' builders.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.parse
from datetime import datetime
from pathlib import Path

from ..model.config import WORKLOAD_KINDS
from ..results.bundle import read_manifest

REPO_ROOT = Path(__file__).resolve().parents[3]
GRAFANA_URL = "http://127.0.0.1:3000"  # docker/compose.yml's

ALL_KINDS = tuple(WORKLOAD_KINDS)  # the experiment files' kinds (kinds/ runs each)
# uid -> the experiment kinds whose runs feed every panel of that dashboard.
KINDS: dict[str, tuple[str, ...]] = {
    "ccemu-fabric": ALL_KINDS,
    "ccemu-flows": ALL_KINDS,
    "ccemu-transport": ALL_KINDS,
    "ccemu-fidelity": ALL_KINDS,
    "ccemu-realistic": ("realistic",),
    "ccemu-convergence": ("convergence",),
    "ccemu-lossless": ("victim",),  # the kind whose ports are lossless (PFC) in the live test's run
    # Runs of any kind with Docker hosts feed it (the containers' cgroups), no namespace run does:
    # the live test's monitored incast is the one run in Docker hosts.
    "ccemu-hosts": ("incast",),
}

DOCKER_ONLY = ("ccemu-hosts",)  # fed by Docker hosts' cgroups alone


def for_run(kind: str, docker_hosts: bool) -> list[str]:
    """The uids of the dashboards a run of `kind` feeds, the fabric's first."""
    return [uid for uid, kinds in KINDS.items() if kind in kinds and (docker_hosts or uid not in DOCKER_ONLY)]


def _epoch_ms(timestamp: str) -> int:
    """manifest.json's UTC time (2026-11-27T13:51:14Z) in Grafana's from/to unit."""
    return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)


# A run's range is padded by a few scrapes: its first and last samples sit inside, not on an edge.
RANGE_PAD_MS = 10_000


def links(kind: str, experiment: str, started: str, finished: str | None = None, docker_hosts: bool = False,
          grafana: str = GRAFANA_URL) -> dict[str, str]:
    """uid -> the URL that opens a dashboard the run feeds (`experiment`, of `kind`) on the run:
    its experiment chosen, the time from `started` to `finished` (manifest.json's; None: a live
    run, until now, refreshed every 5 s)."""
    start = _epoch_ms(started) - RANGE_PAD_MS
    end = {"to": _epoch_ms(finished) + RANGE_PAD_MS} if finished else {"to": "now", "refresh": "5s"}
    query = urllib.parse.urlencode({"orgId": 1, "var-experiment": experiment, "from": start, **end})
    return {uid: f"{grafana.rstrip('/')}/d/{uid}/{uid}?{query}" for uid in for_run(kind, docker_hosts)}


def bundle_links(bundle: Path, grafana: str = GRAFANA_URL) -> tuple[str, dict[str, str]]:
    """The run a bundle holds, from its manifest.json: its time window in words, and its `links`
    (a file people exchange: its values go into the URLs encoded, never anywhere else)."""
    manifest = read_manifest(bundle)  # not through a link; its name a name, its text printable
    try:
        kind, name = str(manifest["kind"]), str(manifest["config"]["name"])
        docker = (manifest["config"].get("hosts") or {}).get("kind") == "docker"
        started, finished = str(manifest["started"]), manifest["finished"] and str(manifest["finished"])
        urls = links(kind, name, started, finished, docker, grafana)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # times that parse are all it prints
        raise ValueError(f"{bundle / 'manifest.json'}: no run's kind, name and times ({exc})") from None
    return f"the run: {started} to {finished or 'its interruption'} (UTC)", urls


def compose_command() -> tuple[str, str]:
    """How this machine runs compose (Docker's plugin, else Debian's docker-compose, as the
    Makefile's replay does), and what it lacks when it has neither ("" when it has one)."""
    try:
        if subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=10).returncode == 0:
            return "docker compose", ""
    except (OSError, subprocess.TimeoutExpired):
        pass
    if shutil.which("docker-compose"):
        return "docker-compose", ""
    return "docker compose", " (this machine has no compose: Docker's compose plugin, or `apt install docker-compose`)"


def grafana_lines(prometheus_port: int, dashboard_links: dict[str, str]) -> list[str]:
    """What to print for a user to watch: the command that starts Grafana on this Prometheus
    (docker/compose.yml; it pulls Grafana's image), then each dashboard's link."""
    compose = os.path.relpath(REPO_ROOT / "docker" / "compose.yml")
    if compose.startswith(".."):
        compose = str(REPO_ROOT / "docker" / "compose.yml")
    command, lacking = compose_command()
    return [f"Grafana: CCEMU_PROMETHEUS_PORT={prometheus_port} {command} -f {compose} up grafana{lacking}",
            *(f"  {uid:18} {url}" for uid, url in dashboard_links.items())]


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "links":
        try:
            window, urls = bundle_links(Path(argv[1]))
            print(window)
            for uid, url in urls.items():
                print(f"{uid:18} {url}")
        except (OSError, ValueError) as exc:
            print(f"grafana links: {exc}", file=sys.stderr)
            return 2
        return 0
    print("usage: python -m ccemu.metrics.grafana links BUNDLE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
