"""Waiting for a condition without a fixed sleep."""

from __future__ import annotations

import time
from typing import Callable


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.01) -> bool:
    """Poll `condition` until it holds (True) or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True
