"""The experiment: every section together, the rules across them, and parsing a file.

Pure: nothing here probes the machine. What the kernel offers comes in as KernelFeatures from
the caller; what this machine can hold is judged by fabric/admission.py just before bring-up.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal, Union

from pydantic import Field, TypeAdapter, ValidationError, ValidationInfo, field_validator, model_validator

from ..kernel import NO_KERNEL_MODULES, KernelFeatures
from ..dilation import DEFAULT_FAITHFUL, Dilation, FaithfulRates, auto_dilation
from ..names import Name
from .base import Section
from .errors import ConfigError, KeyedError, as_number, describe, read_yaml
from ..excerpt import shown
from .fabric import FabricConfig
from .hosts import HostsConfig
from .ports import ETHERNET_HEADER_BYTES, MIN_CREDIT_RATE_BPS, PORT_PROFILES, DropTailPort, PortConfig
from .schemes import SchemeConfig, TransportConfig
from .topology import LinkConfig, TopologyConfig
from .workloads import WORKLOAD_KINDS, WorkloadConfig

# The experiments `make experiment NAME=...` runs (workloads/experiments/NAME.yaml).
EXPERIMENTS_DIR = Path(__file__).resolve().parents[4] / "workloads" / "experiments"


class DatacenterConfig(Section):
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



class ExperimentConfig(Section):
    name: Name = Field(description="the experiment's name: its bundle's folder (model/names.py's rule)")
    # cchost's seed is seed x 1000 + the host's number, a u64 (2^64 ~ 1.8e19): 1e15 leaves room
    # for every host and every repeat (ccemu reproduce --repeats: seed + r - 1).
    seed: int = Field(1, ge=0, le=10 ** 15)
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
        # An explicit check, not an assert: `python -O` drops asserts, and this one names the key.
        dc = self.datacenter
        if dc is None:
            return self
        if dc.dilation == "auto":
            raise KeyedError(("datacenter", "dilation"), "'auto' was not resolved to a number: give a number from "
                                                         "1 to 1e6")
        rate = dc.link_gbps * 1000 / dc.dilation
        if not math.isclose(self.link.rate_mbps, rate):
            raise KeyedError(("datacenter", "link_gbps"),
                             f"link.rate_mbps ({self.link.rate_mbps:g}) is not datacenter.link_gbps / "
                             f"datacenter.dilation ({rate:g}): give both as plain numbers and no link.rate_mbps")
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
        gbps = as_number(dc.get("link_gbps"))
        if gbps is None or not 0 < gbps <= 1000:
            return data  # DatacenterConfig says what is wrong with it
        dilation = "auto" if dilation_is_auto(data) else as_number(dc.get("dilation"))
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
                raise KeyedError(("link", "rate_mbps"), f"is set by datacenter.link_gbps / datacenter.dilation "
                                                         f"({rate:g}) when the experiment declares a datacenter: "
                                                         f"remove it (got {shown(given)})")
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
                    raise KeyedError((*loc, key), f"must hold at least one full frame, {frame} bytes at MTU "
                                                   f"{self.link.mtu} (got {buffer})")
        return self

    @model_validator(mode="after")
    def _lossless_buffer_holds_every_ingress(self) -> "ExperimentConfig":
        # One egress port may hold, from each other port of its switch, xoff + headroom before PFC
        # stops that ingress: a smaller buffer drops (the qdisc's limit is the buffer).
        radix = self.topology.counts().max_switch_ports
        frame = self.link.mtu + ETHERNET_HEADER_BYTES
        for loc, port in self.port_configs():
            pfc = port.lossless
            if pfc and pfc.headroom_bytes < frame:
                raise KeyedError((*loc, "lossless", "headroom_bytes"),
                                  f"must hold at least the frame an ingress is receiving when its pause is decided, "
                                  f"{frame} bytes at MTU {self.link.mtu} (got {pfc.headroom_bytes})")
            need = (radix - 1) * (pfc.xoff_bytes + pfc.headroom_bytes) if pfc else 0
            if port.buffer_bytes < need:
                raise KeyedError((*loc, "buffer_bytes"),
                                  f"a lossless port of a {radix}-port switch holds xoff_bytes + headroom_bytes from "
                                  f"each of the other {radix - 1} ports: at least {need} (got {port.buffer_bytes})")
        return self

    @model_validator(mode="after")
    def _credit_class_has_a_rate(self) -> "ExperimentConfig":
        for loc, port in self.port_configs():
            share, _ = port.credit_class()
            if not share:
                continue
            credit_bps = self.link.rate_mbps * 1e6 * share
            if credit_bps < MIN_CREDIT_RATE_BPS:
                raise KeyedError(
                    (*loc, "credit_share"),
                    f"gives the credit class {credit_bps:.3g} bit/s at link.rate_mbps {self.link.rate_mbps:g}; it "
                    f"needs at least {MIN_CREDIT_RATE_BPS} (one credit a second), or the port program sees no "
                    f"credit class (got {share:g})",
                )
        return self

    @model_validator(mode="after")
    def _workload_fits_the_topology(self) -> "ExperimentConfig":
        hosts = self.topology.counts().hosts
        if self.workload is not None:
            try:
                self.workload.fit(self.topology.counts(), self.link.fabric_share, self.datacenter_rate_bps)
            except KeyedError as e:
                raise KeyedError(("workload", *e.loc), str(e)) from None
        for name in self.link.host_shares:
            if int(name[1:]) > hosts:
                raise KeyedError(("link", "host_shares", name), f"the topology has h1..h{hosts}")
        for name in self.hosts.per_host:
            if int(name[1:]) > hosts:
                raise KeyedError(("hosts", "per_host", name), f"the topology has h1..h{hosts}")
        names = [s.scheme for s in self.schemes]
        if len(set(names)) != len(names):
            raise KeyedError(("schemes",), f"each scheme once (got {names})")
        return self



_TOPOLOGY = TypeAdapter(TopologyConfig)
_WORKLOAD = TypeAdapter(Union[WorkloadConfig, None])
_UNION_TAGS = {"fattree", "leafspine", "dumbbell", "star", *WORKLOAD_KINDS, *PORT_PROFILES}


def parse_config(data: object, source: str = "config", kernel: KernelFeatures | None = None,
                 faithful: FaithfulRates | None = None) -> ExperimentConfig:
    """The validated config, judged by its own rules only (what this machine can hold is
    fabric/admission.py's, judged where the fabric comes up). `dilation: auto` follows `faithful`
    (the CLI gives this machine's measured capacity, bench/capacity.py faithful_rates), else the
    defaults of the datapath the fabric runs with `kernel`'s features (none given: a kernel
    without the OVS module, as here; DEFAULT_FAITHFUL)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys at the top level")
    try:
        return ExperimentConfig.model_validate(data, context={"kernel": kernel, "faithful": faithful})
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_in_the_files_keys(describe(exc.errors()[0], _UNION_TAGS), data)}") from None


