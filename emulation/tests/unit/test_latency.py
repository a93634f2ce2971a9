"""The idle fabric's RTT floor read from ping's output (fabric/latency.py), without a fabric."""

import pytest

import json

from ccemu.fabric.latency import DelayPlan, _median_by_length, _parse, sampled_pairs, write_delay_tables
from ccemu.model.routing import Routing
from ccemu.model.topology import fat_tree
from ccemu.model.dilation import PairDelay, Serialization

PING_OUTPUT = """# h2
64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=9.10 ms
64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=2.10 ms
64 bytes from 10.0.0.2: icmp_seq=3 ttl=64 time=6.40 ms
64 bytes from 10.0.0.2: icmp_seq=4 ttl=64 time=5.90 ms
# h3
64 bytes from 10.0.0.3: icmp_seq=1 ttl=64 time=0.90 ms
64 bytes from 10.0.0.3: icmp_seq=2 ttl=64 time=3.00 ms
"""


def test_a_pairs_floor_is_its_least_ping_but_the_first_so_a_busy_moment_cannot_raise_it():
    rtts = _parse("h1", PING_OUTPUT)
    # h2: two of three later pings were slowed (6.4, 5.9 ms): the median (5.9) would be the busy
    # moment's, the least (2.1) is the fabric's. The first ping (9.1 ms: OVS's slow path) is dropped.
    assert rtts[("h1", "h2")] == pytest.approx(2.10e-3)
    # h3: the first is dropped even when it is the least (0.9 ms).
    assert rtts[("h1", "h3")] == pytest.approx(3.00e-3)


def test_a_pair_that_answered_once_keeps_that_one_ping():
    one = "# h4\n64 bytes from x: icmp_seq=1 ttl=64 time=4.5 ms\n"
    assert _parse("h1", one) == {("h1", "h4"): pytest.approx(4.5e-3)}


def test_each_host_gets_a_delay_table_of_half_what_its_pairs_lack_and_none_with_nothing_to_add(tmp_path):
    # h1-h2 lack 3 ms of their 4 ms RTT: each end holds the other's packets 1.5 ms; h1-h3 lack nothing.
    pairs = [PairDelay("h1", "h2", 0.001, 0.004), PairDelay("h1", "h3", 0.005, 0.004)]
    plan = DelayPlan(pairs, {("h1", "h2"): 2, ("h1", "h3"): 4}, delayed=True)
    tables = write_delay_tables(plan, tmp_path / "delays")
    assert sorted(tables) == ["h1", "h2"]
    assert [json.loads(line) for line in tables["h2"].read_text().splitlines()] == [
        {"src": 1, "delay_us": 1500.0, "link_ns_per_byte": []}]
    assert [json.loads(line) for line in tables["h1"].read_text().splitlines()] == [
        {"src": 2, "delay_us": 1500.0, "link_ns_per_byte": []}]
    assert plan.too_slow() == [pairs[1]]
    # Without datacenter delays (no targets) and nothing to serialize: no table at all.
    undelayed = DelayPlan([PairDelay("h1", "h2", 0.001, 0.0), PairDelay("h1", "h3", 0.005, 0.0)], plan.links,
                          delayed=False)
    assert write_delay_tables(undelayed, tmp_path / "none") == {} and not (tmp_path / "none").exists()
    assert undelayed.too_slow() == []


def test_without_datacenter_delays_each_host_still_holds_packets_for_their_serialization(tmp_path):
    # h1-h3 over 4 links at 10 Mbit/s: 800 ns a byte at each; no propagation to add. h3 sends at half the rate (its
    # share): its first link takes 1600 ns a byte.
    there, back = Serialization.of([10e6] * 4), Serialization.of([5e6, 10e6, 10e6, 10e6])
    assert (there.ns_per_byte, back.ns_per_byte) == pytest.approx((3200, 4000))
    pairs = [PairDelay("h1", "h3", 0.005, 0.0, there, back)]
    tables = write_delay_tables(DelayPlan(pairs, {("h1", "h3"): 4}, delayed=False), tmp_path / "delays")
    assert [json.loads(line) for line in tables["h3"].read_text().splitlines()] == [
        {"src": 1, "delay_us": 0.0, "link_ns_per_byte": [800, 800, 800, 800]}]
    assert [json.loads(line) for line in tables["h1"].read_text().splitlines()] == [
        {"src": 3, "delay_us": 0.0, "link_ns_per_byte": [1600, 800, 800, 800]}]


def test_up_to_256_pairs_every_pair_is_measured():
    routing = Routing(fat_tree(4))
    hosts = routing.topo.host_names
    pairs = [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1:]]
    links = {pair: len(routing.path(*pair, 0)) + 1 for pair in pairs}
    assert sampled_pairs(pairs, links) == pairs


def test_192_hosts_measure_16_pairs_per_path_length_and_each_pair_takes_its_lengths_median():
    routing = Routing(fat_tree(8, hosts_per_edge=6, uplinks=2))
    hosts = routing.topo.host_names
    pairs = [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1:]]
    links = {pair: len(routing.path(*pair, 0)) + 1 for pair in pairs}
    sample = sampled_pairs(pairs, links)
    assert len(pairs) == 18336 and len(sample) == 3 * 16  # 2, 4 and 6 links between hosts
    assert sorted(links[p] for p in sample) == [2] * 16 + [4] * 16 + [6] * 16
    assert len({src for src, _ in sample}) > 16  # spread over the sources, not one host's pings
    floors = {pair: links[pair] * 1e-4 + (1e-3 if i == 0 else 0.0) for i, pair in enumerate(sample)}
    every = _median_by_length(floors, pairs, links)
    assert set(every) == set(pairs)
    assert every[("h1", "h2")] == pytest.approx(2e-4) and every[("h1", "h192")] == pytest.approx(6e-4)
