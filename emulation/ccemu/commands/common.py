"""What several commands share: where bundles go, and the root they need."""

from __future__ import annotations

import os
from pathlib import Path

RESULTS = Path("results")  # where bundles go, and where `dilation: auto` finds this machine's capacity


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise SystemExit(f"ccemu {what}: needs root (it creates network namespaces and OVS bridges)")
