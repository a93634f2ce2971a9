"""What a run created, written down before it is created, and removal of exactly that.

Every run owns a state directory (/run/ccemu/<run-id>/ by default) holding state.json.
Everything of the run lives in network namespaces it created (hosts, and one per OVS
instance: switch ports and OVS's own tap devices live there too), so removing the run is:
stop the recorded processes, kill every process still inside a recorded namespace
(identified by the namespace's inode, never by a name), wait for the namespaces to
disappear, delete the state directory. Nothing of a run is created in the root namespace.

A process is identified by (pid, start time in clock ticks since boot) so a recycled pid is
never signalled.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .polling import wait_until

DEFAULT_STATE_ROOT = Path(os.environ.get("CCEMU_STATE_ROOT", "/run/ccemu"))
STATE_FILE = "state.json"
SHELL_OF = "shell of "
TERM_GRACE_S = 1.0  # how long recorded daemons get to exit on SIGTERM before SIGKILL


def process_start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot, or None if it is gone (or a zombie:
    dead, only waiting for its parent to read its status)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name may hold spaces and parentheses: fields resume after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])


def netns_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


@dataclass(frozen=True)
class ProcessRecord:
    pid: int
    start_time: int
    what: str

    @classmethod
    def of(cls, pid: int, what: str) -> "ProcessRecord":
        start = process_start_time(pid)
        if start is None:
            raise ProcessLookupError(f"{what} (pid {pid}) exited before it could be recorded")
        return cls(pid, start, what)

    def alive(self) -> bool:
        return process_start_time(self.pid) == self.start_time


@dataclass(frozen=True)
class NamespaceRecord:
    inode: int
    what: str


@dataclass
class Inventory:
    run_id: str
    state_dir: Path
    orchestrator: ProcessRecord
    processes: list[ProcessRecord] = field(default_factory=list)
    namespaces: list[NamespaceRecord] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)  # filesystems mounted inside state_dir

    # Creating ----------------------------------------------------------------------

    @classmethod
    def create(cls, run_id: str, root: Path = DEFAULT_STATE_ROOT) -> "Inventory":
        state_dir = root / run_id
        state_dir.mkdir(parents=True, exist_ok=False)
        inventory = cls(run_id, state_dir, ProcessRecord.of(os.getpid(), "orchestrator"))
        inventory.save()
        return inventory

    def add_process(self, pid: int, what: str) -> ProcessRecord:
        record = ProcessRecord.of(pid, what)
        self.processes.append(record)
        self.save()
        return record

    def add_node(self, shell_pid: int, node: str) -> None:
        """A Mininet node: the shell holding its namespace, and the namespace."""
        self.add_process(shell_pid, SHELL_OF + node)
        self.add_namespace_of(shell_pid, node)

    def shell_of(self, node: str) -> ProcessRecord | None:
        """The live shell of `node` (its namespace's anchor), if the run has that node."""
        for record in self.processes:
            if record.what == SHELL_OF + node and record.alive():
                return record
        return None

    def add_mount(self, fstype: str, path: Path) -> None:
        """Mount a `fstype` filesystem at `path` (inside state_dir), recorded first."""
        if self.state_dir not in path.parents:
            raise ValueError(f"{path} is outside the run's state directory {self.state_dir}")
        path.mkdir(parents=True, exist_ok=True)
        self.mounts.append(str(path))
        self.save()
        subprocess.run(["mount", "-t", fstype, fstype, str(path)], check=True, capture_output=True)

    def add_namespace_of(self, pid: int, what: str) -> NamespaceRecord:
        inode = netns_inode(pid)
        if inode in _protected_namespaces():
            raise RuntimeError(f"{what} (pid {pid}) is not in a namespace of its own")
        record = NamespaceRecord(inode, what)
        self.namespaces.append(record)
        self.save()
        return record

    def save(self) -> None:
        data = {
            "run_id": self.run_id,
            "orchestrator": asdict(self.orchestrator),
            "processes": [asdict(p) for p in self.processes],
            "namespaces": [asdict(n) for n in self.namespaces],
            "mounts": self.mounts,
        }
        tmp = self.state_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.state_dir / STATE_FILE)

    # Reading -----------------------------------------------------------------------

    @classmethod
    def load(cls, state_dir: Path) -> "Inventory":
        data = json.loads((state_dir / STATE_FILE).read_text())
        return cls(
            run_id=data["run_id"],
            state_dir=state_dir,
            orchestrator=ProcessRecord(**data["orchestrator"]),
            processes=[ProcessRecord(**p) for p in data["processes"]],
            namespaces=[NamespaceRecord(**n) for n in data["namespaces"]],
            mounts=data.get("mounts", []),
        )

    @classmethod
    def all_runs(cls, root: Path = DEFAULT_STATE_ROOT) -> list["Inventory"]:
        if not root.is_dir():
            return []
        return [cls.load(d) for d in sorted(root.iterdir()) if (d / STATE_FILE).is_file()]

    # Removing ----------------------------------------------------------------------

    def processes_inside(self) -> list[int]:
        """Pids of every process in one of the recorded namespaces."""
        return pids_in_namespaces({n.inode for n in self.namespaces} - _protected_namespaces())

    def remove(self, timeout: float = 10.0) -> list[str]:
        """Stop everything recorded; return what could not be removed (empty = clean)."""
        for record in self.processes:
            if record.alive():
                _signal(record.pid, signal.SIGTERM)
        wait_until(lambda: not any(p.alive() for p in self.processes), TERM_GRACE_S)

        def killed_all() -> bool:
            inside = self.processes_inside()
            for pid in inside:
                _signal(pid, signal.SIGKILL)
            return not inside and not any(p.alive() for p in self.processes)
        wait_until(killed_all, timeout)
        problems = [f"{p.what} (pid {p.pid}) still running" for p in self.processes if p.alive()]
        problems += [f"pid {pid} still inside a namespace of the run" for pid in self.processes_inside()]
        for path in reversed(self.mounts):
            if path in mounted_paths():
                result = subprocess.run(["umount", path], capture_output=True, text=True)
                if result.returncode:
                    problems.append(f"cannot unmount {path}: {result.stderr.strip()}")
        if not problems:
            shutil.rmtree(self.state_dir)
        return problems


def _protected_namespaces() -> set[int]:
    """Our own namespace and init's (where readable): never a run's to remove."""
    protected = {netns_inode(os.getpid())}
    try:
        protected.add(netns_inode(1))
    except PermissionError:
        pass  # some sandboxes hide init's namespaces even from root
    return protected


def mounted_paths() -> set[str]:
    with open("/proc/self/mounts") as mounts:
        return {line.split()[1] for line in mounts}


def pids_in_namespaces(inodes: set[int]) -> list[int]:
    """Pids of every process whose network namespace is one of `inodes`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry / "ns" / "net").st_ino in inodes:
                found.append(int(entry.name))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
