"""Docker's engine for the containerized hosts: the machine's dockerd when one answers, otherwise a
dockerd ccemu starts, records and stops once no user of ccemu's is left.

Users (a run with Docker hosts, `ccemu image`, `ccemu clean`) hold a shared flock on
/run/ccemu/docker/lock for as long as they use the engine (a SIGKILLed user's lock goes with
it). Whoever releases last, i.e. can take the lock exclusively, stops a dockerd that ccemu started;
a dockerd that was running before (the machine's own) is never stopped.

A dockerd ccemu starts is recorded before it runs (an Inventory at /run/ccemu/docker/dockerd/,
the spawn gate of fabric/inventory.py) and runs in a session of its own (Ctrl-C in the terminal
does not reach it: containers outlive the run's teardown only by being removed). It is started
with `--iptables=false --bridge=none --ip-forward=false`: it leaves the firewall alone (a default
dockerd sets the iptables FORWARD policy to DROP, which silently stops Linux-bridge forwarding on
the machine), leaves the machine's IPv4 forwarding as it was (by default dockerd turns it on for
every interface, and never back: a machine on two networks would route between them) and makes
no bridge; ccemu's containers have no Docker network at all (the fabric's veth is their
only interface) and ccemu's fabric forwards in OVS, not in the root namespace, so nothing of ours
depends on either. Images it builds stay in Docker's data root (/var/lib/docker) as usual.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from ..fabric.inventory import Inventory, StateFileError
from ..logs import ended, last_line
from ..polling import wait_until

# Machine-wide, as the engine's socket is: not under a run's state root (CCEMU_STATE_ROOT).
ENGINE_ROOT = Path(os.environ.get("CCEMU_DOCKER_STATE", "/run/ccemu/docker"))
DOCKERD_ARGS = ("--iptables=false", "--bridge=none", "--ip-forward=false")
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0  # dockerd stops its containerd and any container left on SIGTERM
API_TIMEOUT_S = 120  # seconds a Docker API call may take (an image build, 16 containers at once)
RUN_LABEL = "org.ccemu.run"  # on every container a run creates: its run id (removal checks it)


class EngineError(RuntimeError):
    """Docker's engine is missing or would not start; str() is one line."""


def docker_sdk():
    """The Docker SDK, imported when Docker hosts are used (namespace-only runs never load it)."""
    import docker

    return docker


class DockerEngine:
    """A session with Docker's engine: `client` is the SDK's; release() (or leaving the `with`)
    ends it and stops a dockerd ccemu started if nobody else uses it."""

    def __init__(self, client, lock_fd: int, started_here: bool, root: Path):
        self.client = client
        self.root = root
        self._lock_fd: int | None = lock_fd
        self.started_here = started_here  # this session started dockerd

    @classmethod
    def acquire(cls, root: Path = ENGINE_ROOT) -> "DockerEngine":
        """Connect to the machine's dockerd, or start one (recorded) if none answers."""
        lock_fd = _lock(root, fcntl.LOCK_SH)
        try:
            client = _connect()
            started = False
            if client is None:
                client, started = _start(root)
            return cls(client, lock_fd, started, root)
        except BaseException:
            os.close(lock_fd)
            stop_if_unused(root)
            raise

    def release(self) -> None:
        """End the session; stop a dockerd ccemu started if this was its last user. Never raises:
        what ends a session (a run's teardown) must not be replaced by a failure to stop dockerd,
        which is said on stderr and left to `ccemu clean`."""
        if self._lock_fd is None:
            return
        self.client.close()
        os.close(self._lock_fd)
        self._lock_fd = None
        try:
            stop_if_unused(self.root)
        except (EngineError, OSError) as exc:
            print(f"ccemu: {exc}; `ccemu clean` tries again", file=sys.stderr)

    def __enter__(self) -> "DockerEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _lock(root: Path, how: int) -> int:
    """An fd of root/lock holding `how`. The last user removes the lock file and the directory
    (stop_if_unused): retry if the file we locked is no longer the one at the path."""
    while True:
        root.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            continue  # the directory went between mkdir and open
        fcntl.flock(fd, how)
        try:
            if os.stat(root / "lock").st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _directory_lock(root: Path, create: bool = True) -> int:
    """root itself locked exclusively: one starter or stopper of dockerd at a time."""
    while True:
        if create:
            root.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            if not create:
                raise
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd


def _socket() -> str:
    """Where the dockerd ccemu starts listens: DOCKER_HOST's socket if it names one (the clients
    look there), else Docker's default."""
    host = os.environ.get("DOCKER_HOST", "")
    return host if host.startswith("unix://") else DEFAULT_SOCKET


def _connect():
    """A client of the engine DOCKER_HOST (or the default socket) names, or None if none answers."""
    docker = docker_sdk()
    try:
        client = docker.from_env(timeout=API_TIMEOUT_S)
    except docker.errors.DockerException:
        return None
    try:
        client.ping()
    except (docker.errors.DockerException, OSError):
        client.close()
        return None
    return client


