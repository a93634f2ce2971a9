"""Statistics of a run: flow-size buckets, percentiles, per-bucket FCT summaries, queue-length
distributions from the port programs' exact histograms."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# The papers' buckets (../shared/reference/README.md): S < 10 KB, M 10-100 KB, L 100 KB-1 MB, XL > 1 MB.
BUCKETS = (("S", 0, 10_000), ("M", 10_000, 100_000), ("L", 100_000, 1_000_000), ("XL", 1_000_000, math.inf))


def size_bucket(size: int) -> str:
    for name, low, high in BUCKETS:
        if low <= size < high:
            return name
    raise ValueError(f"size must be >= 0 (got {size})")


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between closest ranks (numpy's
    default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100] (got {q})")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class FctSummary:
    flows: int
    mean: float
    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, fcts: Sequence[float]) -> "FctSummary":
        return cls(len(fcts), sum(fcts) / len(fcts), percentile(fcts, 50), percentile(fcts, 99), max(fcts))


def fct_by_bucket(flows: Iterable[tuple[int, float]]) -> dict[str, FctSummary]:
    """(size, fct) pairs -> summary per size bucket, buckets in order, empty ones left out."""
    grouped: dict[str, list[float]] = {name: [] for name, _, _ in BUCKETS}
    for size, fct in flows:
        grouped[size_bucket(size)].append(fct)
    return {name: FctSummary.of(fcts) for name, fcts in grouped.items() if fcts}


def histogram_cdf(counts: Sequence[int], bucket_bytes: int) -> list[tuple[float, float]]:
    """(queue bytes at the bucket's upper edge, cumulative fraction of enqueues) per bucket."""
    total = sum(counts)
    if not total:
        return []
    cumulative, points = 0, []
    for i, count in enumerate(counts):
        cumulative += count
        points.append(((i + 1) * bucket_bytes, cumulative / total))
    return points


def histogram_mean(counts: Sequence[int], bucket_bytes: int) -> float:
    """Mean queue length at enqueue, bucket midpoints."""
    total = sum(counts)
    return sum((i + 0.5) * bucket_bytes * c for i, c in enumerate(counts)) / total if total else 0.0


def jain_fairness(rates: Sequence[float]) -> float:
    return sum(rates) ** 2 / (len(rates) * sum(r * r for r in rates)) if any(rates) else 0.0
