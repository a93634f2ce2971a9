"""Reading the port programs' maps of a live run: per-port counters, queue lengths (real and
ideal) and exact queue histograms, straight from the pinned BPF maps with the bpf(2) system
call (no process per read). Layouts mirror bpf/port.h; a test checks them against the
loader's `--layout`.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2.netns import popns, pushns

from .port_program import PORT_INDEX_FILE
from .shaping import HISTOGRAM_BUCKETS, WIRE_OVERHEAD_BYTES

DATA_FIFO_HANDLE = 0x200000  # qdisc 20: (shaping.port_qdiscs)

CLASS_STATS = struct.Struct(f"<9Q{HISTOGRAM_BUCKETS}Q")
PORT_STATE = struct.Struct("<IIQ2Q2Q2QIIII")  # followed by two CLASS_STATS (data, credit)
PORT_STATE_SIZE = PORT_STATE.size + 2 * CLASS_STATS.size
PORT_CONFIG = struct.Struct("<QQ2III2I2III2III")
PORT_DEPARTURES = struct.Struct("<2Q2Q")
KEY = struct.Struct("<I")

_BPF_SYSCALL = {"x86_64": 321, "aarch64": 280}
_BPF_MAP_LOOKUP_ELEM, _BPF_OBJ_GET = 1, 7
_libc = ctypes.CDLL(None, use_errno=True)


class _ObjGetAttr(ctypes.Structure):
    _fields_ = [("pathname", ctypes.c_uint64), ("bpf_fd", ctypes.c_uint32), ("file_flags", ctypes.c_uint32)]


class _MapElemAttr(ctypes.Structure):
    _fields_ = [("map_fd", ctypes.c_uint32), ("pad", ctypes.c_uint32), ("key", ctypes.c_uint64),
                ("value", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


def _bpf(cmd: int, attr: ctypes.Structure) -> int:
    result = _libc.syscall(_BPF_SYSCALL[platform.machine()], cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


class PinnedMap:
    """A BPF map pinned on a bpffs, looked up by key."""

    def __init__(self, path: Path, value_size: int):
        path_bytes = ctypes.create_string_buffer(str(path).encode())
        try:
            self.fd = _bpf(_BPF_OBJ_GET, _ObjGetAttr(pathname=ctypes.addressof(path_bytes)))
        except OSError as exc:
            raise OSError(exc.errno, f"opening pinned map {path}: {exc.strerror}") from None
        self.value = ctypes.create_string_buffer(value_size)

    def lookup(self, key: int) -> bytes | None:
        key_buf = ctypes.create_string_buffer(KEY.pack(key))
        attr = _MapElemAttr(map_fd=self.fd, key=ctypes.addressof(key_buf), value=ctypes.addressof(self.value))
        try:
            _bpf(_BPF_MAP_LOOKUP_ELEM, attr)
        except FileNotFoundError:
            return None
        return self.value.raw

    def close(self) -> None:
        os.close(self.fd)


@dataclass(frozen=True)
class ClassStats:
    enqueued_packets: int
    enqueued_bytes: int
    dropped_packets: int
    dropped_bytes: int
    marked_packets: int
    marked_bytes: int
    max_queue_bytes: int
    lag_sum_bytes: int  # over enqueues, |real - ideal queue|
    max_lag_bytes: int
    histogram: tuple[int, ...]  # enqueues by queue length after them, bucket_bytes wide
    bucket_bytes: int

    @classmethod
    def unpack(cls, raw: bytes, bucket_bytes: int) -> "ClassStats":
        values = CLASS_STATS.unpack(raw)
        return cls(*values[:9], histogram=tuple(values[9:]), bucket_bytes=bucket_bytes)

    @property
    def mean_lag_bytes(self) -> float:
        """How far, on average at an enqueue, the real queue was from an ideal port's."""
        return self.lag_sum_bytes / self.enqueued_packets if self.enqueued_packets else 0.0


@dataclass(frozen=True)
class PortConfig:
    link_rate_Bps: int
    credit_rate_Bps: int
    buffer_bytes: tuple[int, int]  # data, credit
    ecn_threshold_bytes: int
    credit_mark_window: int
    port_id: int
    peer_port_id: int

    @classmethod
    def unpack(cls, raw: bytes) -> tuple["PortConfig", tuple[int, int]]:
        # Per-class arrays are indexed [data, credit] (PORT_CLASS_DATA = 0).
        (link, credit, data_buffer, credit_buffer, k, window, _data_cls, _credit_cls, data_bucket, credit_bucket,
         _overhead, _min_wire, _data_burst, _credit_burst, port_id, peer_port_id) = PORT_CONFIG.unpack(raw)
        return (cls(link, credit, (data_buffer, credit_buffer), k, window, port_id, peer_port_id),
                (data_bucket, credit_bucket))


