"""Sweep files, their points, and what became of each point (no emulation, no Ansible)."""

import json
from pathlib import Path

import pytest
import yaml

from ccemu.cli import main
from ccemu.sweeps import outcome
from ccemu.sweeps.fanout import RUN_TASK, Progress
from ccemu.model.config import ConfigError
from ccemu.sweeps.plan import load_sweep, write_plan

REPO = Path(__file__).resolve().parents[3]
BASE = {
    "name": "tiny", "seed": 1, "topology": {"kind": "star", "hosts": 5}, "link": {"rate_mbps": 10},
    "schemes": [{"scheme": "expresspass"},
                {"scheme": "dctcp", "port": {"ecn_threshold_bytes": 15000, "buffer_bytes": 30000}}],
    "workload": {"kind": "incast", "aggregator": "h1", "total_bytes": 200000, "flows": [2, 4], "rounds": 1},
}


def sweep_file(tmp_path, text: str, base: dict = BASE):
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(base))
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


def test_every_combination_of_the_grid_is_a_point_in_order_with_set_applied_to_all(tmp_path):
    sweep = load_sweep(sweep_file(tmp_path, """
experiment: tiny.yaml
set: {workload.rounds: 3, fabric.ovs_instances: 1}
grid: {scheme: [expresspass, dctcp], workload.flows: [2, 4, 8]}
"""))
    assert [p.id for p in sweep.points] == ["p01", "p02", "p03", "p04", "p05", "p06"]
    assert [p.describe() for p in sweep.points[:4]] == [
        "scheme=expresspass, workload.flows=2", "scheme=expresspass, workload.flows=4",
        "scheme=expresspass, workload.flows=8", "scheme=dctcp, workload.flows=2"]
    fourth = sweep.points[3].config
    assert fourth["name"] == "sweep-p04"
    assert [s["scheme"] for s in fourth["schemes"]] == ["dctcp"]
    assert fourth["schemes"][0]["port"]["ecn_threshold_bytes"] == 15000  # the base's scheme, whole
    # A scalar against the base's list stands for a list of one; a missing section is created.
    assert fourth["workload"]["flows"] == [2] and fourth["workload"]["rounds"] == 3
    assert fourth["fabric"] == {"ovs_instances": 1}
    assert BASE["workload"]["flows"] == [2, 4]  # the base is not changed in place


@pytest.mark.parametrize("text, message", [
    ("experiment: tiny.yaml\ngrid: {workload.flowz: [2]}\n",
     "point p01 (workload.flowz=2): workload.flowz: unknown key"),
    ("experiment: tiny.yaml\ngrid: {scheme: [expresspass, cubic]}\n",
     "grid.scheme: the experiment has no scheme 'cubic' (it has: expresspass, dctcp)"),
    ("experiment: tiny.yaml\ngrid: {workload.flows: [2, 0]}\n", "point p02 (workload.flows=0): workload.flows"),
    ("experiment: tiny.yaml\ngrid: {}\n", "grid: needs at least one key"),
    ("experiment: tiny.yaml\ngrid: {seed: []}\n", "grid.seed: needs at least one value"),
    ("experiment: nosuch\ngrid: {seed: [1]}\n", "experiment: no experiment 'nosuch' (a name of workloads/experiments/"),
    ("experiment: tiny.yaml\ngrid: {seed: [1]}\nrepeat: 3\n", "repeat: unknown key"),
    ("experiment: tiny.yaml\ngrid: {link.rate_mbps.x: [1]}\n", "rate_mbps is not a section of the experiment file"),
    ("experiment: tiny.yaml\ngrid: [1, 2]\n", "grid: input should be a valid dictionary"),
    # A bool is no number (pydantic would read `true` as 1 s), and no bool is a number.
    ("experiment: tiny.yaml\ngrid: {seed: [1]}\ntimeout_s: true\n", "timeout_s: must be a number (got true)"),
    ("experiment: tiny.yaml\ngrid: {seed: [1]}\nmonitoring: 3\n", "monitoring: input should be a valid boolean"),
    ("experiment: tiny.yaml\ngrid: {seed: [1]}\ntimeout_s: .inf\n", "timeout_s: input should be a finite number"),
    ("experiment: tiny.yaml\ngrid: {seed: [1]}\nmonitoring: 'no'\n", "monitoring: input should be a valid boolean"),
    # The points' names are the sweep's: a grid or a set: over name would silently lose to them.
    ("experiment: tiny.yaml\ngrid: {name: [a, b]}\n", "grid.name: the sweep names its points"),
    ("experiment: tiny.yaml\nset: {name: ../../x}\ngrid: {seed: [1]}\n", "set.name: the sweep names its points"),
    ("experiment: ../../../../../../../../../etc/hostname\ngrid: {seed: [1]}\n", "experiment: "),
    # 10^8 combinations: refused by their count, before one is built.
    ("experiment: tiny.yaml\ngrid: {seed: [" + ", ".join(map(str, range(100))) + "], transport.alpha: ["
     + ", ".join(f"0.{i:02d}1" for i in range(100)) + "], workload.rounds: [" + ", ".join(map(str, range(1, 101)))
     + "], link.mtu: [" + ", ".join(map(str, range(1000, 1100))) + "]}\n",
     "grid: 100 seed x 100 transport.alpha x 100 workload.rounds x 100 link.mtu is 100000000 points: at most 10000"),
])
def test_a_bad_sweep_file_is_one_line_naming_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError) as caught:  # SweepError, or the point's own ConfigError
        load_sweep(sweep_file(tmp_path, text))
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith(str(tmp_path / "sweep.yaml"))


