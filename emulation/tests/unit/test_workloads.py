import random
import statistics

import pytest

from ccemu.model.workloads import (CDF_NAMES, FlowSizeCdf, host_load_for_tor_uplinks, incast_round, permutation,
                                  poisson_flows, shuffle)

HOSTS = [f"h{i}" for i in range(1, 17)]


def test_incast_splits_the_total_over_n_flows_to_the_aggregator_from_every_other_host():
    flows = incast_round(HOSTS, "h1", 32, 1_000_000, random.Random(1))
    assert len(flows) == 32 and {f.dst for f in flows} == {"h1"}
    assert {f.size for f in flows} == {31_250}
    senders = [f.src for f in flows]
    assert "h1" not in senders and set(senders) == set(HOSTS) - {"h1"}
    assert max(senders.count(h) for h in set(senders)) == 3  # 32 flows over 15 senders


def test_incast_refuses_an_aggregator_outside_the_topology():
    with pytest.raises(ValueError, match="h99 is not a host"):
        incast_round(HOSTS, "h99", 4, 1000, random.Random(1))


@pytest.mark.parametrize("name", CDF_NAMES)
def test_sampled_sizes_follow_the_cdf(name):
    cdf = FlowSizeCdf.named(name)
    rng = random.Random(7)
    sizes = [cdf.sample(rng) for _ in range(20_000)]
    assert statistics.fmean(sizes) == pytest.approx(cdf.mean(), rel=0.1)
    # The median of the samples sits where the CDF crosses 1/2.
    median = statistics.median(sizes)
    below = sum(1 for s in sizes if s <= median) / len(sizes)
    assert below == pytest.approx(0.5, abs=0.01)
    assert min(sizes) >= cdf.sizes[0] and max(sizes) <= cdf.sizes[-1]


def test_the_cdfs_have_the_papers_average_sizes():
    # The papers' reference (ExpressPass's workloads): 1.6 MB, 7.41 MB, 701 KB, 64 KB. Interpolating linearly
    # between the points gives 1.71 MB, 7.49 MB, 713 KB, 66 KB: within 7 %.
    means = {name: FlowSizeCdf.named(name).mean() for name in CDF_NAMES}
    assert means["search"] == pytest.approx(1.6e6, rel=0.07)
    assert means["mining"] == pytest.approx(7.41e6, rel=0.07)
    assert means["cachefollower"] == pytest.approx(701e3, rel=0.07)
    assert means["webserver"] == pytest.approx(64e3, rel=0.07)


def test_the_hadoop_cdf_has_nine_flows_in_ten_under_120_kb_as_tcd_says_of_it():
    cdf = FlowSizeCdf.named("hadoop")  # seed 004 line 156: "90% flows of the Hadoop workload are less than 120KB"
    rng = random.Random(12)
    sizes = [cdf.sample(rng) for _ in range(20_000)]
    assert sum(1 for s in sizes if s < 120_000) / len(sizes) == pytest.approx(0.9, abs=0.01)


@pytest.mark.parametrize("name", CDF_NAMES)
def test_poisson_arrivals_offer_the_target_load_within_5_percent_over_10k_flows(name):
    cdf, load, link_bps = FlowSizeCdf.named(name), 0.6, 10e6
    flows = poisson_flows(HOSTS, cdf, load, link_bps, 10_000, random.Random(3))
    span = max(f.start for f in flows)
    offered = sum(cdf.mean() for _ in flows) * 8 / span  # arrival rate x mean size
    assert offered == pytest.approx(load * link_bps * len(HOSTS), rel=0.05)
    assert all(f.src != f.dst for f in flows)
    assert [f.start for f in flows] == sorted(f.start for f in flows)


def test_each_hosts_first_flow_waits_an_exponential_time_too_so_no_burst_opens_the_workload():
    cdf, load, link_bps = FlowSizeCdf.named("webserver"), 0.5, 10e6
    hosts = [f"h{i}" for i in range(1, 193)]
    flows = poisson_flows(hosts, cdf, load, link_bps, 5000, random.Random(7))
    firsts = {}
    for f in flows:
        firsts.setdefault(f.src, f.start)
    assert len(firsts) == len(hosts) and min(firsts.values()) > 0
    assert len(set(firsts.values())) == len(hosts)  # no two at once
    mean_gap = cdf.mean() * 8 / (load * link_bps)  # 1 / each host's arrival rate
    assert statistics.fmean(firsts.values()) == pytest.approx(mean_gap, rel=0.2)


