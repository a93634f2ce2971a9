"""--datapath: `ccemu experiment` and `ccemu check` set fabric.datapath before anything is derived
from the file (`dilation: auto` follows the datapath it names), and ci/smoke.py runs the smoke on the
datapath asked for (`make smoke DATAPATH=...`, `.ci/run` both), says which one each run forwarded
with, and refuses a name that is no datapath in one line, before running anything."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import yaml

from ccemu.model.config import DATAPATHS, with_datapath
from ccemu.model.dilation import DEFAULT_FAITHFUL
from test_smoke_checks import write_bundle

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("smoke_override", REPO / "ci" / "smoke.py")
smoke = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(smoke)

# An incast of 1 Gbit/s links, its dilation left to `auto`: one busy link, so OVS's 10 Mbit/s per link
# (d = 100) and the bpf datapath's 25 (d = 40) give different rates.
AUTO_INCAST = {"name": "auto-incast", "topology": {"kind": "fattree", "k": 4}, "datacenter": {"link_gbps": 1},
               "fabric": {"datapath": "bpf", "ovs_instances": 2},
               "schemes": [{"scheme": "dctcp"}], "workload": {"kind": "incast", "aggregator": "h1", "flows": [8]}}


def test_the_override_replaces_only_the_datapath_and_leaves_what_it_cannot_read_to_the_configs_rules():
    assert with_datapath(AUTO_INCAST, "ovs")["fabric"] == {"datapath": "ovs", "ovs_instances": 2}
    assert AUTO_INCAST["fabric"]["datapath"] == "bpf"  # the caller's data is not changed
    assert with_datapath({"name": "x"}, "ovs") == {"name": "x", "fabric": {"datapath": "ovs"}}
    assert with_datapath(AUTO_INCAST, None) is AUTO_INCAST
    assert with_datapath({"fabric": "ovs"}, "bpf") == {"fabric": "ovs"}  # its own rule says what is wrong
    assert with_datapath(["not", "a", "mapping"], "bpf") == ["not", "a", "mapping"]


@pytest.mark.parametrize("datapath, dilation", [("ovs", 100), ("bpf", 40)])
def test_ccemu_experiment_and_check_set_the_datapath_before_dilation_auto_is_resolved(tmp_path, monkeypatch,
                                                                                       datapath, dilation):
    from ccemu.commands.fabric import check_config as _check_config
    from ccemu.experiments.validation import load_experiment

    monkeypatch.chdir(tmp_path)  # no `ccemu bench capacity` results here: each datapath's defaults
    path = tmp_path / "auto-incast.yaml"
    path.write_text(yaml.safe_dump({**AUTO_INCAST, "fabric": {"datapath": "bpf" if datapath == "ovs" else "ovs"}}))
    config, faithful = load_experiment(path, tmp_path, with_datapath(yaml.safe_load(path.read_text()), datapath))
    assert config.fabric.datapath == datapath and faithful == DEFAULT_FAITHFUL[datapath]
    assert (config.datacenter.dilation, config.link.rate_mbps) == (dilation, pytest.approx(1000 / dilation))
    checked = _check_config(Namespace(config=path, datapath=datapath, ovs_instances=None, inventory=None))
    assert (checked.fabric.datapath, checked.datacenter.dilation) == (datapath, dilation)


def test_ccemu_experiment_offers_every_datapath_the_config_knows_and_refuses_others(capsys):
    from ccemu.cli import main

    with pytest.raises(SystemExit) as shown:
        main(["experiment", "--help"])
    assert shown.value.code == 0 and "--datapath {" + ",".join(DATAPATHS) + "}" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        main(["experiment", "x.yaml", "--datapath", "xdp"])
    assert refused.value.code == 2 and "argument --datapath: invalid choice: 'xdp'" in capsys.readouterr().err


@pytest.mark.parametrize("datapath", ["ovs", "bpf"])
def test_the_smoke_runs_smoke_yaml_as_it_is_but_for_the_datapath(datapath):
    asked, as_is = smoke.smoke_config(datapath), smoke.smoke_config(None)
    assert (asked.fabric.datapath, as_is.fabric.datapath) == (datapath, "auto")
    assert asked.model_dump(exclude={"fabric"}) == as_is.model_dump(exclude={"fabric"})


@pytest.mark.parametrize("datapath", ["ovs", "bpf"])
def test_every_datapath_runs_the_smoke_at_a_rate_it_carries_faithfully(datapath):
    """model/dilation.py's figures where nothing was measured: userspace OVS keeps 10 Mbit/s per link
    faithful (40 in all), the bpf datapath more; the smoke's one incast loads one link."""
    config, faithful = smoke.smoke_config(datapath), DEFAULT_FAITHFUL[datapath]
    busy = config.workload.busy_links(config.topology.counts(), config.link.fabric_share)
    assert config.link.rate_mbps <= faithful.link_mbps
    assert config.link.rate_mbps * busy <= faithful.aggregate_mbps


