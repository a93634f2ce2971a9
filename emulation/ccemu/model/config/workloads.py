"""The workloads an experiment drives through the fabric, one model per kind
(kinds/ runs each)."""

from __future__ import annotations

import math

import re
from typing import Annotated, Literal, Union, get_args

from pydantic import Field, field_validator, model_validator

from ..topology import TopologyCounts
from ..workloads import CdfName, FlowSizeCdf, host_load_for_tor_uplinks
from .base import HOST_NAME, Section
from .errors import KeyedError
from ..excerpt import shown
from .schemes import SchemeName


# What a block's traffic may ask for. Every flow is a schedule line, a cchost flow and a record, made
# in memory before the block starts: a million is hours of any experiment here.
MAX_FLOWS = 1_000_000
# A flow's bytes: 1 PB is 9 days at 10 Gbit/s (cchost counts them in u64).
MAX_FLOW_BYTES = 10**15
# Wall seconds a block waits for its flows: a year, as cchost's longest time (args.rs).
MAX_WAIT_S = 365 * 24 * 3600


def _within(counts: TopologyCounts, loc: tuple[str, ...], names: list[str]) -> None:
    """KeyedError at `loc` naming the first of `names` the topology does not have."""
    beyond = next((name for name in names if int(name[1:]) > counts.hosts), None)
    if beyond:
        raise KeyedError(loc, f"the topology has h1..h{counts.hosts} (got {beyond})")


class Workload(Section):
    """What every workload model says about itself to the rest of the config."""

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        """How many links the workload keeps busy at once (for `dilation: auto`)."""
        raise NotImplementedError

    def fit(self, counts: TopologyCounts, fabric_share: float, link_bps: float) -> None:
        """KeyedError (its key relative to the workload) where the workload asks the topology (at
        links of `link_bps`, the datacenter's) for more than it has, or more flows than a block may
        have; by default it asks nothing."""


class IncastWorkload(Workload):
    """N senders answer one aggregator with total_bytes / N each; the next round starts when
    the last response arrived (the DCTCP+ paper's setup)."""

    kind: Literal["incast"]
    aggregator: str = Field("h1", pattern=HOST_NAME)
    total_bytes: int = Field(1_000_000, ge=1, le=MAX_FLOW_BYTES, description="bytes per round, all responses together")
    flows: list[int] = Field([4, 8, 16, 32], min_length=1, description="N values swept")
    rounds: int = Field(3, ge=1, le=MAX_FLOWS, description="rounds per N")
    settle_rounds: int = Field(0, ge=0, description="the first rounds of each N, shown round by round but left out "
                                                    "of goodput, round time and timeouts (the paper averages 1000 "
                                                    "requests: its figures are the steady state's)")
    round_timeout_s: float = Field(30.0, gt=0, le=MAX_WAIT_S, description="a round not done by then is reported and "
                                                                         "ended")
    warm_up: bool = Field(True, description="before round 1, every sender opens the connections it carries in a "
                                            "round (a one-packet response each, the senders one after another), "
                                            "as the DCTCP+ testbed's persistent connections were open before its "
                                            "requests; not counted. Needs transport.persistent_connections. "
                                            "false: round 1 opens them, and a loss there waits the initial RTO")

    @field_validator("flows")
    @classmethod
    def _positive(cls, flows: list[int]) -> list[int]:
        if any(n < 1 for n in flows):
            raise ValueError(f"every N must be >= 1 (got {shown(flows)})")
        if max(flows) > MAX_FLOWS:
            raise ValueError(f"every N must be at most {MAX_FLOWS} (got {max(flows)})")
        return flows

    @model_validator(mode="after")
    def _rounds_left_after_settling(self) -> "IncastWorkload":
        if self.total_bytes < max(self.flows):
            raise KeyedError(("total_bytes",), f"{self.total_bytes} bytes over N={max(self.flows)} senders leaves "
                                               f"responses of 0 bytes: at least {max(self.flows)}")
        if self.rounds * max(self.flows) > MAX_FLOWS:  # a block's flow ids are unique across its rounds
            raise KeyedError(("rounds",), f"{self.rounds} rounds of N={max(self.flows)} are "
                                          f"{self.rounds * max(self.flows)} flows in a block: at most {MAX_FLOWS}")
        if self.settle_rounds >= self.rounds:
            raise KeyedError(("settle_rounds",), f"must be below workload.rounds ({self.rounds}): the rounds after "
                                                  f"it are the ones counted (got {self.settle_rounds})")
        return self

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        """Every response crosses the aggregator's link: the fabric carries one link's rate."""
        return 1

    def fit(self, counts: TopologyCounts, fabric_share: float, link_bps: float) -> None:
        _within(counts, ("aggregator",), [self.aggregator])


