"""Did the emulation keep up? A verdict per run from what the machine and the fabric report:

- hypervisor steal and CPU saturation (/proc/stat, over the run);
- the bottleneck ports' lag: how far their real queue was from an ideal port's at every
  enqueue (the port programs measure both: bpf/port.bpf.c), i.e. whether the links drained
  at their configured rate;
- cchost's pacing: how late its timers fired, against the credit gap.

PASS, WARN or FAIL with the reasons; the worst finding decides."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
_RANK = {PASS: 0, WARN: 1, FAIL: 2}

# Steal only hints (it is seen here from 0 to 36 % per run); the lag and the pacing say
# whether it hurt.
STEAL_WARN, STEAL_FAIL = 0.15, 0.35
BUSY_WARN = 0.95
# A fluid queue drains a frame bit by bit, a real port holds it whole until it is sent: about
# one frame of difference is the model, not lag (measured 0.6-0.8 frames on a quiet machine).
LAG_WARN_FRAMES, LAG_FAIL_FRAMES = 2.0, 4.0
PACING_WARN, PACING_FAIL = 0.25, 1.0  # mean timer lateness / credit gap


def worst(a: str, b: str) -> str:
    return a if _RANK[a] >= _RANK[b] else b


@dataclass(frozen=True)
class CpuTimes:
    busy: int
    idle: int
    steal: int

    @classmethod
    def now(cls, stat: Path = Path("/proc/stat")) -> "CpuTimes":
        fields = [int(v) for v in stat.read_text().splitlines()[0].split()[1:]]
        user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
        return cls(busy=user + nice + system + irq + softirq, idle=idle + iowait, steal=steal)

    def since(self, earlier: "CpuTimes") -> tuple[float, float]:
        """(steal share, busy share) of all CPU time in between."""
        busy, idle, steal = self.busy - earlier.busy, self.idle - earlier.idle, self.steal - earlier.steal
        total = max(1, busy + idle + steal)
        return steal / total, busy / total


@dataclass
class Verdict:
    status: str = PASS
    reasons: list[str] = field(default_factory=list)
    figures: dict[str, float] = field(default_factory=dict)

    def judge(self, name: str, value: float, warn: float, fail: float | None, what: str) -> None:
        self.figures[name] = round(value, 4)
        status = FAIL if fail is not None and value >= fail else WARN if value >= warn else PASS
        if status != PASS:
            self.reasons.append(f"{status}: {what}")
        self.status = worst(self.status, status)

    def as_dict(self) -> dict:
        return {"status": self.status, "reasons": self.reasons, "figures": self.figures}


def judge(steal: float, busy: float, lag_bytes: float, frame_bytes: int, lateness_us: float | None,
          credit_gap_us: float | None) -> Verdict:
    verdict = Verdict()
    verdict.judge("steal", steal, STEAL_WARN, STEAL_FAIL, f"hypervisor steal took {steal:.0%} of the CPU time")
    verdict.judge("cpu_busy", busy, BUSY_WARN, None, f"CPUs {busy:.0%} busy: the emulation may have fallen behind")
    verdict.judge("bottleneck_lag_frames", lag_bytes / frame_bytes, LAG_WARN_FRAMES, LAG_FAIL_FRAMES,
                  f"bottleneck queues were {lag_bytes:.0f} B on average away from an ideal port's "
                  f"({lag_bytes / frame_bytes:.1f} frames): links drained slower than configured")
    if lateness_us is not None and credit_gap_us:
        verdict.judge("pacing_lateness_of_gap", lateness_us / credit_gap_us, PACING_WARN, PACING_FAIL,
                      f"cchost timers fired {lateness_us:.0f} us late on average, credit gap {credit_gap_us:.0f} us")
    return verdict
