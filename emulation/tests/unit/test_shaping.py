import pytest

from ccemu.model.config import parse_config
from ccemu.model.kernel import KernelFeatures
from ccemu.ports.program import PortIds, number_ports
from ccemu.model.config.ports import Marker
from ccemu.ports.tc import PortShape, gate, idle_reset_ns, port_program_line, port_qdiscs, tcd_max_on_s

NO_MODULES = KernelFeatures(openvswitch=False)


def program_values(line: str) -> dict[str, str]:
    """A port_loader config line's key=value pairs (ports/fields.py)."""
    return dict(pair.split("=", 1) for pair in line.split())


def shape_of(port: dict, rate_mbps: float = 25) -> PortShape:
    config = parse_config({"name": "t", "topology": {"kind": "star"}, "link": {"rate_mbps": rate_mbps},
                           "port": port}, kernel=NO_MODULES)
    return PortShape.of(config)


def test_droptail_port_is_htb_at_link_rate_with_wire_overhead_and_only_a_data_class():
    lines = port_qdiscs("e1-eth1", shape_of({"profile": "droptail", "buffer_bytes": 30000}))
    assert lines[0] == "qdisc replace dev e1-eth1 root handle 1: htb default 20"
    assert "classid 1:1 htb rate 25000000bit ceil 25000000bit" in lines[1]
    assert all("overhead 24 mpu 84" in line for line in lines if line.startswith("class"))
    assert not any("1:10" in line for line in lines)
    assert "classid 1:20 htb rate 25000000bit ceil 25000000bit" in lines[2]
    # The FIFO has room beyond the buffer: the port program drops first.
    assert lines[3] == f"qdisc replace dev e1-eth1 parent 1:20 handle 20: bfifo limit {30000 + 4 * 1514}"


def test_expresspass_port_caps_credits_at_their_share_and_lets_data_borrow_the_link():
    lines = port_qdiscs("x", shape_of({"profile": "expresspass"}, rate_mbps=10))
    credit_bps = round(10e6 * 84 / (84 + 1538))
    assert f"classid 1:10 htb rate {credit_bps}bit ceil {credit_bps}bit burst 168b cburst 168b prio 0" in lines[2]
    assert f"classid 1:20 htb rate {10_000_000 - credit_bps}bit ceil 10000000bit" in lines[4]


def test_port_program_line_carries_every_setting_by_its_port_config_name():
    line = port_program_line("s1-eth3", shape_of({"profile": "spraypass", "credit_buffer_credits": 8}, rate_mbps=8),
                             port_id=7, peer_port_id=2, switch_port=True)
    v = program_values(line)
    assert len(v) == 24  # port= and the 23 fields of struct port_config but its padding
    assert (v["port"], v["link_rate_Bps"], v["buffer_bytes"], v["ecn_threshold_bytes"], v["credit_mark_window"]) == (
        "s1-eth3", "1000000", "150000,672", "0", "4")
    assert v["marker"] == "spraypass"
    assert int(v["credit_rate_Bps"]) == round(8e6 * 84 / 1622) // 8
    assert v["classid"] == f"{0x10020},{0x10010}"  # data, credit
    assert [v[k] for k in ("wire_overhead_bytes", "min_wire_bytes", "burst_bytes", "port_id", "peer_port_id",
                           "switch_port", "idle_reset_ns")] == ["24", "84", f"{2 * 1538},168", "7", "2", "1",
                                                               str(10**9)]
    assert [v[k] for k in ("lossless", "xoff_bytes", "xon_bytes", "red_kmin_bytes", "red_kmax_bytes", "red_pmax_ppm",
                           "tcd_threshold_bytes", "tcd_max_on_ns", "tcd_sample_ns")] == ["0"] * 9  # no PFC, RED, TCD


