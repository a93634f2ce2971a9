"""What a run records about what ran it: the code's commit, the tools' versions and the machine
(probed here, at run time, so the results layer that writes the bundle stays pure)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

from ..programs.cchost import REPO_ROOT, cchost_binary

COPIED_COMMIT = REPO_ROOT / "build" / "commit"


def _output(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def git_commit() -> str:
    """The commit of the tree that runs, with "-dirty" if tracked files differ from it. A tree
    Ansible copied to a machine has no .git: there, the controller's commit it came from, as
    playbooks/roles/ccemu_build wrote it into build/commit."""
    if not (REPO_ROOT / ".git").exists():
        return COPIED_COMMIT.read_text().strip() if COPIED_COMMIT.is_file() else "unknown"
    commit = _output(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"]) or "unknown"
    dirty = bool(_output(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"]))
    return commit + ("-dirty" if dirty else "")


def provenance() -> dict:
    """Git commit and versions of what ran, and the machine."""
    try:
        import mininet.net
        mininet_version = mininet.net.VERSION
    except (ImportError, AttributeError):
        mininet_version = "unknown"
    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), platform.machine())
    ovs = _output(["ovs-vswitchd", "--version"])
    return {
        "git_commit": git_commit(),
        "versions": {
            "kernel": platform.release(),
            "ovs": ovs.splitlines()[0] if ovs else "unknown",
            "mininet": mininet_version,
            "cchost": _output([str(cchost_binary()), "--version"]),
            "python": platform.python_version(),
        },
        "machine": {"cpus": os.cpu_count(), "cpu_model": cpu_model,
                    "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
    }
