import pytest

from ccemu.results.stats import (histogram_cdf, histogram_mean, jain_fairness, median_interval, percentile, size_bucket,
                                 wilson_interval)


def test_sizes_fall_in_the_papers_buckets():
    assert [size_bucket(s) for s in (0, 9_999, 10_000, 99_999, 100_000, 999_999, 1_000_000, 10**9)] == \
        ["S", "S", "M", "M", "L", "L", "XL", "XL"]


def test_percentiles_interpolate_between_ranks_like_numpy():
    values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert percentile(values, 50) == 5.5
    assert percentile(values, 99) == pytest.approx(9.91)
    assert percentile(values, 0) == 1 and percentile(values, 100) == 10
    assert percentile([42], 99) == 42


def test_queue_histograms_give_their_cdf_and_mean():
    counts = [2, 0, 2]
    assert histogram_cdf(counts, 100) == [(100, 0.5), (200, 0.5), (300, 1.0)]
    assert histogram_mean(counts, 100) == 150
    assert histogram_cdf([0, 0], 10) == []


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
