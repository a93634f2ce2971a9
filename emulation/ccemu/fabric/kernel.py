"""What this kernel can emulate, read from its build configuration (no root needed)."""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class KernelFeatures:
    openvswitch: bool  # the OVS kernel datapath; otherwise OVS runs in userspace (netdev)

    @classmethod
    def probe(cls) -> "KernelFeatures":
        options = _read_kernel_config()
        if options is None:
            # No config to read: assume the stock features of a distribution kernel.
            return cls(openvswitch=Path("/sys/module/openvswitch").exists())
        return cls(openvswitch=_available(options, "CONFIG_OPENVSWITCH", "openvswitch"))


def _available(options: dict[str, str], option: str, module: str) -> bool:
    value = options.get(option)
    if value == "y":
        return True
    # A module only counts if it is loaded or loadable here.
    return value == "m" and (
        Path(f"/sys/module/{module}").exists() or Path(f"/lib/modules/{os.uname().release}").is_dir()
    )


def _read_kernel_config() -> dict[str, str] | None:
    candidates = [Path("/proc/config.gz"), Path(f"/boot/config-{os.uname().release}")]
    for path in candidates:
        try:
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        except OSError:
            continue
        options = {}
        for line in raw.decode(errors="replace").splitlines():
            if line.startswith("CONFIG_") and "=" in line:
                key, _, value = line.partition("=")
                options[key] = value
        return options
    return None


# A kernel without loadable modules (this project's CI machines): what a pure caller that was
# given no probed kernel assumes (model/config's `datapath: auto` then means bpf).
NO_KERNEL_MODULES = KernelFeatures(openvswitch=False)
