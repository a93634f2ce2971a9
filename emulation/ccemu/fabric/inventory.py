"""What a run created, written down before it is created, and removal of exactly that.

Every run owns a state directory (/run/ccemu/<run-id>/ by default) holding state.json.
Everything of the run lives in network namespaces it created (hosts, and one per OVS
instance: switch ports and OVS's own tap devices live there too), so removing the run is:
stop the recorded processes, kill every process still inside a recorded namespace, remove the
run's Docker containers (Docker hosts: a container's network namespace is its host's), wait for
the namespaces to disappear, delete the state directory. Nothing of a run is created in the
root namespace but, on a machine running part of a fabric over several, the filter in front of
its tunnels (fabric/firewall.py): an iptables chain, recorded by name and removed by that name.

Identities that cannot be reused while the record exists, never names:
- a process is (pid, start time in clock ticks since boot), and is signalled through a pidfd
  opened before its start time is compared, so a recycled pid is never signalled;
- a network namespace is (inode, cookie). The kernel hands a freed namespace's inode number
  to the next namespace it creates (a SIGKILLed run's host namespaces die with its shells,
  and the next run's get their numbers), but a namespace cookie (SO_NETNS_COOKIE) is never
  reused until reboot. A namespace is acted on only while we hold it open (so its inode
  cannot change hands) and its cookie matches the record.

Processes are recorded before they run (spawn(): the child waits for its record to be saved),
so a SIGKILL at any moment leaves nothing unrecorded: a node's shell creates its namespace
once it runs, and the namespace dies with it unless something else of the run, itself inside
it, holds it.

A state.json is read as what someone else may have written (SECURITY.md): only from a folder and
file of ours that no one else can write, never through a link; a record ccemu could not have
written is refused in one line and the run skipped (`ccemu clean` goes on with the others); a
mount must lie inside the run's folder; and a recorded process is signalled only if it carries
its run's mark (CCEMU_RUN=<run id> in the environment it started with, which every process
spawn() starts gets and no other process has): a record naming sshd's pid and start time
does not make `ccemu clean` stop sshd.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..polling import wait_until
from . import firewall
from .namespaces import (mounted_paths, netns_cookie, netns_inode_or_none, netns_of_processes, open_netns,
                         pids_in_namespaces, process_start_time, protected_cookies)

DEFAULT_STATE_ROOT = Path(os.environ.get("CCEMU_STATE_ROOT", "/run/ccemu"))
STATE_FILE = "state.json"
RUN_ENV = "CCEMU_RUN"  # spawn() puts CCEMU_RUN=<run id> in what it starts (see above)
SHELL_OF = "shell of "
MID_EXEC_WAIT_S = 1.0  # how long a process showing no environment gets to finish its exec (ProcessRecord.carries)
TERM_GRACE_S = 1.0  # how long recorded daemons get to exit on SIGTERM before SIGKILL


def _send_signal(pid: int, sig: int, still_the_one: Callable[[], bool]) -> None:
    """Signal `pid` only if, once a pidfd pins the process, `still_the_one()` holds."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if still_the_one():
            signal.pidfd_send_signal(pidfd, sig)
    except ProcessLookupError:
        pass
    finally:
        os.close(pidfd)


# Runs the real command only once the parent writes a line on fd N (after recording the
# child's pid); on EOF (the parent died first) it exits without running anything. bash, not
# sh: dash redirects only file descriptors 0-9.
_GATE = 'read -r _ <&{fd} && exec "$@" {fd}<&-'


def _release(gate_write: int) -> None:
    """Let a spawned process run (see Inventory.spawn) and close its gate."""
    try:
        os.write(gate_write, b"go\n")
    except BrokenPipeError:
        pass  # it exited before reading (what started it failed): the caller sees its status
    finally:
        os.close(gate_write)


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

    def signal(self, sig: int) -> None:
        _send_signal(self.pid, sig, self.alive)

    def carries(self, run_id: str) -> bool:
        """Whether the process started with its run's mark in its environment (spawn() gives it;
        an exec keeps it). Read once the record is judged alive: a gone process carries nothing.
        An empty environment is read again for a while: a process in the middle of an exec shows
        none (its new memory has no environment yet; a spawned process execs its program just
        after it is released), and one spawn() started is never without its mark."""
        environ = b""

        def read() -> bool:
            nonlocal environ
            environ = _environ_of(self.pid)
            return environ is None or environ != b""
        wait_until(read, MID_EXEC_WAIT_S)
        return environ is not None and f"{RUN_ENV}={run_id}".encode() in environ.split(b"\0")


