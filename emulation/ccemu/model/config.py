"""Experiment configuration: the YAML schema, validated before anything is started.

A bad config raises ConfigError whose message is one line naming the key path and the
rule, e.g. ``incast.yaml: topology.k: must be even (got 5)``; the CLI prints it and exits
with status 2. Later issues add sections (scheme, workload, monitoring) to
ExperimentConfig; unknown keys are always an error, so a typo never passes silently.

What cannot run is refused here too, before anything starts: values the port program cannot
represent (bounds below, each with its reason), and fabrics this machine cannot hold
(DoesNotFit, from footprint.py's estimate against the machine's limits, read at validation
time or injected through the validation context as the kernel's features are).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Union

import yaml
from pydantic import (BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo,
                      field_validator, model_validator)

from ..fabric.allocators import ALLOCATORS
from ..fabric.kernel import KernelFeatures
# CREDIT_WIRE_BYTES: minimum Ethernet frame + preamble/SFD + inter-frame gap; DATA_WIRE_BYTES:
# maximum frame (MTU 1500) + the same.
from .dilation import (CREDIT_WIRE_BYTES, DATA_WIRE_BYTES, DEFAULT_FAITHFUL, Dilation, FaithfulRates,
                       auto_dilation)
from .workloads import host_load_for_tor_uplinks
from .topology import (
    Topology,
    TopologyCounts,
    dumbbell,
    dumbbell_counts,
    fat_tree,
    fat_tree_counts,
    leaf_spine,
    leaf_spine_counts,
    star,
    star_counts,
)

if TYPE_CHECKING:
    from ..fabric.footprint import MachineLimits

# The experiments `make experiment NAME=...` runs (workloads/experiments/NAME.yaml).
EXPERIMENTS_DIR = Path(__file__).resolve().parents[3] / "workloads" / "experiments"
ETHERNET_HEADER_BYTES = 14
SWITCHES_PER_INSTANCE = 5


class ConfigError(ValueError):
    """An invalid experiment config; str() is the one line to show the user."""


class DoesNotFit(ConfigError):
    """A valid config whose fabric this machine cannot hold (memory, processes, open files)
    or the port program cannot number (port ids, ports per namespace)."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FatTreeConfig(_Section):
    kind: Literal["fattree"]
    k: int = Field(4, description="switch radix: k pods, k^3/4 hosts")

    @field_validator("k")
    @classmethod
    def _even_and_at_least_two(cls, k: int) -> int:
        if k < 2:
            raise ValueError(f"must be >= 2 (got {k})")
        if k % 2:
            raise ValueError(f"must be even (got {k})")
        return k

    def build(self) -> Topology:
        return fat_tree(self.k)

    def counts(self) -> TopologyCounts:
        return fat_tree_counts(self.k)

    def describe(self) -> str:
        return f"a fat-tree with k={self.k}"

    @property
    def size_key(self) -> str:
        return "k"


class LeafSpineConfig(_Section):
    kind: Literal["leafspine"]
    leaves: int = Field(4, ge=1)
    spines: int = Field(2, ge=1)
    hosts_per_leaf: int = Field(4, ge=1)

    def build(self) -> Topology:
        return leaf_spine(self.leaves, self.spines, self.hosts_per_leaf)

    def counts(self) -> TopologyCounts:
        return leaf_spine_counts(self.leaves, self.spines, self.hosts_per_leaf)

    def describe(self) -> str:
        return f"a leaf-spine with {self.leaves} leaves, {self.spines} spines and {self.hosts_per_leaf} hosts per leaf"

    @property
    def size_key(self) -> str:
        """Hosts grow with leaves x hosts_per_leaf, links with leaves x spines: the largest
        of the three is the one that makes the fabric big."""
        return max(("leaves", "spines", "hosts_per_leaf"), key=lambda key: getattr(self, key))


class DumbbellConfig(_Section):
    kind: Literal["dumbbell"]
    hosts_per_side: int = Field(2, ge=1)

    def build(self) -> Topology:
        return dumbbell(self.hosts_per_side)

    def counts(self) -> TopologyCounts:
        return dumbbell_counts(self.hosts_per_side)

    def describe(self) -> str:
        return f"a dumbbell with {self.hosts_per_side} hosts per side"

    @property
    def size_key(self) -> str:
        return "hosts_per_side"


class StarConfig(_Section):
    kind: Literal["star"]
    hosts: int = Field(4, ge=2)

    def build(self) -> Topology:
        return star(self.hosts)

    def counts(self) -> TopologyCounts:
        return star_counts(self.hosts)

    def describe(self) -> str:
        return f"a star with {self.hosts} hosts"

    @property
    def size_key(self) -> str:
        return "hosts"


TopologyConfig = Annotated[
    Union[FatTreeConfig, LeafSpineConfig, DumbbellConfig, StarConfig], Field(discriminator="kind")
]


# bpf/port.bpf.c drains its fluid queues by elapsed_ns * rate_Bps / 1e6 milli-bytes in u64,
# with elapsed_ns up to the port's idle reset (port_config.idle_reset_ns, at least 1 s): at
# 1 s that overflows above (2^64 - 1) / 1e9 = 18446744073 B/s = 147573.95 Mbit/s, so 100 Gbit/s
# is the largest round rate that is safe. (A longer idle reset comes from a deep buffer, whose
# drain time scales down with the rate; footprint.py checks the product exactly.)
MAX_LINK_RATE_MBPS = 100_000
# The port program keeps rates in whole bytes per second: from 1 kbit/s (125 B/s) up the
# truncation costs under 1 % of the rate; at 8 bit/s or less the link would not drain at all.
MIN_LINK_RATE_MBPS = 0.001