def _in_the_files_keys(line: str, data: dict) -> str:
    """`line` naming the keys the file wrote: with a datacenter, link.rate_mbps is derived (link_gbps
    / dilation), and a rule about it is a rule about those two."""
    link = data.get("link")
    if not isinstance(data.get("datacenter"), dict) or isinstance(link, dict) and "rate_mbps" in link:
        return line
    derived = "link.rate_mbps (datacenter.link_gbps / datacenter.dilation)"
    if line.startswith("link.rate_mbps: "):
        return f"datacenter.dilation: makes {derived}, which {line.removeprefix('link.rate_mbps: ')}"
    return line.replace("link.rate_mbps", derived)


def load_config(path: Path | str, kernel: KernelFeatures | None = None,
                faithful: FaithfulRates | None = None) -> ExperimentConfig:
    path = Path(path)
    return parse_config(read_yaml(path), source=str(path), kernel=kernel, faithful=faithful)


def fabric_section(data: object) -> FabricConfig | None:
    """The raw config's fabric section, validated alone (None where it is not valid: the whole
    config's validation says why)."""
    try:
        return FabricConfig.model_validate((data.get("fabric") if isinstance(data, dict) else None) or {})
    except ValidationError:
        return None


def with_datapath(data: object, datapath: str | None) -> object:
    """Raw config `data` with fabric.datapath set to `datapath` (a command's --datapath; None: as the
    file says), before anything is derived from it: `dilation: auto` then follows the faithful rates
    of that datapath (and `ccemu bench capacity`'s measurement of it). A name that is not a datapath
    is the config's to refuse, in one line naming fabric.datapath; data that is not a mapping, or
    whose fabric section is not one, is left as it is for its own rules to refuse."""
    if datapath is None or not isinstance(data, dict) or not isinstance(data.get("fabric") or {}, dict):
        return data
    return {**data, "fabric": {**(data.get("fabric") or {}), "datapath": datapath}}


def default_faithful(fabric: FabricConfig | None, kernel: KernelFeatures | None) -> FaithfulRates:
    """What `dilation: auto` follows where no capacity was measured: the figures of the datapath
    `fabric` runs on `kernel` (an invalid section: its default's; no kernel: NO_KERNEL_MODULES)."""
    return DEFAULT_FAITHFUL[(fabric or FabricConfig()).forwarder(kernel or NO_KERNEL_MODULES)]


def dilation_is_auto(data: object) -> bool:
    """Whether raw config data declares a datacenter whose dilation is left to `auto`."""
    return (isinstance(data, dict) and isinstance(data.get("datacenter"), dict)
            and data["datacenter"].get("dilation", "auto") == "auto")


def _busy_links(data: dict) -> float:
    """How many links the raw config's workload keeps busy at once (for `dilation: auto`); 1 when
    the workload or topology is not valid yet (their own rules report that)."""
    try:
        topology = _TOPOLOGY.validate_python(data.get("topology"))
        workload = _WORKLOAD.validate_python(data.get("workload"))
        link = data.get("link") or {}
        share = LinkConfig.model_validate({"fabric_share": link.get("fabric_share", 1.0)}).fabric_share
        return workload.busy_links(topology.counts(), share) if workload is not None else 1.0
    except (ValidationError, AttributeError, ValueError, ArithmeticError):
        return 1.0
