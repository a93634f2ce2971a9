"""Statistics of a run: flow-size buckets, percentiles, per-bucket FCT summaries, queue-length
distributions from the port programs' histograms."""

from __future__ import annotations

import math
from collections.abc import Sequence

# The papers' flow-size buckets (ExpressPass's realistic workloads): S < 10 KB, M 10-100 KB, L 100 KB-1 MB, XL > 1 MB.
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


def histogram_cdf(counts: Sequence[int], upper_edges: Sequence[float]) -> list[tuple[float, float]]:
    """(a bucket's upper edge, cumulative fraction of the counts) for every bucket up to the last
    that holds any."""
    total = sum(counts)
    if not total:
        return []
    last = max(i for i, count in enumerate(counts) if count)
    cumulative, points = 0, []
    for count, edge in zip(counts[:last + 1], upper_edges):
        cumulative += count
        points.append((edge, cumulative / total))
    return points


def jain_fairness(rates: Sequence[float]) -> float:
    return sum(rates) ** 2 / (len(rates) * sum(r * r for r in rates)) if any(rates) else 0.0


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95 % (z = 1.96) Wilson score interval of a proportion: unlike p +- z sqrt(p(1-p)/n) it
    stays inside [0, 1] and keeps a width at 0 or n successes (TCD's 0 % of victims marked)."""
    if trials <= 0:
        raise ValueError("a proportion needs at least one trial")
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z / (1 + z * z / trials) * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return max(0.0, centre - half), min(1.0, centre + half)


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """A distribution-free interval for the median of what `values` sample: the order statistics
    (x_(j), x_(n+1-j)) with the largest j whose coverage, 1 - 2 P(Binomial(n, 1/2) < j), is at least
    `confidence`; with too few values for that, the smallest and largest and their own (lower)
    coverage. Returns (low, high, coverage). Five runs cover the median 94 % of the time between their
    extremes; six reach 95 %."""
    if not values:
        raise ValueError("an interval of no values")
    ordered, n = sorted(values), len(values)
    below = [math.comb(n, i) / 2 ** n for i in range(n + 1)]  # P(Binomial(n, 1/2) = i)
    j = 1
    while j + 1 <= (n + 1) // 2 and 1 - 2 * sum(below[:j + 1]) >= confidence:
        j += 1
    return ordered[j - 1], ordered[n - j], 1 - 2 * sum(below[:j])
