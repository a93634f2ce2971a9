import pytest

from ccemu.shaping import PortShape, droptail_port


def test_droptail_port_is_htb_at_link_rate_with_wire_overhead_over_a_byte_fifo():
    lines = droptail_port("e1-eth1", PortShape(rate_mbps=25, buffer_bytes=30000, mtu=1500))
    assert lines[0] == "qdisc replace dev e1-eth1 root handle 1: htb default 1"
    assert "rate 25000000bit ceil 25000000bit" in lines[1]
    assert "overhead 24 mpu 84" in lines[1]
    assert lines[2] == "qdisc replace dev e1-eth1 parent 1:1 handle 10: bfifo limit 30000"


def test_fractional_rates_are_not_rounded_to_whole_megabits():
    lines = droptail_port("x", PortShape(rate_mbps=0.5, buffer_bytes=3000, mtu=1500))
    assert "rate 500000bit" in lines[1]


def test_link_delay_puts_netem_under_the_rate_limiter():
    lines = droptail_port("x", PortShape(rate_mbps=5, buffer_bytes=15140, mtu=1500, delay_us=250))
    assert lines[2] == "qdisc replace dev x parent 1:1 handle 10: netem delay 250us limit 10"


@pytest.mark.parametrize("kwargs, message", [
    ({"rate_mbps": 0, "buffer_bytes": 3000, "mtu": 1500}, "rate_mbps"),
    ({"rate_mbps": 5, "buffer_bytes": 1000, "mtu": 1500}, "cannot hold one 1514-byte frame"),
    ({"rate_mbps": 5, "buffer_bytes": 3000, "mtu": 1500, "delay_us": -1}, "delay_us"),
])
def test_bad_shapes_raise_instead_of_being_ignored(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PortShape(**kwargs)
