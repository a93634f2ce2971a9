"""What a fabric of a config needs from the machine, and whether this machine has it.

A fabric is, per host: a network namespace with Mininet's bash shell in it, a veth end with
its qdiscs and port program, and in experiments one cchost; per OVS instance: a namespace
with a shell, ovsdb-server and ovs-vswitchd (which holds sockets per port); per switch port:
a veth end with its qdiscs, port program entries and OVS's per-port state. The counts come
from the topology's formulas (nothing is built: a k=400 fat-tree has 16 million hosts), the
costs per item were measured on a live fabric (the constants below say how and when).

admission.py asks refusal() on the machine that brings the fabric up, before anything starts,
so a config that cannot run is refused with one line naming its key (config.DoesNotFit).
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

from ..model.config import ExperimentConfig, ExpressPassPort, PortConfig
from ..ports.tc import PortShape, idle_reset_ns
from ..model.topology import TopologyCounts

# bpf/port.h and bpf/port_loader.c (tests compare them with the sources).
PORT_MAX_PORTS = 4096  # ports the loader attaches in one namespace at most
PORT_MAX_FABRIC_PORTS = 65536  # port ids of a run: 1..65535, 0 meaning no port
RESIDENCE_ENTRIES_PER_PORT = 1024  # the run's residence map: per switch port...
RESIDENCE_MAX_ENTRIES = 1048576  # ...up to this many
RESIDENCE_MIN_ENTRIES = 64  # ...and at least this many
OPEN_FILES_LIMIT = 65536  # fabric.py raises the soft RLIMIT_NOFILE to this (or the hard limit)
U64_MAX = (1 << 64) - 1
C_INT_MAX = (1 << 31) - 1  # setsockopt() takes an int: the largest socket buffer one can ask for

# Measured here on 2026-11-23 (2 vCPUs, 23.5 GiB, Linux 6.18, userspace OVS datapath; port maps
# already sized per namespace by port_loader) with FabricNet bring-ups, one at a time with no
# other fabric up (runs where `bpftool map show` found another run's maps were dropped): a star
# of 2, 12 and 48 hosts, k=4 fat-trees on 4 OVS instances and on 1, and k=6 (9 instances), 3 to 6
# times each. MemAvailable read before and while up, after a 2 s settle each; costs per item by
# least squares over each case's median (residuals within +-18 MiB: MemAvailable moves by tens
# of MiB between identical runs); the residence maps, exactly as bpftool reports them, apart.
RUN_BYTES = 11_298 << 10  # once per run: the shared port_departures map, ccemu's own growth
OVS_INSTANCE_BYTES = 17_078 << 10  # ovsdb-server, ovs-vswitchd, their namespace and its shell
HOST_BYTES = 384 << 10  # namespace, shell, veth end, qdiscs, port programs, one-entry port maps
SWITCH_PORT_BYTES = 216 << 10  # veth end, qdiscs, port map entries, OVS's state of the port
# One idle cchost: the median over 5 stars of 48 hosts with cchost started on every host
# (24.9 MiB for 48). Its 256 sockets' buffers fill only under traffic (queued memory covers
# what the ports hold; what cchost's own sockets hold, the headroom).
CCHOST_BYTES = 531 << 10
# Docker hosts (hosts.kind: docker), measured the same way on 2026-11-23: stars of 2 and 12 hosts
# and a k=4 fat-tree, twice each with namespace and with Docker hosts, dockerd started by the run;
# least squares over the differences (113, 164 and 240 MiB): the engine (dockerd and its
# containerd) once, a container (its containerd-shim, its first process, cgroups) per host.
DOCKER_ENGINE_BYTES = 89 << 20
CONTAINER_BYTES = 8_500 << 10
DOCKER_ENGINE_TASKS = 20
CONTAINER_TASKS = 14  # the shim's threads, mostly (+47 tasks for 2 hosts, +187 for 12, +237 for 16)
# A residence map entry (bpftool's memlock of the LRU hash: 104 bytes an entry, 16 a bucket,
# the buckets a power of two), the run's map sized by port_loader.
RESIDENCE_ENTRY_BYTES, RESIDENCE_BUCKET_BYTES = 104, 16
# Tasks (processes and threads: each takes a pid) and open files, counted on the same runs.
OVSDB_TASKS = 1
CCHOST_TASKS = 1
# At bring-up's busiest, each namespace's shell runs one child (ip, tc, port_loader) and every
# bridge gets its own ovs-ofctl installing its flows, all at once.
TASKS_PER_NAMESPACE = 2
TASKS_PER_SWITCH = 1
ORCHESTRATOR_FILES = 16  # ccemu's own: 6 once imported, the state file, netlink, ...
ORCHESTRATOR_FILES_PER_NAMESPACE = 2  # Mininet's pty master and slave per node
ORCHESTRATOR_FILES_PER_SWITCH = 2  # the pipes of its ovs-ofctl, all bridges' at once
VSWITCHD_FILES = 37  # ovs-vswitchd with no bridge: 42 with one bridge of 2 ports
VSWITCHD_FILES_PER_PORT = 1  # the port's receive socket
VSWITCHD_FILES_PER_SWITCH = 3  # the bridge's management socket, its listener and its datapath port
OVSDB_FILES = 20
SHELL_FILES = 4  # the pty three times, and bash's own copy
CCHOST_FILES = 264  # a socket per path-id (256), its files and epoll


def vswitchd_tasks(cpus: int) -> int:
    """ovs-vswitchd's threads: main, urcu, ct_clean and ipf_clean, and OVS's defaults of
    cpus / 4 + 1 revalidators and a handler per other CPU, at least one (6 here, on 2)."""
    revalidators = cpus // 4 + 1
    return 4 + revalidators + max(cpus - revalidators, 1)


VSWITCHD_TASKS = vswitchd_tasks(os.cpu_count() or 1)
# The estimate must fit in this share of MemAvailable, because: MemAvailable is the kernel's
# guess of what can be had without swapping (part of it is page cache that cannot all be
# dropped); the per-item costs above scatter by ~15 % between identical runs; and beyond the
# estimate come cchost's socket buffers under traffic, Prometheus and the bundle being written.
# Running out is worse than refusing: the OOM killer picks a daemon, and a fabric half gone
# measures nothing.
MEMORY_HEADROOM = 0.8


@dataclass(frozen=True)
class MachineLimits:
    """What this machine allows, read when a config is admitted (admission.py; tests inject their own)."""

    memory_available_bytes: int  # /proc/meminfo MemAvailable
    pid_max: int  # kernel.pid_max: a task (process or thread) needs a pid
    threads_max: int  # kernel.threads-max
    tasks_now: int  # tasks alive now (/proc/loadavg)
    nproc: int | None  # RLIMIT_NPROC; None: unlimited, or we are root, whom the kernel exempts
    net_namespaces_max: int  # user.max_net_namespaces
    open_files_soft: int  # RLIMIT_NOFILE (Linux never lets it be unlimited: fs.nr_open caps it)
    open_files_hard: int  # resource.RLIM_INFINITY: unlimited
    file_max: int  # fs.file-max: open files of the whole machine
    files_now: int  # allocated now (fs.file-nr)
    # fs.nr_open caps the hard RLIMIT_NOFILE, which ccemu never raises: not a limit of its own.

    @classmethod
    def probe(cls) -> "MachineLimits":
        nproc = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return cls(
            memory_available_bytes=_meminfo("MemAvailable"),
            pid_max=_sysctl("kernel/pid_max"),
            threads_max=_sysctl("kernel/threads-max"),
            tasks_now=int(Path("/proc/loadavg").read_text().split()[3].split("/")[1]),
            nproc=None if nproc == resource.RLIM_INFINITY or os.getuid() == 0 else nproc,
            net_namespaces_max=_sysctl("user/max_net_namespaces"),
            open_files_soft=soft, open_files_hard=hard,
            file_max=_sysctl("fs/file-max"),
            files_now=_sysctl("fs/file-nr"),
        )

    @property
    def usable_memory_bytes(self) -> int:
        return int(self.memory_available_bytes * MEMORY_HEADROOM)

    @property
    def open_files_per_process(self) -> int:
        """What ccemu and the daemons it starts may open: fabric.py raises the soft limit to
        min(OPEN_FILES_LIMIT, hard) before anything starts, and children inherit it."""
        hard = OPEN_FILES_LIMIT if self.open_files_hard == resource.RLIM_INFINITY else self.open_files_hard
        return max(self.open_files_soft, min(OPEN_FILES_LIMIT, hard))

    def task_room(self) -> tuple[int, str]:
        """How many more tasks may start, and the limit that says so."""
        limits = {"kernel.pid_max": self.pid_max, "kernel.threads-max": self.threads_max}
        if self.nproc is not None:
            limits["RLIMIT_NPROC"] = self.nproc
        name = min(limits, key=limits.__getitem__)
        return max(0, limits[name] - self.tasks_now), name


@dataclass(frozen=True)
class Footprint:
    """What the fabric of a config takes while it is up (and at bring-up's busiest)."""

    counts: TopologyCounts
    instances: int
    queued_bytes_per_port: int  # kernel memory a full port holds (ports/tc.py PortShape), worst port config
    containers: bool = False  # Docker hosts: an engine and a container per host besides

    @property
    def namespaces(self) -> int:
        return self.counts.hosts + self.instances

    @property
    def switch_ports(self) -> int:
        return self.counts.interfaces - self.counts.hosts

    @property
    def switches_per_instance(self) -> int:
        """At most: FabricNet deals the switches out evenly."""
        return -(-self.counts.switches // self.instances)

    @property
    def tasks(self) -> int:
        docker = DOCKER_ENGINE_TASKS + CONTAINER_TASKS * self.counts.hosts if self.containers else 0
        return (TASKS_PER_NAMESPACE * self.namespaces + TASKS_PER_SWITCH * self.counts.switches
                + (VSWITCHD_TASKS + OVSDB_TASKS) * self.instances + CCHOST_TASKS * self.counts.hosts + docker)

    @property
    def fabric_bytes(self) -> int:
        """The fabric up and idle, cchost running on every host."""
        docker = DOCKER_ENGINE_BYTES + CONTAINER_BYTES * self.counts.hosts if self.containers else 0
        return (RUN_BYTES + OVS_INSTANCE_BYTES * self.instances + (HOST_BYTES + CCHOST_BYTES) * self.counts.hosts
                + SWITCH_PORT_BYTES * self.switch_ports + self._residence_bytes() + docker)

    def _residence_bytes(self) -> int:
        """port_loader sizes the run's residence map by the switch ports, within bounds."""
        return _residence_map_bytes(min(max(self.switch_ports * RESIDENCE_ENTRIES_PER_PORT, RESIDENCE_MIN_ENTRIES),
                                        RESIDENCE_MAX_ENTRIES))

    @property
    def queued_bytes(self) -> int:
        """Every port's queue full (what ovs-vswitchd's socket buffers are sized to allow)."""
        return self.queued_bytes_per_port * self.counts.interfaces

    @property
    def memory_bytes(self) -> int:
        return self.fabric_bytes + self.queued_bytes

    @property
    def orchestrator_files(self) -> int:
        return (ORCHESTRATOR_FILES + ORCHESTRATOR_FILES_PER_NAMESPACE * self.namespaces
                + ORCHESTRATOR_FILES_PER_SWITCH * self.counts.switches)

    def vswitchd_files(self, ports: int, switches: int) -> int:
        return VSWITCHD_FILES + VSWITCHD_FILES_PER_PORT * ports + VSWITCHD_FILES_PER_SWITCH * switches

    @property
    def files(self) -> int:
        """Open files of everything the run starts."""
        return (self.orchestrator_files + (VSWITCHD_FILES + OVSDB_FILES) * self.instances
                + VSWITCHD_FILES_PER_PORT * self.switch_ports + VSWITCHD_FILES_PER_SWITCH * self.counts.switches
                + SHELL_FILES * self.namespaces + CCHOST_FILES * self.counts.hosts)


def _residence_map_bytes(entries: int) -> int:
    return RESIDENCE_ENTRY_BYTES * entries + RESIDENCE_BUCKET_BYTES * (1 << (entries - 1).bit_length())


@dataclass(frozen=True)
class Refusal:
    """Why a config cannot run: the key to change (path from the top of the config) and one
    line saying what it needs against what there is."""

    loc: tuple[str, ...]
    message: str


@dataclass(frozen=True)
class _PortCase:
    loc: tuple[str, ...]  # where this port config is: ("port",) or ("schemes", "0", "port")
    port: PortConfig
    shape: PortShape


def estimate(config: ExperimentConfig) -> Footprint:
    """The fabric of `config`, with the port config whose full queues hold the most."""
    return _estimate(config, _port_cases(config))


def refusal(config: ExperimentConfig, machine: MachineLimits, share: TopologyCounts | None = None,
            whose: str = "") -> Refusal | None:
    """The first reason `config` cannot run here, or None. Machine limits come first (they
    need only the counts), then what the port program can number, then per OVS instance
    (which needs a loop over instances: only once the port ids have bounded their number).
    `share`: the counts of the part of the fabric this machine holds when it is split over
    several (Partition.counts_on), `whose` naming it in the refusal ("machine m2's share of ")."""
    ports = _port_cases(config)
    footprint = _estimate(config, ports, share)
    for check in (_machine_refusal, _port_id_refusal, _instance_refusal, _drain_refusal):
        found = check(config, footprint, ports, machine)
        if found:
            return Refusal(found.loc, whose + found.message) if whose else found
    return None


def _port_cases(config: ExperimentConfig) -> list[_PortCase]:
    return [_PortCase(loc, port, PortShape.of(config.with_port(port))) for loc, port in config.port_configs()]


def _fullest(ports: list[_PortCase]) -> _PortCase:
    return max(ports, key=lambda case: case.shape.queued_memory_bytes)


def _estimate(config: ExperimentConfig, ports: list[_PortCase], share: TopologyCounts | None = None) -> Footprint:
    counts = share or config.topology.counts()
    return Footprint(counts, config.fabric.instance_count(counts.switches),
                     _fullest(ports).shape.queued_memory_bytes, config.hosts.kind == "docker")


def _topology_key(config: ExperimentConfig) -> tuple[str, ...]:
    return ("topology", config.topology.size_key)


def _machine_refusal(config: ExperimentConfig, footprint: Footprint, ports: list[_PortCase],
                     machine: MachineLimits) -> Refusal | None:
    task_room, task_limit = machine.task_room()
    per_process = machine.open_files_per_process
    short = [
        (footprint.memory_bytes > machine.usable_memory_bytes,
         f"~{_size(footprint.memory_bytes)} of memory, more than {MEMORY_HEADROOM:.0%} of the "
         f"{_size(machine.memory_available_bytes)} this machine has available"),
        (footprint.tasks > task_room,
         f"{footprint.tasks} processes and threads, {task_limit} leaves room for {task_room}"),
        (footprint.namespaces > machine.net_namespaces_max,
         f"{footprint.namespaces} network namespaces, user.max_net_namespaces is {machine.net_namespaces_max}"),
        (footprint.orchestrator_files > per_process,
         f"{footprint.orchestrator_files} open files in ccemu itself, its RLIMIT_NOFILE is {per_process}"),
        (footprint.files > machine.file_max - machine.files_now,
         f"{footprint.files} open files in all, fs.file-max leaves room for {machine.file_max - machine.files_now}"),
    ]
    needs = [text for exceeded, text in short if exceeded]
    if not needs:
        return None
    only_queues = needs == [short[0][1]] and footprint.fabric_bytes <= machine.usable_memory_bytes
    if only_queues:  # the fabric fits; its full queues do not
        port = _fullest(ports)
        return Refusal((*port.loc, "buffer_bytes"),
                       f"{footprint.counts.interfaces} ports that hold up to {_size(footprint.queued_bytes_per_port)} "
                       f"each in kernel memory when full need, with the fabric, {needs[0]}")
    counts = footprint.counts
    also = f" (and {'; '.join(needs[1:])})" if needs[1:] else ""
    return Refusal(_topology_key(config), f"{config.topology.describe()} has {counts.hosts} hosts and "
                                          f"{counts.switches} switches: needs {needs[0]}{also}")


def _port_id_refusal(config: ExperimentConfig, footprint: Footprint, ports: list[_PortCase],
                     machine: MachineLimits) -> Refusal | None:
    counts = footprint.counts
    if counts.interfaces > PORT_MAX_FABRIC_PORTS - 1:
        return Refusal(_topology_key(config),
                       f"{config.topology.describe()} has {counts.links} links, {counts.interfaces} ports; the port "
                       f"program numbers at most {PORT_MAX_FABRIC_PORTS - 1} in a run")
    if counts.max_switch_ports > PORT_MAX_PORTS:
        return Refusal(_topology_key(config),
                       f"{config.topology.describe()} has a switch with {counts.max_switch_ports} ports; the port "
                       f"loader attaches at most {PORT_MAX_PORTS} per namespace, and a switch's ports share one")
    return None


def _instance_refusal(config: ExperimentConfig, footprint: Footprint, ports: list[_PortCase],
                      machine: MachineLimits) -> Refusal | None:
    """The OVS instance with the most ports: its namespace's maps, its ovs-vswitchd's open
    files, and its one sending socket, which all its ports' queues are charged to."""
    instances = footprint.instances
    most = footprint.counts.max_ports_of_an_instance(instances)
    held = f"{instances} OVS instances would hold up to {most} ports in one" if instances > 1 else \
        f"1 OVS instance would hold {most} ports"
    if config.fabric.ovs_instances == "auto":
        key, holder, remedy = _topology_key(config), f"{config.topology.describe()} on 'auto': {held}", ""
    else:
        key, holder, remedy = ("fabric", "ovs_instances"), held, ": use more instances or 'auto'"
    if most > PORT_MAX_PORTS:
        return Refusal(key, f"{holder}; the port loader attaches at most {PORT_MAX_PORTS} per namespace{remedy}")
    files = footprint.vswitchd_files(most, footprint.switches_per_instance)
    limit = machine.open_files_per_process
    if files > limit:
        return Refusal(key, f"{holder}, for which its ovs-vswitchd needs {files} open files; its RLIMIT_NOFILE "
                            f"is {limit}{remedy}")
    port = _fullest(ports)
    queued = most * port.shape.queued_memory_bytes
    if queued > C_INT_MAX:
        return Refusal((*port.loc, "buffer_bytes"),
                       f"{most} ports of one OVS instance hold up to {_size(queued)} in kernel memory when full, "
                       f"more than its sending socket's buffer can be set to ({_size(C_INT_MAX)}, a C int): use "
                       f"smaller buffers or more OVS instances")
    return None


def _drain_refusal(config: ExperimentConfig, footprint: Footprint, ports: list[_PortCase],
                   machine: MachineLimits) -> Refusal | None:
    """The port program's fluid drain, elapsed_ns * rate_Bps in u64, with elapsed_ns up to
    the port's idle reset: twice the time its fuller class takes to drain (ports/tc.py idle_reset_ns), at
    least 1 s. model/config/ports.py's bounds keep the 1 s and the data queue's drain time below
    overflow (2e9 * buffer / data share <= 2e9 * 2^30 * 2); a deep credit queue at a small
    credit share is what remains."""
    for case in ports:
        idle_ns = idle_reset_ns(case.shape)
        if idle_ns * (case.shape.link_bps // 8) <= U64_MAX:
            continue
        if isinstance(case.port, ExpressPassPort):
            key, remedy = (*case.loc, "credit_buffer_credits"), "use fewer credits or a larger credit_share"
        else:
            key, remedy = (*case.loc, "buffer_bytes"), "use a smaller buffer"
        return Refusal(key, f"the port program drains its ideal queues over up to {idle_ns / 1e9:.3g} s idle "
                            f"(twice the time its full queue takes to drain), which overflows 64 bits at "
                            f"{config.link.rate_mbps:g} Mbit/s: {remedy}")
    return None


def _size(n: float) -> str:
    """Bytes the way people read them: 61 GiB, 22.3 GiB, 750 MiB."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{n:.0f} B"


def _meminfo(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return int(value.split()[0]) * 1024
    raise RuntimeError(f"/proc/meminfo has no {key}")


def _sysctl(name: str) -> int:
    return int(Path("/proc/sys", name).read_text().split()[0])
