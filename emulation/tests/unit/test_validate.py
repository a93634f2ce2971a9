"""`ccemu validate`: every file judged as `ccemu experiment` / `ccemu sweep` would before starting
anything, without root; cchost's own argument rules asked of the built cchost (--check-args), so
the two can never disagree."""

import resource
import subprocess
import sys
import time

import pytest

from ccemu.programs.cchost import CCHOST

REPO = CCHOST.parents[1]
SHIPPED = sorted((REPO / "workloads" / "experiments").glob("*.yaml")) + [REPO / "ci" / "smoke.yaml"] + sorted(
    (REPO / "workloads" / "sweeps").glob("*.yaml"))

pytestmark = pytest.mark.skipif(not CCHOST.exists(), reason=f"no {CCHOST}: `make setup` builds it")


def validate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ccemu.cli", "validate", *args], capture_output=True, text=True,
                          timeout=120)


def cpu_seconds(who: int = resource.RUSAGE_CHILDREN) -> float:
    """User and system CPU time of `who` so far (children: those waited for, with theirs)."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


# The time bounds below are on CPU time, not wall time: on a shared 2-CPU machine the wall clock
# counts whatever else runs (a CI run once waited seconds for a CPU), while the CPU time is what
# validating costs. Wall time only has to show that nothing hung.


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_file_is_valid_here_in_under_two_seconds(path):
    started, cpu = time.monotonic(), cpu_seconds()
    done = validate(str(path))
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith(f"{path}: valid: ")
    # The bound is wall time (restored after the timing pass had widened it to 60 s): ~0.5 s
    # here, also with a CI run beside it; and in CPU time (`ccemu validate` and its cchost).
    assert cpu_seconds() - cpu < 2
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("extra, message", [
    # Once accepted by the config's rules (a finite number) and refused by cchost; the config now
    # takes each parameter's range from cchost's table, in cchost's words.
    ("schemes: [{scheme: dcqcn, params: {timer_us: 0}}]\n",
     "schemes.0.params.timer_us: must be microseconds > 0, at most a year (got 0)"),
    # Once refused by cchost only after bring-up; the config's bound is cchost's own (a year).
    ("schemes: [{scheme: dctcp}]\ntransport: {control_timeout_ms: 1.0e+20}\n",
     "transport.control_timeout_ms: input should be less than or equal to 31536000000"),
    ("schemes: []\n", "no schemes to compare"),
])
def test_what_cchost_would_refuse_after_bring_up_is_refused_before_in_one_line(tmp_path, extra, message):
    path = tmp_path / "t.yaml"
    path.write_text("name: t\ntopology: {kind: star}\nworkload: {kind: permutation}\n" + extra)
    done = validate(str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"ccemu: {path}: ") and message in done.stderr


def test_cchost_is_asked_once_per_scheme_alpha_and_link_rate_whatever_the_fabrics_size(tmp_path):
    from ccemu.model.config import parse_config
    from ccemu.programs.cchost import check_args

    calls = tmp_path / "calls"
    fake = tmp_path / "cchost"
    fake.write_text(f'#!/bin/sh\necho "$2" >> {calls}\n')  # the host number, then success
    fake.chmod(0o755)
    # 250 million hosts: asked of h1 (its own share) and h2 (every other host's rate), not of each.
    config = parse_config({"name": "t", "topology": {"kind": "fattree", "k": 1000},
                           "link": {"host_shares": {"h1": 0.5}}, "workload": {"kind": "permutation"},
                           "schemes": [{"scheme": "dctcp"}, {"scheme": "expresspass"}]})
    started = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds()
    check_args(config, [None, 0.5], binary=fake)
    assert calls.read_text().split() == ["1", "2"] * 4
    assert cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds() - started < 5  # not 250 million names