def test_generators_are_deterministic_under_a_seed_and_differ_across_seeds():
    cdf = FlowSizeCdf.named("webserver")
    run = lambda seed: poisson_flows(HOSTS, cdf, 0.5, 10e6, 500, random.Random(seed))  # noqa: E731
    assert run(5) == run(5) and run(5) != run(6)
    assert incast_round(HOSTS, "h1", 8, 800, random.Random(2)) == incast_round(HOSTS, "h1", 8, 800, random.Random(2))


def test_a_permutation_sends_one_flow_from_and_to_every_host_never_to_itself():
    flows = permutation(HOSTS, 1000, random.Random(4))
    assert sorted(f.src for f in flows) == sorted(HOSTS) == sorted(f.dst for f in flows)
    assert all(f.src != f.dst for f in flows)


def test_a_permutation_across_tors_sends_every_flow_out_of_its_senders_tor_as_seed_003_does():
    hosts = [f"h{i}" for i in range(1, 241)]
    tor_of = {h: f"leaf{(int(h[1:]) - 1) // 10}" for h in hosts}  # 24 leaves of 10, as SprayPass's fabric
    flows = permutation(hosts, 1000, random.Random(4), tor_of)
    assert sorted(f.src for f in flows) == sorted(hosts) == sorted(f.dst for f in flows)
    assert all(tor_of[f.src] != tor_of[f.dst] for f in flows)
    assert flows == permutation(hosts, 1000, random.Random(4), tor_of) != permutation(hosts, 1000, random.Random(5),
                                                                                       tor_of)


def test_a_permutation_across_tors_refuses_a_tor_holding_more_than_half_of_the_hosts():
    tor_of = {"h1": "a", "h2": "a", "h3": "a", "h4": "b"}
    with pytest.raises(ValueError, match="3 of 4 hosts under one ToR"):
        permutation(list(tor_of), 1000, random.Random(1), tor_of)


def test_the_shuffle_sends_each_task_to_every_other_host():
    flows = shuffle(HOSTS[:5], 8, 1_000_000)
    assert len(flows) == 5 * 8 * 4
    assert all(f.src != f.dst for f in flows)


def test_convergence_flows_start_one_by_one_and_are_sized_to_stop_in_reverse_order_under_fair_sharing():
    from ccemu.model.workloads import convergence

    flows = convergence("h1", ["h2", "h3", "h4"], interval_s=1.0, rate_bytes_per_s=1200)
    assert [f.start for f in flows] == [0.0, 1.0, 2.0]
    assert all(f.dst == "h1" for f in flows)
    # Intervals 0..4 have 1, 2, 3, 2, 1 flows. The first runs through all five, the last only the middle one.
    assert [f.size for f in flows] == [1200 + 600 + 400 + 600 + 1200, 600 + 400 + 600, 400]
    with pytest.raises(ValueError, match="cannot be a sender"):
        convergence("h1", ["h1"], 1.0, 1.0)


def test_a_load_on_the_tor_uplinks_of_a_3_to_1_k4_fat_tree_offers_a_third_of_it_from_each_host_and_a_bit_more():
    # A k=4 ToR: 2 hosts, 2 uplinks at a third of a host link. 14 of a host's 15 peers are under
    # other ToRs, so the uplinks carry 14/15 of what the hosts offer.
    x = host_load_for_tor_uplinks(0.6, (2, 2), 16, 1 / 3)
    assert x == pytest.approx(0.6 / 3 * 15 / 14)
    assert 2 * x * 14 / 15 == pytest.approx(0.6 * 2 / 3)  # the uplinks' load, in host links


def test_a_load_on_the_tor_uplinks_is_refused_without_uplinks_or_with_one_tor():
    with pytest.raises(ValueError, match="needs a topology whose hosts' switches have uplinks"):
        host_load_for_tor_uplinks(0.5, None, 4, 1.0)
    with pytest.raises(ValueError, match="every host is under one ToR"):
        host_load_for_tor_uplinks(0.5, (4, 1), 4, 1.0)
