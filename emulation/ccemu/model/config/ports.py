"""Port profiles: what every switch egress port (and host NIC) runs, per scheme: buffers,
marking, the credit class, PFC. Bounds come from what the port program can represent.

A profile is one class here, in PORT_PROFILE_CLASSES: its `settings()` is everything the ports
take from it (ports/tc.py PortShape.of: the HTB tree and the port program's config), and it
says how the port marks by overriding `marker()` (and, for a credit class, `credit_class()`).
ports/fields.py says what a new way of marking adds to the port program."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

# CREDIT_WIRE_BYTES: minimum Ethernet frame + preamble/SFD + inter-frame gap; DATA_WIRE_BYTES:
# maximum frame (MTU 1500) + the same.
from ..dilation import CREDIT_WIRE_BYTES, DATA_WIRE_BYTES
from .base import Section
from .errors import KeyedError

ETHERNET_HEADER_BYTES = 14
EXPRESSPASS_CREDIT_SHARE = CREDIT_WIRE_BYTES / (CREDIT_WIRE_BYTES + DATA_WIRE_BYTES)
# struct port_config holds buffers and K as u32, and tc's bfifo limit (the buffer plus a few
# frames of margin, ports/tc.py FIFO_MARGIN_FRAMES) is a u32 too: 1 GiB stays far from 2^32 with
# any margin. What full buffers hold in kernel memory (~4x, skb truesize) is footprint.py's.
MAX_PORT_BUFFER_BYTES = 1 << 30
# port_config.credit_mark_window is a u32, and the program counts credits up to it in a u32.
MAX_CREDIT_MARK_WINDOW = (1 << 32) - 1
# The port program keeps the credit rate in whole bytes per second, 0 meaning "no credit
# class"; below one credit per second a credit class is no credit class for any experiment.
MIN_CREDIT_RATE_BPS = 8 * CREDIT_WIRE_BYTES
# How the port program counts buffers and K (ports/tc.py WIRE_OVERHEAD_BYTES), said in their descriptions.
_WIRE_BYTES = ("bytes on the wire: each frame (1514 bytes at MTU 1500) plus 24 of preamble, FCS and inter-frame "
               "gap, e.g. 20 full frames = 20 x 1538 = 30760")


# Credits a credit queue may send back to back beyond its buffer (ExpressPass's queue bound).
CREDIT_BURST_CREDITS = 2
# TCD's pause loop delay, in frame times (tcd_max_on_s).
PAUSE_LOOP_FRAMES = 2


@dataclass(frozen=True)
class Marker:
    """How a port marks what it admits: `kind` names one of the port program's markers
    (ports/fields.py MARKERS) and `fields` its parameters, by their names in struct port_config
    (ports/fields.py PORT_CONFIG_FIELDS; the fields a marker does not set are 0)."""

    kind: str = "none"
    fields: tuple[tuple[str, int], ...] = ()

    def value(self, name: str) -> int:
        """The parameter `name` (0: not one of this marker's)."""
        return dict(self.fields).get(name, 0)


@dataclass(frozen=True)
class PortSettings:
    """What a profile asks of a port at a given rate: its data buffer (wire bytes), its credit
    class (credit_share 0: none), PFC, and its marker."""

    buffer_bytes: int
    credit_share: float = 0.0
    credit_buffer_bytes: int = 0
    lossless: "LosslessConfig | None" = None
    marker: Marker = Marker()


def tcd_max_on_s(link_bps: float, frame_wire_bytes: int, xoff_bytes: int, xon_bytes: int, epsilon: float) -> float:
    """max(T_on) from epsilon: the longest ON period PFC alone makes at a port whose downstream
    drains at most (1 - epsilon) C. Reconstructed (the formula of seed 004's sections 3-4 is not in
    the seed, nor found elsewhere): after a resume the downstream ingress has drained to about Xon
    less the 2d (1 - eps) C it drains while the resume and the first bytes travel; it then fills at
    eps C to Xoff, and the pause takes d to act: T_on = (Xoff - Xon + 2 d (1 - eps) C) / (eps C) + d.
    d here is the pause loop's delay in this emulation, taken as PAUSE_LOOP_FRAMES frame times
    (the fabric's links have no propagation delay of their own; the agent's reaction is ~1 frame
    time at 10 Mbit/s)."""
    rate_Bps = link_bps / 8
    d = PAUSE_LOOP_FRAMES * frame_wire_bytes / rate_Bps
    return (xoff_bytes - xon_bytes + 2 * d * (1 - epsilon) * rate_Bps) / (epsilon * rate_Bps) + d


class LosslessConfig(Section):
    """PFC (ports/pfc.py): per ingress port of a switch, the bytes that arrived through it and
    still sit in the switch's egress queues; above xoff_bytes the port upstream of it is paused,
    at xon_bytes or below it resumes. A lossless port never drops."""

    xoff_bytes: int = Field(320_000, ge=1, le=MAX_PORT_BUFFER_BYTES,
                            description=f"pause above this, in {_WIRE_BYTES} (TCD paper 5.2.1: 320 KB)")
    xon_bytes: int = Field(318_000, ge=0, description="resume at or below this (TCD paper 5.2.1: 318 KB)")
    headroom_bytes: int = Field(
        15_380, ge=0, le=MAX_PORT_BUFFER_BYTES,
        description="what may still arrive through an ingress after its pause is decided (the pause reaction "
                    "times the link rate, and the frames on their way); buffer_bytes must hold xoff_bytes + this "
                    "(default: 10 full frames)")

    @model_validator(mode="after")
    def _xon_below_xoff(self) -> "LosslessConfig":
        if self.xon_bytes >= self.xoff_bytes:
            raise KeyedError(("xon_bytes",), f"must be below xoff_bytes ({self.xoff_bytes}) (got {self.xon_bytes})")
        return self


class DropTailPort(Section):
    """A byte FIFO at the link rate: tail drop, no marking."""

    profile: Literal["droptail"] = "droptail"
    buffer_bytes: int = Field(150_000, ge=1, le=MAX_PORT_BUFFER_BYTES,
                              description=f"egress (data) buffer of every port, in {_WIRE_BYTES}; lossless "
                                          "ports never drop, and hold at least xoff + headroom per ingress")
    lossless: Union[LosslessConfig, None] = Field(None, description="PFC: pause upstream instead of dropping "
                                                                     "(unset: the port drops at buffer_bytes)")
    host_buffer_bytes: Union[int, None] = Field(
        None, ge=1, le=MAX_PORT_BUFFER_BYTES,
        description=f"egress buffer of every host's NIC, in {_WIRE_BYTES} (unset: buffer_bytes). A NIC is not a "
                    "switch port: ns2-xpass's scripts give hosts 1000 packets (1538000), where switch ports have "
                    "250 at 10 Gbit/s")

    @property
    def host_nic_buffer_bytes(self) -> int:
        return self.buffer_bytes if self.host_buffer_bytes is None else self.host_buffer_bytes

    def settings(self, link_bps: int, frame_wire_bytes: int) -> PortSettings:
        """What a port of this profile runs at `link_bps` (a full frame being `frame_wire_bytes`
        on the wire): a switch port's; a host's NIC takes host_nic_buffer_bytes instead."""
        credit_share, credit_buffer_bytes = self.credit_class()
        return PortSettings(self.buffer_bytes, credit_share, credit_buffer_bytes, self.lossless,
                            self.marker(link_bps, frame_wire_bytes))

    def credit_class(self) -> tuple[float, int]:
        """(share of the link, buffer in wire bytes) of the credit class; (0, 0): none."""
        return 0.0, 0

    def marker(self, link_bps: int, frame_wire_bytes: int) -> Marker:
        """How the port marks (at `link_bps`, for markers whose parameters are in time)."""
        return Marker()

    def credit_gap_us(self, link_rate_mbps: float) -> float | None:
        """Gap between credits at the full credit rate of a `link_rate_mbps` link, against which
        the verdict judges cchost's pacing (None: no credit class, no credits to pace)."""
        credit_share, _ = self.credit_class()
        return CREDIT_WIRE_BYTES * 8 / (link_rate_mbps * credit_share) if credit_share else None

    def manifest_entries(self, credit_queues: int) -> dict:
        """What the profile adds to a run's manifest (read by the summary and the smoke checks):
        `credit_queues`, the credit queues on the longest credit path of the run's last block
        (0: no block ran)."""
        return {}

    @model_validator(mode="after")
    def _buffer_holds_what_pfc_lets_in(self) -> "DropTailPort":
        pfc = self.lossless
        if pfc and self.buffer_bytes < pfc.xoff_bytes + pfc.headroom_bytes:
            raise KeyedError(("buffer_bytes",), f"a lossless port holds xoff_bytes + headroom_bytes "
                                                 f"({pfc.xoff_bytes + pfc.headroom_bytes}) from one ingress "
                                                 f"(got {self.buffer_bytes})")
        return self


class DctcpPort(DropTailPort):
    """DCTCP: ECN-capable packets that find more than K bytes queued are CE-marked."""

    profile: Literal["dctcp"] = "dctcp"
    # At most buffer_bytes (the rule below), so within the u32 of port_config too.
    ecn_threshold_bytes: int = Field(30_000, ge=1, description=f"K: a packet that finds more queued is CE-marked, "
                                                              f"in {_WIRE_BYTES} (default: Linux's 20 packets)")

    def marker(self, link_bps: int, frame_wire_bytes: int) -> Marker:
        return Marker("dctcp", (("ecn_threshold_bytes", self.ecn_threshold_bytes),))

    def manifest_entries(self, credit_queues: int) -> dict:
        return {"dctcp_k_bytes": self.ecn_threshold_bytes}

    @model_validator(mode="after")
    def _threshold_below_buffer(self) -> "DctcpPort":
        if self.ecn_threshold_bytes >= self.buffer_bytes:
            raise KeyedError(("ecn_threshold_bytes",),
                              f"must be below port.buffer_bytes ({self.buffer_bytes}) (got {self.ecn_threshold_bytes})")
        if self.ecn_threshold_bytes >= self.host_nic_buffer_bytes:  # a NIC marks at K too
            raise KeyedError(("host_buffer_bytes",), f"must be above port.ecn_threshold_bytes "
                                                      f"({self.ecn_threshold_bytes}) (got {self.host_buffer_bytes})")
        return self


class ExpressPassPort(DropTailPort):
    """ExpressPass: credits get their own class capped at credit_share of the link with a
    tiny buffer (excess credits are dropped); data gets the rest and may borrow all of it."""

    @model_validator(mode="after")
    def _credits_are_dropped(self) -> "ExpressPassPort":
        if self.lossless:
            raise KeyedError(("lossless",), f"{self.profile} ports drop excess credits by design: no PFC")
        return self

    profile: Literal["expresspass"] = "expresspass"
    credit_share: float = Field(EXPRESSPASS_CREDIT_SHARE, gt=0, le=0.5,
                                description="credit class rate / link rate; paper: 84/(84+1538)")
    credit_buffer_credits: int = Field(8, ge=1, le=MAX_PORT_BUFFER_BYTES // CREDIT_WIRE_BYTES,
                                       description="credit queue, in 84-byte credits as the wire carries them "
                                                   "(paper: 8)")

    @property
    def credit_buffer_bytes(self) -> int:
        return self.credit_buffer_credits * CREDIT_WIRE_BYTES

    def credit_class(self) -> tuple[float, int]:
        return self.credit_share, self.credit_buffer_bytes

    def queue_bound_bytes(self, credit_queues: int) -> int:
        """The reference's bound, C x (max - min credit-path delay): a credit waits at most its
        buffer plus burst at each of the `credit_queues` credit queues of its path, and each credit
        stands for a full data frame, so the spread is at most that many frames per queue."""
        return ((self.credit_buffer_credits + CREDIT_BURST_CREDITS) * (CREDIT_WIRE_BYTES + DATA_WIRE_BYTES)
                * credit_queues)

    def manifest_entries(self, credit_queues: int) -> dict:
        if not credit_queues:
            return {}
        return {"expresspass_queue_bound_bytes": self.queue_bound_bytes(credit_queues),
                "expresspass_credit_queues_on_longest_path": credit_queues}


class SprayPassPort(ExpressPassPort):
    """SprayPass: ExpressPass's credit queue, and departing credits CE-marked with the
    probability Pd = dropped / injected credits, refreshed every credit_mark_window credits."""

    profile: Literal["spraypass"] = "spraypass"
    credit_mark_window: int = Field(4, ge=1, le=MAX_CREDIT_MARK_WINDOW,
                                    description="N_cdt, credits per Pd refresh (paper: 4)")

    def marker(self, link_bps: int, frame_wire_bytes: int) -> Marker:
        return Marker("spraypass", (("credit_mark_window", self.credit_mark_window),))


class _LosslessPort(DropTailPort):
    """What the lossless profiles share: PFC on, and a buffer that holds Xoff + headroom from
    several ingresses (not itself a profile: it is in no PortConfig)."""

    buffer_bytes: int = Field(2_000_000, ge=1, le=MAX_PORT_BUFFER_BYTES,
                              description=f"egress buffer of every port, in {_WIRE_BYTES}")


def _below_buffers(port: DropTailPort, key: str, queue_bytes: int) -> None:
    """KeyedError at `key` unless a queue of `queue_bytes` fits in the port's buffer and in a host
    NIC's (a NIC runs the port's marking too)."""
    for name, buffer in (("buffer_bytes", port.buffer_bytes), ("host_buffer_bytes", port.host_nic_buffer_bytes)):
        if queue_bytes >= buffer:
            raise KeyedError((key,), f"must be below port.{name} ({buffer}): no queue reaches it (got {queue_bytes})")


# DCQCN's CP (SIGCOMM 2015, section 5 and Figure 4's marking curve): Kmin 5 KB, Kmax 200 KB, Pmax 1 %.
class DcqcnPort(_LosslessPort):
    """DCQCN's CP on a lossless port: an ECN-capable packet that finds q queued is CE-marked with
    probability 0 below kmin, rising linearly to pmax at kmax, 1 above (RED on the instant queue)."""

    profile: Literal["dcqcn"] = "dcqcn"
    lossless: Union[LosslessConfig, None] = Field(default_factory=LosslessConfig,
                                                  description="PFC (DCQCN runs on lossless RoCE fabrics)")
    kmin_bytes: int = Field(5_000, ge=0, le=MAX_PORT_BUFFER_BYTES, description="no mark at or below (paper: 5 KB)")
    kmax_bytes: int = Field(200_000, ge=1, le=MAX_PORT_BUFFER_BYTES, description="mark always above (paper: 200 KB)")
    pmax: float = Field(0.01, ge=0, le=1, description="marking probability at kmax (paper: 1 %)")

    def marker(self, link_bps: int, frame_wire_bytes: int) -> Marker:
        return Marker("red", (("red_kmin_bytes", self.kmin_bytes), ("red_kmax_bytes", self.kmax_bytes),
                              ("red_pmax_ppm", round(self.pmax * 1e6))))

    @model_validator(mode="after")
    def _kmin_below_kmax(self) -> "DcqcnPort":
        if self.kmin_bytes >= self.kmax_bytes:
            raise KeyedError(("kmin_bytes",), f"must be below kmax_bytes ({self.kmax_bytes}) (got {self.kmin_bytes})")
        _below_buffers(self, "kmax_bytes", self.kmax_bytes)  # the marking curve ends inside the queue
        return self


class TcdPort(_LosslessPort):
    """TCD (seed 004) on a lossless port: congestion -> CE, undetermined (paused, or sending for
    at most max(T_on) since the last resume) -> UE, non-congestion -> no mark."""

    profile: Literal["tcd"] = "tcd"
    lossless: LosslessConfig = Field(default_factory=LosslessConfig, description="PFC (TCD needs it)")
    # github.com/bobzhuyb/ns3-rdma mix/config.txt KMIN 40 (KB): the DCQCN simulator TCD's own is built on.
    threshold_bytes: int = Field(40_000, ge=1, le=MAX_PORT_BUFFER_BYTES,
                                 description="a port that is ON with more queued is congested")
    epsilon: float = Field(0.05, ge=0.001, lt=1, description="sets max(T_on) (seed 004, 5.1.4: 0.05 recommended)")
    # At most a million frame times: the port program keeps max(T_on) in u64 nanoseconds.
    max_on_frames: Union[float, None] = Field(
        None, gt=0, le=1e6, description="max(T_on) in frame times at the link rate; unset: from epsilon "
                                        "(tcd_max_on_s)")

    @model_validator(mode="after")
    def _threshold_below_buffer(self) -> "TcdPort":
        _below_buffers(self, "threshold_bytes", self.threshold_bytes)  # a queue that can pass it
        return self

    def max_on_s(self, link_bps: int, frame_wire_bytes: int) -> float:
        """max(T_on) at a port of `link_bps`, in wall seconds."""
        if self.max_on_frames:
            return self.max_on_frames * frame_wire_bytes * 8 / link_bps
        return tcd_max_on_s(link_bps, frame_wire_bytes, self.lossless.xoff_bytes, self.lossless.xon_bytes,
                            self.epsilon)

    def marker(self, link_bps: int, frame_wire_bytes: int) -> Marker:
        max_on_ns = round(self.max_on_s(link_bps, frame_wire_bytes) * 1e9)
        return Marker("tcd", (("tcd_threshold_bytes", self.threshold_bytes), ("tcd_max_on_ns", max_on_ns),
                              ("tcd_sample_ns", max_on_ns)))  # the queue's trend is sampled once per max(T_on)


# The one list of profiles: the config's union and its tags come from it.
PORT_PROFILE_CLASSES = (DropTailPort, DctcpPort, ExpressPassPort, SprayPassPort, DcqcnPort, TcdPort)
PortConfig = Annotated[Union[PORT_PROFILE_CLASSES], Field(discriminator="profile")]
PORT_PROFILES = tuple(cls.model_fields["profile"].default for cls in PORT_PROFILE_CLASSES)