def _environ_of(pid: int) -> bytes | None:
    """/proc/PID/environ (None: the process is gone or not ours to read)."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


class InventoryError(RuntimeError):
    pass


class StateFileError(InventoryError):
    """A state.json ccemu could not have written, or one it cannot trust (one line)."""


@dataclass(frozen=True)
class NamespaceRecord:
    inode: int
    cookie: int | None  # SO_NETNS_COOKIE: unique until reboot, unlike the inode (None: recorded without one)
    what: str


def container_name(run_id: str, host: str) -> str:
    """Unique to the run (the run id holds a random part): cleanup finds it by this exact name.
    Docker takes [a-zA-Z0-9][a-zA-Z0-9_.-]* only: anything else (dctcp+) becomes '_'."""
    return re.sub(r"[^a-zA-Z0-9_.-]", "_", f"ccemu-{run_id}-{host}")


@dataclass
class ContainerRecord:
    """A Docker container of the run: its name (unique to the run: it holds the run id) is recorded
    before the container is created, its id once it is."""

    name: str
    id: str | None = None


@dataclass
class Inventory:
    run_id: str
    state_dir: Path
    orchestrator: ProcessRecord
    processes: list[ProcessRecord] = field(default_factory=list)
    namespaces: list[NamespaceRecord] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)  # filesystems mounted inside state_dir
    containers: list[ContainerRecord] = field(default_factory=list)
    filters: list[str] = field(default_factory=list)  # iptables chains in our own namespace (fabric/firewall.py)
    # Inside batch(): the gates of processes spawned but not yet released (None: not batching).
    _held_gates: list[int] | None = field(default=None, repr=False, compare=False)

    # Creating ----------------------------------------------------------------------

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Records made inside are saved once, at the end, and only then are the processes
        spawned inside released: a fabric of 1000 hosts saves its state once, not 2000 times
        (each save writes the whole record). If the block raises, its processes are not released:
        they read EOF and exit without running anything."""
        if self._held_gates is not None:
            raise InventoryError("Inventory.batch() does not nest")
        self._held_gates = []
        released = False
        try:
            yield
            self._held_gates, gates = None, self._held_gates
            self.save()
            for gate in gates:
                _release(gate)
            released = True
        finally:
            if not released:
                gates, self._held_gates = self._held_gates or [], None
                for gate in gates:
                    os.close(gate)
                self.save()

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
        self._save_unless_batching()
        return record

    def _save_unless_batching(self) -> None:
        if self._held_gates is None:
            self.save()

    def spawn(self, what: str, argv: list[str], start: Callable[..., subprocess.Popen] = subprocess.Popen,
              **popen_kwargs) -> subprocess.Popen:
        """Start `argv` with `start` (Popen, or a node's popen), recorded before it runs: the
        child waits on a pipe until its pid and start time are saved (inside batch(): until the
        batch ends); if we are killed first, it reads EOF and exits without running anything."""
        gate_read, gate_write = os.pipe()
        popen_kwargs["env"] = {**(popen_kwargs.get("env") or os.environ), RUN_ENV: self.run_id}
        try:
            popen_kwargs.pop("close_fds", None)  # pass_fds closes the rest, as Popen's default does
            proc = start(["bash", "-c", _GATE.format(fd=gate_read), "ccemu-gate", *argv], pass_fds=(gate_read,),
                         **popen_kwargs)
        except BaseException:
            os.close(gate_write)
            raise
        finally:
            os.close(gate_read)
        try:
            self.add_process(proc.pid, what)
        except ProcessLookupError:  # it exited before reading (what started it failed): the caller sees its status
            os.close(gate_write)
            return proc
        except BaseException:
            os.close(gate_write)
            raise
        if self._held_gates is not None:
            self._held_gates.append(gate_write)
        else:
            _release(gate_write)
        return proc

    def shell_of(self, node: str) -> ProcessRecord | None:
        """The live shell of `node` (its namespace's anchor), if the run has that node."""
        for record in self.processes:
            if record.what == SHELL_OF + node and record.alive():
                return record
        return None

    def add_mount(self, fstype: str, path: Path, mode: int = 0o700) -> None:
        """Mount a `fstype` filesystem at `path` (inside state_dir), recorded first; its root is
        root's alone (`mode`): a bpffs's default root is 1777, where any local user could plant
        pins that make a run fail or reuse another's maps."""
        if self.state_dir not in path.parents:
            raise ValueError(f"{path} is outside the run's state directory {self.state_dir}")
        path.mkdir(parents=True, exist_ok=True)
        self.mounts.append(str(path))
        self.save()
        subprocess.run(["mount", "-t", fstype, "-o", f"mode={mode:o}", fstype, str(path)], check=True,
                       capture_output=True)

    def add_filter(self, chain: str, make: Callable[[str], None]) -> None:
        """An iptables chain of the run in this namespace, recorded before `make(chain)` makes it."""
        if not firewall.is_chain(chain):
            raise InventoryError(f"{chain!r} is not a name ccemu gives its chains")
        self.filters.append(chain)
        self.save()
        make(chain)

    def add_containers(self, names: list[str]) -> None:
        """Record containers about to be created (their ids follow: container_created)."""
        self.containers += [ContainerRecord(name) for name in names]
        self.save()

    def container_created(self, ids: dict[str, str]) -> None:
        """Record the ids of created containers (name -> id)."""
        for record in self.containers:
            record.id = ids.get(record.name, record.id)
        self.save()

    def add_namespace_of(self, pid: int, what: str) -> NamespaceRecord:
        with open_netns(pid) as ns_fd:
            if ns_fd is None:
                raise ProcessLookupError(f"{what} (pid {pid}) exited before its namespace could be recorded")
            inode, cookie = os.fstat(ns_fd).st_ino, netns_cookie(ns_fd)
        if cookie is None:
            raise InventoryError(f"cannot read the network namespace cookie of {what} (SO_NETNS_COOKIE needs Linux "
                                 "5.14 or later): without it a run's namespaces cannot be told from another's")
        if cookie in protected_cookies():
            raise InventoryError(f"{what} (pid {pid}) is not in a namespace of its own")
        record = NamespaceRecord(inode, cookie, what)
        self.namespaces.append(record)
        self._save_unless_batching()
        return record

    def save(self) -> None:
        data = {
            "run_id": self.run_id,
            "orchestrator": asdict(self.orchestrator),
            "processes": [asdict(p) for p in self.processes],
            "namespaces": [asdict(n) for n in self.namespaces],
            "mounts": self.mounts,
            "containers": [asdict(c) for c in self.containers],
            "filters": self.filters,
        }
        tmp = self.state_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.state_dir / STATE_FILE)

    # Reading -----------------------------------------------------------------------

    @classmethod
    def load(cls, state_dir: Path) -> "Inventory":
        """The run whose folder is `state_dir`: its state.json read only if the folder and the file
        are ours, no one else can write them and neither is a link; StateFileError otherwise."""
        _check_ours(state_dir, stat.S_ISDIR, "a folder")
        path = state_dir / STATE_FILE
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            raise StateFileError(f"{path}: cannot be read without following a link ({exc.strerror})") from None
        with os.fdopen(fd, "rb") as file:
            _check_ours(path, stat.S_ISREG, "a regular file", os.fstat(file.fileno()))
            text = file.read()
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise StateFileError(f"{path}: not JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("run_id") != state_dir.name:
            raise StateFileError(f"{path}: its run_id is not its folder's name {state_dir.name!r}")
        return cls.of_state(data, state_dir)

    @classmethod
    def of_state(cls, data: dict, state_dir: Path) -> "Inventory":
        """The inventory a state.json holds (read before it was removed, say); StateFileError
        naming the first record ccemu could not have written."""
        try:
            run_id = data["run_id"]
            if not isinstance(run_id, str) or not run_id.isprintable() or "/" in run_id:
                raise StateFileError(f"run_id {run_id!r} is not a run's id")
            inventory = cls(
                run_id=run_id,
                state_dir=state_dir,
                orchestrator=_process(data["orchestrator"]),
                processes=[_process(p) for p in data["processes"]],
                namespaces=[NamespaceRecord(_count(n["inode"]), None if n.get("cookie") is None else
                                            _count(n["cookie"]), _text(n["what"])) for n in data["namespaces"]],
                mounts=[_mount(m, state_dir) for m in data.get("mounts", [])],
                containers=[_container(c, run_id) for c in data.get("containers", [])],
                # Only a name ccemu gives: a record is not a way to have `ccemu clean` remove another chain.
                filters=[chain for chain in data.get("filters", []) if firewall.is_chain(chain)],
            )
        except StateFileError as exc:
            raise StateFileError(f"{state_dir / STATE_FILE}: {exc}") from None
        except (KeyError, TypeError, AttributeError) as exc:
            raise StateFileError(f"{state_dir / STATE_FILE}: not a run's record ({type(exc).__name__}: "
                                 f"{exc})") from None
        return inventory

    @classmethod
    def all_runs(cls, root: Path = DEFAULT_STATE_ROOT, skipped: list[str] | None = None) -> list["Inventory"]:
        """Every run under `root`. A run whose record cannot be trusted is skipped, and why goes to
        `skipped` (one line each): one bad file does not stop the others."""
        if not root.is_dir():
            return []
        try:
            _check_ours(root, stat.S_ISDIR, "a folder")
        except StateFileError as exc:
            if skipped is not None:
                skipped.append(f"{exc}: no run under it read")
            return []
        runs = []
        for state_dir in sorted(root.iterdir()):
            if not os.path.lexists(state_dir / STATE_FILE):
                continue  # not a run's folder (the monitoring root, a run's folder being made)
            try:
                runs.append(cls.load(state_dir))
            except StateFileError as exc:
                if skipped is not None:
                    skipped.append(str(exc))
        return runs

    # Removing ----------------------------------------------------------------------

    @contextlib.contextmanager
    def held_namespaces(self, unverified: set[int] | None = None) -> Iterator[dict[int, int]]:
        """inode -> open fd of every recorded namespace that still exists, verified by its
        cookie and held open for the duration (so its inode means it, and only it). Inodes in
        use whose namespace cannot be verified (recorded without a cookie, or the cookie
        cannot be read) go into `unverified`: left alone, never assumed ours."""
        wanted = {n.inode: n.cookie for n in self.namespaces}
        protected = protected_cookies()
        held: dict[int, int] = {}
        reused: set[int] = set()  # inodes now of another namespace (only one holds an inode at a time)
        with contextlib.ExitStack() as stack:
            for pid, inode in netns_of_processes():
                if inode not in wanted or inode in held or inode in reused:
                    continue
                ns_fd = stack.enter_context(open_netns(pid))
                if ns_fd is None or os.fstat(ns_fd).st_ino != inode:
                    continue  # pid gone or reused since the scan: another of its processes may do
                cookie = netns_cookie(ns_fd)
                if cookie is None or wanted[inode] is None:
                    if unverified is not None:
                        unverified.add(inode)
                    reused.add(inode)
                elif cookie == wanted[inode] and cookie not in protected:
                    held[inode] = ns_fd
                else:
                    reused.add(inode)
            yield held

    def processes_inside(self) -> list[int]:
        """Pids of every process in one of the recorded namespaces."""
        with self.held_namespaces() as held:
            return pids_in_namespaces(set(held))

    def _kill_inside(self) -> list[int]:
        """SIGKILL every process inside a recorded namespace; returns the pids found."""
        with self.held_namespaces() as held:
            inside = pids_in_namespaces(set(held))
            for pid in inside:
                # The namespaces are held open: a pid still showing one of their inodes is in it.
                _send_signal(pid, signal.SIGKILL,
                             lambda pid=pid: netns_inode_or_none(pid) in held)
        return inside

    def remove(self, timeout: float = 10.0,
               remove_containers: Callable[[str, list[ContainerRecord]], list[str]] | None = None) -> list[str]:
        """Stop everything recorded; return what could not be removed (empty = clean).
        `remove_containers` removes recorded Docker containers (containers.engine's: this recorder
        knows no engine); a run that recorded containers and is given none reports them as left."""
        # A live process without its run's mark is not one ccemu started, whatever the record says.
        ours: list[ProcessRecord] = []
        foreign: list[ProcessRecord] = []
        for record in self.processes:
            (foreign if record.alive() and not record.carries(self.run_id) else ours).append(record)
        problems = [f"{p.what} (pid {p.pid}) is not a process of {self.run_id} (it started without "
                    f"{RUN_ENV}={self.run_id}): left alone" for p in foreign]
        for record in ours:
            record.signal(signal.SIGTERM)
        wait_until(lambda: not any(p.alive() for p in ours), TERM_GRACE_S)

        def killed_all() -> bool:
            inside = self._kill_inside()
            for record in ours:
                record.signal(signal.SIGKILL)
            return not inside and not any(p.alive() for p in ours)
        wait_until(killed_all, timeout)
        problems += [f"{p.what} (pid {p.pid}) still running" for p in ours if p.alive()]
        if self.containers:
            # Once nothing runs in their namespaces (their own init included): Docker removes them.
            problems += (remove_containers(self.run_id, self.containers) if remove_containers else
                         [f"containers {', '.join(c.name for c in self.containers)} left: nothing here removes "
                          "Docker containers"])
        unverified: set[int] = set()
        with self.held_namespaces(unverified) as held:
            problems += [f"pid {pid} still inside a namespace of the run" for pid in pids_in_namespaces(set(held))]
        problems += [f"a namespace with the inode of {n.what}'s ({n.inode}) is in use but cannot be verified as the "
                     "run's (no cookie on record, or none readable): left alone" for n in self.namespaces
                     if n.inode in unverified]
        for chain in self.filters:
            problems += firewall.remove(chain)
        for path in reversed(self.mounts):
            if path in mounted_paths():
                result = subprocess.run(["umount", path], capture_output=True, text=True)
                if result.returncode:
                    problems.append(f"cannot unmount {path}: {result.stderr.strip()}")
        if not problems:
            shutil.rmtree(self.state_dir)
        return problems


def _check_ours(path: Path, kind: Callable[[int], bool], what: str, status: os.stat_result | None = None) -> None:
    """StateFileError unless `path` (not followed, or the open file's `status`) is `what`, ours,
    and writable by no one else: a record someone else could have written is not read."""
    try:
        status = status or os.lstat(path)
    except OSError as exc:
        raise StateFileError(f"{path}: {exc.strerror}") from None
    if not kind(status.st_mode):
        raise StateFileError(f"{path}: not {what} (a link, or something else)")
    if status.st_uid != os.geteuid() or status.st_mode & 0o022:
        raise StateFileError(f"{path}: owned by uid {status.st_uid} with mode {stat.S_IMODE(status.st_mode):o}: "
                             "someone else could have written it")


def _count(value: object) -> int:
    if type(value) is not int or value < 0:
        raise StateFileError(f"{value!r} is not a count")
    return value


def _text(value: object) -> str:
    """A record's description: printed by `ccemu clean`, so one printable line."""
    if not isinstance(value, str) or not value.isprintable():
        raise StateFileError(f"{value!r} is not one printable line")
    return value


def _process(record: dict) -> ProcessRecord:
    pid = _count(record["pid"])
    if pid < 2:
        raise StateFileError(f"pid {pid} is not a process ccemu starts")
    return ProcessRecord(pid, _count(record["start_time"]), _text(record["what"]))


def _mount(path: object, state_dir: Path) -> str:
    """A recorded mount point: only inside the run's folder (add_mount makes them nowhere else)."""
    if not isinstance(path, str) or ".." in Path(path).parts or state_dir not in Path(path).parents:
        raise StateFileError(f"mount {path!r} is not inside the run's folder {state_dir}")
    return path


def _container(record: dict, run_id: str) -> ContainerRecord:
    """A recorded container: named for its run as containers/host.py names them (removal also
    checks the container's run label: containers/engine.py)."""
    name, container_id = record["name"], record.get("id")
    if not isinstance(name, str) or name == container_name(run_id, "") or \
            container_name(run_id, name.removeprefix(container_name(run_id, ""))) != name:
        raise StateFileError(f"container {name!r} is not named for run {run_id}")
    if container_id is not None and not (isinstance(container_id, str) and re.fullmatch(r"[0-9a-f]{1,64}",
                                                                                           container_id)):
        raise StateFileError(f"container id {container_id!r} is not a container id")
    return ContainerRecord(name, container_id)
