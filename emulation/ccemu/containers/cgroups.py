"""A container's cgroups: where they are, how a process joins them, and what they count (CPU used
and throttled, memory), on cgroup v1, v2 and the hybrid of both.

Read from the kernel's files, not from Docker's stats API: a read is two small files per figure
(cheap enough for every scrape) and works as well for a run whose dockerd is not ours.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from pathlib import Path

V2 = ""  # the key of the unified (v2) hierarchy in a cgroup map


def _cgroup_mounts(mountinfo: str) -> list[tuple[str, set[str], str, str]]:
    """(fstype, super options, root inside the hierarchy, mount point) of every cgroup mount."""
    mounts = []
    for line in mountinfo.splitlines():
        ours, _, theirs = line.partition(" - ")
        fields, tail = ours.split(), theirs.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            mounts.append((tail[0], set(tail[2].split(",")), fields[3], fields[4]))
    return mounts


def in_cgroup_filesystem(folder: object, proc: Path = Path("/proc")) -> bool:
    """Whether `folder` is a path inside a cgroup filesystem mounted here (no '..' in it): the only
    place a recorded cgroup can be."""
    if not isinstance(folder, str) or ".." in Path(folder).parts or not Path(folder).is_absolute():
        return False
    points = {Path(point) for *_, point in _cgroup_mounts((proc / "self" / "mountinfo").read_text())}
    return any(point == Path(folder) or point in Path(folder).parents for point in points)


def cgroup_dirs(pid: int, proc: Path = Path("/proc")) -> dict[str, str]:
    """Hierarchy -> the directory of `pid`'s cgroup in it: v1 hierarchies keyed by their
    controllers ("cpu", "cpu,cpuacct", "name=systemd"), the unified one by V2. Hierarchies not
    mounted here are left out."""
    mounts = _cgroup_mounts((proc / "self" / "mountinfo").read_text())
    dirs = {}
    for line in (proc / str(pid) / "cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        unified = number == "0" and not controllers
        wanted = set(controllers.split(","))
        for fstype, options, root, point in mounts:
            if (fstype == "cgroup2") if unified else (fstype == "cgroup" and wanted <= options):
                relative = path[len(root):] if root != "/" and path.startswith(root) else path
                dirs[V2 if unified else controllers] = str(Path(point) / relative.lstrip("/"))
                break
    return dirs


def join_command(dirs: dict[str, str]) -> str:
    """A shell command that moves the shell running it ($$) into every one of `dirs`' cgroups (a
    command it then execs stays there)."""
    return " && ".join(f"echo $$ > {shlex.quote(str(Path(d) / 'cgroup.procs'))}" for d in dirs.values())


@dataclass(frozen=True)
class CgroupFigures:
    """What a container's cgroups counted since it started."""

    cpu_seconds: float  # CPU time its processes used
    periods: int  # CFS enforcement periods in which it ran (0: no CPU limit)
    throttled_periods: int  # of those, the ones in which it hit its limit and waited
    throttled_seconds: float  # time it waited for its CPU quota
    memory_bytes: int  # memory charged now (page cache included)
    memory_peak_bytes: int  # the most ever charged

    def as_row(self) -> dict:
        return asdict(self)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _keyed(text: str | None) -> dict[str, int]:
    """A cgroup stat file ("key value" lines) as a dict."""
    pairs = (line.split() for line in (text or "").splitlines())
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].lstrip("-").isdigit()}


def _v1(dirs: dict[str, str], controller: str) -> Path | None:
    for key, directory in dirs.items():
        if key != V2 and controller in key.split(","):
            return Path(directory)
    return None


def read_figures(dirs: dict[str, str]) -> CgroupFigures | None:
    """The figures of the cgroups in `dirs` (cgroup_dirs), v1 files where the controller is on a v1
    hierarchy, else v2's; None if the cgroups are gone (the container was removed)."""
    cpu, cpuacct, memory = _v1(dirs, "cpu"), _v1(dirs, "cpuacct"), _v1(dirs, "memory")
    unified = Path(dirs[V2]) if V2 in dirs else None
    figures = {}
    if cpuacct is not None and (usage := _read(cpuacct / "cpuacct.usage")) is not None:
        figures["cpu_seconds"] = int(usage) / 1e9
    if cpu is not None and (stat := _read(cpu / "cpu.stat")) is not None:
        stat = _keyed(stat)
        figures |= {"periods": stat.get("nr_periods", 0), "throttled_periods": stat.get("nr_throttled", 0),
                    "throttled_seconds": stat.get("throttled_time", 0) / 1e9}
    if memory is not None and (current := _read(memory / "memory.usage_in_bytes")) is not None:
        figures |= {"memory_bytes": int(current),
                    "memory_peak_bytes": int(_read(memory / "memory.max_usage_in_bytes") or current)}
    if unified is not None:
        stat = _keyed(_read(unified / "cpu.stat"))
        if "cpu_seconds" not in figures and "usage_usec" in stat:
            figures["cpu_seconds"] = stat["usage_usec"] / 1e6
        if "periods" not in figures and "nr_periods" in stat:
            figures |= {"periods": stat["nr_periods"], "throttled_periods": stat.get("nr_throttled", 0),
                        "throttled_seconds": stat.get("throttled_usec", 0) / 1e6}
        if "memory_bytes" not in figures and (current := _read(unified / "memory.current")) is not None:
            figures |= {"memory_bytes": int(current),
                        "memory_peak_bytes": int(_read(unified / "memory.peak") or current)}
    if "cpu_seconds" not in figures:
        return None
    return CgroupFigures(**{"periods": 0, "throttled_periods": 0, "throttled_seconds": 0.0, "memory_bytes": 0,
                            "memory_peak_bytes": 0, **figures})