class LinkConfig(_Section):
    rate_mbps: float = Field(5.0, description="every link, both directions, Mbit/s on the wire "
                                              f"({MIN_LINK_RATE_MBPS:g} to {MAX_LINK_RATE_MBPS})")
    delay_us: int = Field(0, ge=0, description="must be 0: netem delay is refused (see below); propagation "
                                                "delay is the datacenter's (datacenter.link_delay_us), added at the "
                                                "hosts by cchost's delay line")
    mtu: int = Field(1500, ge=576, le=9000, description="IP MTU of every interface, bytes")
    host_shares: dict[str, float] = Field(
        {}, description="hosts whose NIC sends at this share of rate_mbps (and whose transport takes that for its "
                        "link's rate), e.g. TCD's S0 and S1 at 20 of 40 Gbit/s: {h1: 0.5}")

    @field_validator("host_shares")
    @classmethod
    def _shares_of_hosts(cls, shares: dict[str, float]) -> dict[str, float]:
        for host, share in shares.items():
            if not re.match(r"^h[1-9][0-9]*$", host):
                raise ValueError(f"not a host name: {host!r}")
            if not 0 < share <= 1:
                raise ValueError(f"{host}: a share must be in (0, 1] (got {share})")
        return shares

    fabric_share: float = Field(
        1.0, gt=0, le=1, allow_inf_nan=False,
        description="links between switches at this share of rate_mbps (hosts' links stay at rate_mbps): "
                    "oversubscription at the ToR, e.g. ExpressPass's 3:1 (6 hosts over 2 uplinks) on a k=4 "
                    "fat-tree's ToR of 2 hosts and 2 uplinks: 0.3333")

    def host_rate_mbps(self, host: str) -> float:
        """What `host`'s NIC sends at."""
        return self.rate_mbps * self.host_shares.get(host, 1.0)

    @property
    def fabric_rate_mbps(self) -> float:
        """What a link between two switches runs at."""
        return self.rate_mbps * self.fabric_share

    @field_validator("rate_mbps")
    @classmethod
    def _rate_the_port_program_represents(cls, rate: float) -> float:
        if not rate >= MIN_LINK_RATE_MBPS:  # also refuses NaN
            raise ValueError(f"must be at least {MIN_LINK_RATE_MBPS:g} (1 kbit/s): the port program keeps rates "
                             f"in whole bytes per second (got {rate:g})")
        if rate > MAX_LINK_RATE_MBPS:
            raise ValueError(f"must be at most {MAX_LINK_RATE_MBPS} (100 Gbit/s): the port program's fluid "
                             f"drain overflows 64 bits above 147573 Mbit/s (got {rate:g})")
        return rate

    @field_validator("delay_us")
    @classmethod
    def _no_delay_inside_the_measured_queue(cls, delay_us: int, info: ValidationInfo) -> int:
        # A port's queue is measured from its egress to the peer's ingress (bpf/port.h): netem
        # behind the port, the only place a veth link can hold packets, would put every packet
        # in flight into that queue, toward its buffer, K and drops. The delay line is outside
        # it, in cchost at the receiving host: datacenter.link_delay_us.
        if delay_us:
            kernel: KernelFeatures = (info.context or {}).get("kernel") or KernelFeatures.probe()
            raise ValueError(
                f"{delay_us} us of propagation delay is not emulated by netem: netem behind a port would sit inside "
                "the queue the port programs measure (packets in flight would count toward its buffer, K and "
                f"drops){'' if kernel.netem else ', and this kernel lacks netem anyway'}; use 0 and "
                "datacenter.link_delay_us (added at the hosts)"
            )
        return delay_us


EXPRESSPASS_CREDIT_SHARE = CREDIT_WIRE_BYTES / (CREDIT_WIRE_BYTES + DATA_WIRE_BYTES)
# struct port_config holds buffers and K as u32, and tc's bfifo limit (the buffer plus a few
# frames of margin, shaping.FIFO_MARGIN_FRAMES) is a u32 too: 1 GiB stays far from 2^32 with
# any margin. What full buffers hold in kernel memory (~4x, skb truesize) is footprint.py's.
MAX_PORT_BUFFER_BYTES = 1 << 30
# port_config.credit_mark_window is a u32, and the program counts credits up to it in a u32.
MAX_CREDIT_MARK_WINDOW = (1 << 32) - 1
# The port program keeps the credit rate in whole bytes per second, 0 meaning "no credit
# class"; below one credit per second a credit class is no credit class for any experiment.
MIN_CREDIT_RATE_BPS = 8 * CREDIT_WIRE_BYTES
# How the port program counts buffers and K (shaping.WIRE_OVERHEAD_BYTES), said in their descriptions.
_WIRE_BYTES = ("bytes on the wire: each frame (1514 bytes at MTU 1500) plus 24 of preamble, FCS and inter-frame "
               "gap, e.g. 20 full frames = 20 x 1538 = 30760")


class LosslessConfig(_Section):
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
            raise _KeyedError(("xon_bytes",), f"must be below xoff_bytes ({self.xoff_bytes}) (got {self.xon_bytes})")
        return self


class DropTailPort(_Section):
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

    @model_validator(mode="after")
    def _buffer_holds_what_pfc_lets_in(self) -> "DropTailPort":
        pfc = self.lossless
        if pfc and self.buffer_bytes < pfc.xoff_bytes + pfc.headroom_bytes:
            raise _KeyedError(("buffer_bytes",), f"a lossless port holds xoff_bytes + headroom_bytes "
                                                 f"({pfc.xoff_bytes + pfc.headroom_bytes}) from one ingress "
                                                 f"(got {self.buffer_bytes})")
        return self


class DctcpPort(DropTailPort):
    """DCTCP: ECN-capable packets that find more than K bytes queued are CE-marked."""

    profile: Literal["dctcp"] = "dctcp"
    # At most buffer_bytes (the rule below), so within the u32 of port_config too.
    ecn_threshold_bytes: int = Field(30_000, ge=1, description=f"K: a packet that finds more queued is CE-marked, "
                                                              f"in {_WIRE_BYTES} (default: Linux's 20 packets)")

    @model_validator(mode="after")
    def _threshold_below_buffer(self) -> "DctcpPort":
        if self.ecn_threshold_bytes >= self.buffer_bytes:
            raise _KeyedError(("ecn_threshold_bytes",),
                              f"must be below port.buffer_bytes ({self.buffer_bytes}) (got {self.ecn_threshold_bytes})")
        if self.ecn_threshold_bytes >= self.host_nic_buffer_bytes:  # a NIC marks at K too
            raise _KeyedError(("host_buffer_bytes",), f"must be above port.ecn_threshold_bytes "
                                                      f"({self.ecn_threshold_bytes}) (got {self.host_buffer_bytes})")
        return self


