"""What this kernel can emulate, read from its build configuration (no root needed); the pure model
only ever receives the result (model/kernel.py)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from ..model.kernel import KernelFeatures


def probe_kernel() -> KernelFeatures:
    """This machine's kernel's features, from its build configuration."""
    options = _read_kernel_config()
    if options is None:
        # No config to read: assume the stock features of a distribution kernel.
        return KernelFeatures(openvswitch=Path("/sys/module/openvswitch").exists())
    return KernelFeatures(openvswitch=_available(options, "CONFIG_OPENVSWITCH", "openvswitch"))


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