def _start(root: Path):
    """Start dockerd (one starter at a time: the others wait on the start lock and find it up)."""
    start_fd = _directory_lock(root)
    try:
        client = _connect()
        if client is not None:
            return client, False
        dockerd = os.environ.get("CCEMU_DOCKERD") or shutil.which("dockerd")
        if dockerd is None or not os.access(dockerd, os.X_OK):
            raise EngineError("Docker hosts need Docker's engine and dockerd is not installed: "
                              "`apt-get install docker.io` (or `make setup`)")
        _remove_stale_record(root / "dockerd")
        inventory = Inventory.create("dockerd", root)
        log_path = inventory.state_dir / "dockerd.log"
        with open(log_path, "ab") as log:
            process = inventory.spawn("dockerd started by ccemu", [dockerd, *DOCKERD_ARGS, "--host", _socket()],
                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        client = None
        deadline = time.monotonic() + START_TIMEOUT_S
        while client is None and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            client = _connect()
        if client is None:
            said = last_line(log_path)
            status = (ended(process.returncode) if process.poll() is not None
                      else f"did not answer within {START_TIMEOUT_S:.0f} s")
            inventory.remove()
            raise EngineError(f"dockerd {status}{': ' + said if said else ''}")
        return client, True
    finally:
        os.close(start_fd)


def _remove_stale_record(record: Path) -> None:
    """What a dockerd of ours left that no longer answers: its record if it died (or a starter was
    killed before saving one). One still running is refused, not killed here: it may serve a run
    with another DOCKER_HOST; acquire()'s failure path stops it if no run uses it."""
    if not record.exists():
        return
    if not (record / "state.json").exists():
        shutil.rmtree(record)
        return
    try:
        stale = Inventory.load(record)
    except StateFileError as exc:
        raise EngineError(f"the record of a dockerd ccemu started: {exc}") from None
    alive = [p for p in stale.processes if p.alive()]
    if alive:
        raise EngineError(f"the dockerd ccemu started (pid {alive[0].pid}) does not answer on {_socket()} "
                          "(another DOCKER_HOST's?): it is stopped now unless a run of ccemu uses it; try again")
    problems = stale.remove()
    if problems:
        raise EngineError(f"removing what a dead dockerd of ccemu's left: {'; '.join(problems)}")


@contextmanager
def engine_session(needed: bool):
    """A DockerEngine session for the duration (None when `needed` is false): commands that make
    several fabrics hold one, so that a dockerd ccemu starts serves them all instead of stopping
    and starting between them."""
    if not needed:
        yield None
        return
    with DockerEngine.acquire() as engine:
        yield engine


def stop_if_unused(root: Path = ENGINE_ROOT) -> bool:
    """Stop the dockerd ccemu started if no user holds the engine lock; True if it stopped one."""
    try:
        fd = _directory_lock(root, create=False)  # the start lock: no dockerd starts meanwhile
    except FileNotFoundError:
        return False
    try:
        lock_fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            return False  # someone uses it
        try:
            stopped = False
            if (root / "dockerd").is_dir() and not (root / "dockerd" / "state.json").exists():
                shutil.rmtree(root / "dockerd")  # a starter killed before it saved a record: nothing ran
            if (root / "dockerd").is_dir():
                try:
                    inventory = Inventory.load(root / "dockerd")
                except StateFileError as exc:
                    raise EngineError(f"the record of the dockerd ccemu started: {exc}") from None
                for record in inventory.processes:
                    if record.carries(inventory.run_id):  # ours (remove() says so of any that is not)
                        record.signal(signal.SIGTERM)
                wait_until(lambda: not any(p.alive() for p in inventory.processes), STOP_TIMEOUT_S, 0.1)
                problems = inventory.remove()
                if problems:
                    raise EngineError(f"stopping the dockerd ccemu started: {'; '.join(problems)}")
                stopped = True
            os.unlink(root / "lock")
        finally:
            os.close(lock_fd)
        return stopped
    finally:
        os.close(fd)
        try:
            root.rmdir()
        except OSError:
            pass  # a user came in meanwhile, or something else is there


def remove_containers(run_id: str, records) -> list[str]:
    """Remove run `run_id`'s recorded containers (ContainerRecord: by id, or by the exact recorded
    name when the run died before it saved the id); returns what could not be removed. Only a
    container labelled with that run (containers/host.py labels each it creates) is removed: a
    record is not a way to have `ccemu clean` remove another's container."""
    docker = docker_sdk()
    try:
        engine = DockerEngine.acquire()
    except EngineError as exc:
        return [f"containers {', '.join(r.name for r in records)} not removed: {exc}"]
    problems = []
    with engine:
        for record in records:
            try:
                container = engine.client.containers.get(record.id or record.name)
                if (container.labels or {}).get(RUN_LABEL) != run_id:
                    problems.append(f"container {record.name} is not labelled {RUN_LABEL}={run_id}: left alone")
                    continue
                container.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass  # never created, or gone already
            except docker.errors.APIError as exc:
                problems.append(f"container {record.name}: {exc.explanation or exc}")
            except (docker.errors.DockerException, OSError) as exc:  # the engine went away, or timed out
                problems.append(f"container {record.name}: {exc}")
    return problems
