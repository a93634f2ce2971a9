"""playbooks/sweep.yml never touches a path outside its machines' sweep folders: an inventory name
that would make one (`x/../../../../sentinel`) stops that machine before the playbook creates or
removes anything there. Runs the real playbook on this machine (ansible_connection=local) with a
plan of no points, so nothing but the playbook's own folder handling runs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PLAYBOOKS = Path(__file__).resolve().parents[3] / "playbooks"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def run_sweep_playbook(tmp_path: Path, machine: str) -> subprocess.CompletedProcess:
    """The sweep playbook with a plan of no points on one local 'machine' named `machine`, its
    sweep folders under tmp_path/a/b/c/root."""
    planned = tmp_path / "results" / "sweeps" / "t" / "20261126-000000"
    planned.mkdir(parents=True)
    (planned / "plan.json").write_text(json.dumps({"name": "t", "points": [], "prefix": []}))
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(f"{machine} ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    root = tmp_path / "a" / "b" / "c" / "root"
    root.mkdir(parents=True)
    env = {**os.environ, "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
           "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-remote"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    extra = {"ccemu_sweep_dir": str(planned), "ccemu_sweep_update": False, "ccemu_sweep_merge": False,
             "ccemu_sweep_remote_root": str(root)}
    return subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(PLAYBOOKS / "sweep.yml"),
                           "-e", json.dumps(extra)], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason=f"no {ANSIBLE_PLAYBOOK} (make test installs it)")
def test_an_inventory_name_that_climbs_out_of_the_sweep_root_removes_nothing_there(tmp_path):
    # The folder x/../../../../sentinel resolves to from root: tmp_path/a/sentinel.
    sentinel = tmp_path / "a" / "sentinel"
    sentinel.mkdir(parents=True)
    (sentinel / "keep").write_text("a researcher's file")
    done = run_sweep_playbook(tmp_path, "x/../../../../sentinel")
    assert (sentinel / "keep").read_text() == "a researcher's file", done.stdout[-2000:]
    assert not (sentinel / "points").exists()
    assert done.returncode != 0
    assert "must be a name" in done.stdout, done.stdout[-2000:]


@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason=f"no {ANSIBLE_PLAYBOOK} (make test installs it)")
def test_a_machine_with_a_plain_name_gets_its_sweep_folder_under_the_root_and_it_is_removed_after(tmp_path):
    done = run_sweep_playbook(tmp_path, "machine-1")
    assert done.returncode == 0, done.stdout[-2000:]
    root = tmp_path / "a" / "b" / "c" / "root"
    assert "Remove the sweep's folder from the machine" in done.stdout
    assert list(root.iterdir()) == []  # created, then removed