def test_ccemu_sweep_refuses_a_bad_sweep_file_with_status_2_before_anything_starts(tmp_path, capsys):
    path = sweep_file(tmp_path, "experiment: tiny.yaml\ngrid: {workload.flowz: [2]}\n")
    assert main(["sweep", str(path), "--results", str(tmp_path / "results")]) == 2
    assert "workload.flowz: unknown key" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_the_plan_holds_each_points_experiment_file_which_validates_alone(tmp_path):
    sweep = load_sweep(sweep_file(tmp_path, "experiment: tiny.yaml\nmonitoring: false\n"
                                            "grid: {scheme: [dctcp], workload.flows: [2, 4]}\n"))
    directory = write_plan(sweep, tmp_path / "results")
    assert directory.parent == tmp_path / "results" / "sweeps" / "sweep"
    plan = json.loads((directory / "plan.json").read_text())
    assert [p["params"] for p in plan["points"]] == [{"scheme": "dctcp", "workload.flows": "2"},
                                                     {"scheme": "dctcp", "workload.flows": "4"}]
    assert plan["points"][1]["args"] == ["experiment", "points/p02.yaml", "--results", "runs/p02", "--no-monitoring"]
    from ccemu.model.config import load_config
    assert load_config(directory / "points" / "p02.yaml").workload.flows == [4]
    assert (directory / "sweep.yaml").read_text() == (tmp_path / "sweep.yaml").read_text()


def planned(tmp_path, machines=None):
    sweep = load_sweep(sweep_file(tmp_path, "experiment: tiny.yaml\ngrid: {workload.flows: [2, 4, 8, 16, 32]}\n"))
    directory = write_plan(sweep, tmp_path / "results")
    if machines is not None:
        (directory / "machines.json").write_text(json.dumps(machines))
    return directory


def fake_bundle(run, manifest):
    bundle = run / "sweep-p01" / "20261123-000000"
    bundle.mkdir(parents=True)
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    return bundle


