"""Watching a run in Grafana: docker/compose.yml for a live run and a replayed one (checked with
compose's own `config`: no image can be pulled here), the datasource's port, one Grafana
version, the links that open the dashboards on a run's time range, and `ccemu monitor`'s
Prometheus serving a copy of a bundle's data."""

import calendar
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from ccemu.metrics.grafana import RANGE_PAD_MS, bundle_links, grafana_lines, links
from ccemu.metrics.monitoring import MonitoringError, Prometheus, copy_plain_tree
from ccemu.results.files import BundleFileError

REPO = Path(__file__).resolve().parents[3]
COMPOSE_FILE = REPO / "docker" / "compose.yml"


def compose() -> list[str]:
    """Docker's compose plugin where installed (the hosted runner), else Debian's docker-compose
    (tests/debian-packages.txt): one of them must be there, or the replay is untested."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    assert shutil.which("docker-compose"), "neither `docker compose` nor docker-compose: `make test-packages`"
    return ["docker-compose"]


def compose_config(env: dict[str, str], *profiles: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("BUNDLE", "CCEMU_PROMETHEUS_PORT")}
    return subprocess.run([*compose(), "-f", str(COMPOSE_FILE), *(a for p in profiles for a in ("--profile", p)),
                           "config"], capture_output=True, text=True, env={**environment, **env}, timeout=60)


def bundle_at(path: Path) -> Path:
    (path / "prometheus" / "data").mkdir(parents=True)
    return path


def test_the_replay_passes_compose_config_with_a_bundles_data_mounted_read_only_and_served_from_a_copy(tmp_path):
    bundle = bundle_at(tmp_path / "results" / "incast" / "20261127-135109")
    checked = compose_config({"BUNDLE": str(bundle), "CCEMU_PROMETHEUS_PORT": "9191"}, "bundle")
    assert checked.returncode == 0, checked.stderr
    services = yaml.safe_load(checked.stdout)["services"]
    prometheus = services["prometheus"]
    (data,) = [v for v in prometheus["volumes"] if isinstance(v, dict) and v.get("target") == "/bundle"]
    assert data["type"] == "bind" and data["source"] == str(bundle / "prometheus") and data["read_only"] is True
    assert prometheus["tmpfs"] == ["/prometheus"]
    command = " ".join(prometheus["command"])
    assert command.startswith("cp -a /bundle/data/. /prometheus/ && exec /bin/prometheus")
    assert "--storage.tsdb.path=/prometheus " in command
    assert str(prometheus["environment"]["CCEMU_PROMETHEUS_PORT"]) == "9191"
    assert str(services["grafana"]["environment"]["CCEMU_PROMETHEUS_PORT"]) == "9191"
    assert all(v.endswith(":ro") for v in services["grafana"]["volumes"])


def test_grafana_alone_starts_without_a_bundle_on_prometheus_default_port():
    checked = compose_config({})
    assert checked.returncode == 0, checked.stderr
    assert str(yaml.safe_load(checked.stdout)["services"]["grafana"]["environment"]["CCEMU_PROMETHEUS_PORT"]) == "9090"


def test_make_replay_hands_compose_the_bundles_absolute_path_and_the_port(tmp_path):
    bundle = bundle_at(tmp_path / "b")
    relative = os.path.relpath(bundle, REPO)
    planned = subprocess.run(["make", "-n", "-C", str(REPO), "replay", f"BUNDLE={relative}", "PROMETHEUS_PORT=9191"],
                             capture_output=True, text=True, timeout=60)
    assert planned.returncode == 0, planned.stderr
    assert f'BUNDLE="{bundle}" CCEMU_PROMETHEUS_PORT=9191 ' in planned.stdout
    assert "-f docker/compose.yml --profile bundle up" in planned.stdout


def test_the_datasource_reads_the_port_from_grafanas_environment_which_compose_and_the_role_set():
    datasource = yaml.safe_load((REPO / "dashboards/provisioning/datasources/ccemu.yml").read_text())
    (source,) = datasource["datasources"]
    assert source["uid"] == "ccemu-prometheus" and source["url"] == "http://127.0.0.1:${CCEMU_PROMETHEUS_PORT}"
    grafana = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["grafana"]
    assert grafana["environment"]["CCEMU_PROMETHEUS_PORT"] == "${CCEMU_PROMETHEUS_PORT:-9090}"
    role = yaml.safe_load((REPO / "playbooks/roles/grafana/tasks/install.yml").read_text())
    (line,) = [t["ansible.builtin.lineinfile"] for t in role if "ansible.builtin.lineinfile" in t]
    assert line["path"] == "/etc/default/grafana-server"
    assert line["line"] == "CCEMU_PROMETHEUS_PORT={{ grafana_prometheus_port | int }}"


def test_grafana_is_one_version_in_compose_the_dashboards_builders_and_the_ansible_role():
    sdk = re.search(r'"grafana-foundation-sdk==\d+!(\d+\.\d+)\.\d+"', (REPO / "emulation/pyproject.toml").read_text())
    image = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["grafana"]["image"]
    role = yaml.safe_load((REPO / "playbooks/roles/grafana/defaults/main.yml").read_text())["grafana_package"]
    assert sdk and image == f"grafana/grafana:{sdk[1]}.0" and role == f"grafana={sdk[1]}.*"


def epoch_ms(timestamp: str) -> int:
    return calendar.timegm(time.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ")) * 1000


def test_a_finished_runs_links_open_the_dashboards_it_feeds_on_its_time_range_and_experiment():
    started, finished = "2026-11-27T13:51:14Z", "2026-11-27T13:55:30Z"
    urls = links("realistic", "realistic", started, finished)
    assert list(urls) == ["ccemu-fabric", "ccemu-flows", "ccemu-transport", "ccemu-fidelity", "ccemu-realistic"]
    for uid, url in urls.items():
        assert url.startswith(f"http://127.0.0.1:3000/d/{uid}/{uid}?")
        assert "var-experiment=realistic" in url
        assert f"from={epoch_ms(started) - RANGE_PAD_MS}&to={epoch_ms(finished) + RANGE_PAD_MS}" in url
        assert "refresh" not in url


def test_a_live_runs_links_run_until_now_and_refresh_and_docker_hosts_add_their_dashboard():
    urls = links("incast", "incast", "2026-11-27T13:51:14Z", None, docker_hosts=True)
    assert "ccemu-hosts" in urls and "ccemu-hosts" not in links("incast", "incast", "2026-11-27T13:51:14Z")
    assert all("&to=now&refresh=5s" in url for url in urls.values())


def test_a_bundles_links_come_from_its_manifest_and_a_manifest_without_a_name_or_times_is_refused(tmp_path):
    manifest = {"kind": "victim", "config": {"name": "victim-fig15.b", "hosts": {"kind": "namespace"}},
                "started": "2026-11-27T13:51:14Z", "finished": "2026-11-27T13:55:30Z"}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    window, urls = bundle_links(tmp_path)
    assert window == "the run: 2026-11-27T13:51:14Z to 2026-11-27T13:55:30Z (UTC)"
    assert "ccemu-lossless" in urls and all("var-experiment=victim-fig15.b&" in u for u in urls.values())
    # A name that is not a name (one that would need encoding in a URL) is refused as the manifest is read.
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "config": {"name": "a&b=c d"}}))
    with pytest.raises(BundleFileError, match="config.name must be a name"):
        bundle_links(tmp_path)
    for wrong in ({"started": "yesterday"}, {"finished": "\x1b[2J2026-11-27T13:55:30Z"},
                  {"config": {"name": "n", "hosts": "docker"}}):
        (tmp_path / "manifest.json").write_text(json.dumps({**manifest, **wrong}))
        with pytest.raises(ValueError, match="manifest.json: no run's kind, name and times"):
            bundle_links(tmp_path)


def test_the_lines_a_run_prints_start_grafana_with_this_machines_compose_on_its_port_then_list_the_links():
    first, *rest = grafana_lines(9191, {"ccemu-fabric": "http://x/d/ccemu-fabric"})
    assert first.startswith(f"Grafana: CCEMU_PROMETHEUS_PORT=9191 {' '.join(compose())} -f ")
    assert first.endswith("docker/compose.yml up grafana")
    assert rest == ["  ccemu-fabric       http://x/d/ccemu-fabric"]


def test_a_machine_without_compose_is_told_what_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    (first,) = grafana_lines(9090, {})
    assert first.endswith("up grafana (this machine has no compose: Docker's compose plugin, or "
                          "`apt install docker-compose`)")


def test_copying_a_bundles_data_refuses_a_link_in_it(tmp_path):
    source = tmp_path / "data"
    (source / "wal").mkdir(parents=True)
    (source / "wal" / "00000000").write_bytes(b"x" * 10)
    copy_plain_tree(source, tmp_path / "copy")
    assert (tmp_path / "copy" / "wal" / "00000000").read_bytes() == b"x" * 10
    (source / "chunks_head").symlink_to("/etc")
    with pytest.raises(MonitoringError, match="chunks_head: not a plain file or directory"):
        copy_plain_tree(source, tmp_path / "again")


def tree(path: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(path)): (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(path.rglob("*"))}


def test_serving_a_finished_run_leaves_its_bundle_as_it_was_and_nothing_behind(tmp_path):
    bundle = bundle_at(tmp_path / "bundle")
    (bundle / "prometheus" / "prometheus.yml").write_text("global: {}\n")
    before = tree(bundle)
    state = tmp_path / "state"
    prometheus = Prometheus(bundle, None, "replayed", state_root=state)
    try:
        assert (prometheus.dir / "data").is_dir() and state in prometheus.dir.parents
    finally:
        prometheus.stop()
    assert tree(bundle) == before
    assert not (state / "monitoring").exists()
