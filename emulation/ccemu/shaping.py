"""Egress shaping of one port as `tc -batch` lines (pure, testable without root).

Like Mininet's TCIntf, each step returns (commands, parent handle) so that steps chain;
unlike it, bad parameters raise instead of being logged and ignored, and rates are not
capped. This is the plain drop-tail port: HTB at the link rate over a byte FIFO. The
scheme-specific port model (credit and data classes, the eBPF port program) builds on the
same chain.
"""

from __future__ import annotations

from dataclasses import dataclass

# Preamble (7) + start delimiter (1) + FCS (4) + inter-frame gap (12): HTB charges only
# skb->len, and without this a minimum frame would get ~40 % more than its wire share.
WIRE_OVERHEAD_BYTES = 24
MIN_WIRE_FRAME_BYTES = 84  # 60-byte minimum frame + overhead
ETHERNET_HEADER_BYTES = 14


@dataclass(frozen=True)
class PortShape:
    rate_mbps: float
    buffer_bytes: int
    mtu: int
    delay_us: int = 0

    def __post_init__(self) -> None:
        if self.rate_mbps <= 0:
            raise ValueError(f"rate_mbps must be > 0, got {self.rate_mbps}")
        if self.buffer_bytes < self.frame_bytes:
            raise ValueError(f"buffer_bytes {self.buffer_bytes} cannot hold one {self.frame_bytes}-byte frame")
        if self.delay_us < 0:
            raise ValueError(f"delay_us must be >= 0, got {self.delay_us}")

    @property
    def frame_bytes(self) -> int:
        return self.mtu + ETHERNET_HEADER_BYTES


def htb_root(dev: str, shape: PortShape) -> tuple[list[str], str]:
    """HTB root with a single class at the link rate; returns the class as parent."""
    rate = f"{round(shape.rate_mbps * 1e6)}bit"
    # Two frames of burst: enough for HTB to send a full frame at any rate, small enough
    # that the port never bursts above the link rate by more than one frame.
    burst = 2 * (shape.frame_bytes + WIRE_OVERHEAD_BYTES)
    commands = [
        f"qdisc replace dev {dev} root handle 1: htb default 1",
        f"class replace dev {dev} parent 1: classid 1:1 htb rate {rate} ceil {rate} "
        f"burst {burst}b cburst {burst}b quantum {shape.frame_bytes} "
        f"overhead {WIRE_OVERHEAD_BYTES} mpu {MIN_WIRE_FRAME_BYTES}",
    ]
    return commands, "1:1"


def fifo_leaf(dev: str, parent: str, shape: PortShape) -> tuple[list[str], str]:
    """Tail-drop byte FIFO (or netem, which then also holds the delay) under `parent`."""
    if shape.delay_us:
        limit_packets = max(1, shape.buffer_bytes // shape.frame_bytes)
        return [f"qdisc replace dev {dev} parent {parent} handle 10: netem delay {shape.delay_us}us "
                f"limit {limit_packets}"], "10:"
    return [f"qdisc replace dev {dev} parent {parent} handle 10: bfifo limit {shape.buffer_bytes}"], "10:"


def droptail_port(dev: str, shape: PortShape) -> list[str]:
    commands, parent = htb_root(dev, shape)
    leaf, _ = fifo_leaf(dev, parent, shape)
    return commands + leaf
