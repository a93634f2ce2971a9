"""The port programs' log-linear histograms (bpf/port.h): where each bucket starts and ends, and
quantiles read from them (pure: the results layer reads bundles' histograms with it too)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

# Bucket 0 holds values under 2^first_log2, then SUB_BUCKETS per doubling, the last bucket the rest.
SUB_BUCKETS = 4  # 1 << LOG_SUB_BUCKETS_LOG2
RESIDENCE_BUCKETS = 96  # PORT_RESIDENCE_BUCKETS
RESIDENCE_FIRST_LOG2 = 10  # bucket 0: under 2^10 ns
QUEUE_BUCKETS = 80  # PORT_QUEUE_BUCKETS
QUEUE_FIRST_LOG2 = 6  # bucket 0: under 64 B


def log_linear_bounds(bucket: int, first_log2: int, buckets: int) -> tuple[float, float]:
    """[low, high) of a bucket of a log-linear histogram of bpf/port.h (port.bpf.c
    log_linear_bucket); the last bucket's high is infinite (it holds the rest)."""
    if not 0 <= bucket < buckets:
        raise ValueError(f"bucket {bucket} is not in [0, {buckets})")
    if bucket == 0:
        return 0.0, float(1 << first_log2)
    octave, sub = divmod(bucket - 1, SUB_BUCKETS)
    base = float(1 << (first_log2 + octave))
    high = base * (1 + (sub + 1) / SUB_BUCKETS) if bucket < buckets - 1 else float("inf")
    return base * (1 + sub / SUB_BUCKETS), high


def queue_bucket_bounds(bucket: int) -> tuple[float, float]:
    """[low, high) of a queue-length bucket in bytes."""
    return log_linear_bounds(bucket, QUEUE_FIRST_LOG2, QUEUE_BUCKETS)


def histogram_quantile(counts: Sequence[int], q: float, bounds: Callable[[int], tuple[float, float]],
                       largest: float) -> float:
    """The q-quantile of a log-linear histogram, interpolated inside its bucket (the last bucket up
    to `largest`, the largest value seen), by `bounds(bucket)`. 0 for an empty one."""
    total = sum(counts)
    if not total:
        return 0.0
    rank, seen = q * total, 0
    for bucket, count in enumerate(counts):
        if count and seen + count >= rank:
            low, high = bounds(bucket)
            high = min(high, max(low, float(largest)))
            return low + (high - low) * (rank - seen) / count
        seen += count
    return float(largest)


def residence_bucket_bounds(bucket: int) -> tuple[float, float]:
    """[low, high) of a residence bucket in ns."""
    return log_linear_bounds(bucket, RESIDENCE_FIRST_LOG2, RESIDENCE_BUCKETS)


