"""What forwards between a switch's ports, and how the OVS daemons are placed."""

from __future__ import annotations

import math
import os
from typing import Literal, Union

from pydantic import Field, field_validator

from ..kernel import KernelFeatures
from .base import Section
from ..excerpt import shown

SWITCHES_PER_INSTANCE = 5
# The memory allocators ovs-vswitchd can run with (fabric/allocators.py preloads them):
# name -> (library to preload, Debian package that brings it); glibc: no preload.
ALLOCATORS: dict[str, tuple[str, str] | None] = {
    "glibc": None,
    "jemalloc": ("libjemalloc.so.2", "libjemalloc2"),
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
}
# fabric.datapath's names: what forwards between a switch's ports (FabricConfig.datapath says which is which).
DATAPATHS = ("auto", "ovs", "bpf")


class FabricConfig(Section):
    # auto: userspace OVS forwards 5x less than the bpf datapath here (k=4, every pair >= 0.95 up to 15
    # Mbit/s per link against 75; emulation/README.md "This machine's limits"), so it runs only where asked for.
    datapath: Literal[DATAPATHS] = Field(
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
    # emulation/README.md "This machine's limits").
    ovs_allocator: Literal[tuple(ALLOCATORS)] = Field(
        "jemalloc", description="the memory allocator ovs-vswitchd runs with (jemalloc, tcmalloc: preloaded from "
                                "their Debian packages; glibc: its own); it allocates and frees buffers for every "
                                "packet it forwards")

    @field_validator("ovs_instances", mode="before")
    @classmethod
    def _auto_or_count(cls, value: object) -> int | str:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 64):
            return value
        raise ValueError(f"must be 'auto' or a whole number from 1 to 64 (got {shown(value)})")

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
