"""The fabric's shape and links: which topology, at what rate, with what MTU and shares."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Union

from pydantic import Field, field_validator

from ..topology import (
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
from .base import HOST_NAME, Section

# Every size parameter of a topology is at most this: far beyond what any machine holds (admission
# refuses a k=400 fat-tree with its estimate), near enough that the arithmetic on counts (floats in
# the footprint and `dilation: auto`) cannot overflow.
MAX_SIZE = 10_000


class FatTreeConfig(Section):
    kind: Literal["fattree"]
    k: int = Field(4, le=MAX_SIZE, description="switch radix: k pods, k^3/4 hosts")
    hosts_per_edge: int | None = Field(None, ge=1, le=MAX_SIZE,
                                       description="hosts under each edge switch (default k/2)")
    uplinks: int | None = Field(None, ge=1, le=MAX_SIZE,
                                description="each edge switch's uplinks, one per aggregation switch of its pod "
                                            "(default k/2); ExpressPass's 3:1 fat-tree: k 8, hosts_per_edge 6, "
                                            "uplinks 2")

    @field_validator("k")
    @classmethod
    def _even_and_at_least_two(cls, k: int) -> int:
        if k < 2:
            raise ValueError(f"must be >= 2 (got {k})")
        if k % 2:
            raise ValueError(f"must be even (got {k})")
        return k

    def build(self) -> Topology:
        return fat_tree(self.k, self.hosts_per_edge, self.uplinks)

    def counts(self) -> TopologyCounts:
        return fat_tree_counts(self.k, self.hosts_per_edge, self.uplinks)

    def describe(self) -> str:
        if self.hosts_per_edge is None and self.uplinks is None:
            return f"a fat-tree with k={self.k}"
        hosts, uplinks = self.counts().tor
        return f"a fat-tree with k={self.k}, {hosts} hosts over {uplinks} uplinks per edge switch"

    @property
    def size_key(self) -> str:
        """k makes the fabric big, unless the edges' hosts are what does."""
        return "hosts_per_edge" if (self.hosts_per_edge or 0) > self.k else "k"


class LeafSpineConfig(Section):
    kind: Literal["leafspine"]
    leaves: int = Field(4, ge=1, le=MAX_SIZE)
    spines: int = Field(2, ge=1, le=MAX_SIZE)
    hosts_per_leaf: int = Field(4, ge=1, le=MAX_SIZE)

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


class DumbbellConfig(Section):
    kind: Literal["dumbbell"]
    hosts_per_side: int = Field(2, ge=1, le=MAX_SIZE)

    def build(self) -> Topology:
        return dumbbell(self.hosts_per_side)

    def counts(self) -> TopologyCounts:
        return dumbbell_counts(self.hosts_per_side)

    def describe(self) -> str:
        return f"a dumbbell with {self.hosts_per_side} hosts per side"

    @property
    def size_key(self) -> str:
        return "hosts_per_side"


class StarConfig(Section):
    kind: Literal["star"]
    hosts: int = Field(4, ge=2, le=MAX_SIZE)

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


class LinkConfig(Section):
    rate_mbps: float = Field(5.0, description="every link, both directions, Mbit/s on the wire "
                                              f"({MIN_LINK_RATE_MBPS:g} to {MAX_LINK_RATE_MBPS})")
    # No delay key: netem behind a port, the only place a veth link can hold packets, would sit
    # inside the queue the port programs measure (egress to the peer's ingress, bpf/port.h), so
    # packets in flight would count toward its buffer, K and drops. Propagation delay is the
    # datacenter's (datacenter.link_delay_us), added at the receiving host by cchost's delay line.
    mtu: int = Field(1500, ge=576, le=9000, description="IP MTU of every interface, bytes")
    host_share: float = Field(
        1.0, gt=0, le=1, allow_inf_nan=False,
        description="every host's NIC at this share of rate_mbps, but those host_shares names: hosts slower than "
                    "the fabric, e.g. SprayPass's 40 Gbit/s servers on 100 Gbit/s links: 0.4")
    host_shares: dict[str, float] = Field(
        {}, description="hosts whose NIC sends at this share of rate_mbps (and whose transport takes that for its "
                        "link's rate), e.g. TCD's S0 and S1 at 20 of 40 Gbit/s: {h1: 0.5}")

    @field_validator("host_shares")
    @classmethod
    def _shares_of_hosts(cls, shares: dict[str, float]) -> dict[str, float]:
        for host, share in shares.items():
            if not re.fullmatch(HOST_NAME, host):
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
        return self.rate_mbps * self.host_shares.get(host, self.host_share)

    @property
    def fabric_rate_mbps(self) -> float:
        """What a link between two switches runs at."""
        return self.rate_mbps * self.fabric_share

    def path_rates_mbps(self, src: str, links: int) -> list[float]:
        """The rates of the links a packet from host `src` crosses to another host over `links` links,
        in order: its NIC's (host_shares), those between switches (fabric_share), and the switch
        port's toward the destination (rate_mbps: a share shapes only what its host sends)."""
        if links < 2:
            raise ValueError(f"a path between two hosts has at least 2 links (got {links})")
        return [self.host_rate_mbps(src), *[self.fabric_rate_mbps] * (links - 2), self.rate_mbps]

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