class RealisticWorkload(Workload):
    """Poisson flow arrivals between random host pairs at a target load, flow sizes from one of
    the four CDFs (the ExpressPass and SprayPass realistic workloads); one fabric per load."""

    kind: Literal["realistic"]
    cdf: CdfName = "webserver"
    loads: list[float] = Field([0.2, 0.5, 0.8], min_length=1,
                               description="offered load where load_on says, each run on its own fabric")
    load_on: Literal["host_links", "tor_uplinks"] = Field(
        "host_links", description="host_links: every host offers load x its link; tor_uplinks: what crosses a "
                                  "ToR's uplinks is load x their capacity (ExpressPass, seed 000: 'we set the "
                                  "target load for ToR up-links', with 3:1 oversubscription there)")
    flows: int = Field(300, ge=1, le=MAX_FLOWS, description="flows per load (all hosts together)")
    warmup_flows: int = Field(0, ge=0, le=MAX_FLOWS,
                              description="the first flows of each load (by start) run but are left out of every "
                                          "FCT figure: the fabric fills before flows are measured (switch queues "
                                          "are still the whole block's)")
    timeout_s: float = Field(120.0, gt=0, le=MAX_WAIT_S,
                             description="wall seconds a load's flows get after the last one starts")

    @model_validator(mode="after")
    def _flows_left_after_the_warmup(self) -> "RealisticWorkload":
        if self.warmup_flows >= self.flows:
            raise KeyedError(("warmup_flows",), f"{self.warmup_flows} of {self.flows} flows leaves none to measure")
        return self

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

    def fit(self, counts: TopologyCounts, fabric_share: float, link_bps: float) -> None:
        try:
            over = [(load, x) for load, x in zip(self.loads, self.host_link_loads(counts, fabric_share)) if x > 1]
        except (ValueError, ArithmeticError) as e:
            raise KeyedError(("load_on",), str(e)) from None
        if over:
            raise KeyedError(("loads",), f"{over[0][0]:g} on the ToR uplinks needs {over[0][1]:.3g} of every host "
                                         "link: at most 1")


class PermutationWorkload(Workload):
    """Every host sends one long flow to another, no two to the same receiver (SprayPass)."""

    kind: Literal["permutation"]
    size_bytes: int = Field(2_000_000, ge=1, le=MAX_FLOW_BYTES)
    across_tors: bool = Field(False, description="every flow to a host under another ToR (SprayPass: 'across "
                                                 "different leaf switches'); else any other host")
    timeout_s: float = Field(120.0, gt=0, le=MAX_WAIT_S, description="wall seconds the flows get to finish")

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        return counts.hosts


class ShuffleWorkload(Workload):
    """ExpressPass's MapReduce shuffle: each of every host's tasks sends size_bytes to every
    other host, all at once."""

    kind: Literal["shuffle"]
    tasks_per_host: int = Field(2, ge=1, le=MAX_FLOWS)
    size_bytes: int = Field(100_000, ge=1, le=MAX_FLOW_BYTES)
    timeout_s: float = Field(300.0, gt=0, le=MAX_WAIT_S, description="wall seconds the flows get to finish")

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        return counts.hosts

    def fit(self, counts: TopologyCounts, fabric_share: float, link_bps: float) -> None:
        flows = self.tasks_per_host * counts.hosts * (counts.hosts - 1)
        if flows > MAX_FLOWS:
            raise KeyedError(("tasks_per_host",), f"{self.tasks_per_host} tasks on each of {counts.hosts} hosts, each "
                                                  f"sending to every other host, are {flows} flows: at most "
                                                  f"{MAX_FLOWS}")


