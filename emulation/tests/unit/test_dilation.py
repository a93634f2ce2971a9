"""Datacenter time: the dilation arithmetic and how a config declares it."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
import yaml

from ccemu.model.kernel import KernelFeatures
from ccemu.model.config import ConfigError, parse_config, read_yaml
from ccemu.model.dilation import (DATA_WIRE_BYTES, Dilation, FaithfulRates, PairDelay, Serialization, auto_dilation,
                                  bdp_packets, delay_lines, ideal_fct_s, one_way_delay_us, wire_bytes)

NO_MODULES = KernelFeatures(openvswitch=False)


def experiment(**sections):
    """`dilation: auto` below follows userspace OVS's figures (DEFAULT_FAITHFUL["ovs"]) unless a test
    names another datapath."""
    return parse_config({"name": "t", "topology": {"kind": "fattree", "k": 4}, "fabric": {"datapath": "ovs"},
                         **sections}, kernel=NO_MODULES)


def test_a_dilated_link_runs_at_the_datacenter_rate_divided_by_the_factor():
    config = experiment(datacenter={"link_gbps": 10, "dilation": 1000})
    assert config.link.rate_mbps == pytest.approx(10.0)
    assert config.dilation.factor == 1000
    assert config.datacenter_rate_bps == pytest.approx(10e9)


def test_an_experiment_without_a_datacenter_is_not_dilated():
    config = experiment(link={"rate_mbps": 7})
    assert config.dilation.factor == 1
    assert config.datacenter_rate_bps == pytest.approx(7e6)


def test_times_are_multiplied_and_reported_back_divided_by_the_factor():
    d = Dilation(1000)
    assert d.wall_s(52e-6) == pytest.approx(0.052)  # ExpressPass's 52 us RTT takes 52 ms of wall time
    assert d.datacenter_s(0.8) == pytest.approx(0.8e-3)
    assert d.wall_mbps(10) == pytest.approx(10.0)
    with pytest.raises(ValueError, match="finite and >= 1"):
        Dilation(0.5)


def test_auto_picks_the_smallest_round_factor_that_keeps_links_and_the_fabric_faithful():
    ten = FaithfulRates(10, 40, "userspace OVS here")  # one link 10 Mbit/s, 40 in all
    assert auto_dilation(10, 1, ten) == 1000  # one busy link: 10 Mbit/s
    assert auto_dilation(1, 1, ten) == 100
    assert auto_dilation(0.005, 1, ten) == 1  # slower than the machine's limit: not dilated
    assert auto_dilation(10, 16, ten) == 4000  # 16 hosts sending: 2.5 Mbit/s each, 40 in all
    assert auto_dilation(10, 16 * 0.8, ten) == 4000  # 3.125 Mbit/s allowed: 2.5 is the next round rate
    assert auto_dilation(40, 1, ten) == 4000
    assert auto_dilation(3, 1, ten) == 400  # 300 needed: 400 is the next of 1, 2, 2.5, 4, 5 x 10^n


def test_auto_counts_the_hosts_a_workload_keeps_sending():
    permutation = experiment(datacenter={"link_gbps": 10}, workload={"kind": "permutation"})
    incast = experiment(datacenter={"link_gbps": 1}, workload={"kind": "incast"})
    assert permutation.dilation.factor == 4000 and permutation.link.rate_mbps == pytest.approx(2.5)
    assert incast.dilation.factor == 100 and incast.link.rate_mbps == pytest.approx(10)


def test_auto_follows_the_figures_of_the_datapath_the_fabric_runs():
    """Nothing measured: the bpf datapath's 25 Mbit/s per link and 100 in all, where this kernel
    (no openvswitch module) makes `auto` the bpf datapath; userspace OVS's 10 and 40 where asked for."""
    for datapath in ("auto", "bpf"):
        convergence = experiment(datacenter={"link_gbps": 10}, workload={"kind": "convergence"},
                                 fabric={"datapath": datapath})
        permutation = experiment(datacenter={"link_gbps": 10}, workload={"kind": "permutation"},
                                 fabric={"datapath": datapath})
        assert convergence.dilation.factor == 400 and convergence.link.rate_mbps == pytest.approx(25)
        assert permutation.dilation.factor == 2000 and permutation.link.rate_mbps == pytest.approx(5)
    ovs = experiment(datacenter={"link_gbps": 10}, workload={"kind": "permutation"}, fabric={"datapath": "ovs"})
    assert ovs.dilation.factor == 4000
    with_ovs_module = parse_config({"name": "t", "topology": {"kind": "fattree", "k": 4}, "datacenter": {
        "link_gbps": 10}, "workload": {"kind": "permutation"}}, kernel=KernelFeatures(openvswitch=True))
    assert with_ovs_module.dilation.factor == 4000  # auto: OVS's kernel datapath, with OVS's figures


def test_the_expresspass_setting_gives_52_us_of_rtt_over_six_links():
    assert 2 * one_way_delay_us(6, link_delay_us=4, host_delay_us=1) == pytest.approx(52)


def test_the_bdp_in_packets_is_the_same_at_any_dilation():
    dc = bdp_packets(10e9, 52e-6)
    assert dc == pytest.approx(10e9 * 52e-6 / 8 / DATA_WIRE_BYTES)
    d = Dilation(1000)
    assert bdp_packets(10e9 / d.factor, d.wall_s(52e-6)) == pytest.approx(dc)


