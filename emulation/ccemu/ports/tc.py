"""One port's egress: the HTB tree as `tc -batch` lines and the port program's settings
(pure, testable without root). The lines' keys are struct port_config's fields (ports/fields.py).

Like Mininet's TCIntf, each step returns (commands, handle) so that steps chain; unlike
it, bad parameters raise instead of being logged and ignored, and rates are not capped.

Every port gets the same tree, with the credit class only where the profile has credits:

    1: htb (default 1:20)
    └── 1:1   link rate
        ├── 1:10  credits: rate = ceil = credit share          └── 10: bfifo
        └── 1:20  data: rate = link - credit share, ceil = link └── 20: bfifo

The port program (bpf/port.bpf.c) steers packets into 1:10 / 1:20 and drops at the buffer
sizes, by the queue it measures (admitted minus arrived at the peer); the leaf FIFOs get
FIFO_MARGIN_FRAMES more room so that they never drop first.

A lossless port's data leaf is a gate instead of a bfifo: a TBF (with the same FIFO inside) that
is open (far above the link rate, so HTB alone shapes) until PFC pauses the port, when its rate
drops to 8 bit/s and nothing more leaves (ports/pfc.py). Changing HTB's own class would not do:
a class that went over its rate waits in HTB's event queue for as long as the tiny rate says,
and a later change does not take it out (measured: never resumed within a second), whereas a
TBF changed back sends as soon as its qdisc runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..model.config import CREDIT_WIRE_BYTES, ExperimentConfig
from ..model.config.ports import Marker
from ..model.config.ports import tcd_max_on_s as _tcd_max_on_s
from .fields import MARKER_PARAMETERS, config_line

# Preamble (7) + start delimiter (1) + FCS (4) + inter-frame gap (12): HTB charges only
# skb->len, and without this a minimum frame would get ~40 % more than its wire share.
WIRE_OVERHEAD_BYTES = 24
MIN_WIRE_FRAME_BYTES = CREDIT_WIRE_BYTES  # 60-byte minimum frame + overhead
ETHERNET_HEADER_BYTES = 14
FIFO_MARGIN_FRAMES = 4
CREDIT_CLASSID = 0x10010  # 1:10
DATA_CLASSID = 0x10020  # 1:20


WIRE_END_BUFFER_BYTES = 1 << 30  # PortShape.of_wire_end: more than any burst (buffer_bytes is a u32)


@dataclass(frozen=True)
class PortShape:
    """Everything one egress port needs, in bytes and bit/s of the wire: what its profile's
    settings() says (model/config/ports.py) at the port's rate."""

    rate_mbps: float
    buffer_bytes: int
    mtu: int
    credit_share: float = 0.0  # 0: no credit class
    credit_buffer_bytes: int = 0
    lossless: bool = False  # PFC: never drop, pause upstream (xoff/xon per ingress)
    xoff_bytes: int = 0
    xon_bytes: int = 0
    marker: Marker = Marker()  # how the port program marks, and its parameters

    def __post_init__(self) -> None:
        if self.rate_mbps <= 0:
            raise ValueError(f"rate_mbps must be > 0, got {self.rate_mbps}")
        if self.buffer_bytes < self.frame_bytes:
            raise ValueError(f"buffer_bytes {self.buffer_bytes} cannot hold one {self.frame_bytes}-byte frame")
        if not 0 <= self.credit_share <= 0.5:
            raise ValueError(f"credit_share must be in [0, 0.5], got {self.credit_share}")
        if self.credit_share and self.credit_buffer_bytes < MIN_WIRE_FRAME_BYTES:
            raise ValueError(f"credit_buffer_bytes {self.credit_buffer_bytes} cannot hold one credit")
        if not 0 <= self.marker.value("ecn_threshold_bytes") < self.buffer_bytes:
            raise ValueError(f"ecn_threshold_bytes must be in [0, buffer_bytes), got "
                             f"{self.marker.value('ecn_threshold_bytes')}")

    @classmethod
    def of(cls, config: ExperimentConfig, rate_mbps: float | None = None) -> "PortShape":
        """A switch port facing a host (at link.rate_mbps), or at `rate_mbps`."""
        rate_mbps = config.link.rate_mbps if rate_mbps is None else rate_mbps
        frame = cls(rate_mbps=rate_mbps, buffer_bytes=1 << 30, mtu=config.link.mtu)  # its rate and frame only
        settings = config.port.settings(frame.link_bps, frame.frame_wire_bytes)
        pfc = settings.lossless
        return cls(rate_mbps=rate_mbps, buffer_bytes=settings.buffer_bytes, mtu=config.link.mtu,
                   credit_share=settings.credit_share, credit_buffer_bytes=settings.credit_buffer_bytes,
                   lossless=pfc is not None, xoff_bytes=pfc.xoff_bytes if pfc else 0,
                   xon_bytes=pfc.xon_bytes if pfc else 0, marker=settings.marker)

    @classmethod
    def of_fabric(cls, config: ExperimentConfig) -> "PortShape":
        """A switch port facing another switch: at link.fabric_share of the rate (TCD's max ON
        time, in frames at the port's rate, follows it)."""
        return cls.of(config, config.link.fabric_rate_mbps)

    def of_nic(self, config: ExperimentConfig, host: str) -> "PortShape":
        """`host`'s NIC: this port at the host's own rate (link.host_shares) and with the NIC's
        buffer (port.host_buffer_bytes)."""
        return dataclasses.replace(self, rate_mbps=config.link.host_rate_mbps(host),
                                   buffer_bytes=config.port.host_nic_buffer_bytes)

    def of_wire_end(self) -> "PortShape":
        """A cut link's wire end (fabric/tunnels.py), whose port program only counts what left the
        switch's port: it must drop and mark nothing of what the tunnel hands it, which no figure
        would show (it is no port of the fabric's index). Its queue is what the veth to the switch's
        port has not yet delivered: a burst the machines' network delivers at once (a NIC's
        interrupt coalescing) would otherwise fill a credit buffer of 8 credits and lose credits no
        real wire loses. So: a buffer no burst fills, no marker."""
        return dataclasses.replace(self, buffer_bytes=WIRE_END_BUFFER_BYTES, marker=Marker(),
                                   credit_buffer_bytes=WIRE_END_BUFFER_BYTES if self.credit_share else 0)

    def as_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "PortShape":
        marker = data["marker"]
        return cls(**{**data, "marker": Marker(marker["kind"], tuple(map(tuple, marker["fields"])))})

    @property
    def queued_memory_bytes(self) -> int:
        """Kernel memory a full port can hold: each queued packet is charged its skb
        truesize, up to ~4x its wire size for full frames and ~12x for 84-byte credits."""
        return 4 * (self.buffer_bytes + FIFO_MARGIN_FRAMES * self.frame_bytes) + 12 * self.credit_buffer_bytes

    @property
    def frame_bytes(self) -> int:
        return self.mtu + ETHERNET_HEADER_BYTES

    @property
    def frame_wire_bytes(self) -> int:
        """A full frame as the wire carries it (what a frame time at the link rate is of)."""
        return self.frame_bytes + WIRE_OVERHEAD_BYTES

    @property
    def link_bps(self) -> int:
        return round(self.rate_mbps * 1e6)

    @property
    def credit_bps(self) -> int:
        return round(self.link_bps * self.credit_share)

    @property
    def frame_ns(self) -> float:
        """Time one full frame takes on the link."""
        return self.frame_wire_bytes * 8 / self.link_bps * 1e9


