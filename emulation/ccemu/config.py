"""Experiment configuration: the YAML schema, validated before anything is started.

A bad config raises ConfigError whose message is one line naming the key path and the
rule, e.g. ``incast.yaml: topology.k: must be even (got 5)``; the CLI prints it and exits
with status 2. Later issues add sections (scheme, workload, monitoring) to
ExperimentConfig; unknown keys are always an error, so a typo never passes silently.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from .kernel import KernelFeatures
from .topology import Topology, dumbbell, fat_tree, leaf_spine, star

ETHERNET_HEADER_BYTES = 14
SWITCHES_PER_INSTANCE = 5


class ConfigError(ValueError):
    """An invalid experiment config; str() is the one line to show the user."""


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


class LeafSpineConfig(_Section):
    kind: Literal["leafspine"]
    leaves: int = Field(4, ge=1)
    spines: int = Field(2, ge=1)
    hosts_per_leaf: int = Field(4, ge=1)

    def build(self) -> Topology:
        return leaf_spine(self.leaves, self.spines, self.hosts_per_leaf)


class DumbbellConfig(_Section):
    kind: Literal["dumbbell"]
    hosts_per_side: int = Field(2, ge=1)

    def build(self) -> Topology:
        return dumbbell(self.hosts_per_side)


class StarConfig(_Section):
    kind: Literal["star"]
    hosts: int = Field(4, ge=2)

    def build(self) -> Topology:
        return star(self.hosts)


TopologyConfig = Annotated[
    Union[FatTreeConfig, LeafSpineConfig, DumbbellConfig, StarConfig], Field(discriminator="kind")
]


class LinkConfig(_Section):
    rate_mbps: float = Field(5.0, gt=0, description="every link, both directions, Mbit/s on the wire")
    delay_us: int = Field(0, ge=0, description="one-way propagation delay per link, microseconds")
    mtu: int = Field(1500, ge=576, le=9000, description="IP MTU of every interface, bytes")

    @field_validator("delay_us")
    @classmethod
    def _kernel_can_delay(cls, delay_us: int, info: ValidationInfo) -> int:
        kernel: KernelFeatures = (info.context or {}).get("kernel") or KernelFeatures.probe()
        if delay_us and not kernel.netem:
            raise ValueError(
                f"{delay_us} us needs the netem qdisc, which this kernel lacks "
                "(CONFIG_NET_SCH_NETEM); use 0"
            )
        return delay_us


CREDIT_WIRE_BYTES = 84  # minimum Ethernet frame + preamble/SFD + inter-frame gap
DATA_WIRE_BYTES = 1538  # maximum frame (MTU 1500) + the same
EXPRESSPASS_CREDIT_SHARE = CREDIT_WIRE_BYTES / (CREDIT_WIRE_BYTES + DATA_WIRE_BYTES)


class DropTailPort(_Section):
    """A byte FIFO at the link rate: tail drop, no marking."""

    profile: Literal["droptail"] = "droptail"
    buffer_bytes: int = Field(150_000, description="egress (data) buffer of every port, bytes")


class DctcpPort(DropTailPort):
    """DCTCP: ECN-capable packets that find more than K bytes queued are CE-marked."""

    profile: Literal["dctcp"] = "dctcp"
    ecn_threshold_bytes: int = Field(30_000, ge=1, description="K, bytes (Linux default 20 packets = 30 KB)")

    @model_validator(mode="after")
    def _threshold_below_buffer(self) -> "DctcpPort":
        if self.ecn_threshold_bytes >= self.buffer_bytes:
            raise _KeyedError(("ecn_threshold_bytes",),
                              f"must be below port.buffer_bytes ({self.buffer_bytes}) (got {self.ecn_threshold_bytes})")
        return self


class ExpressPassPort(DropTailPort):
    """ExpressPass: credits get their own class capped at credit_share of the link with a
    tiny buffer (excess credits are dropped); data gets the rest and may borrow all of it."""

    profile: Literal["expresspass"] = "expresspass"
    credit_share: float = Field(EXPRESSPASS_CREDIT_SHARE, gt=0, le=0.5,
                                description="credit class rate / link rate; paper: 84/(84+1538)")
    credit_buffer_credits: int = Field(8, ge=1, description="credit queue, in 84-byte credits (paper: 8)")

    @property
    def credit_buffer_bytes(self) -> int:
        return self.credit_buffer_credits * CREDIT_WIRE_BYTES


class SprayPassPort(ExpressPassPort):
    """SprayPass: ExpressPass's credit queue, and departing credits CE-marked with the
    probability Pd = dropped / injected credits, refreshed every credit_mark_window credits."""

    profile: Literal["spraypass"] = "spraypass"
    credit_mark_window: int = Field(4, ge=1, description="N_cdt, credits per Pd refresh (paper: 4)")


PortConfig = Annotated[
    Union[DropTailPort, DctcpPort, ExpressPassPort, SprayPassPort], Field(discriminator="profile")
]
PORT_PROFILES = ("droptail", "dctcp", "expresspass", "spraypass")


class FabricConfig(_Section):
    ovs_instances: Union[int, str] = Field(
        "auto",
        description="ovs-vswitchd processes the switches are spread over; 'auto' runs one per CPU "
                    f"and at least one per {SWITCHES_PER_INSTANCE} switches",
    )

    @field_validator("ovs_instances", mode="before")
    @classmethod
    def _auto_or_count(cls, value: object) -> int | str:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 64):
            return value
        raise ValueError(f"must be 'auto' or a whole number from 1 to 64 (got {value!r})")

    def instance_count(self, switches: int) -> int:
        """Each instance forwards in one thread (so: one per CPU) and visits all its ports on
        every wake-up (so: few switches each). Measured (benchmarks/): on a k=8 fat-tree 16
        instances cut the idle RTT from 39 to 4.5 ms and teardown from 8.1 to 0.8 s; on k=4,
        4 instances carry 8 flows at 0.99 of 10 Mbit/s where 1 instance reaches 0.91."""
        if self.ovs_instances == "auto":
            wanted = max(os.cpu_count() or 1, math.ceil(switches / SWITCHES_PER_INSTANCE))
        else:
            wanted = self.ovs_instances
        return max(1, min(wanted, switches))


SCHEME_PORT_PROFILES = {"expresspass": ("expresspass", "spraypass"), "dctcp": ("dctcp",)}


class SchemeConfig(_Section):
    """One scheme of the comparison and the port profile its fabric runs."""

    scheme: Literal["expresspass", "dctcp"]
    port: PortConfig

    @model_validator(mode="before")
    @classmethod
    def _profile_defaults_to_the_schemes(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("scheme") in SCHEME_PORT_PROFILES:
            port = data.get("port") or {}
            if isinstance(port, dict) and "profile" not in port:
                data = {**data, "port": {"profile": data["scheme"], **port}}
        return data

    @model_validator(mode="after")
    def _profile_fits_the_scheme(self) -> "SchemeConfig":
        allowed = SCHEME_PORT_PROFILES[self.scheme]
        if self.port.profile not in allowed:
            raise _KeyedError(("port", "profile"), f"{self.scheme} needs {' or '.join(allowed)} ports "
                                                   f"(got {self.port.profile!r})")
        return self


class IncastWorkload(_Section):
    """N senders answer one aggregator with total_bytes / N each; the next round starts when
    the last response arrived (the DCTCP+ paper's setup)."""

    kind: Literal["incast"]
    aggregator: str = Field("h1", pattern=r"^h[1-9][0-9]*$")
    total_bytes: int = Field(1_000_000, ge=1, description="bytes per round, all responses together")
    flows: list[int] = Field([4, 8, 16, 32], min_length=1, description="N values swept")
    rounds: int = Field(3, ge=1, description="rounds per N")
    round_timeout_s: float = Field(30.0, gt=0, description="a round not done by then is reported and ended")

    @field_validator("flows")
    @classmethod
    def _positive(cls, flows: list[int]) -> list[int]:
        if any(n < 1 for n in flows):
            raise ValueError(f"every N must be >= 1 (got {flows})")
        return flows


class RealisticWorkload(_Section):
    """Poisson arrivals at a target load with one of the four flow-size CDFs."""

    kind: Literal["realistic"]
    cdf: Literal["search", "mining", "cachefollower", "webserver"]
    load: float = Field(0.5, gt=0, le=1, description="offered load on every host link")
    flows: int = Field(1000, ge=1)


class PermutationWorkload(_Section):
    kind: Literal["permutation"]
    size_bytes: int = Field(1_000_000, ge=1)


class ShuffleWorkload(_Section):
    kind: Literal["shuffle"]
    tasks_per_host: int = Field(8, ge=1)
    size_bytes: int = Field(1_000_000, ge=1)


WorkloadConfig = Annotated[
    Union[IncastWorkload, RealisticWorkload, PermutationWorkload, ShuffleWorkload], Field(discriminator="kind")
]


class TransportConfig(_Section):
    """cchost's parameters (transport/src/bin/cchost)."""

    alpha: float = Field(0.5, gt=0, le=1, description="ExpressPass initial credit rate / max (paper: 1/2)")
    rto_min_ms: float = Field(10.0, gt=0, description="DCTCP retransmission timeout floor (DCTCP+ paper: 10 ms)")
    control_timeout_ms: float = Field(100.0, gt=0, description="credit request / stop resent after (paper: 100 ms)")


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

    def for_scheme(self, scheme: SchemeConfig) -> "ExperimentConfig":
        """This experiment with the scheme's ports."""
        return self.model_copy(update={"port": scheme.port})

    @model_validator(mode="before")
    @classmethod
    def _port_profile_defaults_to_droptail(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("port"), dict) and "profile" not in data["port"]:
            data = {**data, "port": {"profile": "droptail", **data["port"]}}
        return data

    @model_validator(mode="after")
    def _buffer_holds_a_frame(self) -> "ExperimentConfig":
        frame = self.link.mtu + ETHERNET_HEADER_BYTES
        ports = [(("port",), self.port)] + [(("schemes", str(i), "port"), s.port) for i, s in enumerate(self.schemes)]
        for loc, port in ports:
            if port.buffer_bytes < frame:
                raise _KeyedError(
                    (*loc, "buffer_bytes"),
                    f"must hold at least one full frame, {frame} bytes at MTU {self.link.mtu} "
                    f"(got {port.buffer_bytes})",
                )
        return self

    @model_validator(mode="after")
    def _workload_fits_the_topology(self) -> "ExperimentConfig":
        if isinstance(self.workload, IncastWorkload):
            hosts = len(self.topology.build().hosts)
            number = int(self.workload.aggregator[1:])
            if number > hosts:
                raise _KeyedError(("workload", "aggregator"),
                                  f"the topology has h1..h{hosts} (got {self.workload.aggregator})")
        names = [s.scheme for s in self.schemes]
        if len(set(names)) != len(names):
            raise _KeyedError(("schemes",), f"each scheme once (got {names})")
        return self


class _KeyedError(ValueError):
    """A cross-field rule that still names one key path."""

    def __init__(self, loc: tuple[str, ...], message: str):
        super().__init__(message)
        self.loc = loc


def parse_config(data: object, source: str = "config", kernel: KernelFeatures | None = None) -> ExperimentConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys at the top level")
    try:
        return ExperimentConfig.model_validate(data, context={"kernel": kernel or KernelFeatures.probe()})
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc.errors()[0])}") from None


def load_config(path: Path | str, kernel: KernelFeatures | None = None) -> ExperimentConfig:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    return parse_config(data, source=str(path), kernel=kernel)


_UNION_TAGS = {"fattree", "leafspine", "dumbbell", "star", "incast", "realistic", "permutation", "shuffle",
               *PORT_PROFILES}


def _describe(error: dict) -> str:
    # Drop the tag pydantic adds for the chosen member of a tagged union (topology.fattree.k).
    loc = [str(part) for part in error["loc"] if part not in _UNION_TAGS]
    original = (error.get("ctx") or {}).get("error")
    if isinstance(original, _KeyedError):  # its key path is relative to the model that raised it
        return f"{'.'.join([*loc, *original.loc])}: {original}"
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
