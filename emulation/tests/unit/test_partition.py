"""One fabric over several machines, without root: how topologies split (model/partition.py), what
the tunnels ask of the machines' network (model/tunnel.py, fabric/tunnels.py), how the controller
reaches each machine (machines/session.py); test_machine_control.py holds what its part answers."""

import subprocess
import time
from pathlib import Path

import pytest

from ccemu.model.kernel import KernelFeatures
from ccemu.fabric.tunnels import (AcrossMachinesError, refused_across_machines, tunnel_line, wire_shell_lines,
                                  wire_tc_lines)
from ccemu.machines.fabric import capacities, underlay_address
from ccemu.machines.session import ccemu_on
from ccemu.model.config import parse_config
from ccemu.model.dilation import FaithfulRates
from ccemu.model.partition import CAPACITY_BUSY_PORTS, MachinePart, Partition, PartitionError, Plan
from ccemu.model.topology import TopologyCounts, dumbbell, fat_tree, leaf_spine, star
from ccemu.model.tunnel import source_port, vni_base
from ccemu.model.tunnel import mtu_problem, underlay_mtu_needed
from ccemu.sweeps.machines import Machine

REPO = Path(__file__).resolve().parents[3]
NO_MODULES = KernelFeatures(openvswitch=False)


def names(count: int) -> list[str]:
    return [f"m{i + 1}" for i in range(count)]


def test_a_k4_fat_tree_over_two_machines_keeps_pods_whole_and_deals_the_cores_out():
    partition = Partition.of(fat_tree(4), names(2))
    assert partition.switches_on("m1") == ["e1", "e2", "e3", "e4", "a1", "a2", "a3", "a4", "c1", "c3"]
    assert partition.switches_on("m2") == ["e5", "e6", "e7", "e8", "a5", "a6", "a7", "a8", "c2", "c4"]
    assert partition.hosts_on("m1") == [f"h{i}" for i in range(1, 9)]
    # Only links between aggregation and core switches are cut: each pod reaches the other machine's cores.
    assert len(partition.cut) == 8
    assert all({link.a[0], link.b[0]} == {"a", "c"} for link in partition.cut)


@pytest.mark.parametrize("k", [4, 6, 8])
def test_no_host_link_is_ever_cut_and_every_machine_gets_a_pod(k):
    for count in range(1, k + 1):
        partition = Partition.of(fat_tree(k), names(count))
        assert all(not partition.topo.is_host(end) for link in partition.cut for end in (link.a, link.b))
        assert all(partition.switches_on(m) for m in partition.machines)
        cores = [s for s in partition.topo.switch_names if s.startswith("c")]
        per_machine = [sum(partition.machine_of[c] == m for c in cores) for m in partition.machines]
        assert max(per_machine) - min(per_machine) <= 1  # the core tier spread evenly


def test_the_papers_3_to_1_fat_tree_over_four_machines_keeps_its_pods_of_four_edges_and_two_aggregations_whole():
    partition = Partition.of(fat_tree(8, hosts_per_edge=6, uplinks=2), names(4))
    assert partition.switches_on("m1")[:12] == ["e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8", "a1", "a2", "a3", "a4"]
    assert all(not partition.topo.is_host(end) for link in partition.cut for end in (link.a, link.b))
    assert all({link.a[0], link.b[0]} == {"a", "c"} for link in partition.cut)
    assert [len(partition.hosts_on(m)) for m in partition.machines] == [48] * 4


def test_every_cut_link_has_one_key_that_both_of_its_machines_agree_on():
    partition = Partition.of(fat_tree(8), names(4))
    keys = [partition.tunnel_key(link) for link in partition.cut]
    assert sorted(keys) == list(range(1, len(partition.cut) + 1))
    addresses = {m: f"192.0.2.{i + 1}" for i, m in enumerate(partition.machines)}
    link = partition.cut[5]
    a, b = (MachinePart(Partition.of(fat_tree(8), names(4)), partition.machine_of[end], addresses, 70000)
            for end in (link.a, link.b))
    key = partition.tunnel_key(link)
    line_a, line_b = tunnel_line(key, 1500, 42, a, link), tunnel_line(key, 1500, 43, b, link)
    # Named by its key, identified by the run's: the run's base (70000) plus the key, less one.
    assert line_a.startswith(f"link add name vx{key} mtu 1500 netns 42 type vxlan id {70000 + key - 1} ")
    assert f" id {70000 + key - 1} " in line_b
    assert a.vni_range() == b.vni_range() == (70000, 70000 + len(partition.cut) - 1)
    assert (f"local {addresses[a.machine]} remote {addresses[b.machine]}" in line_a
            and f"local {addresses[b.machine]} remote {addresses[a.machine]}" in line_b)