class ConvergenceTiming(Section):
    """A scheme's own senders and interval in a convergence workload (unset: the workload's)."""

    senders: int | None = Field(None, ge=1)
    interval_rtts: float | None = Field(None, gt=0)


class ConvergenceWorkload(Workload):
    """Senders start one by one, `interval_rtts` apart, toward one receiver (one bottleneck: its
    link) and stop in reverse order; each flow's size is what fair sharing gives it in its time.
    Credit schemes run once per initial rate alpha (= w_init)."""

    kind: Literal["convergence"]
    receiver: str = Field("h1", pattern=HOST_NAME)
    senders: int = Field(4, ge=1, le=MAX_FLOWS)
    interval_rtts: float = Field(40, gt=0, description="between starts (and stops), in base RTTs of the "
                                                       "longest path")
    per_scheme: dict[SchemeName, ConvergenceTiming] = Field(
        {}, description="a scheme's own senders and interval_rtts (DCTCP converges in hundreds of RTTs: a join "
                        "needs room for it to be measured, not read as never)")
    alphas: list[float] = Field([0.5, 0.0625], min_length=1,
                                description="initial credit rate / max of the credit schemes (paper: 1/2 and 1/16)")
    timeout_s: float = Field(120.0, gt=0, le=MAX_WAIT_S,
                             description="wall seconds the flows get after the last one starts")

    @field_validator("alphas")
    @classmethod
    def _fractions(cls, alphas: list[float]) -> list[float]:
        bad = [a for a in alphas if not 0 < a <= 1]
        if bad:
            raise ValueError(f"every alpha must be in (0, 1] (got {bad[0]})")
        return alphas

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        return 1

    def fit(self, counts: TopologyCounts, fabric_share: float, link_bps: float) -> None:
        _within(counts, ("receiver",), [self.receiver])
        # Each sender is a host of its own (the kind picks those farthest from the receiver, which
        # it checks once the fabric's paths are known): at most every other host.
        asked = [(("senders",), self.senders)] + [(("per_scheme", scheme, "senders"), own.senders)
                                                  for scheme, own in self.per_scheme.items() if own.senders]
        for loc, senders in asked:
            if senders > counts.hosts - 1:
                raise KeyedError(loc, f"{senders} senders to {self.receiver}, each a host of its own: the topology "
                                      f"has {counts.hosts - 1} other hosts")

    def senders_of(self, scheme: str) -> int:
        own = self.per_scheme.get(scheme)
        return own.senders if own and own.senders is not None else self.senders

    def interval_rtts_of(self, scheme: str) -> float:
        own = self.per_scheme.get(scheme)
        return own.interval_rtts if own and own.interval_rtts is not None else self.interval_rtts



