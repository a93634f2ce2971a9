"""A private Open vSwitch (ovsdb-server + ovs-vswitchd) living in its own network namespace.

Each run starts its own OVS instances instead of using the system's: their database,
control sockets and logs live in the run's state directory, the switch ports and OVS's tap
devices live in the instance's namespace, and stopping the run removes all of it. Several
instances can run side by side (two userspace datapaths cannot share one namespace: both
would claim the "ovs-netdev" tap), which is how a fabric gets more than one forwarding
thread: the userspace datapath polls non-DPDK ports from ovs-vswitchd's main thread only.
"""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
from pathlib import Path

from mininet.node import Node

from .inventory import Inventory
from ..logs import ended, ended_saying, last_line
from ..polling import wait_until
from ..model.routing import PATH_IDS

OVS_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
START_TIMEOUT_S = 10.0


class OvsError(RuntimeError):
    pass


class OvsMissing(OvsError):
    """Open vSwitch is not installed."""


class OvsInstance:
    """ovsdb-server and ovs-vswitchd number `index` of a run, in namespace `namespace`."""

    def __init__(self, index: int, state_dir: Path, datapath: str, namespace: Node, preload: str | None):
        self.index = index
        self.preload = preload  # the allocator library ovs-vswitchd runs with (allocators.allocator_library)
        self.rundir = state_dir / f"ovs{index}"
        self.datapath = datapath  # "netdev" (userspace) or "system" (kernel module)
        self.namespace = namespace
        self.db_socket = self.rundir / "db.sock"
        self.daemons: dict[str, subprocess.Popen] = {}  # "ovsdb-server", then "ovs-vswitchd"

    def _server_argv(self) -> list[str]:
        return ["ovsdb-server", str(self.rundir / "conf.db"), f"--remote=punix:{self.db_socket}",
                f"--unixctl={self.rundir / 'ovsdb-server.ctl'}", f"--log-file={self.rundir / 'ovsdb-server.log'}"]

    def _vswitchd_argv(self) -> list[str]:
        return ["ovs-vswitchd", f"unix:{self.db_socket}", f"--unixctl={self.rundir / 'ovs-vswitchd.ctl'}",
                f"--log-file={self.rundir / 'ovs-vswitchd.log'}"]

    def _spawn(self, inventory: Inventory, what: str, argv: list[str], preload: str | None = None) -> None:
        # OVS_RUNDIR puts the bridges' OpenFlow management sockets in our directory.
        env = dict(os.environ, OVS_RUNDIR=str(self.rundir), OVS_DBDIR=str(self.rundir))
        if preload:
            env["LD_PRELOAD"] = preload
        with open(self.rundir / f"{what}.stderr", "wb") as log:
            self.daemons[what] = inventory.spawn(f"{what} #{self.index}", argv, start=self.namespace.popen, env=env,
                                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def _wait_ready(self, what: str, control_socket: Path) -> None:
        """Until the daemon just started opens `control_socket`; one line naming why if it exits
        first or takes too long."""
        daemon = self.daemons[what]
        if wait_until(lambda: control_socket.exists() or daemon.poll() is not None, START_TIMEOUT_S) \
                and daemon.poll() is None:
            return
        failed = (ended(daemon.returncode) if daemon.poll() is not None
                  else f"did not open {control_socket} within {START_TIMEOUT_S:g} s")
        said = last_line(self.rundir / f"{what}.stderr") or last_line(self.rundir / f"{what}.log")
        raise OvsError(f"{what} #{self.index} {failed} at start{': ' + said if said else ''} "
                       f"(is Open vSwitch installed? `make setup`)")

    @property
    def vswitchd_pid(self) -> int:
        """ovs-vswitchd's pid (each instance starts ovsdb-server first)."""
        return self.daemons["ovs-vswitchd"].pid

    def _check_allocator(self) -> None:
        """The dynamic loader only warns when a preload is missing, and ovs-vswitchd would forward
        with glibc's malloc under another name: the allocator asked for must be mapped."""
        if self.preload and f"/{self.preload}" not in Path(f"/proc/{self.vswitchd_pid}/maps").read_text():
            raise OvsError(f"ovs-vswitchd #{self.index} runs without {self.preload} (fabric.ovs_allocator); see "
                           f"{self.rundir / 'ovs-vswitchd.stderr'}")

    def vsctl(self, *args: str) -> str:
        """One ovs-vsctl transaction (pass several commands separated by "--")."""
        return _run(self._vsctl_argv(args))

    def start_vsctl(self, *args: str) -> tuple[str, subprocess.Popen]:
        """vsctl() without waiting: (instance name, process) for the caller to wait on."""
        proc = subprocess.Popen(self._vsctl_argv(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        return f"ovs instance {self.index}", proc

    def _vsctl_argv(self, args) -> list[str]:
        return ["ovs-vsctl", f"--db=unix:{self.db_socket}", "--timeout=120", *args]

    def management_socket(self, bridge: str) -> str:
        return f"unix:{self.rundir / bridge}.mgmt"

    def add_flows(self, bridge: str, flows: list[str]) -> subprocess.Popen:
        """Start installing `flows` on `bridge` as one OpenFlow bundle; the caller waits.
        The flows stay in the instance's directory, for reading while the run is up."""
        path = self.rundir / f"{bridge}.flows"
        path.write_text("\n".join(flows) + "\n")
        return subprocess.Popen(
            ["ovs-ofctl", "--bundle", "add-flows", self.management_socket(bridge), str(path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def dump_ports(self, bridge: str) -> subprocess.Popen:
        """Start reading `bridge`'s port counters; parse the output with parse_port_stats."""
        return subprocess.Popen(["ovs-ofctl", "dump-ports", self.management_socket(bridge)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def traced_path_id(self, bridge: str, flow: str) -> int:
        """The path-id `bridge` computes for a packet described by `flow` (ovs-ofctl flow
        syntax, with in_port), asked of ovs-vswitchd without sending anything."""
        out = _run(["ovs-appctl", "-t", str(self.rundir / "ovs-vswitchd.ctl"), "ofproto/trace", bridge, flow])
        for line in out.splitlines():
            if line.startswith("Final flow:"):
                for field in line.split(":", 1)[1].split(","):
                    if field.startswith("reg0="):
                        return int(field[5:], 0) & (PATH_IDS - 1)
                return 0  # OVS omits registers that are zero
        raise OvsError(f"ofproto/trace of {bridge} gave no final flow: {out.strip()[:200]}")

    def enlarge_packet_socket_buffers(self, bridge: str, send_bytes: int, receive_bytes: int) -> int:
        """Give ovs-vswitchd's packet sockets room for everything its ports can queue;
        returns how many sockets were set.

        ovs-vswitchd receives through one AF_PACKET socket per port but transmits through a
        single one shared by all its ports, created at its first transmission, and every
        packet waiting in any port's qdisc is charged to that socket. With the default
        208 KB an instance holds only ~90 full frames in all its queues before sendmmsg()
        fails with EAGAIN and OVS silently drops what it was sending, credits included. The
        namespace's net.core.wmem_default is read-only, so the sockets themselves are
        changed: OVS is made to transmit once (a frame of an unused ethertype that every
        switch and host drops), pidfd_getfd() lends us each descriptor, and SO_*BUFFORCE
        applies to the socket ovs-vswitchd shares with us."""
        _run(["ovs-ofctl", "packet-out", self.management_socket(bridge), "NONE", "output:1", PRIMING_FRAME])
        vswitchd = self.vswitchd_pid
        packet_inodes = {
            line.split()[-1] for line in Path(f"/proc/{vswitchd}/net/packet").read_text().splitlines()[1:]
        }
        pidfd = os.pidfd_open(vswitchd)
        count = 0
        try:
            for fd_path in Path(f"/proc/{vswitchd}/fd").iterdir():
                try:
                    target = os.readlink(fd_path)
                except FileNotFoundError:
                    continue
                if not (target.startswith("socket:[") and target[8:-1] in packet_inodes):
                    continue
                borrowed = _pidfd_getfd(pidfd, int(fd_path.name))
                try:
                    sock = socket.socket(fileno=borrowed)
                    # setsockopt takes a C int (the kernel doubles and caps it anyway).
                    sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, min(send_bytes, C_INT_MAX))
                    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, min(receive_bytes, C_INT_MAX))
                    sock.detach()
                finally:
                    os.close(borrowed)
                count += 1
        finally:
            os.close(pidfd)
        return count

    def pin(self, cpu: int) -> int:
        """Run every thread of both daemons on `cpu` (threads they start later inherit it from
        the thread that starts them); returns how many threads were pinned."""
        count = 0
        for daemon in self.daemons.values():
            for task in Path(f"/proc/{daemon.pid}/task").iterdir():
                try:
                    os.sched_setaffinity(int(task.name), {cpu})
                except ProcessLookupError:
                    continue  # a thread that just ended
                count += 1
        return count

    def died(self) -> str | None:
        """Its first daemon that is no longer running, how it ended and the last it said; None
        while both run."""
        for what, proc in self.daemons.items():
            if proc.poll() is not None:
                said = last_line(self.rundir / f"{what}.stderr")
                return f"{what} #{self.index} {ended_saying(proc.returncode, said)}"
        return None

    def kill(self) -> None:
        """Kill the daemons without waiting (see wait()). No graceful exit: ovs-vswitchd
        would remove its ports one by one, which the namespace's removal does in one batch,
        tap devices included."""
        for proc in self.daemons.values():
            if proc.poll() is None:
                proc.kill()

    def wait(self) -> None:
        """Wait for the daemons to be gone. Exit is slow: the kernel waits an RCU grace
        period for every packet socket ovs-vswitchd closes (one per port, ~12 ms each
        here), so instances are killed together and waited for together."""
        for proc in self.daemons.values():
            proc.wait()


SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33
C_INT_MAX = (1 << 31) - 1
# Broadcast, from a locally administered address, ethertype 0x88b5 (IEEE local experimental).
PRIMING_FRAME = "ffffffffffff" "020000000000" "88b5" + "00" * 46
SYS_PIDFD_GETFD = 438  # the same number on every architecture (generic syscall table)
_libc = ctypes.CDLL(None, use_errno=True)


def start_instances(instances: list[OvsInstance], inventory: Inventory) -> None:
    """Start every instance's ovsdb-server, then every ovs-vswitchd, each step for all instances
    at once (one inventory save per step; a k=16 fabric has dozens of instances)."""
    for instance in instances:
        instance.rundir.mkdir(parents=True)
    _run_all([["ovsdb-tool", "create", str(i.rundir / "conf.db"), str(OVS_SCHEMA)] for i in instances],
             "creating the OVS databases")
    with inventory.batch():
        for instance in instances:
            instance._spawn(inventory, "ovsdb-server", instance._server_argv())
    for instance in instances:
        instance._wait_ready("ovsdb-server", instance.db_socket)
    _run_all([instance._vsctl_argv(("--no-wait", "init")) for instance in instances], "initialising the OVS databases")
    with inventory.batch():
        for instance in instances:
            instance._spawn(inventory, "ovs-vswitchd", instance._vswitchd_argv(), instance.preload)
    for instance in instances:
        instance._wait_ready("ovs-vswitchd", instance.rundir / "ovs-vswitchd.ctl")
        instance._check_allocator()


def _pidfd_getfd(pidfd: int, fd: int) -> int:
    result = _libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"pidfd_getfd({fd}): {os.strerror(errno)}")
    return result


def parse_port_stats(dump_ports_output: str) -> dict[int, tuple[int, int]]:
    """OpenFlow port number -> (rx_packets, tx_packets) from `ovs-ofctl dump-ports`."""
    stats: dict[int, tuple[int, int]] = {}
    port = None
    for line in dump_ports_output.splitlines():
        line = line.strip()
        if line.startswith("port"):
            name = line.split(":")[0].split()[1]
            port = int(name) if name.isdigit() else None
            if port is not None:
                stats[port] = (_counter(line, "rx pkts="), 0)
        elif line.startswith("tx") and port is not None:
            stats[port] = (stats[port][0], _counter(line, "tx pkts="))
    return stats


def _counter(line: str, key: str) -> int:
    value = line.split(key, 1)[1].split(",", 1)[0]
    return int(value) if value.isdigit() else 0


def _run(argv: list[str]) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True)
    except FileNotFoundError:
        raise OvsMissing(f"{argv[0]} not found: install Open vSwitch (`make setup`)") from None
    if result.returncode:
        raise OvsError(f"{argv[0]} failed ({result.returncode}): {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def wait_all(procs: list[tuple[str, subprocess.Popen]], what: str) -> None:
    """Wait for commands started in parallel; raise naming every one that failed."""
    failures = []
    for name, proc in procs:
        out, err = proc.communicate()
        if proc.returncode:
            failures.append(f"{name}: {(err or '').strip() or (out or '').strip()}")
    if failures:
        raise OvsError(f"{what} failed: " + "; ".join(failures))


def _run_all(argvs: list[list[str]], what: str) -> None:
    """_run() for each command line, all at once."""
    try:
        procs = [(argv[0], subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True)) for argv in argvs]
    except FileNotFoundError as exc:
        raise OvsMissing(f"{exc.filename} not found: install Open vSwitch (`make setup`)") from None
    wait_all(procs, what)
