"""The CLI a researcher meets: `ccemu --version`, `ccemu list`, the help of every command, and
`ccemu experiment` / `ccemu validate` with --schemes and --set (a variant of an experiment file,
changed by the rules a sweep's points are: model/config/overrides.py). Nothing here starts a fabric."""

import json
import re
from importlib import metadata
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from ccemu import catalog
from ccemu.cli import build_parser, main
from ccemu.commands import experiment as experiment_command
from ccemu.commands.fabric import check_config
from ccemu.commands.help import HelpFormatter
from ccemu.experiments.validation import as_asked
from ccemu.model import schemes as scheme_table
from ccemu.model.config import EXPERIMENTS_DIR, ConfigError
from ccemu.programs.cchost import CCHOST
from ccemu.sweeps.plan import load_sweep

REPO = Path(__file__).resolve().parents[3]
MAIN_COMMANDS = ["experiment", "reproduce", "report", "monitor", "list", "validate", "sweep", "check", "up"]
TINY = {
    "name": "tiny", "seed": 1, "topology": {"kind": "star", "hosts": 5}, "link": {"rate_mbps": 10},
    "schemes": [{"scheme": "expresspass"},
                {"scheme": "dctcp", "port": {"ecn_threshold_bytes": 15000, "buffer_bytes": 30000}}],
    "workload": {"kind": "incast", "aggregator": "h1", "total_bytes": 200000, "flows": [2, 4], "rounds": 1},
}


def tiny_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY, sort_keys=False))
    return path


