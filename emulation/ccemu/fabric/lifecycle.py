"""What every fabric shares, on one machine (fabric/net.py) or split over several
(machines/fabric.py): `with fabric:` up and down, the bring-up's phases timed, the errors it raises."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


class FabricError(RuntimeError):
    pass


class LeftoversError(FabricError):
    """Teardown could not remove everything the run created."""


@dataclass
class Timings:
    """Seconds spent per bring-up phase, for the benchmark and `ccemu check`."""

    phases: dict[str, float] = field(default_factory=dict)
    _last: float = field(default_factory=time.monotonic)

    def mark(self, phase: str) -> None:
        now = time.monotonic()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self._last
        self._last = now

    @property
    def total(self) -> float:
        return sum(self.phases.values())


class UpWhileInside:
    """`with fabric:` brings it up and tears it down, also when the bring-up fails half way."""

    def bring_up(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        try:
            self.bring_up()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