def test_each_cut_link_keeps_one_outer_source_port_and_its_tunnel_merges_and_splits_no_frames():
    partition = Partition.of(fat_tree(4), names(2))
    link = partition.cut[0]
    part = MachinePart(partition, partition.machine_of[link.a], {m: f"192.0.2.{i}" for i, m in enumerate(names(2))}, 9)
    key = partition.tunnel_key(link)
    # The kernel picks a port in [low, high): a range of one, so every inner flow takes one path.
    assert tunnel_line(key, 1500, 42, part, link).endswith(f" srcport {source_port(key)} {source_port(key) + 1}")
    ports = [source_port(k) for k in range(1, 16385)]
    assert len(set(ports)) == 16384 and min(ports) == 49152 and max(ports) == 65535
    assert source_port(16385) == 49152  # past the range: shared, never out of it
    assert wire_shell_lines([3]) == ["ethtool -K vx3 gro off gso off tso off > /dev/null",
                                     "ethtool -K wire3 gro off gso off tso off > /dev/null"]


def test_a_wire_end_runs_its_links_port_program_with_a_buffer_no_burst_fills_and_no_marker():
    from ccemu.ports.tc import PortShape

    config = parse_config({"name": "t", "topology": {"kind": "fattree", "k": 4}, "schemes": [
        {"scheme": "expresspass", "port": {"profile": "expresspass"}},
        {"scheme": "dctcp", "port": {"profile": "dctcp", "ecn_threshold_bytes": 32000}}]}, kernel=NO_MODULES)
    credits, marks = (PortShape.of_fabric(config.with_port(scheme.port)) for scheme in config.schemes)
    assert credits.credit_buffer_bytes < 1000 and marks.marker.kind != "none"  # the premise: ports that drop and mark
    for fabric in (credits, marks):
        wire = fabric.of_wire_end()
        assert (wire.buffer_bytes, wire.marker.kind) == (1 << 30, "none")
        assert wire.credit_buffer_bytes == (1 << 30 if fabric.credit_share else 0)
        assert (wire.rate_mbps, wire.credit_share, wire.mtu) == (fabric.rate_mbps, fabric.credit_share, fabric.mtu)


def test_each_machine_counts_its_own_share_and_the_shares_make_the_fabric_with_each_cut_link_twice():
    topo = fat_tree(8)
    partition = Partition.of(topo, names(4))
    shares = [partition.counts_on(m) for m in partition.machines]
    whole = TopologyCounts.of(topo)
    assert sum(s.hosts for s in shares) == whole.hosts and sum(s.switches for s in shares) == whole.switches
    # A cut link has a veth pair on each of its machines (the switch's port and the wire end).
    assert sum(s.links for s in shares) == whole.links + len(partition.cut)
    assert sum(n * ports for s in shares for n, ports in s.switch_ports) == sum(
        n * ports for n, ports in whole.switch_ports)


def test_a_machine_too_small_for_its_share_is_refused_in_one_line_naming_it():
    from dataclasses import replace

    from ccemu.fabric.admission import admit, admit_share
    from ccemu.fabric.footprint import MachineLimits
    from ccemu.model.config import DoesNotFit

    config = parse_config({"name": "t", "topology": {"kind": "fattree", "k": 4}}, kernel=NO_MODULES)
    share = Partition.of(config.topology.build(), names(2)).counts_on("m1")
    assert admit_share(config, share, "m1") is config  # this machine holds half a k=4 easily
    small = replace(MachineLimits.probe(), memory_available_bytes=50 << 20)
    with pytest.raises(DoesNotFit, match=r"^machine m1: topology.k: machine m1's share of a fat-tree with k=4 has 8 "
                                         r"hosts and 10 switches: needs ~\d+ MiB of memory"):
        admit(config, "machine m1", machine=small, share=share, whose="machine m1")


def test_a_machine_running_another_build_is_named_with_both_digests_and_what_brings_it_up_to_date():
    from ccemu.machines.build import identity, mismatch

    ours = identity()
    assert identity() == ours and set(ours) == {"ccemu", "cchost"}
    assert mismatch("m2", dict(ours), ours) is None
    line = mismatch("m2", {**ours, "cchost": "0" * 64}, ours)
    assert line.startswith(f"machine m2 runs another build than this controller (cchost 000000000000 there, "
                           f"{ours['cchost'][:12]} here): bring it up to date with `make provision")
    assert "\n" not in line and "ccemu " not in line.split("(")[1].split(")")[0]