@dataclass(frozen=True)
class PortStats:
    node: str
    port: str
    ifindex: int
    config: PortConfig
    queue_bytes: tuple[int, int]  # real queues (data, credit): admitted minus arrived at the peer
    ideal_queue_bytes: tuple[float, float]  # an ideal port's (fluid) queues, drained to the time of reading
    mark_probability: float  # SprayPass Pd in force
    unparsed_packets: int
    data: ClassStats
    credit: ClassStats


def drain(queues_mbytes: tuple[int, int], elapsed_ns: int, config: PortConfig) -> tuple[float, float]:
    """The fluid model of bpf/port.bpf.c: credits drain first (capped), data gets the rest.
    Returns (data, credit) in bytes."""
    data, credit = queues_mbytes
    link = elapsed_ns * config.link_rate_Bps / 1e6
    credit_drained = min(credit, elapsed_ns * config.credit_rate_Bps / 1e6, link)
    return max(0.0, data - (link - credit_drained)) / 1000, (credit - credit_drained) / 1000


class PortMaps:
    """The port maps of every namespace of one run (keeps them open between reads)."""

    def __init__(self, state_dir: Path):
        self.index: dict[str, dict[str, int]] = json.loads((state_dir / PORT_INDEX_FILE).read_text())
        bpffs = state_dir.resolve() / "bpffs"
        self.departures = PinnedMap(bpffs / "port_departures", PORT_DEPARTURES.size)
        self.maps = {
            node: (PinnedMap(bpffs / node / "port_config", PORT_CONFIG.size),
                   PinnedMap(bpffs / node / "port_state", PORT_STATE_SIZE))
            for node in self.index
        }

    def read(self) -> list[PortStats]:
        result = []
        for node, ports in self.index.items():
            config_map, state_map = self.maps[node]
            for port, ifindex in ports.items():
                raw_config, raw_state = config_map.lookup(ifindex), state_map.lookup(ifindex)
                now = time.monotonic_ns()  # CLOCK_MONOTONIC, as bpf_ktime_get_ns
                if raw_config is None or raw_state is None:
                    continue
                config, buckets = PortConfig.unpack(raw_config)
                (_lock, _pad, last_ns, data_q, credit_q, _data_tokens, _credit_tokens, data_admitted,
                 credit_admitted, _win, _drops, pd_ppm, unparsed) = PORT_STATE.unpack_from(raw_state)
                data_departed, credit_departed, _, _ = PORT_DEPARTURES.unpack(self.departures.lookup(config.port_id))
                stats = [ClassStats.unpack(raw_state[PORT_STATE.size + i * CLASS_STATS.size:]
                                           [:CLASS_STATS.size], buckets[i]) for i in (0, 1)]
                result.append(PortStats(
                    node=node, port=port, ifindex=ifindex, config=config,
                    queue_bytes=(max(0, data_admitted - data_departed), max(0, credit_admitted - credit_departed)),
                    ideal_queue_bytes=drain((data_q, credit_q), max(0, now - last_ns), config),
                    mark_probability=pd_ppm / 1e6, unparsed_packets=unparsed, data=stats[0], credit=stats[1],
                ))
        return result

    def close(self) -> None:
        self.departures.close()
        for config_map, state_map in self.maps.values():
            config_map.close()
            state_map.close()

    def __enter__(self) -> "PortMaps":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def netlink_of(pid: int) -> IPRoute:
    """A netlink socket in the network namespace of `pid` (a socket stays in the namespace
    it was made in, so no process is needed to talk to it)."""
    pushns(f"/proc/{pid}/ns/net")
    try:
        return IPRoute()
    finally:
        popns()


def data_fifo_backlog_wire_bytes(netlink: IPRoute, ifindex: int) -> int:
    """Real backlog of a port's data FIFO, counted as the wire counts it."""
    for qdisc in netlink.get_qdiscs(index=ifindex):
        if qdisc["handle"] == DATA_FIFO_HANDLE:
            queue = qdisc.get_attr("TCA_STATS2").get_attr("TCA_STATS_QUEUE")
            return queue["backlog"] + WIRE_OVERHEAD_BYTES * queue["qlen"]
    raise LookupError(f"no data FIFO (qdisc 20:) on ifindex {ifindex}")


def queue_minus_backlog(maps: PortMaps, node: str, port: str, namespace_pid: int, samples: int,
                        interval_s: float) -> list[float]:
    """Samples of (the port program's data queue - the data FIFO's backlog from netlink, as
    `tc -s qdisc` shows it) of one port, in bytes. The backlog is read between two reads of
    the program's queue, and compared with their mean."""
    ifindex = maps.index[node][port]
    netlink = netlink_of(namespace_pid)

    def measured() -> float:
        (queue,) = [p.queue_bytes[0] for p in maps.read() if (p.node, p.port) == (node, port)]
        return queue

    differences = []
    try:
        for _ in range(samples):
            before = measured()
            backlog = data_fifo_backlog_wire_bytes(netlink, ifindex)
            differences.append((before + measured()) / 2 - backlog)
            time.sleep(interval_s)
    finally:
        netlink.close()
    return differences
