"""Ansible for real: site.yml provisioning this machine twice (the second run changes nothing),
and sweeps run by `ccemu sweep` here and across "machines" that are sshd instances on 127.0.0.1
(tests/live/machines.py), with every bundle fetched back and nothing left behind."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import ansible_runner
import pytest
import yaml

from ccemu.experiments.provenance import git_commit
from machines import Machines
from runs import SMALL_INCAST

REPO = Path(__file__).resolve().parents[3]
PLAYBOOKS = REPO / "playbooks"
STATE_ROOT = Path("/run/ccemu")
ENV = {"ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"),
       "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]}


def site(inventory: Path, private: Path, **extravars) -> dict:
    """site.yml on the inventory; its recap (ansible-runner's stats: changed, failures, ... per host)."""
    private.mkdir(exist_ok=True)
    result = ansible_runner.run(private_data_dir=str(private), playbook=str(PLAYBOOKS / "site.yml"),
                                inventory=str(inventory), envvars=ENV, extravars=extravars, quiet=True,
                                suppress_env_files=True)
    assert result.status == "successful", result.stdout.read()[-3000:]
    return result.stats


def tiny_sweep(directory: Path, grid: str) -> Path:
    """A sweep of a two-scheme incast on a star of 5 hosts (seconds per point)."""
    (directory / "tiny.yaml").write_text(SMALL_INCAST.format(name="tiny", seed=1, total_bytes=200_000, flows=[2],
                                                             rounds=1, round_timeout_s=30, hosts="{kind: namespace}"))
    path = directory / "sweep.yaml"
    path.write_text(f"experiment: tiny.yaml\nmonitoring: false\ncheck: false\ngrid: {grid}\n")
    return path


def ccemu_sweep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ccemu.cli", "sweep", *args], capture_output=True, text=True,
                          env={**os.environ, **ENV}, timeout=900)


def runs_in(root: Path) -> set[str]:
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


@pytest.mark.root
def test_site_yml_against_localhost_twice_changes_nothing_the_second_time(tmp_path):
    root = tmp_path / "opt" / "ccemu"
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"ccemu": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3",
        "ccemu_build_root": str(root), "ccemu_site_docker": True}}}}))
    try:
        first = site(inventory, tmp_path / "runner")
        # A fresh folder: the tree is copied and unpacked, the virtualenv made.
        assert first["changed"].get("localhost", 0) >= 3, first
        assert (root / "build" / "cchost").read_bytes() == (REPO / "build" / "cchost").read_bytes()
        assert (root / "build" / "bpf" / "port.bpf.o").is_file()
        assert (root / "build" / "commit").read_text().strip() == git_commit()  # what its bundles will cite
        assert root.stat().st_mode & 0o777 == 0o700  # the controller's untracked files are root's to read
        check = subprocess.run([str(root / ".venv" / "bin" / "ccemu"), "sweep", "--help"], capture_output=True,
                               text=True)
        assert check.returncode == 0 and "--inventory" in check.stdout
        second = site(inventory, tmp_path / "runner")
        assert second["changed"].get("localhost", 0) == 0, second
        assert not second["failures"] and not second["dark"]
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.mark.root
def test_a_sweep_fans_out_over_ssh_to_two_machines_and_every_bundle_comes_back_merged(tmp_path):
    machines = Machines(tmp_path / "machines", ["w1", "w2"])
    (tmp_path / "machines").mkdir()
    runs_before = runs_in(STATE_ROOT)
    try:
        machines.start()
        site(machines.inventory(), tmp_path / "runner")
        # The sweep's inventory also names a machine that does not answer: its share goes to the others.
        inventory = machines.inventory(unreachable={"w3": machines.closed_port()}, name="with-w3.yml")
        sweep = tiny_sweep(tmp_path, "{scheme: [expresspass, dctcp], workload.flows: [2, 4]}")
        ran = ccemu_sweep(str(sweep), "--inventory", str(inventory), "--results", str(tmp_path / "results"))
        # Every point ran; the sweep still fails, in one line, because w3 did not answer.
        assert ran.returncode == 1, ran.stdout + ran.stderr
        assert "w3: unreachable" in ran.stdout
        assert ran.stderr.strip().startswith("ccemu sweep: 0 of 4 points did not finish, 1 machine(s) did not "
                                             "answer: w3 unreachable (") and len(ran.stderr.strip().splitlines()) == 1
        directory = next((tmp_path / "results" / "sweeps" / "sweep").iterdir())
        machines_file = json.loads((directory / "machines.json").read_text())
        assert machines_file["points"] == {"w1": ["p01", "p03"], "w2": ["p02", "p04"]}
        assert set(machines_file["unreachable"]) == {"w3"}
        spans = {}  # point -> (started, ended): its machine file is written as it starts, its log to its end
        for point, machine in (("p01", "w1"), ("p02", "w2"), ("p03", "w1"), ("p04", "w2")):
            assert f"{point}: done on {machine}" in ran.stdout
            run = directory / "runs" / point
            assert (run / "machine").read_text().strip() == machine
            spans[point] = ((run / "machine").stat().st_mtime, (run / "log").stat().st_mtime)
            bundle = next(run.glob("*/*/manifest.json")).parent
            flows = bundle / "flows.csv"
            assert len(flows.read_text().splitlines()) > 1, f"{point}: no flow in {flows}"
            # The machine's tree has no .git: its bundles cite the controller's commit.
            assert json.loads((bundle / "manifest.json").read_text())["git_commit"] == git_commit()
        # One fabric per machine at a time: a machine's second point started after its first ended;
        # the two machines ran at once.
        assert spans["p03"][0] >= spans["p01"][1] and spans["p04"][0] >= spans["p02"][1], spans
        assert spans["p01"][0] < spans["p02"][1] and spans["p02"][0] < spans["p01"][1], spans
        points = (directory / "points.csv").read_text().splitlines()
        assert len(points) == 5 and all(",done," in line for line in points[1:])
        summary = (directory / "summary.md").read_text()
        assert "4 points: 4 ran, 0 failed, 0 did not run." in summary
        blocks = (directory / "blocks.csv").read_text().splitlines()
        assert len(blocks) == 5, blocks  # a block per point: one scheme and one N each
        assert sorted(p.name for p in (directory / "plots").iterdir()) == [
            "sweep_goodput_of_link.png", "sweep_max_queue_packets.png", "sweep_slowdown_p99.png"]
        # Nothing left: not the machines' sweep folders, not the fetched archives, not a fabric.
        assert runs_in(tmp_path / "machines" / "remote") == set()
        assert not list(directory.glob("runs-*.tar.gz"))
        assert runs_in(STATE_ROOT) <= runs_before
    finally:
        machines.stop()
    assert machines.processes() == [] and not machines.control.exists()
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_a_sweep_whose_machines_all_fail_to_answer_runs_no_point_and_says_why(tmp_path):
    machines = Machines(tmp_path, [])
    inventory = machines.inventory(unreachable={"w3": machines.closed_port()})
    sweep = tiny_sweep(tmp_path, "{workload.flows: [2, 4]}")
    try:
        ran = ccemu_sweep(str(sweep), "--inventory", str(inventory), "--results", str(tmp_path / "results"))
    finally:
        machines.stop()
    assert ran.returncode == 1
    errors = ran.stderr.strip().splitlines()
    assert len(errors) == 1, ran.stderr
    assert errors[0].startswith("ccemu sweep: 2 of 2 points did not finish, 1 machine(s) did not answer: "
                                "p01 not run (no machine ran it: w3 unreachable: "), errors[0]
    assert "; p02 not run" in errors[0] and "; w3 unreachable (" in errors[0]
    summary = next((tmp_path / "results" / "sweeps" / "sweep").iterdir()) / "summary.md"
    assert "2 points: 0 ran, 0 failed, 2 did not run." in summary.read_text()