def data_burst_bytes(shape: PortShape) -> int:
    """Two full frames: enough for HTB to send a frame at any rate, small enough that the
    port never bursts above the link rate by more than a frame.

    Less loses the line: HTB sends while its tokens are not below 0, its timer fires late, and a
    class with no tokens to spare never catches up. A saturated port at 25 Mbit/s here drained, of
    its rate (emulation/benchmarks/bursts.py, 3 runs each, 2026-11-27): 0.923-0.929 with a 1-byte
    burst, 0.988-0.995 with 84 bytes, 0.997-1.000 with one frame, 0.997-1.000 with two. What a burst
    costs, a port that idled letting two frames go at once where a store-and-forward link sends one
    after the other, cchost's delay line puts right: it holds every packet for its serialization at
    each link and makes a source's packets follow one another as the path's links would
    (transport/src/delay_line.rs OneWay)."""
    return 2 * (shape.frame_bytes + WIRE_OVERHEAD_BYTES)


CREDIT_BURST_BYTES = 2 * MIN_WIRE_FRAME_BYTES  # the paper's max credit burst: 2 credits


def _htb_class(dev: str, parent: str, classid: str, rate_bps: int, ceil_bps: int, burst: int,
               prio: int | None = None) -> str:
    prio_opt = f" prio {prio}" if prio is not None else ""
    return (f"class replace dev {dev} parent {parent} classid {classid} htb rate {rate_bps}bit "
            f"ceil {ceil_bps}bit burst {burst}b cburst {burst}b{prio_opt} "
            f"overhead {WIRE_OVERHEAD_BYTES} mpu {MIN_WIRE_FRAME_BYTES}")


def htb_root(dev: str, shape: PortShape) -> tuple[list[str], str]:
    """HTB root and its one class at the link rate."""
    return [
        f"qdisc replace dev {dev} root handle 1: htb default 20",
        _htb_class(dev, "1:", "1:1", shape.link_bps, shape.link_bps, data_burst_bytes(shape)),
    ], "1:1"


def fifo_leaf(dev: str, parent: str, handle: str, limit_bytes: int) -> list[str]:
    """Byte FIFO under `parent`. Never a delay line (netem): whatever sits here is inside the
    queue the port program measures (config.LinkConfig.delay_us says why)."""
    return [f"qdisc replace dev {dev} parent {parent} handle {handle} bfifo limit {limit_bytes}"]


# A lossless port's gate (see the module docstring): open, it passes what HTB sends; paused, it
# lets at most the frame its bucket holds through (a TBF must hold one frame or it drops frames).
GATE_OPEN_RATE_FACTOR = 10
GATE_PAUSED_RATE_BPS = 8


