"""What a kernel can emulate, as the pure model sees it: given, never probed here (fabric/kernel.py
reads this machine's)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KernelFeatures:
    openvswitch: bool  # the OVS kernel datapath; otherwise OVS runs in userspace (netdev)


# A kernel without loadable modules (this project's CI machines): what a pure caller that was
# given no probed kernel assumes (model/config's `datapath: auto` then means bpf).
NO_KERNEL_MODULES = KernelFeatures(openvswitch=False)