def test_a_sweep_on_an_inventory_ansible_cannot_read_fails_in_one_line_naming_it(tmp_path):
    inventory = tmp_path / "broken.yml"
    inventory.write_text("ccemu: [this is not, an inventory\n")
    ran = ccemu_sweep(str(tiny_sweep(tmp_path, "{workload.flows: [2]}")), "--inventory", str(inventory),
                      "--results", str(tmp_path / "results"))
    # Judged before a plan is written (sweeps/machines.py): a bad inventory is a bad input, status 2.
    assert ran.returncode == 2, ran.stdout + ran.stderr
    errors = ran.stderr.strip().splitlines()
    assert errors == [f"ccemu: {inventory}: lists no machine (Unable to parse {inventory} as an inventory source)"]
    assert not (tmp_path / "results").exists()
    missing = ccemu_sweep(str(tmp_path / "sweep.yaml"), "--inventory", str(tmp_path / "nosuch.yml"))
    assert (missing.returncode, missing.stderr.strip()) == (2, f"ccemu sweep: --inventory {tmp_path / 'nosuch.yml'}: "
                                                               "no such file")


@pytest.mark.root
def test_a_point_past_the_sweeps_time_limit_is_interrupted_keeps_what_finished_and_leaves_no_fabric(tmp_path):
    runs_before = runs_in(STATE_ROOT)
    # 30 s: long enough that the point is interrupted mid-experiment, its bundle begun, even where
    # Python and the fabric take their time to start (at 6 s a loaded machine could stop it before);
    # 500 rounds of both schemes take minutes, so the limit is what ends it.
    sweep = tiny_sweep(tmp_path, "{workload.rounds: [500]}")
    sweep.write_text(sweep.read_text() + "timeout_s: 30\n")
    ran = ccemu_sweep(str(sweep), "--results", str(tmp_path / "results"))
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "point 1/1 p01: stopped at its time limit in" in ran.stdout
    assert "p01 interrupted (stopped early (its time limit, or Ctrl-C)" in ran.stderr
    directory = next((tmp_path / "results" / "sweeps" / "sweep").iterdir())
    manifest = json.loads(next((directory / "runs" / "p01").glob("*/*/manifest.json")).read_text())
    assert manifest["interrupted"] and 0 < manifest["wall_seconds"] < 30
    assert "(interrupted)" in (directory / "summary.md").read_text()
    assert runs_in(STATE_ROOT) <= runs_before


@pytest.mark.root
def test_a_sweep_without_an_inventory_runs_its_points_here_one_after_another(tmp_path):
    runs_before = runs_in(STATE_ROOT)
    sweep = tiny_sweep(tmp_path, "{workload.flows: [2, 3]}")
    ran = ccemu_sweep(str(sweep), "--results", str(tmp_path / "results"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    said = [ran.stdout.index(line) for line in (
        "point 1/2 p01 (workload.flows=2): running on", "point 1/2 p01: done in",
        "point 2/2 p02 (workload.flows=3): running on", "point 2/2 p02: done in")]
    assert said == sorted(said), ran.stdout
    directory = next((tmp_path / "results" / "sweeps" / "sweep").iterdir())
    blocks = (directory / "blocks.csv").read_text().splitlines()
    assert len(blocks) == 1 + 2 * 2  # two points x two schemes (the base's)
    assert runs_in(STATE_ROOT) <= runs_before