def said(capsys, *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `ccemu ARGV`, whether it returns or exits (--help, --version)."""
    try:
        status = main(list(argv))
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


# --version ----------------------------------------------------------------------------------------

def test_version_names_the_package_version_and_commit(capsys):
    version = tomllib.loads((REPO / "emulation" / "pyproject.toml").read_text())["project"]["version"]
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert head, "the tests run from ccemu's git tree (its commit is what --version names)"
    status, out, _ = said(capsys, "--version")
    assert status == 0
    assert re.fullmatch(rf"ccemu {re.escape(version)} \(git {head}(-dirty)?\)\n", out), out


def test_version_without_a_commit_names_the_package_version_alone(capsys, monkeypatch):
    from ccemu.experiments import provenance

    monkeypatch.setattr(provenance, "git_commit", lambda: "unknown")  # a tree copied without .git or build/commit
    assert said(capsys, "--version")[:2] == (0, f"ccemu {metadata.version('ccemu')}\n")


# ccemu list ---------------------------------------------------------------------------------------

def test_list_names_every_experiment_sweep_scheme_profile_and_topology(capsys):
    status, out, _ = said(capsys, "list")
    assert status == 0
    names = {line.split()[0] for line in out.splitlines() if line.startswith("  ") and line[2] != " "}
    assert {p.stem for p in EXPERIMENTS_DIR.glob("*.yaml")} <= names
    assert {p.stem for p in catalog.SWEEPS_DIR.glob("*.yaml")} <= names
    assert set(scheme_table.names()) <= names
    assert set(catalog.PROFILES) <= names
    assert {"fattree", "leafspine", "dumbbell", "star"} <= names
    # Each experiment with its description (the file's opening comment) and what it runs.
    incast = out[out.index("\n  incast "):]
    assert incast.splitlines()[1].split(None, 1)[1] == ("Incast at the DCTCP+ paper's operating point (seed 002, "
                                                        "Fig. 7; workloads/reference.yaml)")
    runs = ", ".join(s["scheme"] for s in yaml.safe_load((EXPERIMENTS_DIR / "incast.yaml").read_text())["schemes"])
    assert incast.splitlines()[2].strip() == f"incast on fattree, k=4; schemes: {runs}"


@pytest.mark.parametrize("section, title", [
    ("experiments", "experiments ("), ("sweeps", "sweeps ("), ("schemes", "schemes ("),
    ("profiles", "reproduce profiles ("), ("topologies", "topologies ("),
])
def test_list_of_one_section_prints_that_section_alone(capsys, section, title):
    status, out, _ = said(capsys, "list", section)
    headings = [line for line in out.splitlines() if line and not line.startswith(" ")]
    assert status == 0 and len(headings) == 1 and headings[0].startswith(title)


def test_list_says_what_each_scheme_is_and_refuses_an_unknown_section(capsys):
    _, out, _ = said(capsys, "list", "schemes")
    assert re.search(r"\n  dcqcn\+tcd +sender-driven: a window or a rate; ports: the tcd profile\n", out)
    status, _, err = said(capsys, "list", "schemez")
    assert status == 2 and "invalid choice: 'schemez'" in err


def test_the_topologies_listed_are_the_ones_the_config_and_check_accept(capsys):
    assert list(catalog.topology_kinds()) == ["fattree", "leafspine", "dumbbell", "star"]
    topo = next(a for a in build_parser()._subparsers._group_actions[0].choices["check"]._actions
                if a.dest == "topo")
    assert list(topo.choices) == list(catalog.topology_kinds())
    _, out, _ = said(capsys, "list", "topologies")
    assert "  star       hosts (default 4: a star with 4 hosts: 4 hosts, 1 switch)" in out


@pytest.mark.parametrize("text, description", [
    ("# Incast at the paper's point (seed 002, Fig. 1: here): N senders\n# answer one.\nname: x\n",
     "Incast at the paper's point (seed 002, Fig. 1: here)"),
    ("# Seed 002's Fig. 7 beyond 200 flows. DCTCP+ alone\nname: x\n", "Seed 002's Fig. 7 beyond 200 flows"),
    ("# A title\n#\n# then more: after a blank line\nname: x\n", "A title"),
    ("name: x\n# a comment further down\n", ""),
])
def test_a_files_description_is_the_first_title_or_sentence_of_its_opening_comment(text, description):
    assert catalog.heading(text) == description


def test_a_file_that_cannot_be_read_is_listed_with_the_reason(tmp_path, monkeypatch):
    (tmp_path / "broken.yaml").write_text("# Broken on purpose\nname: [\n")
    monkeypatch.setattr(catalog, "EXPERIMENTS_DIR", tmp_path)
    text = catalog.listing({}, "experiments")
    assert "  broken  Broken on purpose\n          unreadable: " in text and "not valid YAML" in text


# --help -------------------------------------------------------------------------------------------

def subcommands() -> dict:
    """Every command's parser, `bench capacity` included."""
    commands = build_parser()._subparsers._group_actions[0].choices
    benches = commands["bench"]._subparsers._group_actions[0].choices
    return {**commands, **{f"bench {name}": parser for name, parser in benches.items()}}


def test_help_lists_the_main_commands_first_and_hides_part_which_still_runs(capsys):
    status, out, _ = said(capsys, "--help")
    assert status == 0
    listed = re.findall(r"^    (\S+)", out.split("\ncommands:\n", 1)[1], flags=re.M)
    assert listed[:len(MAIN_COMMANDS)] == MAIN_COMMANDS
    assert "part" not in listed and "SUPPRESS" not in out
    assert "exit status:" in out
    status, out, _ = said(capsys, "part", "--help")
    assert status == 0 and "--machine MACHINE" in out


def test_every_positional_argument_is_named_and_described():
    for name, parser in subcommands().items():
        for action in parser._actions:
            if not action.option_strings:
                assert action.help, f"ccemu {name} {action.dest}: no help"
                assert action.metavar and action.metavar[0].isupper(), f"ccemu {name} {action.dest}: unnamed"


def test_every_option_with_a_default_says_it_and_none_says_none():
    for name, parser in subcommands().items():
        text = parser.format_help()
        assert not re.search(r"\(default: (None|False|\[\]|)\)", text), name
        for action in parser._actions:
            if HelpFormatter._shows_default(action):
                said = parser._get_formatter()._format_action(action)
                assert "default" in said, f"ccemu {name}: {said}"


def test_experiment_help_names_its_file_and_the_variant_flags(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")
    _, out, _ = said(capsys, "experiment", "--help")
    assert out.startswith("usage: ccemu experiment ") and out.split("\n\n")[0].endswith(" CONFIG")
    assert re.search(r"\n  CONFIG +an experiment file, e\.g\. workloads/experiments/incast\.yaml", out)
    assert re.search(r"--results RESULTS +bundles go to RESULTS/NAME/TIME \(default: results\)", out)
    assert "--schemes A,B" in out and "--set KEY=VALUE" in out


def test_check_help_says_the_datapath_the_code_uses_without_one(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "1000")
    _, out, _ = said(capsys, "check", "--help")
    assert ("(default: the --config file's fabric.datapath, else auto: OVS where its kernel datapath exists, else "
            "bpf)") in out
    def checked(*argv: str) -> str:
        return check_config(build_parser().parse_args(["check", *argv])).fabric.datapath

    assert checked("--topo", "star") == "auto"
    path = tmp_path / "bpf.yaml"
    path.write_text(yaml.safe_dump({**TINY, "fabric": {"datapath": "bpf"}}))
    assert checked("--config", str(path)) == "bpf"
    assert checked("--config", str(path), "--datapath", "ovs") == "ovs"
    path.write_text(yaml.safe_dump(TINY))
    assert checked("--config", str(path)) == "auto"


# --schemes and --set ------------------------------------------------------------------------------

def test_set_changes_the_file_at_dotted_keys_and_schemes_keeps_only_those_named(tmp_path):
    path = tiny_file(tmp_path)
    data, source = as_asked(path, TINY, "dctcp", ["workload.rounds=3", "workload.flows=[8, 32]", "link.mtu=9000",
                                                  "fabric.datapath=bpf", "hosts.kind=namespace"])
    assert data["workload"]["rounds"] == 3 and data["workload"]["flows"] == [8, 32]
    assert data["link"] == {"rate_mbps": 10, "mtu": 9000} and data["fabric"] == {"datapath": "bpf"}
    assert data["schemes"] == [TINY["schemes"][1]]  # the file's dctcp, whole
    assert source == (f"{path} with --set workload.rounds=3 --set workload.flows=[8, 32] --set link.mtu=9000 "
                      "--set fabric.datapath=bpf --set hosts.kind=namespace --schemes dctcp")
    assert TINY["workload"]["rounds"] == 1 and TINY["link"] == {"rate_mbps": 10}  # the file's data is not changed
    assert as_asked(path, TINY, None, []) == (TINY, str(path))


def test_set_inside_schemes_names_a_scheme_and_keeps_the_rest_of_its_entry(tmp_path):
    path = tiny_file(tmp_path)
    data, _ = as_asked(path, TINY, None, ["schemes.dctcp.params.g=0.0625", "schemes.expresspass.port.buffer_bytes=5"])
    (expresspass, dctcp) = data["schemes"]
    assert dctcp == {**TINY["schemes"][1], "params": {**TINY["schemes"][1].get("params", {}), "g": 0.0625}}
    assert expresspass == {**TINY["schemes"][0], "port": {**TINY["schemes"][0].get("port", {}), "buffer_bytes": 5}}


def test_set_reads_values_as_the_config_files_yaml_does(tmp_path):
    path = tiny_file(tmp_path)
    data, _ = as_asked(path, TINY, None, ["workload.flows=8", "name=yes", "seed=0x10", "link.rate_mbps=2.5e1"])
    assert data["workload"]["flows"] == [8]  # against the file's list: a list of one, as in a sweep
    assert (data["name"], data["seed"], data["link"]["rate_mbps"]) == ("yes", 16, 25.0)


def test_a_sweep_point_and_a_command_line_that_say_the_same_run_the_same_config(tmp_path):
    base = tiny_file(tmp_path)
    (tmp_path / "sweep.yaml").write_text("experiment: tiny.yaml\nset: {workload.rounds: 3}\n"
                                         "grid: {scheme: [dctcp], workload.flows: [8]}\n")
    point = load_sweep(tmp_path / "sweep.yaml").points[0].config
    asked, _ = as_asked(base, TINY, "dctcp", ["workload.rounds=3", "workload.flows=8"])
    assert {**point, "name": "tiny"} == asked


BAD = [
    (["--set", "workload.flowz=8"], "with --set workload.flowz=8: workload.flowz: unknown key"),
    (["--set", "workload.rounds=0"], "with --set workload.rounds=0: workload.rounds: "),
    (["--set", "link.mtu=yes"], "with --set link.mtu=yes: link.mtu: "),
    (["--set", "workload.rounds"], ": --set: expected KEY=VALUE, a dotted key of the experiment file"),
    (["--set", "=2"], ": --set: expected KEY=VALUE"),
    (["--set", "workload.flows=[8, 32"], ": --set workload.flows: the value '[8, 32' is not a YAML value"),
    (["--set", "link.rate_mbps.x=1"], ": --set link.rate_mbps.x: rate_mbps is not a section of the experiment file"),
    (["--set", "workload..rounds=1"], ": --set workload..rounds: not a dotted key of the experiment file"),
    (["--set", "schemes.cubic.params.g=1"], ": --set schemes.cubic.params.g: the experiment has no scheme 'cubic' "
                                            "(it has: expresspass, dctcp)"),
    (["--set", "schemes.dctcp=1"], ": --set schemes.dctcp: name a setting of the scheme, e.g. "
                                   "schemes.dctcp.params.NAME"),
    (["--schemes", "cubic"], ": --schemes: the experiment has no scheme 'cubic' (it has: expresspass, dctcp)"),
    (["--schemes", "dctcp,,expresspass"], ": --schemes 'dctcp,,expresspass': expected scheme names separated by "
                                          "commas"),
    (["--schemes", ""], ": --schemes '': expected scheme names separated by commas"),
]


@pytest.fixture
def nothing_starts(monkeypatch):
    """`ccemu experiment` up to where it would start a runner, whatever is built here; the runner
    it would start (its config recorded), never started."""
    from ccemu import programs
    from ccemu.experiments import runners
    from ccemu.ports.program import PortProgram

    monkeypatch.setattr(programs.cchost, "cchost_binary", lambda: CCHOST)
    monkeypatch.setattr(programs.cchost, "check_args", lambda *args, **kwargs: None)
    monkeypatch.setattr(PortProgram, "built", classmethod(lambda cls: None))
    monkeypatch.setattr(experiment_command, "require_root", lambda what: None)
    started = []

    def runner_for(config, *args, **kwargs):
        started.append(config)
        raise RuntimeError("not started")  # ccemu says so in a line and returns
    monkeypatch.setattr(runners, "runner_for", runner_for)
    return started


@pytest.mark.parametrize("argv, message", BAD, ids=[" ".join(argv) for argv, _ in BAD])
def test_a_bad_key_or_value_is_one_line_naming_it_with_status_2_and_nothing_started(tmp_path, capsys, nothing_starts,
                                                                                    argv, message):
    path = tiny_file(tmp_path)
    status, out, err = said(capsys, "experiment", str(path), "--results", str(tmp_path / "results"), *argv)
    assert status == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"ccemu: {path}") and message in err, err
    assert nothing_starts == [] and not (tmp_path / "results").exists()


def test_the_config_run_is_the_changed_one_so_the_bundles_manifest_records_it(tmp_path, capsys, nothing_starts):
    path = tiny_file(tmp_path)
    said(capsys, "experiment", str(path), "--results", str(tmp_path / "results"), "--schemes", "dctcp",
         "--set", "workload.rounds=2", "--set", "workload.flows=[8]")
    [config] = nothing_starts
    # What the runner writes as the manifest's config (experiments/base.py: config.model_dump(mode="json")).
    recorded = json.loads(json.dumps(config.model_dump(mode="json")))
    assert recorded["workload"]["rounds"] == 2 and recorded["workload"]["flows"] == [8]
    assert [s["scheme"] for s in recorded["schemes"]] == ["dctcp"]
    assert recorded["schemes"][0]["port"]["ecn_threshold_bytes"] == 15000


def test_the_manifest_is_told_how_the_command_line_changed_the_file_and_nothing_when_it_did_not(
        tmp_path, capsys, monkeypatch, nothing_starts):
    from ccemu.experiments import runners

    asked = []

    def runner_for(config, *args, **kwargs):
        asked.append(kwargs["asked"])
        raise RuntimeError("not started")
    monkeypatch.setattr(runners, "runner_for", runner_for)
    path = tiny_file(tmp_path)
    said(capsys, "experiment", str(path), "--results", str(tmp_path / "results"), "--set", "workload.rounds=2")
    said(capsys, "experiment", str(path), "--results", str(tmp_path / "results"))
    assert asked == [f"{path} with --set workload.rounds=2", None]


def test_experiment_says_what_it_runs_when_the_command_line_changed_the_file(tmp_path, capsys, nothing_starts):
    path = tiny_file(tmp_path)
    _, out, _ = said(capsys, "experiment", str(path), "--results", str(tmp_path / "results"), "--set",
                     "workload.rounds=2", "--schemes", "dctcp")
    assert f"experiment tiny: {path} with --set workload.rounds=2 --schemes dctcp\n" in out
    _, out, _ = said(capsys, "experiment", str(path), "--results", str(tmp_path / "results"))
    assert "experiment tiny:" not in out


def test_validate_judges_a_variant_without_starting_anything(tmp_path, capsys):
    path = tiny_file(tmp_path)
    status, out, err = said(capsys, "validate", str(path), "--schemes", "dctcp", "--set", "workload.rounds=2")
    assert (status, err) == (0, "")
    assert out.startswith(f"{path} with --set workload.rounds=2 --schemes dctcp: valid: incast on a star with 5 "
                          "hosts, 1 scheme,")
    status, _, err = said(capsys, "validate", str(path), "--set", "workload.flowz=8")
    assert status == 2 and err.strip() == f"ccemu: {path} with --set workload.flowz=8: workload.flowz: unknown key"


def test_validate_refuses_set_for_a_sweep_file_which_has_its_own(tmp_path, capsys):
    tiny_file(tmp_path)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("experiment: tiny.yaml\ngrid: {workload.flows: [2]}\n")
    status, out, err = said(capsys, "validate", str(sweep), "--set", "workload.rounds=2")
    assert (status, out) == (2, "")
    assert err.strip() == (f"ccemu: {sweep}: --schemes and --set change experiment files; a sweep file changes its "
                           "points with its own set: and grid:")


def test_a_set_that_the_config_cannot_take_is_refused_by_the_model_alone():
    from ccemu.model.config.overrides import changed, setting

    with pytest.raises(ConfigError, match=r"^here: the experiment has no scheme 'x' \(it has: none\)$"):
        changed({"schemes": "dctcp"}, "scheme", "x", "here")
    assert changed({"schemes": ["dctcp", {"scheme": "x"}]}, "scheme", "x", "here") == {"schemes": [{"scheme": "x"}]}
    assert setting("a.b = [1, {c: d}]", "here") == ("a.b", [1, {"c": "d"}])


# make ---------------------------------------------------------------------------------------------

def make(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-C", str(REPO), *argv], capture_output=True, text=True,
                          timeout=60)


def test_building_cchost_rewrites_the_checked_in_scheme_table(tmp_path):
    """Dry run (-n): what the rule that builds build/cchost would run, cargo included, runs nothing."""
    done = make("-n", "-B", "build/cchost")
    assert done.returncode == 0, done.stderr
    assert done.stdout.index("cargo") < done.stdout.index("build/cchost --schemes --json")
    assert "emulation/ccemu/model/schemes.json" in done.stdout


def test_the_scheme_table_is_rewritten_only_when_cchost_lists_another(tmp_path):
    cchost = tmp_path / "cchost"  # a stand-in that prints table.json: no build, no cargo (-o: never remade)
    cchost.write_text(f"#!/bin/sh\ncat {tmp_path}/listed.json\n")
    cchost.chmod(0o755)
    table = tmp_path / "schemes.json"
    table.write_text(scheme_table.TABLE_FILE.read_text())
    (tmp_path / "listed.json").write_text(json.dumps(json.loads(scheme_table.TABLE_FILE.read_text())))
    args = ["-o", str(cchost), "schemes", f"CCHOST={cchost}", f"SCHEMES_TABLE={table}"]
    before = table.stat().st_mtime_ns
    done = make(*args)
    assert done.returncode == 0 and table.stat().st_mtime_ns == before and "rewritten" not in done.stdout
    (tmp_path / "listed.json").write_text('[{"name": "toy"}]')
    done = make(*args)
    assert done.returncode == 0 and f"{table}: rewritten" in done.stdout
    assert json.loads(table.read_text()) == [{"name": "toy"}]
    (tmp_path / "listed.json").write_text("not json")
    assert make(*args).returncode != 0
    assert json.loads(table.read_text()) == [{"name": "toy"}] and sorted(p.name for p in tmp_path.iterdir()) == [
        "cchost", "listed.json", "schemes.json"]


def test_make_validate_passes_args_to_ccemu_as_make_experiment_does():
    done = make("-n", "-o", ".venv/.installed", "-o", "build/cchost", "validate", "NAME=incast",
                "ARGS=--schemes expresspass,dctcp --set workload.rounds=2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [".venv/bin/ccemu", "validate", "workloads/experiments/incast.yaml", "--schemes",
                                   "expresspass,dctcp", "--set", "workload.rounds=2"]
