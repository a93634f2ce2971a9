"""PFC's pause agent: carries out the pause and resume decisions of the lossless port programs.

The port programs decide (bpf/port.bpf.c pfc_hold / pfc_release: an ingress of a switch holding
more than Xoff pauses the port upstream of it, down to Xon resumes it) and hand each decision to
this agent through a BPF ring buffer pinned for the run. The agent closes or opens the paused
port's gate (ports/tc.py `gate`: a TBF under the port's HTB data class) with one netlink message
on a socket it opened in that port's namespace at start, so nothing is spawned per pause. The
kernel has no PFC for veths, and eBPF cannot hold packets back: this is the pause frame's path.

After a resume the agent sends one minimum frame of ethertype 0x8808 (MAC control, what PFC
frames are) out of the port: a changed TBF does not wake its qdisc, and a port whose senders have
stopped would otherwise wait for the next packet to come (measured: 85-310 ms). The next hop
drops it (the switches' tables end in drop; hosts have no handler for it).

Reaction time, from the program's decision (bpf_ktime_get_ns) to the kernel's acknowledgement
of the gate change, is the emulation's pause-frame delay; the agent keeps its distribution and
writes it, with its counts, to <state>/pfc-agent.json once a second and when it stops.

    python -m ccemu.ports.pfc STATE_DIR   (started by fabric/net.py; ports in <state>/pfc-ports.json)
"""

from __future__ import annotations

import json
import mmap
import os
import select
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyroute2.netns import popns, pushns

from .libbpf import PinnedMap, open_pinned
from .maps import ktime_ns
from .layouts import PFC_EVENT, PORT_PFC
from .program import SHAPE_FILE
from .tc import DATA_CLASSID, GateSettings, PortShape

PORTS_FILE = "pfc-ports.json"  # port id -> [node, namespace pid, interface, its PortShape as JSON]
STATS_FILE = "pfc-agent.json"
READY_LINE = "pfc agent ready"
GATE_HANDLE = 0x200000  # 20:
KICK_FRAME = bytes.fromhex("0180c2000001") + bytes(6) + bytes.fromhex("8808") + bytes(46)
RINGBUF_BUSY, RINGBUF_DISCARD, RINGBUF_HEADER = 1 << 31, 1 << 30, 8
STATS_EVERY_S = 1.0
CHECK_EVERY_S = 0.1  # every gate against its port's flag
LOG_FILE = "pfc-agent.log"  # its stderr
EVENTS_BYTES = 256 * 1024  # bpf/port.h PFC_EVENTS_BYTES
_NLMSG_ERROR = 2


# Netlink constants (linux/rtnetlink.h, linux/pkt_sched.h).
_RTM_NEWQDISC, _NLM_F_REQUEST, _NLM_F_ACK = 36, 1, 4
_TCA_KIND, _TCA_OPTIONS = 1, 2
_TCA_TBF_PARMS, _TCA_TBF_RATE64, _TCA_TBF_BURST = 1, 4, 6
_TC_LINKLAYER_ETHERNET = 1


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("<HH", length, kind) + payload + bytes(-length % 4)


def gate_message(ifindex: int, shape: PortShape, paused: bool) -> bytes:
    """The RTM_NEWQDISC (change) that closes or opens a port's gate, as ports/tc.py `gate` says.
    Built here rather than with pyroute2, which cannot express it: its TBF (0.9.7,
    tcmsg/sched_tbf.py) has only TCA_TBF_PARMS/RTAB/PTAB, no TCA_TBF_BURST (the bucket in bytes,
    what tc sends) nor TCA_TBF_RATE64, and fills the u32 tick-counted bucket instead, which a
    frame at 8 bit/s overflows (1514 B = 23,656,250,000 ticks at 15.625 per us; a unit test holds
    the missing attribute). Both messages are built once per port at start, so a pause costs one send and one
    receive, no encoding: the reaction the agent measures."""
    settings = GateSettings.of(shape, paused)
    rate_Bps, burst, limit = settings.rate_bps // 8, settings.burst_bytes, settings.limit_bytes
    # struct tc_tbf_qopt: rate and peakrate (struct tc_ratespec), limit, buffer, mtu. The kernel takes
    # the bucket from TCA_TBF_BURST and the rate from TCA_TBF_RATE64 (wider than the spec's u32).
    ratespec = struct.pack("<BBHhHI", 0, _TC_LINKLAYER_ETHERNET, 0, 0, 0, min(rate_Bps, 0xFFFFFFFF))
    qopt = ratespec + bytes(12) + struct.pack("<III", limit, 0, 0)
    options = (_attr(_TCA_TBF_PARMS, qopt) + _attr(_TCA_TBF_RATE64, struct.pack("<Q", rate_Bps))
               + _attr(_TCA_TBF_BURST, struct.pack("<I", burst)))
    body = (struct.pack("<BxxxiIII", socket.AF_UNSPEC, ifindex, GATE_HANDLE, DATA_CLASSID, 0)
            + _attr(_TCA_KIND, b"tbf\0") + _attr(_TCA_OPTIONS, options))
    return struct.pack("<IHHII", 16 + len(body), _RTM_NEWQDISC, _NLM_F_REQUEST | _NLM_F_ACK, 1, 0) + body


