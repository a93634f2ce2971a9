"""Every failure is one line, a named exit status, and nothing left behind (root; CI runs these):
a missing build, an Open vSwitch that will not start, a Prometheus that fails."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.root

EXIT_NOT_BUILT, EXIT_FABRIC, EXIT_MONITORING = 5, 6, 7  # ccemu/commands/exits.py
TINY_INCAST = """
name: tiny
topology: {kind: star, hosts: 3}
link: {rate_mbps: 10}
schemes: [{scheme: dctcp, port: {ecn_threshold_bytes: 15000, buffer_bytes: 30000}}]
workload: {kind: incast, aggregator: h1, total_bytes: 100000, flows: [2], rounds: 1}
"""


def run_ccemu(tmp_path, *args, env=None):
    env = {**os.environ, "CCEMU_STATE_ROOT": str(tmp_path / "state"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "ccemu.cli", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)


def fake_tool(tmp_path, name, message):
    """A directory to put first in PATH, whose `name` prints `message` and exits 1."""
    directory = tmp_path / "fake-bin"
    directory.mkdir(exist_ok=True)
    tool = directory / name
    tool.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    tool.chmod(0o755)
    return {"PATH": f"{directory}:{os.environ['PATH']}"}


@pytest.fixture
def nothing_left(tmp_path):
    """Asserts, after the test, that the run created nothing: no state, no bundle, no interface."""
    interfaces = set(os.listdir("/sys/class/net"))
    yield
    assert [p for p in tmp_path.rglob("*") if p.is_file() and "fake-bin" not in p.parts and p.suffix != ".yaml"] == []
    assert set(os.listdir("/sys/class/net")) == interfaces


def one_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    return lines[0]


@pytest.mark.parametrize("variable, missing", [("CCEMU_CCHOST", "cchost"), ("CCEMU_BPF_DIR", "port program")])
def test_a_missing_build_is_one_line_that_says_to_run_make_setup(tmp_path, nothing_left, variable, missing):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_INCAST)
    result = run_ccemu(tmp_path, "experiment", str(config), "--results", "results",
                       env={variable: str(tmp_path / "not-built" / "x")})
    assert result.returncode == EXIT_NOT_BUILT
    line = one_line(result)
    assert line.startswith(f"ccemu: {'the ' if missing == 'port program' else ''}{missing} is not built")
    assert line.endswith("run `make setup`")


def test_an_ovs_that_will_not_start_is_one_line_naming_it_and_leaves_nothing(tmp_path, nothing_left):
    result = run_ccemu(tmp_path, "check", "--topo", "star", "--hosts", "2", "--datapath", "ovs",
                       env=fake_tool(tmp_path, "ovs-vswitchd", "fake ovs-vswitchd: cannot start"))
    assert result.returncode == EXIT_FABRIC
    assert one_line(result).startswith("ccemu: ovs-vswitchd #0 exited with status 1 at start: "
                                       "fake ovs-vswitchd: cannot start")


def test_a_prometheus_that_fails_is_one_line_and_leaves_no_bundle(tmp_path, nothing_left):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_INCAST)
    result = run_ccemu(tmp_path, "experiment", str(config), "--skip-check", "--results", "results",
                       env=fake_tool(tmp_path, "prometheus", "fake prometheus: no"))
    assert result.returncode == EXIT_MONITORING
    line = one_line(result)
    assert line.startswith("ccemu: prometheus exited with status 1 at start: fake prometheus: no")
    assert "--no-monitoring runs without" in line


def test_a_dockerd_that_will_not_start_is_one_line_and_leaves_nothing(tmp_path, nothing_left):
    config = tmp_path / "docker.yaml"
    config.write_text("name: docker\ntopology: {kind: star, hosts: 2}\nhosts: {kind: docker}\n")
    fake_tool(tmp_path, "dockerd", "fake dockerd: cannot start")
    # DOCKER_HOST: a socket nobody listens on, so that ccemu starts (the fake) dockerd even on a
    # machine whose own engine runs; its records go to the test's directory.
    result = run_ccemu(tmp_path, "check", "--config", str(config),
                       env={"CCEMU_DOCKERD": str(tmp_path / "fake-bin" / "dockerd"),
                            "DOCKER_HOST": f"unix://{tmp_path}/nobody.sock",
                            "CCEMU_DOCKER_STATE": str(tmp_path / "docker")})
    assert result.returncode == EXIT_FABRIC
    assert one_line(result) == ("ccemu: dockerd exited with status 1: fake dockerd: cannot start; "
                                "nothing of the run is left")
    assert not (tmp_path / "docker").exists()
