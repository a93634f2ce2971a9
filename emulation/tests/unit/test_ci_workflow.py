"""The hosted workflow's datapath steps (.github/workflows/ci.yml): their scripts, taken from the YAML
and run with bash as the runner runs them, against a stub `sudo` and `modprobe` and a module directory
that exists or not. A run that expects the kernel datapath and does not get it fails; a run declared
userspace-only does not."""

import os
import subprocess
from pathlib import Path

import pytest
import yaml

WORKFLOW = Path(__file__).resolve().parents[3] / ".github" / "workflows" / "ci.yml"
JOB = "test-and-smoke"
LOAD = "Load the openvswitch kernel module"
WHICH = "Which datapath ran"


def job() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"][JOB]


def step_script(name: str) -> str:
    (script,) = [step["run"] for step in job()["steps"] if step.get("name") == name]
    return script


def run_step(tmp_path, name: str, *, loads: bool, expect: str | None, smoke_log: str | None = None):
    """`name`'s script, as GitHub runs a `run:` (bash --noprofile --norc -eo pipefail), in `tmp_path`:
    `sudo` runs its command, `modprobe` succeeds and creates the module directory if `loads`, else fails
    and leaves none; CCEMU_EXPECT_KERNEL_DATAPATH is `expect` (None: unset)."""
    bin_dir, module = tmp_path / "bin", tmp_path / "sys-module-openvswitch"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "sudo").write_text('#!/bin/bash\nexec "$@"\n')
    (bin_dir / "modprobe").write_text('#!/bin/bash\n[ "$1" = openvswitch ] || exit 2\n'
                                      + (f'mkdir -p "{module}"\n' if loads else 'echo "modprobe: FATAL" >&2; exit 1\n'))
    for tool in ("sudo", "modprobe"):
        (bin_dir / tool).chmod(0o755)
    if loads and name == WHICH:
        module.mkdir(exist_ok=True)  # loaded by the earlier step
    if smoke_log is not None:
        (tmp_path / "smoke.log").write_text(smoke_log)
    script = tmp_path / "step.sh"
    script.write_text(step_script(name))
    env = {key: value for key, value in os.environ.items() if key != "CCEMU_EXPECT_KERNEL_DATAPATH"}
    env |= {"PATH": f"{bin_dir}:{env['PATH']}", "OVS_MODULE_DIR": str(module),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    if expect is not None:
        env["CCEMU_EXPECT_KERNEL_DATAPATH"] = expect
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=30)


def test_the_job_expects_the_kernel_datapath_unless_a_run_by_hand_says_userspace_only_and_names_the_module_dir():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    # PyYAML reads the key `on` as True.
    userspace_only = workflow[True]["workflow_dispatch"]["inputs"]["userspace_only"]
    assert (userspace_only["type"], userspace_only["default"]) == ("boolean", False)
    assert job()["env"] == {"CCEMU_EXPECT_KERNEL_DATAPATH": "${{ inputs.userspace_only && 'false' || 'true' }}",
                            "OVS_MODULE_DIR": "/sys/module/openvswitch"}
    for name in (LOAD, WHICH):
        assert "/sys/module" not in step_script(name)  # the scripts read the variable the tests set


@pytest.mark.parametrize("expect", ["true", None, "yes"])
def test_loading_the_module_fails_the_job_when_it_cannot_be_loaded_and_the_kernel_datapath_is_expected(
        tmp_path, expect):
    done = run_step(tmp_path, LOAD, loads=False, expect=expect)
    assert done.returncode == 1
    assert "::error::openvswitch module could not be loaded" in done.stdout


def test_loading_the_module_passes_when_it_loads(tmp_path):
    done = run_step(tmp_path, LOAD, loads=True, expect="true")
    assert done.returncode == 0
    assert "openvswitch module loaded" in done.stdout and "::" not in done.stdout


def test_loading_the_module_only_warns_when_the_run_was_declared_userspace_only(tmp_path):
    done = run_step(tmp_path, LOAD, loads=False, expect="false")
    assert done.returncode == 0
    assert "::warning::openvswitch module could not be loaded" in done.stdout and "::error::" not in done.stdout


@pytest.mark.parametrize("loads, expect, log, status", [
    (True, "true", "k=4 fat-tree: system datapath\n", 0),
    (True, "true", "k=4 fat-tree: netdev datapath\n", 1),  # loaded, but ccemu fell back to userspace
    (True, "false", "k=4 fat-tree: netdev datapath\n", 1),  # userspace-only allows no module, not a fallback
    (False, "true", "k=4 fat-tree: bpf datapath\n", 1),
    (False, None, "k=4 fat-tree: bpf datapath\n", 1),
    (False, "true", "", 1),  # no datapath reported
    (False, "false", "k=4 fat-tree: bpf datapath\n", 0),
    (False, "false", "k=4 fat-tree: netdev datapath\n", 0),
])
def test_the_which_datapath_step_fails_unless_the_smoke_run_said_system_datapath_or_the_run_is_userspace_only(
        tmp_path, loads, expect, log, status):
    done = run_step(tmp_path, WHICH, loads=loads, expect=expect, smoke_log=log)
    assert done.returncode == status, done.stdout + done.stderr
    reported = log.split(": ")[1].strip() if log else "no datapath reported"
    assert f"Smoke run: {reported}\n" in done.stdout
    assert (tmp_path / "summary.md").read_text().startswith(f"Smoke run: {reported} (kernel ")
    assert ("::error::" in done.stdout) == (status == 1)


def test_the_which_datapath_step_reads_the_last_datapath_the_smoke_log_names(tmp_path):
    netdev, system = "ccemu check: netdev datapath\n", "smoke: system datapath\n"
    assert run_step(tmp_path, WHICH, loads=True, expect="true", smoke_log=netdev + system).returncode == 0
    assert run_step(tmp_path, WHICH, loads=True, expect="true", smoke_log=system + netdev).returncode == 1