class ExpressPassPort(DropTailPort):
    """ExpressPass: credits get their own class capped at credit_share of the link with a
    tiny buffer (excess credits are dropped); data gets the rest and may borrow all of it."""

    @model_validator(mode="after")
    def _credits_are_dropped(self) -> "ExpressPassPort":
        if self.lossless:
            raise _KeyedError(("lossless",), f"{self.profile} ports drop excess credits by design: no PFC")
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


class SprayPassPort(ExpressPassPort):
    """SprayPass: ExpressPass's credit queue, and departing credits CE-marked with the
    probability Pd = dropped / injected credits, refreshed every credit_mark_window credits."""

    profile: Literal["spraypass"] = "spraypass"
    credit_mark_window: int = Field(4, ge=1, le=MAX_CREDIT_MARK_WINDOW,
                                    description="N_cdt, credits per Pd refresh (paper: 4)")


class _LosslessPort(DropTailPort):
    """What the lossless profiles share: PFC on, and a buffer that holds Xoff + headroom from
    several ingresses (not itself a profile: it is in no PortConfig)."""

    buffer_bytes: int = Field(2_000_000, ge=1, le=MAX_PORT_BUFFER_BYTES,
                              description=f"egress buffer of every port, in {_WIRE_BYTES}")


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

    @model_validator(mode="after")
    def _kmin_below_kmax(self) -> "DcqcnPort":
        if self.kmin_bytes >= self.kmax_bytes:
            raise _KeyedError(("kmin_bytes",), f"must be below kmax_bytes ({self.kmax_bytes}) (got {self.kmin_bytes})")
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
        None, gt=0, le=1e6, description="max(T_on) in frame times at the link rate; unset: from epsilon (ports/tc.py "
                                "tcd_max_on_s)")


PortConfig = Annotated[
    Union[DropTailPort, DctcpPort, ExpressPassPort, SprayPassPort, DcqcnPort, TcdPort], Field(discriminator="profile")
]
PORT_PROFILES = ("droptail", "dctcp", "expresspass", "spraypass", "dcqcn", "tcd")


class FabricConfig(_Section):
    # auto: userspace OVS forwards 5x less than the bpf datapath here (k=4, every pair >= 0.95 up to 15
    # Mbit/s per link against 75; README "This machine's limits"), so it runs only where asked for.
    datapath: Literal["auto", "ovs", "bpf"] = Field(
        "auto", description="what forwards between a switch's ports: 'ovs' (Open vSwitch: its kernel datapath where "
                            "the openvswitch module exists, else its userspace one), 'bpf' (the kernel, driven by "
                            "ccemu's program at each switch port's ingress, ports/bpf/switch.h: the same routes, "
                            "queues and marks, no OVS daemon), 'auto' (OVS where its kernel datapath exists, else bpf)")
    ovs_instances: Union[int, str] = Field(
        "auto",
        description="ovs-vswitchd processes the switches are spread over; 'auto' runs one per CPU "
                    f"and at least one per {SWITCHES_PER_INSTANCE} switches",
    )
    pin_ovs: Union[bool, Literal["auto"]] = Field(
        "auto", description="pin each OVS instance, all its threads, to one CPU (round robin over the CPUs ccemu "
                            "may use); 'auto': pinned on machines of 8 CPUs or more (fabric/placement.py says why)")

    # jemalloc by default: with glibc's, malloc and free were 18 % of ovs-vswitchd's samples; jemalloc
    # forwarded 7-9 % more at 25 and 50 Mbit/s per link on k=4 here (3 runs each, 2026-11-26,
    # README "This machine's limits").
    ovs_allocator: Literal[tuple(ALLOCATORS)] = Field(
        "jemalloc", description="the memory allocator ovs-vswitchd runs with (jemalloc, tcmalloc: preloaded from "
                                "their Debian packages; glibc: its own); it allocates and frees buffers for every "
                                "packet it forwards")

    @field_validator("ovs_instances", mode="before")
    @classmethod
    def _auto_or_count(cls, value: object) -> int | str:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 64):
            return value
        raise ValueError(f"must be 'auto' or a whole number from 1 to 64 (got {value!r})")

    def forwarder(self, kernel: KernelFeatures) -> Literal["ovs", "bpf"]:
        """The datapath this fabric runs on a machine with `kernel`'s features."""
        if self.datapath == "auto":
            return "ovs" if kernel.openvswitch else "bpf"
        return self.datapath

    def instance_count(self, switches: int) -> int:
        """Each instance forwards in one thread (so: one per CPU) and visits all its ports on
        every wake-up (so: few switches each). Measured (benchmarks/): on a k=8 fat-tree 16
        instances cut the idle RTT from 39 to 4.5 ms and teardown from 8.1 to 0.8 s; on k=4,
        4 instances carry 8 flows at 0.99 of 10 Mbit/s where 1 instance reaches 0.91."""
        if self.ovs_instances == "auto":
            wanted = max(len(os.sched_getaffinity(0)), math.ceil(switches / SWITCHES_PER_INSTANCE))
        else:
            wanted = self.ovs_instances
        return max(1, min(wanted, switches))


SchemeName = Literal["expresspass", "spraypass", "dctcp", "dctcp+", "dcqcn", "dcqcn+tcd"]
# The port profile each scheme's hosts are written for.
SCHEME_PORT_PROFILES = {"expresspass": "expresspass", "spraypass": "spraypass", "dctcp": "dctcp", "dctcp+": "dctcp",
                        "dcqcn": "dcqcn", "dcqcn+tcd": "tcd"}
