"""Traffic generators: which flows an experiment sends, deterministic from its seed.

Every generator returns plain flow lists (source host, destination host, bytes, start
second); the experiments (emulation/ccemu/experiments/) turn them into cchost schedules.
"""

from __future__ import annotations

import bisect
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

REPO_ROOT = Path(__file__).resolve().parents[3]
CDF_DIR = REPO_ROOT / "workloads" / "cdf"
# The flow-size CDFs workloads/cdf/ holds (its SOURCE.md cites each).
CdfName = Literal["search", "mining", "cachefollower", "webserver", "hadoop"]
CDF_NAMES: tuple[str, ...] = get_args(CdfName)


@dataclass(frozen=True)
class Flow:
    src: str
    dst: str
    size: int  # bytes
    start: float = 0.0  # seconds after the workload's start


def incast_round(hosts: list[str], aggregator: str, flows: int, total_bytes: int, rng: random.Random) -> list[Flow]:
    """`flows` responses of total_bytes / flows each to the aggregator (the DCTCP+ setup),
    dealt over the other hosts in a shuffled order: several flows per sender when there are
    more flows than hosts."""
    if aggregator not in hosts:
        raise ValueError(f"aggregator {aggregator} is not a host of the topology")
    senders = [h for h in hosts if h != aggregator]
    if not senders:
        raise ValueError("incast needs at least one host besides the aggregator")
    rng.shuffle(senders)
    size = total_bytes // flows
    return [Flow(senders[i % len(senders)], aggregator, size) for i in range(flows)]


