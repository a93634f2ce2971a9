"""Port qdiscs and the port program on live fabrics (root; CI runs these)."""

import json
import subprocess
import sys
import time

import pytest

from ccemu.model.config import parse_config
from ccemu.fabric.net import FabricNet
from ccemu.polling import wait_until
from ccemu.programs import udpgen
from ccemu.ports.program import PortProgram
from ccemu.ports.histograms import queue_bucket_bounds
from ccemu.ports.maps import PortMaps, queue_minus_backlog
from ccemu.ports.layouts import LAYOUTS

DATA_PAYLOAD = 1000
DATA_WIRE_BYTES = DATA_PAYLOAD + 8 + 20 + 14 + 24  # UDP + IP + Ethernet + wire overhead
CREDIT_WIRE_BYTES = 84


def test_python_mirror_of_the_port_maps_has_the_c_sizes_and_field_offsets():
    layout = subprocess.run([str(PortProgram.built().loader), "--layout"], capture_output=True, text=True,
                            check=True).stdout
    c = {line.split()[0]: int(line.split()[1]) for line in layout.splitlines()}
    python = {}
    for struct in LAYOUTS:
        python[struct.name] = struct.size
        python.update({f"{struct.name}.{field}": offset for field, offset in struct.offsets().items()})
    assert python == c


def star(tmp_path, hosts, rate_mbps, port):
    config = parse_config({"name": "ports", "topology": {"kind": "star", "hosts": hosts},
                           "link": {"rate_mbps": rate_mbps}, "port": port})
    return FabricNet(config, state_root=tmp_path)


# A receiver stops this long after the last datagram it got: after its senders, however late they
# started (a fixed listening time, counted from its own start, left ~1 s for the senders' Python to
# start and finish on a machine other work may hold). Longer than any pause a sender sees here.
RECEIVER_IDLE_S = 2.0


