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


def run_sweep_playbook(tmp_path: Path, machine: str, root: Path | None = None) -> subprocess.CompletedProcess:
    """The sweep playbook with a plan of no points on one local 'machine' named `machine`, its
    sweep folders under `root` (default: tmp_path/a/b/c/root, made here as root makes folders)."""
    planned = tmp_path / "results" / "sweeps" / "t" / "20261126-000000"
    planned.mkdir(parents=True)
    (planned / "plan.json").write_text(json.dumps({"name": "t", "points": [], "prefix": []}))
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(f"{machine} ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    if root is None:
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


needs_playbook = pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(),
                                    reason=f"no {ANSIBLE_PLAYBOOK} (make test installs it)")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the sweeps' root must be root's: only root can make one")


@needs_playbook
@needs_root
def test_the_sweeps_folder_on_a_machine_has_a_random_name_so_a_link_made_at_the_predictable_one_leads_nowhere(
        tmp_path):
    # Today's names are the sweep folder's, the plan's and the machine's: a link planted at that
    # name (a local user's, had they been able to write the root) must not be where the sweep goes.
    root = tmp_path / "a" / "b" / "c" / "root"
    root.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "20261126-000000-t-machine-1").symlink_to(elsewhere)
    done = run_sweep_playbook(tmp_path, "machine-1", root)
    assert done.returncode == 0, done.stdout[-2000:]
    assert list(elsewhere.iterdir()) == []
    assert [p.name for p in root.iterdir()] == ["20261126-000000-t-machine-1"]  # only the link: ours was removed


@needs_playbook
@needs_root
@pytest.mark.parametrize("made_by", ["anyone can write it", "another user owns it", "it is a link"])
def test_a_sweeps_root_a_local_user_could_have_made_or_can_change_is_refused_and_nothing_is_made_there(
        tmp_path, made_by):
    root = tmp_path / "shared" / "ccemu-sweeps"
    root.parent.mkdir()
    target = tmp_path / "target"
    target.mkdir(mode=0o755)
    if made_by == "it is a link":
        root.symlink_to(target)
    else:
        root.mkdir()
        if made_by == "anyone can write it":
            root.chmod(0o777)
        else:
            os.chown(root, 65534, 65534)
    done = run_sweep_playbook(tmp_path, "machine-1", root)
    assert done.returncode != 0
    assert "the sweeps' root must be a folder (not a link) owned by root" in done.stdout, done.stdout[-3000:]
    assert list(target.iterdir()) == [] and oct(target.stat().st_mode & 0o7777) == "0o755"
    if made_by != "it is a link":
        assert list(root.iterdir()) == []


@needs_playbook
@needs_root
def test_a_sweeps_root_missing_is_made_root_only(tmp_path):
    root = tmp_path / "lib" / "ccemu" / "sweeps"
    done = run_sweep_playbook(tmp_path, "machine-1", root)
    assert done.returncode == 0, done.stdout[-2000:]
    assert oct(root.stat().st_mode & 0o777) == "0o700" and root.stat().st_uid == 0
