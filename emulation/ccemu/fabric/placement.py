"""Where the fabric's OVS instances run: how many, and on which CPUs (pure, no I/O but reading
which CPUs this process may use).

An instance forwards every packet of its switches in one thread (ovs.py), so a fabric's
capacity is its instances' forwarding threads. Measured with `ccemu bench capacity` (k=4
fat-tree, 8 cross-pod TCP pairs, the highest rate per link at which every pair gets >= 0.95):
- 16 cores: 8 instances unpinned 100 Mbit/s; 16 unpinned only 50 (the scheduler stacks busy
  forwarding threads on one CPU and moves them about); 16 pinned one per CPU 150.
- 2 cores: see emulation/README.md "Userspace OVS on 2 CPUs" for the table this module's rule follows.
- 2 cores: pinning gains nothing measurable (10 Mbit/s either way, same section), and it costs
  the hosts: cchost's delay line then delivers late (a k=4 path's RTT 1.14-1.25 of the
  configured, against 1.04-1.05 unpinned, tests/live/test_datacenter_time_live.py), since a
  host's wake-up must wait for the forwarding thread that owns its CPU.
So `pin_ovs: auto` pins from PIN_FROM_CPUS usable CPUs on (between 2 and 16 nothing was
measured: the threshold is a choice), leaving the hosts the room the kernel finds. Pinned,
instance i runs on the i-th CPU ccemu may use, round robin when there are more instances than
CPUs (fabrics of more than 5 switches per CPU: fewer ports per instance shorten every wake-up,
which the idle RTT shows). Every thread of both daemons is pinned (threads OVS starts later
inherit the main thread's CPU). Hosts are not pinned.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..model.config import FabricConfig

PIN_FROM_CPUS = 8  # `pin_ovs: auto` pins on machines with at least this many usable CPUs


@dataclass(frozen=True)
class Placement:
    cpus: tuple[int | None, ...]  # per instance: the CPU it is pinned to (None: wherever the kernel puts it)

    @property
    def instances(self) -> int:
        return len(self.cpus)

    @property
    def pinned(self) -> bool:
        return any(cpu is not None for cpu in self.cpus)

    def __str__(self) -> str:
        count = f"{self.instances} OVS instance{'s' if self.instances > 1 else ''}"
        if not self.pinned:
            return f"{count}, unpinned"
        return f"{count} pinned to CPU{'s' if self.instances > 1 else ''} {','.join(map(str, self.cpus))}"


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (a container's or taskset's limit, not the machine's)."""
    return sorted(os.sched_getaffinity(0))


def place(fabric: FabricConfig, switches: int, cpus: Sequence[int]) -> Placement:
    instances = fabric.instance_count(switches)
    if fabric.pin_ovs is False or not cpus or (fabric.pin_ovs == "auto" and len(cpus) < PIN_FROM_CPUS):
        return Placement((None,) * instances)
    return Placement(tuple(cpus[i % len(cpus)] for i in range(instances)))