class VictimWorkload(Workload):
    """TCD's victim-flow scenario (seed 004, 5.1.3): victim senders send to a receiver whose link is
    never congested, over ports they share with congesting senders' flows to a hot receiver, which
    bursters hit with synchronised bursts. The hot receiver's link is the one congestion point; PFC
    spreads its pauses upstream over the shared ports, and the victims' flows cross only those."""

    kind: Literal["victim"]
    victim_senders: list[str] = Field(["h1"], min_length=1, description="S0: every flow they send is a victim flow")
    victim_receiver: str = Field("h10", pattern=HOST_NAME, description="R0: its link is never congested")
    congesting_senders: list[str] = Field(["h2"], description="S1: flows to the hot receiver, over the victims' ports")
    hot_receiver: str = Field("h9", pattern=HOST_NAME, description="R1: the congestion point is its link")
    bursters: list[str] = Field(["h11", "h12", "h13", "h14", "h15", "h16"], min_length=1,
                                description="A0..: synchronised bursts to the hot receiver")
    cdf: CdfName = Field(
        "webserver",
        description="victim and congesting flows' sizes (the paper's: hadoop)")
    load: float = Field(0.3, gt=0, le=1, description="offered load of each victim and congesting sender, of the "
                                                      "fabric's link rate")
    flows: int = Field(100, ge=1, le=MAX_FLOWS, description="victim flows (the congesting senders send as many each)")
    burst_bytes: int = Field(64_000, ge=1, le=MAX_FLOW_BYTES, description="each burster's flow per burst")
    burst_cdf: CdfName | None = Field(None, description="each burster's flow per burst drawn from this CDF, instead "
                                                        "of burst_bytes (the paper's Fig. 15(a): hadoop)")
    burst_interval_us: float = Field(2000.0, gt=0, le=MAX_WAIT_S * 1e6, description="datacenter time between bursts")
    burst_rounds: Literal["periodic", "exponential"] = Field(
        "periodic", description="bursts burst_interval_us apart, or apart by exponential times of that mean "
                                "(seed 004 lines 140-141)")
    timeout_s: float = Field(120.0, gt=0, le=MAX_WAIT_S,
                             description="wall seconds the flows get after the last one starts")

    @field_validator("victim_senders", "congesting_senders", "bursters")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        bad = [h for h in hosts if not re.fullmatch(HOST_NAME, h)]
        if bad:
            raise ValueError(f"not a host name: {bad[0]!r}")
        return hosts

    @model_validator(mode="after")
    def _one_burst_size(self) -> "VictimWorkload":
        if self.burst_cdf is not None and "burst_bytes" in self.model_fields_set:
            raise KeyedError(("burst_cdf",), "bursts are burst_bytes or draws from burst_cdf: give one")
        return self

    @model_validator(mode="after")
    def _roles_apart(self) -> "VictimWorkload":
        seen: dict[str, str] = {}  # host -> the key that gave it its role
        for key, hosts in self.roles():
            for host in hosts:
                if host in seen:
                    raise KeyedError((key,), f"{host} is already one of {seen[host]}: each host has one role")
                seen[host] = key
        return self

    def roles(self) -> list[tuple[str, list[str]]]:
        """(key, its hosts) in the file's order of keys."""
        return [("victim_senders", self.victim_senders), ("victim_receiver", [self.victim_receiver]),
                ("congesting_senders", self.congesting_senders), ("hot_receiver", [self.hot_receiver]),
                ("bursters", self.bursters)]

    def hosts(self) -> list[str]:
        return [host for _, hosts in self.roles() for host in hosts]

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        return len(self.bursters) + 2

    def fit(self, counts: TopologyCounts, fabric_share: float, link_bps: float) -> None:
        for key, hosts in self.roles():
            _within(counts, (key,), hosts)
        # The bursts last as long as the Poisson flows (model/workloads.py victim_flows): a congesting
        # sender's `flows` flows at `load` of its link take about flows x mean size / (load x rate).
        lasting_s = self.flows * FlowSizeCdf.named(self.cdf).mean() * 8 / (self.load * link_bps)
        # Microseconds over microseconds, in floats: an interval of 5e-324 us would be 0 s (a division by zero),
        # and its count is inf, which has no int.
        each = lasting_s * 1e6 / self.burst_interval_us
        bursts = len(self.bursters) * (math.floor(each) + 1 if each < MAX_FLOWS else each)
        if bursts > MAX_FLOWS:
            raise KeyedError(("burst_interval_us",), f"{len(self.bursters)} bursters every {self.burst_interval_us:g} "
                                                     f"us over the flows' {lasting_s * 1e3:.3g} ms are {bursts:.3g} "
                                                     f"flows: at most {MAX_FLOWS}")


WorkloadConfig = Annotated[
    Union[IncastWorkload, RealisticWorkload, PermutationWorkload, ShuffleWorkload, ConvergenceWorkload,
          VictimWorkload],
    Field(discriminator="kind"),
]
# The kinds, in the union's order: read from it, so that a kind is added in one place here (a unit
# test holds them equal to kinds/ KINDS, the registry).
WORKLOAD_KINDS = tuple(get_args(model.model_fields["kind"].annotation)[0]
                       for model in get_args(get_args(WorkloadConfig)[0]))