# Schemes whose hosts send data only against credits: behind ports without a credit class the
# credits would queue behind data, and nothing the scheme relies on would hold.
CREDIT_SCHEMES = ("expresspass", "spraypass")


class SchemeConfig(_Section):
    """One scheme of the comparison and the port profile its fabric runs."""

    scheme: SchemeName
    port: PortConfig
    port_mismatch_intended: bool = Field(
        False, description="run the scheme on another scheme's port profile on purpose (e.g. expresspass hosts "
                           "behind spraypass ports); without it that is an error, and credit schemes always need "
                           "ports with a credit class")

    @model_validator(mode="before")
    @classmethod
    def _profile_defaults_to_the_schemes(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("scheme") in SCHEME_PORT_PROFILES:
            port = data.get("port") or {}
            if isinstance(port, dict) and "profile" not in port:
                data = {**data, "port": {"profile": SCHEME_PORT_PROFILES[data["scheme"]], **port}}
        return data

    @model_validator(mode="after")
    def _profile_fits_the_scheme(self) -> "SchemeConfig":
        own, profile = SCHEME_PORT_PROFILES[self.scheme], self.port.profile
        if self.scheme in CREDIT_SCHEMES and not isinstance(self.port, ExpressPassPort):
            raise _KeyedError(("port", "profile"), f"{self.scheme} sends data against credits, and {profile} ports "
                                                   f"have no credit class (use {own} ports)")
        if profile != own and not self.port_mismatch_intended:
            raise _KeyedError(("port", "profile"), f"{self.scheme} runs on {own} ports (got {profile!r}); to run it "
                                                   f"on {profile} ports on purpose, set "
                                                   f"{_KeyedError.HERE}port_mismatch_intended: true")
        return self


class IncastWorkload(_Section):
    """N senders answer one aggregator with total_bytes / N each; the next round starts when
    the last response arrived (the DCTCP+ paper's setup)."""

    kind: Literal["incast"]
    aggregator: str = Field("h1", pattern=r"^h[1-9][0-9]*$")
    total_bytes: int = Field(1_000_000, ge=1, description="bytes per round, all responses together")
    flows: list[int] = Field([4, 8, 16, 32], min_length=1, description="N values swept")
    rounds: int = Field(3, ge=1, description="rounds per N")
    settle_rounds: int = Field(0, ge=0, description="the first rounds of each N, shown round by round but left out "
                                                    "of goodput, round time and timeouts (the paper averages 1000 "
                                                    "requests: its figures are the steady state's)")
    round_timeout_s: float = Field(30.0, gt=0, description="a round not done by then is reported and ended")
    warm_up: bool = Field(True, description="before round 1, every sender opens the connections it carries in a "
                                            "round (a one-packet response each, the senders one after another), "
                                            "as the DCTCP+ testbed's persistent connections were open before its "
                                            "requests; not counted. Needs transport.persistent_connections. "
                                            "false: round 1 opens them, and a loss there waits the initial RTO")

    @field_validator("flows")
    @classmethod
    def _positive(cls, flows: list[int]) -> list[int]:
        if any(n < 1 for n in flows):
            raise ValueError(f"every N must be >= 1 (got {flows})")
        return flows

    @model_validator(mode="after")
    def _rounds_left_after_settling(self) -> "IncastWorkload":
        if self.settle_rounds >= self.rounds:
            raise _KeyedError(("settle_rounds",), f"must be below workload.rounds ({self.rounds}): the rounds after "
                                                  f"it are the ones counted (got {self.settle_rounds})")
        return self

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        """Every response crosses the aggregator's link: the fabric carries one link's rate."""
        return 1


class RealisticWorkload(_Section):
    """Poisson flow arrivals between random host pairs at a target load, flow sizes from one of
    the four CDFs (the ExpressPass and SprayPass realistic workloads); one fabric per load."""

    kind: Literal["realistic"]
    cdf: Literal["search", "mining", "cachefollower", "webserver"] = "webserver"
    loads: list[float] = Field([0.2, 0.5, 0.8], min_length=1,
                               description="offered load where load_on says, each run on its own fabric")
    load_on: Literal["host_links", "tor_uplinks"] = Field(
        "host_links", description="host_links: every host offers load x its link; tor_uplinks: what crosses a "
                                  "ToR's uplinks is load x their capacity (ExpressPass, seed 000: 'we set the "
                                  "target load for ToR up-links', with 3:1 oversubscription there)")
    flows: int = Field(300, ge=1, description="flows per load (all hosts together)")
    timeout_s: float = Field(120.0, gt=0, description="wall seconds a load's flows get after the last one starts")

    @field_validator("loads")
    @classmethod
    def _loads_in_range(cls, loads: list[float]) -> list[float]:
        bad = [load for load in loads if not 0 < load <= 1]
        if bad:
            raise ValueError(f"every load must be in (0, 1] (got {bad[0]})")
        return loads

    def host_link_load(self, load: float, counts: TopologyCounts, fabric_share: float) -> float:
        """`load` (one of loads) as the share of its link every host offers."""
        if self.load_on == "host_links":
            return load
        return host_load_for_tor_uplinks(load, counts.tor, counts.hosts, fabric_share)

    def host_link_loads(self, counts: TopologyCounts, fabric_share: float) -> list[float]:
        return [self.host_link_load(load, counts, fabric_share) for load in self.loads]

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        return counts.hosts * max(self.host_link_loads(counts, fabric_share))


class PermutationWorkload(_Section):
    """Every host sends one long flow to another, no two to the same receiver (SprayPass)."""

    kind: Literal["permutation"]
    size_bytes: int = Field(2_000_000, ge=1)
    timeout_s: float = Field(120.0, gt=0, description="wall seconds the flows get to finish")

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        return counts.hosts


class ShuffleWorkload(_Section):
    """ExpressPass's MapReduce shuffle: each of every host's tasks sends size_bytes to every
    other host, all at once."""

    kind: Literal["shuffle"]
    tasks_per_host: int = Field(2, ge=1)
    size_bytes: int = Field(100_000, ge=1)
    timeout_s: float = Field(300.0, gt=0, description="wall seconds the flows get to finish")

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        return counts.hosts


class ConvergenceTiming(_Section):
    """A scheme's own senders and interval in a convergence workload (unset: the workload's)."""

    senders: int | None = Field(None, ge=1)
    interval_rtts: float | None = Field(None, gt=0)


class ConvergenceWorkload(_Section):
    """Senders start one by one, `interval_rtts` apart, toward one receiver (one bottleneck: its
    link) and stop in reverse order; each flow's size is what fair sharing gives it in its time.
    Credit schemes run once per initial rate alpha (= w_init)."""

    kind: Literal["convergence"]
    receiver: str = Field("h1", pattern=r"^h[1-9][0-9]*$")
    senders: int = Field(4, ge=1)
    interval_rtts: float = Field(40, gt=0, description="between starts (and stops), in base RTTs of the "
                                                       "longest path")
    per_scheme: dict[SchemeName, ConvergenceTiming] = Field(
        {}, description="a scheme's own senders and interval_rtts (DCTCP converges in hundreds of RTTs: a join "
                        "needs room for it to be measured, not read as never)")
    alphas: list[float] = Field([0.5, 0.0625], min_length=1,
                                description="initial credit rate / max of the credit schemes (paper: 1/2 and 1/16)")
    timeout_s: float = Field(120.0, gt=0, description="wall seconds the flows get after the last one starts")

    @field_validator("alphas")
    @classmethod
    def _fractions(cls, alphas: list[float]) -> list[float]:
        bad = [a for a in alphas if not 0 < a <= 1]
        if bad:
            raise ValueError(f"every alpha must be in (0, 1] (got {bad[0]})")
        return alphas

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        return 1

    def senders_of(self, scheme: str) -> int:
        own = self.per_scheme.get(scheme)
        return own.senders if own and own.senders is not None else self.senders

    def interval_rtts_of(self, scheme: str) -> float:
        own = self.per_scheme.get(scheme)
        return own.interval_rtts if own and own.interval_rtts is not None else self.interval_rtts


_HOST = r"^h[1-9][0-9]*$"


class VictimWorkload(_Section):
    """TCD's victim-flow scenario (seed 004, 5.1.3): victim senders send to a receiver whose link is
    never congested, over ports they share with congesting senders' flows to a hot receiver, which
    bursters hit with synchronised bursts. The hot receiver's link is the one congestion point; PFC
    spreads its pauses upstream over the shared ports, and the victims' flows cross only those."""

    kind: Literal["victim"]
    victim_senders: list[str] = Field(["h1"], min_length=1, description="S0: every flow they send is a victim flow")
    victim_receiver: str = Field("h10", pattern=_HOST, description="R0: its link is never congested")
    congesting_senders: list[str] = Field(["h2"], description="S1: flows to the hot receiver, over the victims' ports")
    hot_receiver: str = Field("h9", pattern=_HOST, description="R1: the congestion point is its link")
    bursters: list[str] = Field(["h11", "h12", "h13", "h14", "h15", "h16"], min_length=1,
                                description="A0..: synchronised bursts to the hot receiver")
    cdf: Literal["search", "mining", "cachefollower", "webserver"] = Field(
        "webserver",
        description="victim and congesting flows' sizes (the paper's Hadoop CDF is not among ccemu's four)")
    load: float = Field(0.3, gt=0, le=1, description="offered load of each victim and congesting sender, of the "
                                                      "fabric's link rate")
    flows: int = Field(100, ge=1, description="victim flows (the congesting senders send as many each)")
    burst_bytes: int = Field(64_000, ge=1, description="each burster's flow per burst")
    burst_interval_us: float = Field(2000.0, gt=0, description="datacenter time between bursts")
    timeout_s: float = Field(120.0, gt=0, description="wall seconds the flows get after the last one starts")

    @field_validator("victim_senders", "congesting_senders", "bursters")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        bad = [h for h in hosts if not re.match(_HOST, h)]
        if bad:
            raise ValueError(f"not a host name: {bad[0]!r}")
        return hosts

    @model_validator(mode="after")
    def _roles_apart(self) -> "VictimWorkload":
        roles = [*self.victim_senders, self.victim_receiver, *self.congesting_senders, self.hot_receiver,
                 *self.bursters]
        twice = sorted({h for h in roles if roles.count(h) > 1})
        if twice:
            raise _KeyedError(("bursters",), f"each host has one role (got {', '.join(twice)} twice)")
        return self

    def hosts(self) -> list[str]:
        return [*self.victim_senders, self.victim_receiver, *self.congesting_senders, self.hot_receiver,
                *self.bursters]

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        return len(self.bursters) + 2


WorkloadConfig = Annotated[
    Union[IncastWorkload, RealisticWorkload, PermutationWorkload, ShuffleWorkload, ConvergenceWorkload,
          VictimWorkload],
    Field(discriminator="kind"),
]
WORKLOAD_KINDS = ("incast", "realistic", "permutation", "shuffle", "convergence", "victim")


class DatacenterConfig(_Section):
    """The datacenter the experiment stands for (see model/dilation.py): the fabric runs its
    links at link_gbps / dilation, every time of the experiment (these delays, the transport's
    timers, flow inter-arrivals) x dilation, and every size as given."""

    link_gbps: float = Field(gt=0, le=1000, allow_inf_nan=False, description="every link, Gbit/s")
    link_delay_us: float = Field(0.0, ge=0, le=1e6, allow_inf_nan=False,
                                 description="one-way propagation delay per link, datacenter microseconds")
    host_delay_us: float = Field(0.0, ge=0, le=1e6, allow_inf_nan=False,
                                 description="one-way delay per end host, datacenter microseconds (ExpressPass: 1)")
    dilation: Union[float, Literal["auto"]] = Field(
        "auto", description="wall time / datacenter time; 'auto': the smallest round factor at which this machine "
                            "keeps the workload's links faithful (model/dilation.py)")

    @field_validator("dilation")
    @classmethod
    def _at_least_one(cls, dilation: float | str) -> float | str:
        if dilation != "auto" and not (math.isfinite(dilation) and 1 <= dilation <= 1e6):
            raise ValueError(f"must be 'auto' or a number from 1 to 1e6 (got {dilation!r})")
        return dilation


class TransportConfig(_Section):
    """cchost's parameters (transport/src/bin/cchost)."""

    alpha: float = Field(0.5, gt=0, le=1, description="ExpressPass/SprayPass initial credit rate / max (paper: 1/2; "
                                                      "1/16 for realistic workloads)")
    w_init: Union[float, None] = Field(None, gt=0, le=1,
                                       description="ExpressPass/SprayPass initial aggressiveness w; unset: equal to "
                                                   "alpha (paper: alpha = w_init = 1/16 for realistic workloads)")
    # Every time here is datacenter time when the experiment declares a datacenter (cchost
    # multiplies them, and its own built-in times, by the dilation: --dilation).
    rto_min_ms: float = Field(10.0, gt=0, description="DCTCP retransmission timeout floor (DCTCP+ paper: 10 ms)")
    control_timeout_ms: float = Field(100.0, gt=0, description="credit request / stop resent after (paper: 100 ms)")
    persistent_connections: bool = Field(
        True, description="a window scheme's flow to a host takes over the congestion state (window, alpha, "
                          "slow_time, RTT) the last one to it left, as on a kept connection (the DCTCP+ paper's "
                          "incast); false: every flow starts afresh (the ExpressPass paper's simulated workloads)")
    slow_time_unit_us: Union[float, None] = Field(None, gt=0, allow_inf_nan=False,
                                                  description="DCTCP+ backoff_time_unit, microseconds; unset: the "
                                                              "flow's measured base RTT (paper: the base RTT, 100 us)")


class HostLimits(_Section):
    """What a Docker host's container may use (cgroups)."""

    cpus: Union[float, None] = Field(None, ge=0.01, allow_inf_nan=False,
                                     description="CPUs, e.g. 0.5 (Docker's --cpus: CFS quota per 100 ms period); "
                                                 "unset: no limit")
    memory_mb: Union[int, None] = Field(None, ge=6, description="memory, MiB, swap included (Docker's minimum is 6); "
                                                                "unset: no limit")

    @field_validator("cpus")
    @classmethod
    def _cpus_this_machine_has(cls, value: float | None) -> float | None:
        cpus = os.cpu_count() or 1
        if value is not None and value > cpus:
            raise ValueError(f"this machine has {cpus} CPUs (got {value:g})")
        return value


class HostsConfig(HostLimits):
    """What the fabric's hosts are: network namespaces (ccemu's default), or Docker containers
    (containers/: an image, CPU and memory limits; the same network, addresses and transport)."""

    kind: Literal["namespace", "docker"] = "namespace"
    image: Union[str, None] = Field(None, min_length=1,
                                    description="Docker image every host runs; unset: ccemu-host:<hash of "
                                                "build/cchost>, built when missing (`make image`)")
    per_host: dict[str, HostLimits] = Field({}, description="limits of single hosts over the ones above, e.g. "
                                                            "{h2: {cpus: 0.05}}")

    @field_validator("per_host")
    @classmethod
    def _host_names(cls, value: dict[str, HostLimits]) -> dict[str, HostLimits]:
        for name in value:
            if not (name.startswith("h") and name[1:].isdigit() and not name[1:].startswith("0")):
                raise ValueError(f"keys are host names like h2 (got {name!r})")
        return value

    @model_validator(mode="after")
    def _limits_need_containers(self) -> "HostsConfig":
        if self.kind == "namespace":
            for key in ("image", "cpus", "memory_mb", "per_host"):
                if getattr(self, key):
                    raise _KeyedError((key,), "needs kind: docker (namespace hosts have no image and no limits)")
        return self

    def limits(self, host: str) -> HostLimits:
        """`host`'s limits: its own where per_host sets them, else every host's."""
        own = self.per_host.get(host)
        return HostLimits(cpus=own.cpus if own and own.cpus is not None else self.cpus,
                          memory_mb=own.memory_mb if own and own.memory_mb is not None else self.memory_mb)


class ExperimentConfig(_Section):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    seed: int = Field(1, ge=0)
    topology: TopologyConfig
    link: LinkConfig = LinkConfig()
    port: PortConfig = DropTailPort()
    fabric: FabricConfig = FabricConfig()
    schemes: list[SchemeConfig] = Field([], description="compared side by side, each on its own port profile")
    workload: Union[WorkloadConfig, None] = None
    transport: TransportConfig = TransportConfig()
    hosts: HostsConfig = HostsConfig()
    datacenter: Union[DatacenterConfig, None] = Field(
        None, description="the datacenter this experiment stands for, run dilated; unset: the link rate is the "
                          "datacenter's and nothing is dilated")

    @model_validator(mode="after")
    def _links_ran_at_the_dilated_rate(self) -> "ExperimentConfig":
        """What the before-validator derived holds (it cannot be skipped by a value it did not read)."""
        dc = self.datacenter
        if dc is not None:
            assert dc.dilation != "auto" and math.isclose(self.link.rate_mbps, dc.link_gbps * 1000 / dc.dilation), \
                "datacenter link rate not derived"
        return self

    @property
    def dilation(self) -> Dilation:
        dc = self.datacenter
        return Dilation(dc.dilation) if dc is not None and dc.dilation != "auto" else Dilation()

    @property
    def datacenter_rate_bps(self) -> float:
        """The rate a link stands for (the emulated rate x the dilation)."""
        return self.link.rate_mbps * 1e6 * self.dilation.factor

    @model_validator(mode="before")
    @classmethod
    def _links_run_at_the_dilated_rate(cls, data: object, info: ValidationInfo) -> object:
        """With a datacenter, link.rate_mbps is derived (rate / dilation) and 'auto' resolved from
        what the machine keeps faithful (the context's "faithful": FaithfulRates, measured by
        `ccemu bench capacity`; without, DEFAULT_FAITHFUL of the datapath the fabric runs), so every
        later rule sees the emulated rate."""
        if not (isinstance(data, dict) and isinstance(data.get("datacenter"), dict)):
            return data
        dc, link = data["datacenter"], data.get("link") or {}
        gbps = _as_number(dc.get("link_gbps"))
        if gbps is None or not 0 < gbps <= 1000:
            return data  # DatacenterConfig says what is wrong with it
        dilation = "auto" if dilation_is_auto(data) else _as_number(dc.get("dilation"))
        if dilation == "auto":
            context = info.context or {}
            faithful = context.get("faithful") or default_faithful(fabric_section(data), context.get("kernel"))
            dilation = auto_dilation(gbps, _busy_links(data), faithful)
            dc = {**dc, "dilation": dilation}
        if dilation is not None and 1 <= dilation <= 1e6:
            rate = gbps * 1000 / dilation
            given = link.get("rate_mbps") if isinstance(link, dict) else None
            # A config written back (the manifest's, `ccemu check --config`) carries the derived rate.
            if given is not None and not (isinstance(given, (int, float)) and math.isclose(given, rate)):
                raise _KeyedError(("link", "rate_mbps"), f"is set by datacenter.link_gbps / datacenter.dilation "
                                                         f"({rate:g}) when the experiment declares a datacenter: "
                                                         f"remove it (got {given!r})")
            link = {**link, "rate_mbps": rate} if isinstance(link, dict) else link
        return {**data, "datacenter": dc, "link": link}

    def for_scheme(self, scheme: SchemeConfig) -> "ExperimentConfig":
        """This experiment with the scheme's ports."""
        return self.with_port(scheme.port)

    def with_port(self, port: PortConfig) -> "ExperimentConfig":
        return self.model_copy(update={"port": port})

    @model_validator(mode="before")
    @classmethod
    def _port_profile_defaults_to_droptail(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("port"), dict) and "profile" not in data["port"]:
            data = {**data, "port": {"profile": "droptail", **data["port"]}}
        return data

    def port_configs(self) -> list[tuple[tuple[str, ...], PortConfig]]:
        """Every port config of the file with its key path: `port` (what `ccemu up` runs) and
        each scheme's."""
        return [(("port",), self.port)] + [(("schemes", str(i), "port"), s.port) for i, s in enumerate(self.schemes)]

    @model_validator(mode="after")
    def _buffer_holds_a_frame(self) -> "ExperimentConfig":
        frame = self.link.mtu + ETHERNET_HEADER_BYTES
        for loc, port in self.port_configs():
            for key, buffer in (("buffer_bytes", port.buffer_bytes), ("host_buffer_bytes", port.host_nic_buffer_bytes)):
                if buffer < frame:
                    raise _KeyedError((*loc, key), f"must hold at least one full frame, {frame} bytes at MTU "
                                                   f"{self.link.mtu} (got {buffer})")
        return self

    @model_validator(mode="after")
    def _lossless_buffer_holds_every_ingress(self) -> "ExperimentConfig":
        # One egress port may hold, from each other port of its switch, xoff + headroom before PFC
        # stops that ingress: a smaller buffer drops (the qdisc's limit is the buffer).
        radix = self.topology.counts().max_switch_ports
        for loc, port in self.port_configs():
            pfc = port.lossless
            need = (radix - 1) * (pfc.xoff_bytes + pfc.headroom_bytes) if pfc else 0
            if port.buffer_bytes < need:
                raise _KeyedError((*loc, "buffer_bytes"),
                                  f"a lossless port of a {radix}-port switch holds xoff_bytes + headroom_bytes from "
                                  f"each of the other {radix - 1} ports: at least {need} (got {port.buffer_bytes})")
        return self

    @model_validator(mode="after")
    def _credit_class_has_a_rate(self) -> "ExperimentConfig":
        for loc, port in self.port_configs():
            if not isinstance(port, ExpressPassPort):
                continue
            credit_bps = self.link.rate_mbps * 1e6 * port.credit_share
            if credit_bps < MIN_CREDIT_RATE_BPS:
                raise _KeyedError(
                    (*loc, "credit_share"),
                    f"gives the credit class {credit_bps:.3g} bit/s at link.rate_mbps {self.link.rate_mbps:g}; it "
                    f"needs at least {MIN_CREDIT_RATE_BPS} (one credit a second), or the port program sees no "
                    f"credit class (got {port.credit_share:g})",
                )
        return self

    @model_validator(mode="after")
    def _workload_fits_the_topology(self) -> "ExperimentConfig":
        hosts = self.topology.counts().hosts
        if isinstance(self.workload, IncastWorkload):
            number = int(self.workload.aggregator[1:])
            if number > hosts:
                raise _KeyedError(("workload", "aggregator"),
                                  f"the topology has h1..h{hosts} (got {self.workload.aggregator})")
        if isinstance(self.workload, VictimWorkload):
            beyond = [h for h in self.workload.hosts() if int(h[1:]) > hosts]
            if beyond:
                raise _KeyedError(("workload",), f"the topology has h1..h{hosts} (got {beyond[0]})")
        if isinstance(self.workload, RealisticWorkload):
            try:
                over = [(load, x) for load, x in zip(self.workload.loads, self.workload.host_link_loads(
                    self.topology.counts(), self.link.fabric_share)) if x > 1]
            except ValueError as e:
                raise _KeyedError(("workload", "load_on"), str(e)) from None
            if over:
                raise _KeyedError(("workload", "loads"), f"{over[0][0]:g} on the ToR uplinks needs {over[0][1]:.3g} "
                                                         "of every host link: at most 1")
        for name in self.link.host_shares:
            if int(name[1:]) > hosts:
                raise _KeyedError(("link", "host_shares", name), f"the topology has h1..h{hosts}")
        for name in self.hosts.per_host:
            if int(name[1:]) > hosts:
                raise _KeyedError(("hosts", "per_host", name), f"the topology has h1..h{hosts}")
        names = [s.scheme for s in self.schemes]
        if len(set(names)) != len(names):
            raise _KeyedError(("schemes",), f"each scheme once (got {names})")
        return self

    @model_validator(mode="after")
    def _fits_this_machine(self, info: ValidationInfo) -> "ExperimentConfig":
        """Last: the footprint of a config whose every other rule holds."""
        from ..fabric.footprint import MachineLimits, refusal  # footprint.py builds on this module

        machine = (info.context or {}).get("machine") or MachineLimits.probe()
        found = refusal(self, machine)
        if found:
            raise _DoesNotFitError(found.loc, found.message)
        return self


_TOPOLOGY = TypeAdapter(TopologyConfig)
_WORKLOAD = TypeAdapter(Union[WorkloadConfig, None])


class _KeyedError(ValueError):
    """A cross-field rule that still names one key path, relative to the model that raised
    it; HERE in the message becomes that model's own path (e.g. "schemes.0.")."""

    HERE = "{here}"
    refusal: type[ConfigError] = ConfigError  # what parse_config raises for it

    def __init__(self, loc: tuple[str, ...], message: str):
        super().__init__(message)
        self.loc = loc


class _DoesNotFitError(_KeyedError):
    refusal = DoesNotFit


def parse_config(data: object, source: str = "config", kernel: KernelFeatures | None = None,
                 machine: MachineLimits | None = None, faithful: FaithfulRates | None = None) -> ExperimentConfig:
    """The validated config; `kernel` and `machine` are probed unless given (tests give them);
    `dilation: auto` is resolved from `faithful` (default_faithful unless given: the CLI gives this
    machine's measured capacity, bench/capacity.py faithful_rates)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys at the top level")
    try:
        return ExperimentConfig.model_validate(data, context={"kernel": kernel or KernelFeatures.probe(),
                                                              "machine": machine, "faithful": faithful})
    except ValidationError as exc:
        error = exc.errors()[0]
        original = (error.get("ctx") or {}).get("error")
        refusal = original.refusal if isinstance(original, _KeyedError) else ConfigError
        raise refusal(f"{source}: {_describe(error)}") from None


def load_config(path: Path | str, kernel: KernelFeatures | None = None,
                machine: MachineLimits | None = None, faithful: FaithfulRates | None = None) -> ExperimentConfig:
    path = Path(path)
    return parse_config(read_yaml(path), source=str(path), kernel=kernel, machine=machine, faithful=faithful)


def fabric_section(data: object) -> FabricConfig | None:
    """The raw config's fabric section, validated alone (None where it is not valid: the whole
    config's validation says why)."""
    try:
        return FabricConfig.model_validate((data.get("fabric") if isinstance(data, dict) else None) or {})
    except ValidationError:
        return None


def default_faithful(fabric: FabricConfig | None, kernel: KernelFeatures | None = None) -> FaithfulRates:
    """What `dilation: auto` follows where no capacity was measured: the figures of the datapath
    `fabric` runs on `kernel` (this machine's unless given; an invalid section: its default's)."""
    return DEFAULT_FAITHFUL[(fabric or FabricConfig()).forwarder(kernel or KernelFeatures.probe())]


def dilation_is_auto(data: object) -> bool:
    """Whether raw config data declares a datacenter whose dilation is left to `auto`."""
    return (isinstance(data, dict) and isinstance(data.get("datacenter"), dict)
            and data["datacenter"].get("dilation", "auto") == "auto")


def read_yaml(path: Path) -> object:
    """The YAML file's data; ConfigError (one line) if it cannot be read or parsed."""
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None


_UNION_TAGS = {"fattree", "leafspine", "dumbbell", "star", *WORKLOAD_KINDS, *PORT_PROFILES}
_UNION_FIELDS = {"topology", "workload", "port"}  # the tagged unions: the tag follows their name in a location


def _as_number(value: object) -> float | None:
    """A YAML number, also one YAML reads as a string (`1e3`: YAML 1.1 wants `1.0e+3`), as pydantic
    will read it; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _busy_links(data: dict) -> float:
    """How many links the raw config's workload keeps busy at once (for `dilation: auto`); 1 when
    the workload or topology is not valid yet (their own rules report that)."""
    try:
        topology = _TOPOLOGY.validate_python(data.get("topology"))
        workload = _WORKLOAD.validate_python(data.get("workload"))
        link = data.get("link") or {}
        share = LinkConfig.model_validate({"fabric_share": link.get("fabric_share", 1.0)}).fabric_share
        return workload.busy_links(topology.counts(), share) if workload is not None else 1.0
    except (ValidationError, AttributeError, ValueError):
        return 1.0


def _describe(error: dict) -> str:
    # Drop the tag pydantic adds for the chosen member of a tagged union (topology.fattree.k), and
    # only there: a key elsewhere may be named like a tag (workload.per_scheme.dctcp); and the
    # "[key]" it adds where a mapping's key, not its value, is wrong.
    parts = [str(part) for part in error["loc"]]
    loc = [part for i, part in enumerate(parts)
           if part != "[key]" and not (part in _UNION_TAGS and i > 0 and parts[i - 1] in _UNION_FIELDS)]
    original = (error.get("ctx") or {}).get("error")
    if isinstance(original, _KeyedError):  # its key path is relative to the model that raised it
        here = "".join(f"{part}." for part in loc)
        return f"{'.'.join([*loc, *original.loc])}: {str(original).replace(_KeyedError.HERE, here)}"
    key = ".".join(loc) or "(top level)"
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{key}: unknown key"
    if kind == "missing":
        return f"{key}: required key is missing"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tag = error["ctx"]["discriminator"].strip("'")
        if kind == "union_tag_not_found":
            return f"{key}.{tag}: required key is missing"
        return f"{key}.{tag}: must be one of {error['ctx']['expected_tags']} (got {error['ctx']['tag']!r})"
    message = error["msg"].removeprefix("Value error, ")
    if kind != "value_error":
        message = f"{message[0].lower()}{message[1:]} (got {error.get('input')!r})"
    return f"{key}: {message}"