def incast_connections(hosts: list[str], aggregator: str, flows: int) -> int:
    """The most responses one sender carries in a round of `flows` (incast_round deals them
    over the senders in a shuffled order): the connections each keeps open to the aggregator."""
    senders = len([h for h in hosts if h != aggregator])
    return -(-flows // senders) if senders else 0


class FlowSizeCdf:
    """A flow-size distribution from `size_bytes cumulative_probability` points, sampled by
    inverse transform with linear interpolation between points (as ns-2's EmpiricalRandomVariable)."""

    def __init__(self, points: list[tuple[float, float]], name: str = "cdf"):
        if not points or points[-1][1] != 1.0:
            raise ValueError(f"{name}: the last point must have probability 1")
        if any(b[1] < a[1] or b[0] < a[0] for a, b in zip(points, points[1:])):
            raise ValueError(f"{name}: sizes and probabilities must not decrease")
        self.name = name
        self.sizes = [float(s) for s, _ in points]
        self.probabilities = [float(p) for _, p in points]

    @classmethod
    def named(cls, name: str) -> "FlowSizeCdf":
        if name not in CDF_NAMES:
            raise ValueError(f"unknown flow-size CDF {name!r} (one of {', '.join(CDF_NAMES)})")
        lines = (CDF_DIR / f"{name}.cdf").read_text().split("\n")
        return cls([(float(a), float(b)) for a, b in (line.split() for line in lines if line.strip())], name)

    def sample(self, rng: random.Random) -> int:
        u = rng.random()
        i = bisect.bisect_left(self.probabilities, u)
        if i == 0:
            return max(1, round(self.sizes[0]))
        p0, p1 = self.probabilities[i - 1], self.probabilities[i]
        s0, s1 = self.sizes[i - 1], self.sizes[i]
        size = s1 if p1 == p0 else s0 + (s1 - s0) * (u - p0) / (p1 - p0)
        return max(1, round(size))

    def mean(self) -> float:
        """Mean of the interpolated distribution (piecewise uniform between points)."""
        return sum((p1 - p0) * (s0 + s1) / 2 for (s0, s1, p0, p1) in
                   zip(self.sizes, self.sizes[1:], self.probabilities, self.probabilities[1:])) + \
            self.probabilities[0] * self.sizes[0]


def poisson_flows(hosts: list[str], cdf: FlowSizeCdf, load: float, link_bps: float, flows: int,
                  rng: random.Random) -> list[Flow]:
    """Each host opens flows to uniformly chosen other hosts as a Poisson process whose
    rate makes its offered bytes `load` x its link rate (a load on the ToR uplinks, as
    the ExpressPass realistic workloads set it, comes here through
    host_load_for_tor_uplinks). `flows` in total, in start order."""
    if not 0 < load <= 1:
        raise ValueError(f"load must be in (0, 1] (got {load})")
    if len(hosts) < 2:
        raise ValueError("needs at least two hosts")
    return _poisson(hosts, lambda src: rng.choice([h for h in hosts if h != src]), cdf, load, link_bps, flows, rng)


def host_load_for_tor_uplinks(load: float, tor: tuple[int, int] | None, hosts: int, fabric_share: float) -> float:
    """The load on every host link that puts `load` on the ToR uplinks (ExpressPass, seed 000:
    "there is an over-subscription at the ToR uplinks and most of the traffic traverses through
    the ToR up-links due to random peer selection. Hence, we set the target load for ToR
    up-links"). `tor` is (hosts, uplinks) of every ToR, each uplink at `fabric_share` of a host
    link. A ToR's hosts each offer x of their link to uniformly chosen peers, of whom
    (hosts - per ToR) / (hosts - 1) are under other ToRs: the uplinks carry
    per_tor * x * that share, which is to be load * uplinks * fabric_share."""
    if tor is None:
        raise ValueError("a load on the ToR uplinks needs a topology whose hosts' switches have uplinks, all alike "
                         "(a fat-tree, leaf-spine or dumbbell)")
    per_tor, uplinks = tor
    if per_tor >= hosts:
        raise ValueError("every host is under one ToR: no traffic crosses its uplinks")
    crossing = (hosts - per_tor) / (hosts - 1)
    return load * uplinks * fabric_share / (per_tor * crossing)


@dataclass(frozen=True)
class VictimFlows:
    """The victim scenario's flows by role (starts in seconds after the workload's start)."""

    victims: list[Flow]
    congesting: list[Flow]
    bursts: list[Flow]

    def all(self) -> list[Flow]:
        return sorted(self.victims + self.congesting + self.bursts, key=lambda f: f.start)


def victim_flows(victim_senders: list[str], victim_receiver: str, congesting_senders: list[str], hot_receiver: str,
                 bursters: list[str], cdf: FlowSizeCdf, load: float, link_bps: float, flows: int, burst_bytes: int,
                 burst_interval_s: float, rng: random.Random, burst_cdf: FlowSizeCdf | None = None,
                 exponential_rounds: bool = False) -> VictimFlows:
    """TCD's victim scenario (seed 004, 5.1.3): `flows` victim flows from the victim senders to
    their receiver and as many from each congesting sender to the hot receiver, Poisson arrivals
    at `load` of each sender's link; while they last, the bursters send to the hot receiver in
    rounds, all at the same instants (the paper's synchronised generators): `burst_bytes` each,
    or each its own draw from `burst_cdf`; rounds `burst_interval_s` apart from 0, or (with
    `exponential_rounds`) apart by exponential times of that mean, the first too (lines 140-141)."""
    victims = _poisson(victim_senders, lambda _: victim_receiver, cdf, load, link_bps, flows, rng)
    congesting = [f for src in congesting_senders
                  for f in _poisson([src], lambda _: hot_receiver, cdf, load, link_bps, flows, rng)]
    end = max(f.start for f in victims + congesting)
    if exponential_rounds:
        rounds = []
        t = rng.expovariate(1 / burst_interval_s)
        while t <= end:
            rounds.append(t)
            t += rng.expovariate(1 / burst_interval_s)
    else:
        rounds = [i * burst_interval_s for i in range(int(end / burst_interval_s) + 1)]
    bursts = [Flow(src, hot_receiver, burst_cdf.sample(rng) if burst_cdf else burst_bytes, t)
              for t in rounds for src in bursters]
    return VictimFlows(victims, congesting, bursts)


def _poisson(senders: list[str], destination, cdf: FlowSizeCdf, load: float, link_bps: float, flows: int,
             rng: random.Random) -> list[Flow]:
    """`flows` flows in start order, each sender opening flows to destination(sender) as a
    Poisson process whose rate makes its offered bytes `load` x its link rate."""
    per_host_rate = load * link_bps / 8 / cdf.mean()  # flows per second per host
    result: list[Flow] = []
    # Each host's first arrival too is an exponential wait from the start: at 0 every host's first
    # flow started at once, a burst of one flow per host (192 at the paper's scale, their DCTCP
    # flows stuck in timeouts) that no Poisson process makes.
    clocks = {h: rng.expovariate(per_host_rate) for h in senders}
    while len(result) < flows:
        src = min(clocks, key=clocks.__getitem__)  # the host whose next arrival is first
        start = clocks[src]
        result.append(Flow(src, destination(src), cdf.sample(rng), start))
        clocks[src] = start + rng.expovariate(per_host_rate)
    return result


def permutation(hosts: list[str], size: int, rng: random.Random, tor_of: dict[str, str] | None = None) -> list[Flow]:
    """Every host sends `size` bytes to one other host, every host receiving exactly one
    flow (a random derangement); with `tor_of` (host -> its ToR), never to a host under its
    own ToR (SprayPass: "to one of the other servers across different leaf switches")."""
    if len(hosts) < 2:
        raise ValueError("needs at least two hosts")
    if tor_of is None:
        while True:
            targets = hosts[:]
            rng.shuffle(targets)
            if all(src != dst for src, dst in zip(hosts, targets)):
                return [Flow(src, dst, size) for src, dst in zip(hosts, targets)]
    largest = max(Counter(tor_of[h] for h in hosts).values())
    if 2 * largest > len(hosts):
        raise ValueError(f"{largest} of {len(hosts)} hosts under one ToR: they cannot all send and receive across ToRs")
    # A uniformly shuffled assignment, then repaired: a host whose target shares its ToR swaps
    # targets with a random host for whom the swap is valid too. Rejection sampling alone would
    # almost never succeed at 24 ToRs of 10 (each sender's chance of a same-ToR target is 1 in 24).
    targets = hosts[:]
    rng.shuffle(targets)

    def fits(src: str, dst: str) -> bool:
        return tor_of[src] != tor_of[dst]

    for i, src in enumerate(hosts):
        while not fits(src, targets[i]):
            j = rng.randrange(len(hosts))
            if fits(src, targets[j]) and fits(hosts[j], targets[i]):
                targets[i], targets[j] = targets[j], targets[i]
    return [Flow(src, dst, size) for src, dst in zip(hosts, targets)]


def shuffle(hosts: list[str], tasks_per_host: int, size: int) -> list[Flow]:
    """The ExpressPass shuffle: each of a host's tasks sends `size` bytes to every other
    host (hosts x tasks x (hosts - 1) flows, all at once)."""
    return [Flow(src, dst, size) for src in hosts for _ in range(tasks_per_host) for dst in hosts if dst != src]


def convergence(receiver: str, senders: list[str], interval_s: float, rate_bytes_per_s: float) -> list[Flow]:
    """Senders start one by one, interval_s apart, toward `receiver` and stop in reverse order:
    the i-th (from 0) of N runs from i x interval to (2N - 1 - i) x interval. A flow cannot be
    told to stop, so each one's size is what fair sharing of `rate_bytes_per_s` gives it over
    that time: under a fair scheme the flows end when they should, and any unfairness shows
    as flows ending early or late (and in the throughput timeline)."""
    if receiver in senders:
        raise ValueError(f"the receiver {receiver} cannot be a sender")
    n = len(senders)
    if n < 1:
        raise ValueError("needs at least one sender")
    active = [min(j + 1, 2 * n - 1 - j) for j in range(2 * n - 1)]  # flows running in interval j
    return [Flow(src, receiver, max(1, round(sum(rate_bytes_per_s * interval_s / active[j]
                                                  for j in range(i, 2 * n - 1 - i)))), i * interval_s)
            for i, src in enumerate(senders)]