@pytest.mark.parametrize("own, refusal", [
    ({"ansible_user": "bob"}, "ansible_user is 'bob': log in as root, or set ansible_become: true"),
    ({"ansible_user": "bob", "ansible_become": True, "ansible_become_user": "postgres"},
     "its ansible_become_user is 'postgres'"),
    ({"ansible_user": "bob", "ansible_become": "yes", "ansible_become_method": "su"}, "with sudo only"),
])
def test_an_inventory_that_would_run_ccemu_as_anyone_but_root_is_refused_in_one_line(own, refusal):
    with pytest.raises(AcrossMachinesError, match=refusal):
        ccemu_on(Machine("w1", "192.0.2.7:22", {"ansible_host": "192.0.2.7", **own}), "part")


def test_a_user_with_ansible_become_runs_ccemu_under_sudo_that_never_asks_for_a_password():
    machine = Machine("w1", "192.0.2.7:22", {"ansible_host": "192.0.2.7", "ansible_user": "bob",
                                             "ansible_become": "true", "ccemu_state_root": "/run/w1"})
    assert ccemu_on(machine, "clean")[-1] == "sudo -n -- env CCEMU_STATE_ROOT=/run/w1 /opt/ccemu/.venv/bin/ccemu clean"


def test_a_wire_end_and_its_tunnel_hand_each_other_every_frame_after_the_port_program_counted_it():
    lines = wire_tc_lines([3])
    assert ("filter add dev wire3 ingress pref 2 u32 match u32 0 0 action mirred egress redirect dev vx3" in lines
            and "filter add dev vx3 ingress pref 1 u32 match u32 0 0 action mirred egress redirect dev wire3" in lines)
    # The port loader attaches the port program at preference 1 (ports/bpf/port_loader.c): first at the wire end.
    loader = (Path(__file__).parents[2] / "ccemu" / "ports" / "bpf" / "port_loader.c").read_text()
    assert ".handle = 1, .priority = 1," in loader


def test_a_leaf_spine_splits_by_leaf_with_its_spines_spread_and_a_dumbbell_by_switch():
    partition = Partition.of(leaf_spine(4, 2, 2), names(2))
    assert partition.switches_on("m1") == ["l1", "l2", "s1"] and partition.switches_on("m2") == ["l3", "l4", "s2"]
    assert Partition.of(dumbbell(2), names(2)).cut == (dumbbell(2).links[-1],)


@pytest.mark.parametrize("topo, count, message", [
    (star(4), 2, "a star splits by switch and has 1: it cannot be split over 2 machines"),
    (fat_tree(4), 5, "a fattree splits by pod and has 4: it cannot be split over 5 machines"),
    (fat_tree(4), 0, "no machines"),
])
def test_a_topology_that_cannot_split_over_so_many_machines_is_refused_in_one_line(topo, count, message):
    with pytest.raises(PartitionError, match=message):
        Partition.of(topo, names(count))


def test_a_machine_named_twice_is_refused():
    with pytest.raises(PartitionError, match="machines named twice: m1"):
        Partition.of(fat_tree(4), ["m1", "m2", "m1"])


def plan(k: int, machines: int, rate: float, faithful: float) -> Plan:
    partition = Partition.of(fat_tree(k), names(machines))
    return Plan.of(partition, rate, rate, 1500, {m: (faithful, "measured") for m in partition.machines})


def test_a_machines_load_is_its_switch_ports_at_their_rates_against_the_benchmarks_busy_ports():
    # Userspace OVS keeps 10 Mbit/s per link (model/dilation.py): k=4 at 5 on one machine is the benchmark's own load.
    assert plan(4, 1, 5, 10).shares[0].load == pytest.approx(1.0)
    assert CAPACITY_BUSY_PORTS == 8 * 5  # the benchmark's 8 flows, each through 5 switches
    one = plan(8, 1, 5, 10)
    assert one.shares[0].load_mbps == 80 * 8 * 5 and one.shares[0].load == pytest.approx(8.0)  # eight machines' worth
    assert [s.load for s in plan(8, 8, 5, 10).shares] == pytest.approx([1.0] * 8)


def test_a_plan_a_machine_cannot_carry_is_refused_in_one_line_saying_what_would_fit():
    over = plan(8, 4, 5, 10)
    refusal = over.refusal()
    assert refusal.startswith("4 of 4 machines cannot carry their share faithfully: m1 forwards 800 Mbit/s with "
                              "every port busy, 2.00x the 400 it keeps faithful (measured)")
    assert "use 8 machines or more (of this capacity), or raise the dilation (datacenter.dilation) by 2.00x" in refusal
    assert "\n" not in refusal
    assert plan(8, 8, 5, 10).refusal() is None
    assert "** over capacity **" in over.lines()[1] and "** over capacity **" not in plan(8, 8, 5, 10).lines()[1]


