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
import yaml

PLAYBOOKS = Path(__file__).resolve().parents[3] / "playbooks"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def run_sweep_playbook(tmp_path: Path, machine: str, root: Path | None = None,
                       plan: dict | None = None) -> subprocess.CompletedProcess:
    """The sweep playbook with a plan of no points (or `plan`) on one local 'machine' named
    `machine`, its sweep folders under `root` (default: tmp_path/a/b/c/root, made here as root
    makes folders)."""
    planned = tmp_path / "results" / "sweeps" / "t" / "20261126-000000"
    planned.mkdir(parents=True, exist_ok=True)
    (planned / "plan.json").write_text(json.dumps(plan or {"name": "t", "points": [], "prefix": []}))
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
             "ccemu_sweep_remote_root": str(root), "ccemu_build_root": str(tmp_path / "no-ccemu-here")}
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


def test_the_playbooks_name_rule_is_ccemus():
    from ccemu.model.names import NAME_PATTERN

    play = yaml.safe_load((PLAYBOOKS / "sweep.yml").read_text())[0]
    (read,) = [task for task in play["tasks"] if task["name"] == "Read the plan"]
    assert read["ansible.builtin.set_fact"]["ccemu_sweep_name_pattern"] == NAME_PATTERN


@needs_playbook
@pytest.mark.parametrize("change, says", [
    ({"prefix": ["sh", "-c", "touch {sentinel}"]}, "is not a time limit ccemu plans"),
    ({"prefix": ["timeout", "--signal=INT", "--kill-after=120", "1; touch {sentinel}"]},
     "is not a time limit ccemu plans"),
    ({"points": [{"id": "p01", "args": ["experiment", "points/p01.yaml", "--results", "runs/p01", "--inventory",
                                        "{sentinel}"]}]}, "not what ccemu plans"),
    ({"points": [{"id": "p01", "args": ["sweep", "points/p01.yaml", "--results", "runs/p01"]}]},
     "not what ccemu plans"),
])
def test_a_plan_that_runs_anything_but_ccemu_experiment_on_its_points_is_refused_before_any_machine_is_touched(
        tmp_path, change, says):
    sentinel = tmp_path / "ran"
    plan = {"name": "t", "points": [], "prefix": [], **json.loads(json.dumps(change).replace("{sentinel}",
                                                                                          str(sentinel)))}
    done = run_sweep_playbook(tmp_path, "machine-1", plan=plan)
    assert done.returncode != 0 and says in done.stdout, done.stdout[-2000:]
    root = tmp_path / "a" / "b" / "c" / "root"
    assert list(root.iterdir()) == [] and not sentinel.exists()


@needs_playbook
def test_a_plan_as_ccemu_writes_it_passes_the_playbooks_checks(tmp_path):
    plan = {"name": "t", "prefix": ["timeout", "--signal=INT", "--kill-after=120", "1e+03"],
            "points": [{"id": "p01", "args": ["experiment", "points/p01.yaml", "--results", "runs/p01",
                                              "--no-monitoring", "--skip-check"]}]}
    points = tmp_path / "results" / "sweeps" / "t" / "20261126-000000" / "points"
    points.mkdir(parents=True)
    (points / "p01.yaml").write_text("name: p01\n")  # never run: no ccemu at the build root given
    done = run_sweep_playbook(tmp_path, "machine-1", plan=plan)
    assert "not what ccemu plans" not in done.stdout and "not a time limit" not in done.stdout, done.stdout[-2000:]
    assert "Check that the machine answers" in done.stdout
