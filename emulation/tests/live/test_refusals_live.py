"""The real CLI refuses what cannot run before starting anything (root: as a real run would
be, so that only the refusal stands between the command and a fabric)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ccemu.commands.exits import EXIT_BAD_CONFIG, EXIT_DOES_NOT_FIT

pytestmark = pytest.mark.root


def refused(tmp_path: Path, *args: str) -> tuple[int, str]:
    """Run `ccemu ARGS` with its state in tmp_path; check it started nothing and said so in
    one line; return its exit status and that line."""
    state_root = tmp_path / "state"
    interfaces = set(os.listdir("/sys/class/net"))
    result = subprocess.run([sys.executable, "-m", "ccemu.cli", *args], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "CCEMU_STATE_ROOT": str(state_root)})
    assert result.stdout == ""
    assert not state_root.exists()
    assert set(os.listdir("/sys/class/net")) == interfaces
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return result.returncode, lines[0]


def experiment_file(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\ntopology: {{kind: fattree, k: 4}}\n{body}workload: {{kind: incast}}\n")
    return path


def test_a_fat_tree_with_k_400_is_refused_with_its_memory_estimate_and_this_machines_limits(tmp_path):
    status, line = refused(tmp_path, "check", "--k", "400")
    assert status == EXIT_DOES_NOT_FIT
    assert re.fullmatch(
        r"ccemu: command line: topology\.k: a fat-tree with k=400 has 16000000 hosts and 200000 switches: needs "
        r"~84\.9 TiB of memory, more than 80% of the [\d.]+ GiB this machine has available "
        r"\(and \d+ processes and threads, kernel\.\S+ leaves room for \d+; .*\)", line), line


def test_a_link_rate_of_1e12_mbps_is_refused_naming_the_bound_and_its_reason(tmp_path):
    path = experiment_file(tmp_path, "fast", "link: {rate_mbps: 1e12}\nschemes: [{scheme: dctcp}]\n")
    assert refused(tmp_path, "experiment", str(path)) == (
        EXIT_BAD_CONFIG, f"ccemu: {path}: link.rate_mbps: must be at most 100000 (100 Gbit/s): the port program's "
                         "fluid drain overflows 64 bits above 147573 Mbit/s (got 1e+12)")


def test_expresspass_hosts_behind_spraypass_ports_are_refused_naming_the_key_that_allows_it(tmp_path):
    path = experiment_file(tmp_path, "mismatch", "schemes:\n  - scheme: expresspass\n    port: {profile: spraypass}\n")
    assert refused(tmp_path, "experiment", str(path)) == (
        EXIT_BAD_CONFIG, f"ccemu: {path}: schemes.0.port.profile: expresspass runs on expresspass ports (got "
                         "'spraypass'); to run it on spraypass ports on purpose, set schemes.0.port_mismatch_intended: "
                         "true")