class RingBuffer:
    """A BPF ring buffer pinned on a bpffs, read in place (the kernel's layout: a consumer page
    we write, then the producer page and the data, mapped twice so a record never wraps)."""

    def __init__(self, consumer, producer, size: int, page: int = mmap.PAGESIZE, fd: int | None = None):
        self.consumer, self.producer, self.mask, self.page, self.fd = consumer, producer, size - 1, page, fd

    @classmethod
    def pinned(cls, path: Path, size: int) -> "RingBuffer":
        fd = open_pinned(path)
        page = mmap.PAGESIZE
        consumer = mmap.mmap(fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
        producer = mmap.mmap(fd, page + 2 * size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
        return cls(consumer, producer, size, page, fd)

    def records(self) -> list[bytes]:
        """Every record submitted since the last call."""
        out = []
        consumed = struct.unpack_from("<Q", self.consumer, 0)[0]
        produced = struct.unpack_from("<Q", self.producer, 0)[0]
        while consumed < produced:
            offset = self.page + (consumed & self.mask)
            length = struct.unpack_from("<I", self.producer, offset)[0]
            if length & RINGBUF_BUSY:
                break  # still being written
            size = length & ~(RINGBUF_BUSY | RINGBUF_DISCARD)
            if not length & RINGBUF_DISCARD:
                out.append(bytes(self.producer[offset + RINGBUF_HEADER:offset + RINGBUF_HEADER + size]))
            consumed += (size + RINGBUF_HEADER + 7) & ~7
            struct.pack_into("<Q", self.consumer, 0, consumed)
        return out

    def close(self) -> None:
        self.consumer.close()
        self.producer.close()
        if self.fd is not None:
            os.close(self.fd)


@dataclass
class GatedPort:
    """One port the agent can pause: a netlink socket and a packet socket in its namespace."""

    name: str
    ifindex: int
    netlink: socket.socket
    packet: socket.socket
    pause: bytes
    resume: bytes

    @classmethod
    def open(cls, node: str, pid: int, ifname: str, shape: PortShape) -> "GatedPort":
        pushns(f"/proc/{pid}/ns/net")  # sockets stay in the namespace they were made in
        try:
            netlink = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
            netlink.bind((0, 0))
            packet = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            packet.bind((ifname, 0))
            ifindex = socket.if_nametoindex(ifname)
        finally:
            popns()
        return cls(f"{node}:{ifname}", ifindex, netlink, packet, gate_message(ifindex, shape, True),
                   gate_message(ifindex, shape, False))

    def set_paused(self, paused: bool) -> None:
        """Change the gate and wait for the kernel's answer (raises OSError on an error)."""
        self.netlink.send(self.pause if paused else self.resume)
        answer = self.netlink.recv(65536)
        kind = struct.unpack_from("<H", answer, 4)[0]
        error = struct.unpack_from("<i", answer, 16)[0] if kind == _NLMSG_ERROR else 0
        if error:
            raise OSError(-error, f"{self.name}: changing its gate: {os.strerror(-error)}")
        if not paused:
            self.packet.send(KICK_FRAME)

    def close(self) -> None:
        self.netlink.close()
        self.packet.close()


@dataclass
class AgentStats:
    """What the agent did, for the bundle (reaction times in ns)."""

    frame_ns: float
    pauses: int = 0  # gates closed
    resumes: int = 0  # gates opened
    superseded: int = 0  # pause decisions already undone (resumed) when the agent came to them
    corrections: int = 0  # gates the periodic check set: before their event was read, or after a lost
    #                       event or a failed change
    failures: list[str] = field(default_factory=list)
    unknown_ports: int = 0
    reactions_ns: list[int] = field(default_factory=list)

    def summary(self) -> dict:
        ordered = sorted(self.reactions_ns)

        def q(x: float) -> float | None:
            return ordered[min(len(ordered) - 1, int(x * len(ordered)))] / 1e6 if ordered else None
        return {
            "pauses": self.pauses, "resumes": self.resumes, "superseded": self.superseded,
            "corrections": self.corrections, "failures": self.failures[:20],
            "unknown_ports": self.unknown_ports, "frame_ms": self.frame_ns / 1e6,
            "reaction_ms": {"p50": q(0.5), "p99": q(0.99), "max": ordered[-1] / 1e6 if ordered else None},
            "reaction_frames": {"p50": q(0.5) and q(0.5) * 1e6 / self.frame_ns,
                                "p99": q(0.99) and q(0.99) * 1e6 / self.frame_ns,
                                "max": ordered[-1] / self.frame_ns if ordered else None},
        }


class Agent:
    """The ports' gates kept as the port programs' decisions say. An event only says which port to
    look at: the gate follows that port's flag in the port_pfc map (so a backlog of events does not
    replay stale pauses), and every CHECK_EVERY_S every gate is compared with its flag (so a lost
    event or a failed change is made good)."""

    def __init__(self, ports: dict[int, GatedPort], flags: PinnedMap, stats: AgentStats):
        self.ports, self.flags, self.stats = ports, flags, stats
        self.closed = {port_id: False for port_id in ports}

    def paused(self, port_id: int) -> bool:
        raw = self.flags.lookup(port_id)
        return raw is not None and bool(PORT_PFC.unpack(raw)["paused"])

    def follow(self, port_id: int, event: dict | None = None) -> None:
        """Set the port's gate to its flag; `event`: the decision that woke us for it."""
        port = self.ports.get(port_id)
        if port is None:
            self.stats.unknown_ports += 1
            return
        paused = self.paused(port_id)
        if paused == self.closed[port_id]:
            if event is not None and event["pause"] and not paused:
                self.stats.superseded += 1
            return
        try:
            port.set_paused(paused)
        except (OSError, struct.error) as exc:
            self.stats.failures.append(str(exc))  # the next check retries it
            return
        self.closed[port_id] = paused
        if paused:
            self.stats.pauses += 1
        else:
            self.stats.resumes += 1
        if event is None:
            self.stats.corrections += 1
        elif bool(event["pause"]) == paused:
            self.stats.reactions_ns.append(ktime_ns() - event["ns"])

    def check_all(self) -> None:
        for port_id in self.ports:
            self.follow(port_id)


def run(state_dir: Path) -> int:
    # Each gate from its own port's shape: a gate is replaced whole by every change, and a NIC's (its
    # own rate and buffer) resumed with a switch port's settings would lose both.
    shape = PortShape.from_json(json.loads((state_dir / SHAPE_FILE).read_text()))  # the host links': frame times
    targets = {int(pid_key): value for pid_key, value in json.loads((state_dir / PORTS_FILE).read_text()).items()}
    ports = {port_id: GatedPort.open(node, pid, ifname, PortShape.from_json(port_shape))
             for port_id, (node, pid, ifname, port_shape) in targets.items()}
    bpffs = state_dir.resolve() / "bpffs"
    ring = RingBuffer.pinned(bpffs / "pfc_events", EVENTS_BYTES)
    flags = PinnedMap(bpffs / "port_pfc", PORT_PFC.size)
    stats = AgentStats(frame_ns=shape.frame_ns)
    agent = Agent(ports, flags, stats)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    poller = select.poll()
    poller.register(ring.fd, select.POLLIN)
    print(READY_LINE, flush=True)
    last_write = last_check = 0.0
    try:
        while not stopping:
            poller.poll(round(CHECK_EVERY_S * 1000))
            for raw in ring.records():
                event = PFC_EVENT.unpack(raw)
                agent.follow(event["port_id"], event)
            if time.monotonic() - last_check > CHECK_EVERY_S:
                agent.check_all()
                last_check = time.monotonic()
            if time.monotonic() - last_write > STATS_EVERY_S:
                _write_stats(state_dir, stats)
                last_write = time.monotonic()
    finally:
        _write_stats(state_dir, stats)
        ring.close()
        flags.close()
        for port in ports.values():
            port.close()
    return 0


def _write_stats(state_dir: Path, stats: AgentStats) -> None:
    path = state_dir / STATS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(stats.summary(), indent=1))
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