def test_a_lossless_ports_data_leaf_is_a_gate_that_opens_above_the_link_rate_and_closes_to_8_bits_a_second():
    shape = shape_of({"profile": "dcqcn"}, rate_mbps=10)
    lines = port_qdiscs("s1-eth1", shape)
    limit = 2_000_000 + 4 * 1514
    assert lines[-1] == (f"qdisc replace dev s1-eth1 parent 1:20 handle 20: tbf rate 100000000bit burst 3076b "
                         f"limit {limit}b")
    assert not any("bfifo" in line for line in lines)
    assert gate("s1-eth1", shape, paused=True) == (
        f"qdisc change dev s1-eth1 parent 1:20 handle 20: tbf rate 8bit burst 1514b limit {limit}b")


PFC_RED_TCD = ("lossless", "xoff_bytes", "xon_bytes", "red_kmin_bytes", "red_kmax_bytes", "red_pmax_ppm", "marker",
               "tcd_threshold_bytes", "tcd_max_on_ns", "tcd_sample_ns")


def test_dcqcn_and_tcd_settings_reach_the_port_program_with_their_markers():
    dcqcn = program_values(port_program_line("x", shape_of({"profile": "dcqcn",
                                                            "lossless": {"xoff_bytes": 50_000, "xon_bytes": 40_000},
                                                            "kmin_bytes": 5000, "kmax_bytes": 20000, "pmax": 0.2}),
                                             1, 2, True))
    assert [dcqcn[k] for k in PFC_RED_TCD] == ["1", "50000", "40000", "5000", "20000", "200000", "red", "0", "0", "0"]
    tcd = shape_of({"profile": "tcd", "threshold_bytes": 30_000, "max_on_frames": 10}, rate_mbps=10)
    fields = program_values(port_program_line("x", tcd, 1, 2, True))
    frame_ns = 1538 * 8 / 10e6 * 1e9
    assert [fields[k] for k in PFC_RED_TCD[:8]] == ["1", "320000", "318000", "0", "0", "0", "tcd", "30000"]
    assert int(fields["tcd_max_on_ns"]) == int(fields["tcd_sample_ns"]) == round(10 * frame_ns)


def test_tcds_max_on_grows_as_epsilon_shrinks_and_is_the_reconstructed_formula():
    shape = shape_of({"profile": "tcd", "epsilon": 0.05}, rate_mbps=10)
    rate, d = 10e6 / 8, 2 * 1538 / (10e6 / 8)
    assert shape.marker.value("tcd_max_on_ns") / 1e9 == pytest.approx((2000 + 2 * d * 0.95 * rate) / (0.05 * rate) + d)
    assert tcd_max_on_s(shape, 0.01) > tcd_max_on_s(shape, 0.05) > tcd_max_on_s(shape, 0.1)


def test_a_slow_ports_idle_reset_waits_twice_as_long_as_its_full_buffer_takes_to_drain():
    slow = PortShape(rate_mbps=0.5, buffer_bytes=150_000, mtu=1500)
    assert idle_reset_ns(slow) == round(2e9 * 150_000 * 8 / 500_000)  # 4.8 s
    assert idle_reset_ns(PortShape(rate_mbps=10, buffer_bytes=150_000, mtu=1500)) == 10**9  # at least 1 s


def test_dctcp_threshold_reaches_the_port_program():
    shape = shape_of({"profile": "dctcp", "ecn_threshold_bytes": 20000, "buffer_bytes": 60000})
    assert (shape.marker.value("ecn_threshold_bytes"), shape.credit_share) == (20000, 0.0)
    assert program_values(port_program_line("x", shape, 1, 2, switch_port=False))["ecn_threshold_bytes"] == "20000"


