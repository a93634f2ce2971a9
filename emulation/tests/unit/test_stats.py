import pytest

from ccemu.ports.histograms import QUEUE_BUCKETS, histogram_quantile, queue_bucket_bounds
from ccemu.results.stats import histogram_cdf, jain_fairness, median_interval, percentile, size_bucket, wilson_interval


def test_sizes_fall_in_the_papers_buckets():
    assert [size_bucket(s) for s in (0, 9_999, 10_000, 99_999, 100_000, 999_999, 1_000_000, 10**9)] == \
        ["S", "S", "M", "M", "L", "L", "XL", "XL"]


def test_percentiles_interpolate_between_ranks_like_numpy():
    values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert percentile(values, 50) == 5.5
    assert percentile(values, 99) == pytest.approx(9.91)
    assert percentile(values, 0) == 1 and percentile(values, 100) == 10
    assert percentile([42], 99) == 42


def test_queue_histograms_give_their_cdf_at_each_buckets_upper_edge_up_to_the_last_that_holds_any():
    counts = [2, 0, 2, 0]
    assert histogram_cdf(counts, [100, 200, 300, 400]) == [(100, 0.5), (200, 0.5), (300, 1.0)]
    assert histogram_cdf([0, 0], [10, 20]) == []


def test_queue_buckets_are_a_quarter_of_a_doubling_wide_from_64_bytes_and_a_credit_and_a_frame_fall_apart():
    assert queue_bucket_bounds(0) == (0.0, 64.0)
    assert [queue_bucket_bounds(b) for b in (1, 2, 3, 4, 5)] == [(64.0, 80.0), (80.0, 96.0), (96.0, 112.0),
                                                                 (112.0, 128.0), (128.0, 160.0)]
    assert queue_bucket_bounds(QUEUE_BUCKETS - 1)[1] == float("inf")  # the last holds the rest

    def bucket(size):
        return next(b for b in range(QUEUE_BUCKETS) if size < queue_bucket_bounds(b)[1])
    assert bucket(84) == 2 and bucket(1538) != bucket(2 * 1538) != bucket(84)
    for b in range(1, QUEUE_BUCKETS - 1):  # each bucket at most a quarter of its lower edge wide
        low, high = queue_bucket_bounds(b)
        assert queue_bucket_bounds(b + 1)[0] == high and high - low <= low / 4


def test_a_quantile_of_a_log_histogram_interpolates_inside_its_bucket_and_never_passes_the_largest_value():
    counts = [0] * QUEUE_BUCKETS
    counts[2] = 10  # ten credits: 80-96 B
    assert histogram_quantile(counts, 0.5, queue_bucket_bounds, largest=84) == pytest.approx(80 + 4 * 0.5)
    assert histogram_quantile(counts, 1.0, queue_bucket_bounds, largest=84) == 84
    assert histogram_quantile([0] * QUEUE_BUCKETS, 0.5, queue_bucket_bounds, largest=0) == 0


def test_jain_index_is_one_for_equal_shares_and_one_over_n_for_a_hog():
    assert jain_fairness([3, 3, 3]) == pytest.approx(1)
    assert jain_fairness([1, 0, 0, 0]) == pytest.approx(0.25)


def test_a_proportions_wilson_interval_stays_in_0_1_and_keeps_a_width_at_none_and_all():
    assert wilson_interval(15, 100) == pytest.approx((0.0931, 0.2328), abs=1e-4)  # the textbook's 15 of 100
    assert wilson_interval(0, 100) == pytest.approx((0.0, 0.0370), abs=1e-4)
    assert wilson_interval(100, 100) == pytest.approx((0.9630, 1.0), abs=1e-4)
    low, high = wilson_interval(3, 7)
    assert low < 3 / 7 < high
    with pytest.raises(ValueError):
        wilson_interval(0, 0)


def test_the_interval_of_the_median_is_the_narrowest_pair_of_order_statistics_that_covers_it_95_percent():
    # Coverage of (x_(j), x_(n+1-j)) is 1 - 2 P(Binomial(n, 1/2) < j): five runs reach 94 % between
    # their extremes, nine reach 96 % between the 2nd and the 8th (the 3rd and 7th: 82 %).
    assert median_interval([5, 1, 4, 2, 3]) == (1, 5, pytest.approx(0.9375))
    assert median_interval(list(range(1, 10))) == (2, 8, pytest.approx(0.9609, abs=1e-4))
    assert median_interval([7.0]) == (7.0, 7.0, 0.0)  # one run says nothing of the spread
    assert median_interval([1, 2, 3], confidence=0.5) == (1, 3, 0.75)  # j = 2 would be the median alone: 0
    with pytest.raises(ValueError):
        median_interval([])