def test_a_plan_is_judged_again_with_a_machines_own_capacity_once_it_says_it():
    fits = plan(8, 8, 5, 10)  # every machine assumed as this one: 10 Mbit/s per link
    assert fits.refusal() is None
    (share,) = [s for s in fits.with_capacities({"m3": (2.0, "its own: measured there")}).shares if s.machine == "m3"]
    assert (share.capacity_mbps, share.capacity_source) == (CAPACITY_BUSY_PORTS * 2.0, "its own: measured there")
    judged = fits.with_capacities({"m3": (2.0, "its own: measured there")})
    assert judged.refusal().startswith("1 of 8 machines cannot carry their share faithfully: m3 forwards")
    assert [s.capacity_mbps for s in judged.shares if s.machine != "m3"] == [s.capacity_mbps for s in fits.shares
                                                                           if s.machine != "m3"]


def test_the_printed_plan_names_each_machines_switches_hosts_cut_links_and_load():
    lines = plan(4, 2, 5, 10).lines()
    assert lines[0] == ("fattree: 20 switches, 16 hosts over 2 machines; links 5 Mbit/s (between switches 5); 8 of 32 "
                        "links between switches cut (VXLAN tunnels; the machines' network must carry 1550 B packets)")
    assert lines[1].startswith("  m1: 10 switches (e1-e4, a1-a4, c1, c3), 8 hosts (h1-h8), 8 cut links; forwards "
                               "200 Mbit/s with every port busy = 0.50x its capacity (400: 40 busy switch ports at "
                               "10 Mbit/s, measured)")


def test_the_tunnels_need_the_link_mtu_plus_50_bytes_and_a_smaller_network_is_named_with_its_fix():
    assert underlay_mtu_needed(1500) == 1550 and underlay_mtu_needed(9000) == 9050
    assert mtu_problem("m1", "m2", "10.9.0.2", "eth1", 1550, 1500) is None
    line = mtu_problem("m1", "m2", "10.9.0.2", "eth1", 1500, 1500)
    assert line == ("m1: its network to m2 (10.9.0.2, over eth1) carries 1500 B packets; the tunnels of links of MTU "
                    "1500 need 1550 (1500 + 14 B of Ethernet + 36 B of VXLAN): raise it on both machines and every "
                    "switch between them (`ip link set eth1 mtu 1550` or more), or lower link.mtu to 1450")


@pytest.mark.parametrize("sections, message", [
    ({"schemes": [{"scheme": "dcqcn"}]}, "lossless ports \\(PFC\\) across machines are not built yet"),
    ({"hosts": {"kind": "docker"}}, "Docker hosts across machines are not built yet"),
])
def test_what_is_not_built_across_machines_is_refused_before_anything_starts(sections, message):
    config = parse_config({"name": "t", "topology": {"kind": "fattree", "k": 4}, "link": {"rate_mbps": 5},
                           **sections}, kernel=NO_MODULES)
    with pytest.raises(AcrossMachinesError, match=message):
        refused_across_machines(config)


def test_the_controller_reaches_a_machine_as_ansible_does_and_runs_its_ccemu_with_its_state_root():
    machine = Machine("w1", "192.0.2.7:2222", {
        "ansible_host": "192.0.2.7", "ansible_user": "root", "ansible_ssh_private_key_file": "/k",
        "ansible_ssh_common_args": "-o UserKnownHostsFile=/kh -o StrictHostKeyChecking=yes",
        "ccemu_build_root": "/srv/ccemu", "ccemu_state_root": "/run/ccemu-w1"})
    argv = ccemu_on(machine, "part", "--machine", "w1")
    assert argv[0] == "ssh" and argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-i") + 1] == "/k"
    assert "-o" in argv and "UserKnownHostsFile=/kh" in argv and "BatchMode=yes" in argv
    assert argv[-3:] == ["--", "root@192.0.2.7",
                         "env CCEMU_STATE_ROOT=/run/ccemu-w1 /srv/ccemu/.venv/bin/ccemu part --machine w1"]
    local = ccemu_on(Machine("here", "local", {}), "clean")
    assert local == ["/opt/ccemu/.venv/bin/ccemu", "clean"]