def start_receiver(net, host, seconds, *flags):
    """udpgen recv on `host`, returned once its socket is bound: a datagram sent before would be
    lost (port unreachable), and the tests count every one. It stops RECEIVER_IDLE_S after its
    senders (at the latest `seconds` + 60 s after it started)."""
    port = int(flags[flags.index("--port") + 1]) if "--port" in flags else udpgen.DEFAULT_PORT
    proc = net[host].popen([sys.executable, "-m", "ccemu.programs.udpgen", "recv", "--bind", net[host].IP(),
                            "--seconds", str(seconds + 60), "--idle-s", str(RECEIVER_IDLE_S), *flags],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bound = f"sport = :{port}"
    assert wait_until(lambda: proc.poll() is not None or net[host].cmd(f"ss -Hlun '{bound}'").strip(), 30), \
        f"udpgen recv on {host} did not bind port {port} within 30 s"
    assert proc.poll() is None, proc.communicate()[1]
    return proc


def start_sender(net, src, dst, rate_pps, seconds, *flags):
    return net[src].popen([sys.executable, "-m", "ccemu.programs.udpgen", "send", "--dst", net[dst].IP(),
                           "--rate-pps", str(rate_pps), "--seconds", str(seconds), *flags],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(proc):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out)


def port(net, node, name):
    with PortMaps(net.inventory.state_dir) as maps:
        (stats,) = [p for p in maps.read() if (p.node, p.port) == (node, name)]
    return stats


def all_ports(net):
    with PortMaps(net.inventory.state_dir) as maps:
        return maps.read()


@pytest.mark.root
@pytest.mark.parametrize("profile", ["expresspass", "spraypass"])
def test_credits_blasted_at_twice_their_share_get_exactly_their_share(tmp_path, profile):
    rate_mbps = 20
    credit_pps = rate_mbps * 1e6 * (84 / 1622) / 8 / CREDIT_WIRE_BYTES
    with star(tmp_path, 2, rate_mbps, {"profile": profile}) as net:
        receiver = start_receiver(net, "h2", 6)
        sent = result(start_sender(net, "h1", "h2", 2 * credit_pps, 4, "--credit", "--ecn", "2"))
        got = result(receiver)
        ports = all_ports(net)

    delivered_pps = (got["packets"] - 1) / (got["last"] - got["first"])
    assert delivered_pps == pytest.approx(credit_pps, rel=0.03)
    dropped = sum(p.credit.dropped_packets for p in ports)
    assert dropped == sent["sent"] - got["packets"]
    assert all(p.data.enqueued_packets <= 2 for p in ports)  # credits never count as data
    # Fail open: the non-IP frame each OVS instance sends once at bring-up passed as data (the bpf
    # datapath sends none).
    (first_port,) = [p for p in ports if (p.node, p.port) == (net.switch_namespaces[0].name, "s1-eth1")]
    assert (first_port.unparsed_packets, first_port.data.enqueued_packets, first_port.data.dropped_packets) == (
        (0, 0, 0) if net.forwards_in_bpf else (1, 1, 0))
    if profile == "spraypass":
        drop_ratio = dropped / sent["sent"]
        assert got["ce"] / got["packets"] == pytest.approx(drop_ratio, abs=0.05)
    else:
        assert got["ce"] == 0


@pytest.mark.root
def test_dctcp_marks_ect_packets_above_k_only_and_drops_at_the_buffer(tmp_path):
    rate_mbps, k, buffer = 10, 15_000, 60_000
    line_pps = rate_mbps * 1e6 / 8 / DATA_WIRE_BYTES
    with star(tmp_path, 3, rate_mbps, {"profile": "dctcp", "ecn_threshold_bytes": k, "buffer_bytes": buffer}) as net:
        egress = net.switches[0].intfs[3].name  # s1 toward h3

        # Below K: one sender at half the line rate never builds a queue.
        receiver = start_receiver(net, "h3", 3)
        result(start_sender(net, "h1", "h3", 0.5 * line_pps, 2, "--ecn", "2"))
        below = result(receiver)
        assert below["packets"] > 0 and below["ce"] == 0

        # Above K: two senders at 0.75 each keep the queue full: ECT packets come out CE.
        receiver = start_receiver(net, "h3", 4)
        senders = [start_sender(net, h, "h3", 0.75 * line_pps, 3, "--ecn", "2") for h in ("h1", "h2")]
        for s in senders:
            result(s)
        above = result(receiver)
        marked = port(net, net.switch_namespaces[0].name, egress)
        assert above["ce"] / above["packets"] > 0.5
        assert marked.data.marked_packets >= above["ce"]
        assert marked.data.marked_bytes == marked.data.marked_packets * DATA_WIRE_BYTES
        assert marked.data.max_queue_bytes > k

        # Not ECN-capable: the same overload is dropped at the buffer, never marked.
        receiver = start_receiver(net, "h3", 4)
        senders = [start_sender(net, h, "h3", 0.75 * line_pps, 3) for h in ("h1", "h2")]
        for s in senders:
            result(s)
        plain = result(receiver)
        after = port(net, net.switch_namespaces[0].name, egress)

    assert plain["ce"] == 0
    assert after.data.marked_packets == marked.data.marked_packets
    assert after.data.dropped_packets > 0
    assert after.data.max_queue_bytes <= buffer
    top_bucket = max(i for i, count in enumerate(after.data.histogram) if count)
    assert queue_bucket_bounds(top_bucket)[0] <= buffer < queue_bucket_bounds(top_bucket)[1] * 1.25


def rate_pps(received):
    return (received["packets"] - 1) / (received["last"] - received["first"])


@pytest.mark.root
def test_credits_keep_their_share_of_a_busy_port_and_data_gets_the_rest(tmp_path):
    rate_mbps = 10
    share = 84 / 1622
    credit_pps = rate_mbps * 1e6 * share / 8 / CREDIT_WIRE_BYTES
    data_pps = rate_mbps * 1e6 * (1 - share) / 8 / DATA_WIRE_BYTES
    with star(tmp_path, 3, rate_mbps, {"profile": "expresspass"}) as net:
        credits_in = start_receiver(net, "h3", 6)
        data_in = start_receiver(net, "h3", 6, "--port", "45057")
        senders = [start_sender(net, "h1", "h3", 2 * credit_pps, 4, "--credit"),
                   start_sender(net, "h2", "h3", 1.2 * rate_mbps * 1e6 / 8 / DATA_WIRE_BYTES, 4,
                                "--port", "45057", "--sport", "45057")]
        for s in senders:
            result(s)
        credits, data = result(credits_in), result(data_in)

    assert rate_pps(credits) == pytest.approx(credit_pps, rel=0.03)
    assert rate_pps(data) == pytest.approx(data_pps, rel=0.03)


@pytest.mark.root
def test_the_programs_queue_tracks_the_fifo_backlog_tc_shows_under_overload(tmp_path):
    """benchmarks/ports.py prints the figures; here the mean must stay within one frame."""
    rate_mbps = 5
    line_pps = rate_mbps * 1e6 / 8 / DATA_WIRE_BYTES
    with star(tmp_path, 3, rate_mbps, {"profile": "droptail", "buffer_bytes": 60_000}) as net:
        egress = net.switches[0].intfs[3].name
        namespace = net.switch_namespaces[0]
        receiver = start_receiver(net, "h3", 7)
        senders = [start_sender(net, h, "h3", 0.6 * line_pps, 5) for h in ("h1", "h2")]
        # Sampled under overload: once the queue holds half the buffer (not after a guess at how
        # long the senders take to start).
        assert wait_until(lambda: port(net, namespace.name, egress).queue_bytes[0] > 30_000, 10, 0.02)
        with PortMaps(net.inventory.state_dir) as maps:
            differences = queue_minus_backlog(maps, namespace.name, egress, namespace.pid, 150, 0.02)
        for s in senders:
            result(s)
        result(receiver)
        loaded = port(net, net.switch_namespaces[0].name, egress)
        # Drained: every queue back to zero (a phantom queue never is: the deadline fails it).
        wait_until(lambda: all(p.queue_bytes == (0, 0) for p in all_ports(net)), 10, 0.05)
        drained = all_ports(net)

    mean_abs = sum(abs(d) for d in differences) / len(differences)
    print(f"program queue - tc backlog: mean |diff| {mean_abs:.0f} B, max {max(map(abs, differences)):.0f} B")
    assert mean_abs <= 1538, f"mean |program queue - tc backlog| {mean_abs:.0f} B"
    assert loaded.data.max_queue_bytes > 30_000 and loaded.data.dropped_packets > 0
    # Departures are counted at the peer, in another namespace: a port numbered wrong would
    # be left with a phantom queue here.
    assert [(p.node, p.port, p.queue_bytes) for p in drained if p.queue_bytes != (0, 0)] == []


@pytest.mark.root
def test_one_packet_on_an_empty_port_averages_its_own_size_at_arrival_and_over_the_time_it_was_queued(tmp_path):
    """The exact sums, not a histogram's bucket midpoints (which read half a bucket for every packet
    that found the port empty): one datagram through an idle star, at every port it crossed."""
    with star(tmp_path, 2, 5, {"profile": "droptail", "buffer_bytes": 384_500}) as net:
        receiver = start_receiver(net, "h2", 3)
        result(start_sender(net, "h1", "h2", 10, 0.1))  # one datagram
        assert result(receiver)["packets"] == 1
        crossed = [p for p in all_ports(net) if p.data.enqueued_packets]
    assert {p.node for p in crossed} == {"h1", net.switch_namespaces[0].name}
    for p in crossed:
        assert (p.data.enqueued_packets, p.data.max_queue_bytes) == (1, DATA_WIRE_BYTES)
        assert p.data.mean_queue_per_arrival_bytes == DATA_WIRE_BYTES
        # It was queued from its admission until it arrived at the next hop: well under a second here,
        # and its integral is its size times that time.
        assert 0 < p.data.queue_area_byte_s < DATA_WIRE_BYTES * 1.0
        assert sum(p.data.histogram) == 1 and queue_bucket_bounds(p.data.histogram.index(1)) == (1024.0, 1280.0)


@pytest.mark.root
def test_the_time_integral_of_a_busy_port_is_the_integral_of_its_queue_sampled_every_few_milliseconds(tmp_path):
    """Two senders at 0.6 of the line each overload a 5 Mbit/s port for 4 s: its queue climbs to the
    buffer and sits there, a frame more or less. The integral the program keeps between two reads,
    against the integral of the queue read every ~5 ms in between (a Riemann sum: each read's queue
    held until the next read)."""
    rate_mbps = 5
    line_pps = rate_mbps * 1e6 / 8 / DATA_WIRE_BYTES
    with star(tmp_path, 3, rate_mbps, {"profile": "droptail", "buffer_bytes": 60_000}) as net:
        egress, namespace = net.switches[0].intfs[3].name, net.switch_namespaces[0].name
        receiver = start_receiver(net, "h3", 7)
        senders = [start_sender(net, h, "h3", 0.6 * line_pps, 4) for h in ("h1", "h2")]
        with PortMaps(net.inventory.state_dir) as maps:
            def read():
                (stats,) = [p for p in maps.read() if (p.node, p.port) == (namespace, egress)]
                return time.monotonic(), stats

            assert wait_until(lambda: read()[1].queue_bytes[0] > 30_000, 10, 0.01)
            reads = []
            while any(s.poll() is None for s in senders) and len(reads) < 400:
                reads.append(read())
                time.sleep(0.005)
        for s in senders:
            result(s)
        result(receiver)
    (t0, first), (t1, last) = reads[0], reads[-1]
    program = last.data.queue_area_byte_s - first.data.queue_area_byte_s
    sampled = sum(p.queue_bytes[0] * (t_next - t) for (t, p), (t_next, _) in zip(reads, reads[1:]))
    print(f"over {t1 - t0:.2f} s: program {program / (t1 - t0):.0f} B on average, sampled {sampled / (t1 - t0):.0f} B "
          f"({len(reads)} reads); per-arrival mean {last.data.mean_queue_per_arrival_bytes:.0f} B")
    assert sampled / (t1 - t0) > 30_000  # the queue sat near the buffer
    assert program == pytest.approx(sampled, rel=0.03)