@dataclass(frozen=True)
class GateSettings:
    """A lossless port's gate, open or closed: the TBF's rate, bucket and FIFO limit."""

    rate_bps: int
    burst_bytes: int
    limit_bytes: int

    @classmethod
    def of(cls, shape: PortShape, paused: bool) -> "GateSettings":
        limit = shape.buffer_bytes + FIFO_MARGIN_FRAMES * shape.frame_bytes
        if paused:
            return cls(GATE_PAUSED_RATE_BPS, shape.frame_bytes, limit)
        return cls(GATE_OPEN_RATE_FACTOR * shape.link_bps, data_burst_bytes(shape), limit)


def gate(dev: str, shape: PortShape, paused: bool, verb: str = "change") -> str:
    """The TBF line that opens or closes a lossless port's data leaf (`verb` "replace" creates it);
    ports/pfc.py sends the same change as a netlink message."""
    g = GateSettings.of(shape, paused)
    return (f"qdisc {verb} dev {dev} parent 1:20 handle 20: tbf rate {g.rate_bps}bit burst {g.burst_bytes}b "
            f"limit {g.limit_bytes}b")


def tcd_max_on_s(shape: PortShape, epsilon: float) -> float:
    """TCD's max(T_on) from epsilon at `shape`'s port (model/config/ports.py tcd_max_on_s)."""
    return _tcd_max_on_s(shape.link_bps, shape.frame_wire_bytes, shape.xoff_bytes, shape.xon_bytes, epsilon)


def port_qdiscs(dev: str, shape: PortShape) -> list[str]:
    """The whole tree of one port (see the module docstring)."""
    commands, root = htb_root(dev, shape)
    margin = FIFO_MARGIN_FRAMES * shape.frame_bytes
    if shape.credit_share:
        commands.append(_htb_class(dev, root, "1:10", shape.credit_bps, shape.credit_bps, CREDIT_BURST_BYTES,
                                   prio=0))
        commands += fifo_leaf(dev, "1:10", "10:", shape.credit_buffer_bytes + margin)
    commands.append(_htb_class(dev, root, "1:20", shape.link_bps - shape.credit_bps, shape.link_bps,
                               data_burst_bytes(shape), prio=1))
    if shape.lossless:
        commands.append(gate(dev, shape, paused=False, verb="replace"))
    else:
        commands += fifo_leaf(dev, "1:20", "20:", shape.buffer_bytes + margin)
    return commands


IDLE_RESET_MIN_NS = 10**9


def idle_reset_ns(shape: PortShape) -> int:
    """How long a port must idle before the port program may take every queue of it as empty
    (and forget packets lost between the port and its peer): twice the time its fuller class
    takes to drain a full buffer at its guaranteed rate, and at least a second."""
    drain_s = [shape.buffer_bytes * 8 / (shape.link_bps - shape.credit_bps)]
    if shape.credit_bps:
        drain_s.append(shape.credit_buffer_bytes * 8 / shape.credit_bps)
    return max(IDLE_RESET_MIN_NS, round(2e9 * max(drain_s)))


def port_program_values(shape: PortShape, port_id: int, peer_port_id: int, switch_port: bool) -> dict[str, object]:
    """The port's struct port_config (ports/fields.py), field by field; per-class fields (data,
    credit). `peer_port_id` is the port at the other end of the link: what arrives at the port
    has left that port's queue. A switch port also measures the time packets spend inside its
    switch. The marker's parameters come from the profile; the fields no marker of it sets are 0."""
    marker_fields = {f.name: 0 for f in MARKER_PARAMETERS}
    own = {f.name for f in MARKER_PARAMETERS if f.of_marker == shape.marker.kind}
    unknown = set(dict(shape.marker.fields)) - own
    if unknown:
        raise ValueError(f"marker {shape.marker.kind} sets {sorted(unknown)}: not its parameters in port_config "
                         f"(ports/fields.py)")
    return {
        "link_rate_Bps": shape.link_bps // 8, "credit_rate_Bps": shape.credit_bps // 8,
        "buffer_bytes": (shape.buffer_bytes, shape.credit_buffer_bytes),
        "classid": (DATA_CLASSID, CREDIT_CLASSID),
        "wire_overhead_bytes": WIRE_OVERHEAD_BYTES, "min_wire_bytes": MIN_WIRE_FRAME_BYTES,
        "burst_bytes": (data_burst_bytes(shape), CREDIT_BURST_BYTES if shape.credit_share else 0),
        "port_id": port_id, "peer_port_id": peer_port_id, "switch_port": int(switch_port),
        "idle_reset_ns": idle_reset_ns(shape),
        "lossless": int(shape.lossless), "xoff_bytes": shape.xoff_bytes, "xon_bytes": shape.xon_bytes,
        "marker": shape.marker.kind, **marker_fields, **dict(shape.marker.fields),
    }


def port_program_line(dev: str, shape: PortShape, port_id: int, peer_port_id: int, switch_port: bool) -> str:
    """The port's line in port_loader's attach config: `port=dev key=value ...` (ports/fields.py)."""
    return config_line(dev, port_program_values(shape, port_id, peer_port_id, switch_port))