def run_smoke(monkeypatch, tmp_path, *argv, ran_on="ovs"):
    """smoke.main() with `argv`, ccemu replaced by a recorder whose `experiment` leaves a good bundle
    whose fabric forwarded with `ran_on`; (exit status, the ccemu commands it ran)."""
    commands = []

    def ccemu(*args):
        commands.append(list(args))
        if args[0] == "experiment":
            bundle = tmp_path / "results" / "smoke" / "20261127-000000"
            bundle.mkdir(parents=True)
            write_bundle(bundle)
            manifest = json.loads((bundle / "manifest.json").read_text())
            (bundle / "manifest.json").write_text(json.dumps({**manifest, "datapath": ran_on}))
        return 0
    monkeypatch.setattr(smoke, "ccemu", ccemu)
    monkeypatch.setattr(sys, "argv", ["smoke.py", *argv, "--results", str(tmp_path / "results")])
    return smoke.main(), commands


def test_the_smoke_runs_both_ccemu_commands_on_the_datapath_asked_for_and_says_which_one_forwarded(
        tmp_path, monkeypatch, capsys):
    status, commands = run_smoke(monkeypatch, tmp_path, "--datapath", "ovs")
    config, results = str(smoke.CONFIG), str(tmp_path / "results")
    assert commands == [["check", "--config", config, "--datapath", "ovs"],
                        ["experiment", config, "--skip-check", "--results", results, "--datapath", "ovs"]]
    out = capsys.readouterr().out
    assert status == 0
    assert "PASS  the fabric forwarded with the datapath asked for, ovs: ovs" in out
    assert out.splitlines()[-1].startswith("smoke on datapath ovs: OK in ")


def test_the_smoke_fails_when_the_fabric_forwarded_with_another_datapath(tmp_path, monkeypatch, capsys):
    status, _ = run_smoke(monkeypatch, tmp_path, "--datapath", "ovs", ran_on="bpf")
    out = capsys.readouterr().out
    assert status == 1
    assert "FAIL  the fabric forwarded with the datapath asked for, ovs: bpf" in out


def test_the_smoke_without_a_datapath_runs_the_files_and_says_which_one_auto_became(tmp_path, monkeypatch, capsys):
    status, commands = run_smoke(monkeypatch, tmp_path, ran_on="bpf")
    assert status == 0 and all("--datapath" not in command for command in commands)
    assert capsys.readouterr().out.splitlines()[-1].startswith("smoke on datapath bpf: OK in ")


def test_a_name_that_is_no_datapath_is_refused_in_one_line_naming_it_before_anything_runs(
        tmp_path, monkeypatch, capsys):
    status, commands = run_smoke(monkeypatch, tmp_path, "--datapath", "xdp")
    assert (status, commands) == (2, [])
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [f"smoke: {smoke.CONFIG} --datapath xdp: fabric.datapath: input should be 'auto', "
                                f"'ovs' or 'bpf' (got 'xdp')"]


@pytest.mark.parametrize("failing, status", [(None, 0), ("DATAPATH=bpf", 1), ("DATAPATH=ovs", 1)])
def test_ci_run_runs_the_smoke_on_both_datapaths_even_after_one_failed_and_fails_if_either_did(tmp_path, failing,
                                                                                               status):
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci" / "run", tmp_path / ".ci" / "run")
    stub = tmp_path / "bin" / "make"  # records its arguments; fails on `failing`
    stub.parent.mkdir()
    stub.write_text(f'#!/bin/sh\necho "$*" >> "{tmp_path}/made"\ncase "$*" in *"{failing}"*) exit 1;; esac\n'
                    if failing else f'#!/bin/sh\necho "$*" >> "{tmp_path}/made"\n')
    stub.chmod(0o755)
    git = stub.parent / "git"  # the scheme table is as committed
    git.write_text("#!/bin/sh\nexit 0\n")
    git.chmod(0o755)
    done = subprocess.run([str(tmp_path / ".ci" / "run")], env={**os.environ, "PATH": f"{stub.parent}:/usr/bin:/bin"},
                          capture_output=True, text=True)
    assert (done.returncode, (tmp_path / "made").read_text().splitlines()) == (
        status, ["test", "smoke DATAPATH=bpf", "smoke DATAPATH=ovs"])


def test_ci_run_fails_before_the_smokes_when_building_cchost_rewrote_its_scheme_table(tmp_path):
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "bin").mkdir()
    stubs = (("make", f'echo "$*" >> "{tmp_path}/made"'), ("git", f'echo "$*" >> "{tmp_path}/git"; exit 1'))
    for tool, script in stubs:
        (tmp_path / "bin" / tool).write_text(f"#!/bin/sh\n{script}\n")
        (tmp_path / "bin" / tool).chmod(0o755)
    path = f"{tmp_path / 'bin'}:/usr/bin:/bin"
    done = subprocess.run([str(tmp_path / ".ci" / "run")], env={**os.environ, "PATH": path}, capture_output=True,
                          text=True)
    assert done.returncode == 1 and (tmp_path / "made").read_text().splitlines() == ["test"]
    assert (tmp_path / "git").read_text().split() == ["diff", "--exit-code", "--", "emulation/ccemu/model/schemes.json"]
    assert "schemes.json differs from cchost's schemes: commit the rewritten file" in done.stderr