def test_a_hosts_nic_takes_its_own_buffer_and_share_of_the_rate_and_the_switch_ports_keep_theirs():
    port = {"profile": "dctcp", "ecn_threshold_bytes": 100000, "buffer_bytes": 384500}
    config = parse_config({"name": "t", "topology": {"kind": "star", "hosts": 2}, "link": {"rate_mbps": 20,
                           "host_shares": {"h2": 0.5}}, "port": {**port, "host_buffer_bytes": 1538000}},
                          kernel=NO_MODULES)
    switch_port = PortShape.of(config)
    assert (switch_port.buffer_bytes, switch_port.rate_mbps) == (384500, 20)
    assert (switch_port.of_nic(config, "h1").buffer_bytes, switch_port.of_nic(config, "h2").rate_mbps) == (1538000, 10)
    nic = program_values(port_program_line("x", switch_port.of_nic(config, "h1"), 1, 2, switch_port=False))
    assert nic["buffer_bytes"].split(",")[0] == "1538000"
    unset = parse_config({"name": "t", "topology": {"kind": "star"}, "port": port}, kernel=NO_MODULES)
    assert PortShape.of(unset).of_nic(unset, "h1").buffer_bytes == 384500


def test_host_share_slows_every_hosts_nic_but_those_host_shares_names_and_no_switch_port():
    port = {"profile": "dctcp", "ecn_threshold_bytes": 100000, "buffer_bytes": 384500}
    config = parse_config({"name": "t", "topology": {"kind": "star", "hosts": 3}, "link": {
                           "rate_mbps": 100, "host_share": 0.4, "host_shares": {"h3": 0.5}}, "port": port},
                          kernel=NO_MODULES)
    switch_port = PortShape.of(config)
    assert [switch_port.of_nic(config, h).rate_mbps for h in ("h1", "h2", "h3")] == [40, 40, 50]
    assert switch_port.rate_mbps == 100
    assert config.link.path_rates_mbps("h1", 2) == [40, 100]


def test_fractional_rates_are_not_rounded_to_whole_megabits():
    lines = port_qdiscs("x", PortShape(rate_mbps=0.5, buffer_bytes=3000, mtu=1500))
    assert "rate 500000bit" in lines[1]


@pytest.mark.parametrize("kwargs, message", [
    ({"rate_mbps": 0, "buffer_bytes": 3000, "mtu": 1500}, "rate_mbps"),
    ({"rate_mbps": 5, "buffer_bytes": 1000, "mtu": 1500}, "cannot hold one 1514-byte frame"),
    ({"rate_mbps": 5, "buffer_bytes": 3000, "mtu": 1500, "credit_share": 0.05, "credit_buffer_bytes": 10},
     "cannot hold one credit"),
    ({"rate_mbps": 5, "buffer_bytes": 3000, "mtu": 1500, "marker": Marker("dctcp", (("ecn_threshold_bytes", 3000),))},
     "ecn_threshold_bytes"),
])
def test_bad_shapes_raise_instead_of_being_ignored(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PortShape(**kwargs)


def test_every_port_is_numbered_once_and_points_at_the_other_end_of_its_link():
    ids = number_ports([("s1-eth1", "h1-eth1"), ("s1-eth2", "s2-eth1")])
    assert ids == {"h1-eth1": PortIds(1, 2), "s1-eth1": PortIds(2, 1),
                   "s1-eth2": PortIds(3, 4), "s2-eth1": PortIds(4, 3)}


def test_an_interface_on_two_links_is_refused():
    with pytest.raises(ValueError, match="s1-eth1 is on two links"):
        number_ports([("s1-eth1", "h1-eth1"), ("s1-eth1", "s2-eth1")])


def test_ports_between_switches_run_at_the_fabric_share_of_the_rate_with_tcds_on_time_in_their_own_frames():
    port = {"profile": "tcd", "buffer_bytes": 2_000_000}
    config = parse_config({"name": "t", "topology": {"kind": "fattree", "k": 4},
                           "link": {"rate_mbps": 30, "fabric_share": 1 / 3}, "port": port}, kernel=NO_MODULES)
    facing_host, between_switches = PortShape.of(config), PortShape.of_fabric(config)
    assert (facing_host.rate_mbps, between_switches.rate_mbps) == (30, pytest.approx(10))
    assert between_switches.marker.value("tcd_max_on_ns") == pytest.approx(
        3 * facing_host.marker.value("tcd_max_on_ns"), abs=3)  # each rounded to whole ns
    between = program_values(port_program_line("x", between_switches, 1, 2, switch_port=True))
    assert between["link_rate_Bps"] == "1250000"
