"""Docker hosts: fabric hosts whose network namespace is a Docker container's, as Containernet
makes them, with the Docker SDK and ccemu's inventory.

The container is created with no network of its own (`network_mode: none`: only `lo`), its CPU
and memory limits, and the run's work directories bind-mounted at the same paths (schedules in,
records and counters out). The host's node is then made as for a namespace host, except that its
shell joins the container's network namespace instead of making one: the fabric's veth is created
in it, and addresses, static ARP, offloads and the port program are configured exactly as for
namespace hosts, with the machine's tools (ip, tc, ethtool, the port loader: the image has none of
them, and needs none).

Two kinds of programs run on a Docker host:
- ccemu's own probes and configuration (the reachability check, ping for idle RTTs) run in the
  container's network namespace with the machine's tools (node.popen, node.cmd): they measure
  the network, which is the container's;
- the host's transport (and a researcher's programs) run inside the container
  (popen_transport): in its cgroups (its CPU and memory limits apply), its mount namespace (the
  image's cchost and tools, the bind-mounted directories) and its network namespace. They stay in
  the machine's pid namespace, so ccemu signals and waits for them as for any host process.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from ..fabric.inventory import Inventory, ProcessRecord, container_name
from ..fabric.namespaces import process_start_time
from ..fabric.nodes import FabricHost
from ..model.config import HostsConfig
from .cgroups import cgroup_dirs, in_cgroup_filesystem, join_command
from .engine import RUN_LABEL, DockerEngine, EngineError, docker_sdk
from .image import CCHOST_IN_IMAGE

CREATE_THREADS = 8  # Docker API calls at once while creating a fabric's containers
ENTER = "nsenter"


@dataclass(frozen=True)
class Container:
    """A host's container once it runs."""

    host: str
    name: str
    id: str
    pid: int  # its first process: the anchor of its namespaces
    start_time: int  # of that process (clock ticks since boot): a recycled pid is not it
    cgroups: dict[str, str]  # hierarchy -> cgroup directory (cgroups.cgroup_dirs)
    cpus: float | None  # its CPU limit (None: none)
    memory_mb: int | None

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def running(cls, data: object) -> "Container":
        """The container a run's containers.json records for a host, if it still runs: its first
        process's pid and start time as recorded, its cgroups under the cgroup filesystem
        (`ccemu exec --in-container` joins them as root: a file is not a way to aim it elsewhere).
        EngineError saying what does not hold otherwise."""
        try:
            container = cls(**data)
            pid, start_time = container.pid, container.start_time
            if type(pid) is not int or type(start_time) is not int or not isinstance(container.cgroups, dict):
                raise TypeError("pid and start_time are not counts, or cgroups is not a mapping")
        except TypeError as exc:
            raise EngineError(f"not a container's record ({exc})") from None
        for folder in container.cgroups.values():
            if not in_cgroup_filesystem(folder):
                raise EngineError(f"cgroup {folder!r} is not in a cgroup filesystem mounted here")
        if pid < 2 or process_start_time(pid) != start_time:
            raise EngineError(f"its first process (pid {pid}) is not running: the container stopped")
        return container


def create_containers(engine: DockerEngine, inventory: Inventory, image: str, hosts: list[str],
                      config: HostsConfig, shared_dirs: tuple[Path, ...]) -> dict[str, Container]:
    """Create and start a container per host (recorded by name before any is created, by id once
    created), several at a time."""
    names = {host: container_name(inventory.run_id, host) for host in hosts}
    inventory.add_containers(list(names.values()))
    volumes = {str(d.resolve()): {"bind": str(d.resolve()), "mode": "rw"} for d in shared_dirs}
    ids: dict[str, str] = {}
    docker = docker_sdk()

    def create(host: str):
        limits = config.limits(host)
        params = {"nano_cpus": round(limits.cpus * 1e9)} if limits.cpus else {}
        if limits.memory_mb:
            # Swap included: a host over its memory is killed, not slowed by swapping.
            params |= {"mem_limit": f"{limits.memory_mb}m", "memswap_limit": f"{limits.memory_mb}m"}
        try:
            container = engine.client.containers.create(
                image, name=names[host], hostname=host, network_mode="none", volumes=volumes, detach=True,
                labels={RUN_LABEL: inventory.run_id, "org.ccemu.host": host}, **params)
            ids[names[host]] = container.id
            container.start()
            container.reload()
        except docker.errors.APIError as exc:
            raise EngineError(f"Docker could not create or start {host}'s container: {exc.explanation or exc}") \
                from exc
        pid = container.attrs["State"]["Pid"]
        cgroups = cgroup_dirs(pid)
        if not cgroups:
            raise EngineError(f"{host}'s container (pid {pid}) has no cgroup this machine mounts: its limits cannot "
                              "be joined")
        record = ProcessRecord.of(pid, f"{host}'s container")
        return Container(host, names[host], container.id, pid, record.start_time, cgroups, limits.cpus,
                         limits.memory_mb)

    try:
        with ThreadPoolExecutor(CREATE_THREADS) as pool:
            created = list(pool.map(create, hosts))
    finally:
        inventory.container_created(ids)
    return {c.host: c for c in created}


class DockerHost(FabricHost):
    """A fabric host in a Docker container (params["container"]: its Container)."""

    def __init__(self, name: str, container: Container, **params):
        self.container = container
        super().__init__(name, **params)

    def _popen(self, cmd, **params):
        if self.shell is None:  # startShell's `mnexec -cdn ...`: join the container's namespace, make none
            if cmd[0] != "mnexec" or not cmd[1].startswith("-"):
                raise ValueError(f"not Mininet's shell command: {cmd}")
            if process_start_time(self.container.pid) != self.container.start_time:
                raise EngineError(f"{self.name}'s container stopped before its host came up")
            cmd = [ENTER, f"--net=/proc/{self.container.pid}/ns/net", cmd[0], cmd[1].replace("n", ""), *cmd[2:]]
        return super()._popen(cmd, **params)

    @property
    def transport_binary(self) -> Path:
        return CCHOST_IN_IMAGE

    def popen_transport(self, argv: list[str], **kwargs) -> subprocess.Popen:
        # A session of its own, as mnexec -d gives a namespace host's: Ctrl-C in ccemu's terminal is
        # ccemu's to handle (it stops the transport itself, then tears down).
        kwargs.setdefault("start_new_session", True)
        return subprocess.Popen(inside(self.container.pid, self.container.cgroups, argv), **kwargs)


def inside(pid: int, cgroups: dict[str, str], argv: list[str]) -> list[str]:
    """A command line that runs `argv` (paths as the container sees them) inside the container
    whose first process is `pid`: a shell joins its cgroups, then execs nsenter into its mount, UTS,
    IPC and network namespaces, which execs argv (one process throughout: signals reach argv). Not
    its pid namespace (nsenter would fork and stand between ccemu and argv): the container's /proc
    shows its own processes, not argv; and argv keeps root's capabilities (no seccomp profile)."""
    # The pid goes in as an argument ($1), never into the script's text.
    script = f'{join_command(cgroups)} && exec {ENTER} --target "$1" --mount --uts --ipc --net -- "${{@:2}}"'
    return ["bash", "-c", script, "ccemu-enter", str(int(pid)), *argv]