def test_the_ideal_fct_over_one_link_is_half_the_rtt_plus_the_wire_bytes_at_the_link_rate():
    assert wire_bytes(1450) == 1538 and wire_bytes(1451) == 1451 + 2 * 88 and wire_bytes(1) == 89
    assert ideal_fct_s(14500, [10e9], 52e-6) == pytest.approx(26e-6 + 10 * 1538 * 8 / 10e9)
    # Dilation-free: the same flow at d = 1000 has 1000x the ideal FCT.
    assert ideal_fct_s(14500, [10e6] * 6, 52e-3) == pytest.approx(1000 * ideal_fct_s(14500, [10e9] * 6, 52e-6))


def test_the_ideal_fct_pays_a_full_frames_store_and_forward_at_every_further_link():
    frame = 1538 * 8 / 10e9
    # Ten full frames over six equal links: the bytes at the link rate, and the last frame once more per link after
    # the first (the ExpressPass fat-tree across pods: 5 x 1.23 us on top).
    assert ideal_fct_s(14500, [10e9] * 6, 52e-6) == pytest.approx(26e-6 + 10 * frame + 5 * frame)
    # One packet: its own bytes at every link.
    assert ideal_fct_s(100, [10e9] * 6, 52e-6) == pytest.approx(26e-6 + 6 * (100 + 88) * 8 / 10e9)
    # The realistic experiment's 3:1 fabric: one full frame across pods takes 17.2 us (two host links at 10 Gbit/s,
    # four between switches at a third of it).
    assert ideal_fct_s(1450, [10e9, *[10e9 / 3] * 4, 10e9], 0) == pytest.approx(17.2e-6, rel=0.01)


def tandem_s(frames: list[int], rates_bps: list[float]) -> float:
    """Frames sent back to back through store-and-forward links, each link sending a frame once it has it whole and
    has sent the one before: when the last is through (the recurrence, frame by frame and link by link)."""
    left = [0.0] * len(rates_bps)  # when each link sent the previous frame
    for size in frames:
        arrived = 0.0
        for j, rate in enumerate(rates_bps):
            arrived = left[j] = max(arrived, left[j]) + size * 8 / rate
    return arrived


@given(size=st.integers(1, 40 * 1450), rates=st.lists(st.sampled_from([1e9, 2.5e9, 10e9 / 3, 10e9, 40e9]), min_size=1,
                                                       max_size=6))
def test_the_ideal_fct_is_the_tandem_of_the_flows_frames_through_its_links(size, rates):
    frames = max(1, -(-size // 1450))
    sizes = [1538] * (frames - 1) + [wire_bytes(size) - (frames - 1) * 1538]
    assert ideal_fct_s(size, rates, 0) == pytest.approx(tandem_s(sizes, rates), rel=1e-9)


def test_each_end_holds_the_others_packets_for_half_of_what_the_fabric_lacks_and_their_serialization():
    near = PairDelay("h1", "h2", floor_rtt_s=0.002, target_rtt_s=0.020)
    slow = PairDelay("h1", "h9", floor_rtt_s=0.060, target_rtt_s=0.052)
    assert near.added_one_way_s == pytest.approx(0.009)
    assert slow.added_one_way_s == 0 and slow.floor_exceeds_target
    assert delay_lines([near, slow]) == {"h2": [("h1", 9000.0, ())], "h1": [("h2", 9000.0, ())]}
    # h1 sends at half the rate (its NIC's share): its packets take longer at its link than h9's at its own.
    serialized = PairDelay("h1", "h9", floor_rtt_s=0.060, target_rtt_s=0.052, there=Serialization.of([5e6, 10e6]),
                           back=Serialization.of([10e6, 10e6]))
    assert delay_lines([serialized]) == {"h9": [("h1", 0.0, (1600.0, 800.0))], "h1": [("h9", 0.0, (800.0, 800.0))]}


def test_a_dilated_config_written_back_validates_to_the_same_config():
    config = experiment(datacenter={"link_gbps": 10, "link_delay_us": 4}, workload={"kind": "shuffle"})
    again = parse_config(config.model_dump(mode="json"), kernel=NO_MODULES)
    assert again == config and again.link.rate_mbps == pytest.approx(2.5)


def test_numbers_yaml_1_1_reads_as_strings_are_numbers_in_a_config_file_and_set_the_dilated_rate(tmp_path):
    # YAML 1.1 (yaml.safe_load) reads 1e1 and 1e3 as strings; configs are read as YAML 1.2 (read_yaml),
    # where they are numbers, and the rate follows. A string where a number is meant is refused.
    assert yaml.safe_load("dilation: 1e3")["dilation"] == "1e3"
    path = tmp_path / "dc.yaml"
    path.write_text("datacenter: {link_gbps: 1e1, dilation: 1e3}\n")
    config = experiment(**read_yaml(path))
    assert config.dilation.factor == 1000 and config.link.rate_mbps == pytest.approx(10.0)
    with pytest.raises(ConfigError, match=r"datacenter.dilation: input should be a valid number \(got '1e3'\)"):
        experiment(datacenter={"link_gbps": 10, "dilation": "1e3"})