def test_each_points_outcome_is_read_from_its_folder_done_failed_or_not_run_and_why(tmp_path):
    directory = planned(tmp_path, {"points": {"w1": ["p01", "p03"], "w2": ["p02", "p04"], "w4": ["p05"]},
                                   "unreachable": {"w3": "ssh: connect to host refused"},
                                   "failed": {"w4": "Copy the machine's points to it: disk full"}})
    runs = directory / "runs"
    for point, machine in (("p01", "w1"), ("p02", "w2"), ("p03", "w1")):
        (runs / point).mkdir(parents=True)
        (runs / point / "machine").write_text(machine + "\n")
    done = fake_bundle(runs / "p01", {"config": {}, "wall_seconds": 12.5, "unfinished_flows": 2})
    fake_bundle(runs / "p02", {"config": {}, "failed": "cchost of h3 exited"})
    (runs / "p03" / "log").write_text("checking\nccemu: the fabric could not be brought up: OVS died\n\n")
    found = {e.label: e for e in outcome.entries(directory)}
    assert (found["p01"].status, found["p01"].bundle, found["p01"].machine, found["p01"].wall_seconds,
            found["p01"].reason) == ("done", done, "w1", 12.5, "2 flows never finished")
    assert (found["p02"].status, found["p02"].reason) == ("failed", "stopped by an error: cchost of h3 exited")
    assert (found["p03"].status, found["p03"].reason) == ("failed", "ccemu: the fabric could not be brought up: "
                                                                    "OVS died")
    assert (found["p04"].status, found["p04"].machine, found["p04"].reason) == ("not run", "w2",
                                                                                "w2 stopped before it")
    assert (found["p05"].status, found["p05"].reason) == ("not run", "w4 failed: Copy the machine's points to it: "
                                                                    "disk full")
    assert found["p02"].params == {"workload.flows": "4"}


def test_points_no_machine_ran_say_which_machines_did_not_answer_or_failed_and_why(tmp_path):
    directory = planned(tmp_path, {"unreachable": {"w3": "Failed to connect: refused"},
                                   "failed": {"w4": "Build cchost on the controller: cargo not found"}})
    reasons = {e.reason for e in outcome.entries(directory)}
    assert reasons == {"no machine ran it: w3 unreachable: Failed to connect: refused; w4 failed: Build cchost on "
                       "the controller: cargo not found"}


def test_progress_names_each_point_as_it_starts_and_finishes_on_its_machine(tmp_path):
    directory = planned(tmp_path, {"points": {"w1": ["p01", "p03"], "w2": ["p02", "p04"]}})
    lines = []
    progress = Progress(directory, lines.append, total=4)
    events = [
        {"event": "runner_on_unreachable", "event_data": {"host": "w3", "res": {"msg": "ssh: connect\n refused"}}},
        {"event": "playbook_on_task_start", "event_data": {"task": RUN_TASK}},
        {"event": "runner_item_on_ok", "event_data": {"host": "w2", "task": RUN_TASK,
                                                      "res": {"item": {"id": "p02"}, "rc": 0}}},
        {"event": "runner_item_on_ok", "event_data": {"host": "w1", "task": RUN_TASK,
                                                      "res": {"item": {"id": "p01"}, "rc": 6}}},
        {"event": "runner_on_failed", "event_data": {"host": "w1", "task": "Fetch them to the controller",
                                                     "res": {"msg": "file not found"}}},
    ]
    for event in events:
        progress.event(event)
    assert progress.unreachable == {"w3": "ssh: connect refused"}
    assert progress.failed == {"w1": "Fetch them to the controller: file not found"}
    assert [line.split(" in ")[0] for line in lines] == [
        "w3: unreachable (ssh: connect refused)", "p01: running on w1", "p02: running on w2",
        "p02: done on w2", "p04: running on w2", "p01: exit status 6 on w1", "p03: running on w1",
        "w1: FAILED: Fetch them to the controller: file not found"]
    assert progress.finished == 2


def test_the_sweep_shipped_in_workloads_sweeps_plans_the_incast_as_sixteen_valid_points():
    shipped = sorted((REPO / "workloads" / "sweeps").glob("*.yaml"))
    assert [p.name for p in shipped] == ["incast.yaml"]
    sweep = load_sweep(shipped[0])
    assert len(sweep.points) == 16
    assert sweep.points[-1].describe() == "scheme=dctcp+, workload.flows=256"
    assert sweep.points[-1].config["workload"]["rounds"] == 3  # the experiment's own, unchanged


def test_a_copied_tree_without_git_cites_the_controllers_commit_it_came_from(tmp_path, monkeypatch):
    from ccemu.experiments import provenance

    monkeypatch.setattr(provenance, "REPO_ROOT", tmp_path)  # not a git repository
    monkeypatch.setattr(provenance, "COPIED_COMMIT", tmp_path / "build" / "commit")
    assert provenance.git_commit() == "unknown"
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "commit").write_text("5a7fcbf0123-dirty\n")
    assert provenance.git_commit() == "5a7fcbf0123-dirty"