def test_a_machine_whose_address_starts_with_a_dash_is_a_destination_ssh_refuses_not_an_option_of_ssh():
    argv = ccemu_on(Machine("w1", "-oProxyCommand=touch /tmp/ccemu-pwned:22", {}), "clean")
    # ssh -G prints what ssh would do with these arguments, connecting nowhere. The remote command
    # is one word here ("true"): ccemu's has spaces, which ssh would refuse as a host name and so
    # hide an option taken from the destination.
    shown = subprocess.run([argv[0], "-G", *argv[1:-1], "true"], capture_output=True, text=True, timeout=30)
    assert "proxycommand touch" not in shown.stdout.lower()
    assert "hostname contains invalid characters" in shown.stdout + shown.stderr


def test_a_machines_tunnel_address_is_its_own_setting_else_its_ansible_host():
    assert underlay_address(Machine("w1", "x:22", {"ansible_host": "192.0.2.7"})) == "192.0.2.7"
    assert underlay_address(Machine("w1", "x:22", {"ansible_host": "192.0.2.7",
                                                   "ccemu_underlay_address": "198.51.100.7"})) == "198.51.100.7"
    with pytest.raises(AcrossMachinesError, match="set ccemu_underlay_address"):
        underlay_address(Machine("here", "local", {}))


def test_a_machines_capacity_is_its_own_setting_else_this_machines_and_a_bad_one_is_named():
    here = FaithfulRates(10.0, 40.0, "DESIGN.md")
    got = capacities([Machine("a", "a:22", {}), Machine("b", "b:22", {"ccemu_capacity_mbps": 25})], here)
    assert got == {"a": (10.0, "as this machine: DESIGN.md"), "b": (25.0, "its ccemu_capacity_mbps")}
    with pytest.raises(AcrossMachinesError, match="machine b: ccemu_capacity_mbps must be a positive number"):
        capacities([Machine("b", "b:22", {"ccemu_capacity_mbps": "fast"})], here)


def test_a_runs_tunnel_identifiers_start_at_random_and_all_fit_in_vxlans_24_bits():
    bases = {vni_base(56) for _ in range(200)}
    assert len(bases) > 190  # two runs on one machine: almost never the same
    assert all(1 <= base and base + 56 - 1 <= 2**24 - 1 for base in bases)
    assert vni_base(2**24 - 1) == 1  # the most tunnels there are identifiers for
    assert 1 <= vni_base(0) <= 2**24 - 1
    with pytest.raises(ValueError, match="identifiers"):
        vni_base(2**24)


def test_a_machine_takes_tunnel_packets_from_the_machines_at_the_far_ends_of_its_cut_links_only():
    partition = Partition.of(fat_tree(8), names(4))
    addresses = {m: f"192.0.2.{i + 1}" for i, m in enumerate(partition.machines)}
    part = MachinePart(partition, partition.machines[0], addresses, 1)
    fars = {part.far_end(link) for link in partition.cut_on(part.machine)}
    assert part.far_addresses() == sorted(addresses[m] for m in fars)
    assert addresses[part.machine] not in part.far_addresses()


def test_a_namespace_command_line_longer_than_a_terminal_line_is_refused_naming_it_before_any_is_sent():
    from ccemu.fabric.lifecycle import FabricError
    from ccemu.fabric.net import TERMINAL_LINE_BYTES, _run_everywhere

    class Node:
        def __init__(self, name):
            self.name, self.sent = name, []

        def sendCmd(self, line):  # noqa: N802 (Mininet's name)
            self.sent.append(line)

    short, long = Node("h1"), Node("wire0")
    with pytest.raises(FabricError, match=r"command lines of wire0 \(\d+ B\) are longer than a terminal line"):
        _run_everywhere({short: "true", long: " && ".join(["ethtool -K vx1 gro off > /dev/null"] * 128)})
    assert short.sent == long.sent == []  # a shell given a cut line says nothing: none is sent
    assert TERMINAL_LINE_BYTES == 4095


@pytest.mark.root
def test_a_tunnel_watch_measures_round_trips_until_stopped_and_leaves_no_ping_behind():
    import psutil

    from ccemu.fabric.tunnels import TunnelWatch

    watch = TunnelWatch({"here": "127.0.0.1"}, 1550)  # loopback: no machine's network is touched
    pings = [psutil.Process(ping.pid) for ping, _ in watch.pings.values()]
    time.sleep(0.3)
    rtts = watch.stop()
    assert set(rtts) == {"here"} and len(rtts["here"]) >= 5 and all(rtt > 0 for rtt in rtts["here"])
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in pings) and watch.stop() == {}
