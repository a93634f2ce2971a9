"""The schemes compared side by side, the port profile each runs on, and cchost's parameters."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, model_serializer, model_validator

from .. import schemes

from .base import Section
from .errors import KeyedError
from .ports import PortConfig


YEAR_MS = 365 * 24 * 3600 * 1000  # the longest time cchost takes (args.rs)

# Every list of schemes comes from cchost's own table (model/schemes.py, schemes.json).
SchemeName = Literal[schemes.names()]
# The port profile each scheme's hosts are written for.
SCHEME_PORT_PROFILES = schemes.port_profiles()
# Schemes whose hosts send data only against credits: behind ports without a credit class the
# credits would queue behind data, and nothing the scheme relies on would hold.
CREDIT_SCHEMES = schemes.credit_schemes()


class SchemeConfig(Section):
    """One scheme of the comparison and the port profile its fabric runs."""

    scheme: SchemeName
    port: PortConfig
    port_mismatch_intended: bool = Field(
        False, description="run the scheme on another scheme's port profile on purpose (e.g. expresspass hosts "
                           "behind spraypass ports); without it that is an error, and credit schemes always need "
                           "ports with a credit class")
    params: dict[str, float] = Field(
        {}, description="the scheme's own parameters, by cchost's names (`cchost --schemes`, model/schemes.json), "
                        "e.g. {timer_us: 55} for dcqcn; times in datacenter microseconds (cchost dilates them); "
                        "unset: cchost's defaults (the papers')")
    rto_min_ms: Union[float, None] = Field(
        None, gt=0, le=YEAR_MS, description="this scheme's retransmission timeout floor, datacenter ms, where it "
                                            "differs from transport.rto_min_ms (the DCTCP+ paper's Fig. 8: DCTCP at "
                                            "10 ms beside DCTCP+ at the default 200 ms)")

    @model_validator(mode="after")
    def _params_of_the_scheme(self) -> "SchemeConfig":
        known = schemes.params(self.scheme)
        for key in self.params:
            if key not in known:
                raise KeyedError(("params", key), f"{self.scheme} has no such parameter (it has: "
                                                  f"{', '.join(known)})")
            if not known[key].range.admits(self.params[key]):
                raise KeyedError(("params", key), f"must be {known[key].range.says} (got {self.params[key]:g})")
        return self

    @model_serializer(mode="wrap")
    def _without_empty_params(self, handler):
        # A config written back (bundles' manifests) reads as it did before schemes had params
        # and their own RTO.
        data = handler(self)
        if isinstance(data, dict):
            if not data.get("params"):
                data.pop("params", None)
            if data.get("rto_min_ms") is None:
                data.pop("rto_min_ms", None)
        return data

    def rto_min(self, transport: "TransportConfig") -> float:
        """The RTO floor this scheme's hosts run, datacenter ms."""
        return transport.rto_min_ms if self.rto_min_ms is None else self.rto_min_ms

    def cchost_params(self) -> dict[str, float]:
        """`params` as cchost's --param names them: "<scheme>.<key>" -> value."""
        return {f"{self.scheme}.{key}": value for key, value in self.params.items()}

    @model_validator(mode="before")
    @classmethod
    def _profile_defaults_to_the_schemes(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("scheme"), str) and data["scheme"] in SCHEME_PORT_PROFILES:
            port = data.get("port") or {}
            if isinstance(port, dict) and "profile" not in port:
                data = {**data, "port": {"profile": SCHEME_PORT_PROFILES[data["scheme"]], **port}}
        return data

    @model_validator(mode="after")
    def _profile_fits_the_scheme(self) -> "SchemeConfig":
        own, profile = SCHEME_PORT_PROFILES[self.scheme], self.port.profile
        if self.scheme in CREDIT_SCHEMES and not self.port.credit_class()[0]:
            raise KeyedError(("port", "profile"), f"{self.scheme} sends data against credits, and {profile} ports "
                                                   f"have no credit class (use {own} ports)")
        if profile != own and not self.port_mismatch_intended:
            raise KeyedError(("port", "profile"), f"{self.scheme} runs on {own} ports (got {profile!r}); to run it "
                                                   f"on {profile} ports on purpose, set "
                                                   f"{KeyedError.HERE}port_mismatch_intended: true")
        return self


class TransportConfig(Section):
    """cchost's parameters (transport/src/bin/cchost)."""

    alpha: float = Field(0.5, gt=0, le=1, description="ExpressPass/SprayPass initial credit rate / max (paper: 1/2; "
                                                      "1/16 for realistic workloads)")
    w_init: Union[float, None] = Field(None, gt=0, le=1,
                                       description="ExpressPass/SprayPass initial aggressiveness w; unset: equal to "
                                                   "alpha (paper: alpha = w_init = 1/16 for realistic workloads)")
    # Every time here is datacenter time when the experiment declares a datacenter (cchost
    # multiplies them, and its own built-in times, by the dilation: --dilation).
    # At most a year, as cchost takes them (its Durations); --check-args holds the two equal.
    rto_min_ms: float = Field(10.0, gt=0, le=YEAR_MS, description="DCTCP retransmission timeout floor (DCTCP+ paper: "
                                                                  "10 ms)")
    control_timeout_ms: float = Field(100.0, gt=0, le=YEAR_MS, description="credit request / stop resent after (paper: "
                                                                          "100 ms)")
    persistent_connections: bool = Field(
        True, description="a window scheme's flow to a host takes over the congestion state (window, alpha, "
                          "slow_time, RTT) the last one to it left, as on a kept connection (the DCTCP+ paper's "
                          "incast); false: every flow starts afresh (the ExpressPass paper's simulated workloads)")
    slow_time_unit_us: Union[float, None] = Field(None, gt=0, le=YEAR_MS * 1000, allow_inf_nan=False,
                                                  description="DCTCP+ backoff_time_unit, microseconds; unset: the "
                                                              "flow's measured base RTT (paper: the base RTT, 100 us)")
    realtime: bool = Field(False, description="every cchost runs under SCHED_FIFO (cchost --realtime-priority 1): "
                                              "a pacer woken by its timer runs before ordinary processes instead "
                                              "of waiting its turn among ~200 hosts' (issue 43: p99 lateness 4-10 "
                                              "credit gaps without it at 192 hosts, 1-1.3 with it)")
    trace: bool = Field(False, description="every cchost writes a trace of its credit-scheme flows into the block's "
                                           "work folder (<host>.trace, cchost --trace): per feedback step at their "
                                           "receivers, per RTT at their senders; programs/trace.py reads it")
