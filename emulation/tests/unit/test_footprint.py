"""Counting topologies without building them, and what their fabrics need of a machine
(no root: the machine is injected)."""

import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from ccemu.fabric import footprint
from ccemu.fabric.admission import admit
from ccemu.model.config import ConfigError, DoesNotFit, parse_config
from ccemu.fabric.net import OPEN_FILES_LIMIT, FabricNet
from ccemu.fabric.footprint import MachineLimits, estimate
from ccemu.model.kernel import KernelFeatures
from ccemu.model.topology import (
    TopologyCounts,
    dumbbell,
    dumbbell_counts,
    fat_tree,
    fat_tree_counts,
    leaf_spine,
    leaf_spine_counts,
    star,
    star_counts,
)

BPF = Path(__file__).resolve().parents[2] / "ccemu" / "ports" / "bpf"
NO_MODULES = KernelFeatures(openvswitch=False)
GIB = 1 << 30
# A machine nothing here comes near, but for what the port program can represent.
ROOMY = MachineLimits(memory_available_bytes=1 << 50, pid_max=4_194_304, threads_max=1 << 30, tasks_now=0,
                      nproc=None, net_namespaces_max=1 << 30, open_files_soft=1024, open_files_hard=1 << 20,
                      file_max=1 << 40, files_now=0)
# The example: 22.3 GiB available, the kernel's largest pid_max.
WORKSTATION = dataclasses.replace(ROOMY, memory_available_bytes=round(22.3 * GIB), threads_max=8_000_000,
                                  net_namespaces_max=95_000, open_files_hard=20_000, file_max=2_400_000)


def parse(machine: MachineLimits = ROOMY, **sections):
    """The config as `ccemu experiment` would run it on `machine`: parsed, then admitted."""
    return admit(parse_config({"name": "t", "topology": {"kind": "fattree", "k": 4}, **sections}, kernel=NO_MODULES),
                 machine=machine)


def refusal(machine: MachineLimits = ROOMY, **sections) -> str:
    with pytest.raises(DoesNotFit) as error:
        parse(machine, **sections)
    assert "\n" not in str(error.value)
    return str(error.value)


# Counting ----------------------------------------------------------------------------------

@pytest.mark.parametrize("built, counted", [
    *[(lambda k=k: fat_tree(k), lambda k=k: fat_tree_counts(k)) for k in (2, 4, 6, 8, 10)],
    *[(lambda a=a: fat_tree(*a), lambda a=a: fat_tree_counts(*a)) for a in ((8, 6, 2), (4, 1, 3), (6, 5, 1))],
    *[(lambda a=a: leaf_spine(*a), lambda a=a: leaf_spine_counts(*a))
      for a in ((1, 1, 1), (4, 2, 4), (3, 5, 2), (6, 3, 1), (2, 2, 2), (3, 1, 2))],
    *[(lambda n=n: dumbbell(n), lambda n=n: dumbbell_counts(n)) for n in (1, 2, 7)],
    *[(lambda n=n: star(n), lambda n=n: star_counts(n)) for n in (2, 5, 33)],
])
def test_counts_from_the_formulas_match_what_the_factories_build(built, counted):
    topo, counts = built(), counted()
    assert counts == TopologyCounts.of(topo)
    assert (counts.hosts, counts.switches, counts.links) == (len(topo.hosts), len(topo.switches), len(topo.links))
    assert counts.max_switch_ports == max(len(topo.ports(s.name)) for s in topo.switches)


def test_a_fat_tree_has_k_cubed_over_4_hosts_5_k_squared_over_4_switches_and_k_ports_each():
    counts = fat_tree_counts(400)
    assert (counts.hosts, counts.switches, counts.links, counts.max_switch_ports) == (
        16_000_000, 200_000, 48_000_000, 400)


@pytest.mark.parametrize("topo", [fat_tree(4), fat_tree(6), leaf_spine(10, 1, 1), leaf_spine(5, 3, 4), star(6),
                                  dumbbell(3)], ids=lambda t: t.kind)
@pytest.mark.parametrize("instances", [1, 2, 3, 7])
def test_ports_per_ovs_instance_follow_how_the_fabric_deals_switches_out(topo, instances):
    instances = min(instances, len(topo.switches))
    net = SimpleNamespace(fabric_topo=topo, local_switches=topo.switches, switch_namespaces=list(range(instances)))
    ports = [0] * instances
    for switch in topo.switches:
        ports[FabricNet.slot_of(net, switch.name)] += len(topo.ports(switch.name))
    assert TopologyCounts.of(topo).max_ports_of_an_instance(instances) == max(ports)


def test_the_mirrored_limits_match_the_port_program_sources_and_the_fabric():
    sources = (BPF / "port.h").read_text() + (BPF / "port_loader.c").read_text()
    defines = dict(re.findall(r"#define (\w+) (\d+)", sources))
    for name in ("PORT_MAX_PORTS", "PORT_MAX_FABRIC_PORTS", "RESIDENCE_ENTRIES_PER_PORT", "RESIDENCE_MAX_ENTRIES",
                 "RESIDENCE_MIN_ENTRIES"):
        assert getattr(footprint, name) == int(defines[name]), name
    assert footprint.OPEN_FILES_LIMIT == OPEN_FILES_LIMIT


# What a fabric needs -----------------------------------------------------------------------

def test_a_k4_fat_tree_needs_a_namespace_per_host_and_instance_and_about_120_mib():
    config = parse(fabric={"ovs_instances": 4})
    fp = estimate(config)
    assert (fp.namespaces, fp.instances, fp.switch_ports) == (20, 4, 80)
    # A shell and its child per namespace, an ovs-ofctl per bridge, OVS's daemons, a cchost per host.
    assert fp.tasks == 2 * 20 + 20 + (footprint.VSWITCHD_TASKS + 1) * 4 + 16
    assert 100 << 20 < fp.fabric_bytes < 140 << 20  # measured: 128 MiB (median), cchost not running
    # Every port's queue full: 96 ports of 150 KB buffers, ~4x in kernel memory.
    assert fp.queued_bytes == 96 * (4 * (150_000 + 4 * 1514))


def test_docker_hosts_add_the_engine_once_and_a_container_per_host_as_measured():
    namespaces, containers = estimate(parse()), estimate(parse(hosts={"kind": "docker"}))
    extra = containers.fabric_bytes - namespaces.fabric_bytes
    assert 205 << 20 < extra < 265 << 20  # measured on k=4: 233 and 248 MiB more (MemAvailable: +-18 MiB)
    assert containers.tasks - namespaces.tasks == 20 + 14 * 16  # measured: 235 and 240 more


def test_the_estimate_takes_the_port_config_whose_full_queues_hold_the_most():
    config = parse(schemes=[{"scheme": "dctcp", "port": {"buffer_bytes": 64_000, "ecn_threshold_bytes": 30_000}},
                            {"scheme": "expresspass", "port": {"buffer_bytes": 500_000}}])
    assert estimate(config).queued_bytes_per_port == 4 * (500_000 + 4 * 1514) + 12 * 8 * 84


# Refusals ----------------------------------------------------------------------------------

def test_a_fat_tree_with_k_400_is_refused_with_its_memory_estimate_and_the_limit():
    assert refusal(WORKSTATION, topology={"kind": "fattree", "k": 400}) == (
        "config: topology.k: a fat-tree with k=400 has 16000000 hosts and 200000 switches: needs ~84.9 TiB of "
        "memory, more than 80% of the 22.3 GiB this machine has available (and 48560000 processes and threads, "
        "kernel.pid_max leaves room for 4194304; 16040000 network namespaces, user.max_net_namespaces is 95000; "
        "32480016 open files in ccemu itself, its RLIMIT_NOFILE is 20000; 4403520016 open files in all, fs.file-max "
        "leaves room for 2400000)")


def test_the_incast_experiments_fat_tree_fits_that_machine():
    assert parse(WORKSTATION).topology.k == 4


def test_memory_is_refused_above_80_percent_of_what_is_available_and_accepted_up_to_it():
    needed = estimate(parse()).memory_bytes
    parse(dataclasses.replace(ROOMY, memory_available_bytes=round(needed / 0.8) + 1))
    message = refusal(dataclasses.replace(ROOMY, memory_available_bytes=round(needed / 0.8) - 100))
    # The idle fabric fits: what tips it over is every port's queue full.
    assert message.startswith("config: port.buffer_bytes: 96 ports that hold up to 610 KiB each in kernel memory "
                              "when full need, with the fabric, ~")


def test_a_fabric_that_does_not_fit_even_idle_is_refused_naming_the_topology():
    idle = estimate(parse()).fabric_bytes
    message = refusal(dataclasses.replace(ROOMY, memory_available_bytes=idle))
    assert re.fullmatch(r"config: topology.k: a fat-tree with k=4 has 16 hosts and 20 switches: needs ~\d+ MiB of "
                        r"memory, more than 80% of the \d+ MiB this machine has available", message)


def test_processes_beyond_what_pid_max_leaves_are_refused_naming_the_limit():
    machine = dataclasses.replace(ROOMY, pid_max=32_768, tasks_now=32_700)
    tasks = estimate(parse()).tasks
    assert refusal(machine) == (f"config: topology.k: a fat-tree with k=4 has 16 hosts and 20 switches: needs "
                                f"{tasks} processes and threads, kernel.pid_max leaves room for 68")


def test_rlimit_nproc_is_the_limit_when_it_is_the_smallest_and_applies():
    machine = dataclasses.replace(ROOMY, nproc=50)
    assert "processes and threads, RLIMIT_NPROC leaves room for 50" in refusal(machine)


def test_ccemus_own_open_files_are_bounded_by_the_rlimit_it_can_raise_to():
    machine = dataclasses.replace(ROOMY, open_files_soft=20, open_files_hard=30)
    assert refusal(machine).endswith("open files in ccemu itself, its RLIMIT_NOFILE is 30")
    # The soft limit is raised to min(65536, hard): a low soft limit alone refuses nothing.
    parse(dataclasses.replace(ROOMY, open_files_soft=20))


def test_full_queues_that_do_not_fit_when_the_idle_fabric_does_name_the_buffer_key():
    config = parse(schemes=[{"scheme": "dctcp"}, {"scheme": "expresspass", "port": {"buffer_bytes": 20_000_000}}],
                   fabric={"ovs_instances": 4})
    fp = estimate(config)
    machine = dataclasses.replace(ROOMY, memory_available_bytes=round((fp.fabric_bytes + 1000) / 0.8))
    message = refusal(machine, schemes=[{"scheme": "dctcp"},
                                        {"scheme": "expresspass", "port": {"buffer_bytes": 20_000_000}}],
                      fabric={"ovs_instances": 4})
    assert message.startswith("config: schemes.1.port.buffer_bytes: 96 ports that hold up to 76.3 MiB each in "
                              "kernel memory when full need, with the fabric, ~")


def test_an_ovs_instance_whose_full_queues_exceed_a_socket_buffer_names_the_buffer():
    assert refusal(port={"buffer_bytes": 10_000_000}, fabric={"ovs_instances": 1}) == (
        "config: port.buffer_bytes: 80 ports of one OVS instance hold up to 2.98 GiB in kernel memory when full, "
        "more than its sending socket's buffer can be set to (2 GiB, a C int): use smaller buffers or more OVS "
        "instances")


def test_more_ports_than_the_port_program_numbers_in_a_run_are_refused():
    assert refusal(topology={"kind": "fattree", "k": 36}) == (
        "config: topology.k: a fat-tree with k=36 has 34992 links, 69984 ports; the port program numbers at most "
        "65535 in a run")


def test_a_switch_with_more_ports_than_the_loader_attaches_in_a_namespace_is_refused():
    assert refusal(topology={"kind": "star", "hosts": 5000}) == (
        "config: topology.hosts: a star with 5000 hosts has a switch with 5000 ports; the port loader attaches at "
        "most 4096 per namespace, and a switch's ports share one")


def test_one_ovs_instance_holding_5120_ports_is_refused_naming_fabric_ovs_instances():
    assert refusal(topology={"kind": "fattree", "k": 16}, fabric={"ovs_instances": 1}) == (
        "config: fabric.ovs_instances: 1 OVS instance would hold 5120 ports; the port loader attaches at most 4096 "
        "per namespace: use more instances or 'auto'")
    assert parse(topology={"kind": "fattree", "k": 16}).fabric.ovs_instances == "auto"


def test_auto_instances_that_still_hold_too_many_ports_name_the_topology():
    # 5 spines of 820 ports each land in one instance of 'auto' (at most 5 switches each).
    message = refusal(topology={"kind": "leafspine", "leaves": 820, "spines": 5, "hosts_per_leaf": 1})
    assert message.startswith("config: topology.leaves: a leaf-spine with 820 leaves, 5 spines and 1 hosts per leaf "
                              "on 'auto': 165 OVS instances would hold up to 4100 ports in one; the port loader "
                              "attaches at most 4096 per namespace")


def test_a_deep_credit_queue_at_a_small_credit_share_that_would_overflow_the_drain_is_refused():
    assert refusal(topology={"kind": "star", "hosts": 2}, link={"rate_mbps": 100_000},
                   port={"profile": "expresspass", "credit_share": 0.001, "credit_buffer_credits": 1_000_000}) == (
        "config: port.credit_buffer_credits: the port program drains its ideal queues over up to 13.4 s idle "
        "(twice the time its full queue takes to drain), which overflows 64 bits at 100000 Mbit/s: use fewer "
        "credits or a larger credit_share")


def test_a_leaf_spine_is_refused_naming_its_largest_parameter():
    message = refusal(topology={"kind": "leafspine", "leaves": 4, "spines": 2, "hosts_per_leaf": 5000})
    assert message.startswith("config: topology.hosts_per_leaf: a leaf-spine with 4 leaves, 2 spines and 5000 hosts "
                              "per leaf has a switch with 5002 ports")


def test_does_not_fit_is_a_config_error_of_its_own():
    assert issubclass(DoesNotFit, ConfigError)
    with pytest.raises(ConfigError) as error:
        parse(link={"rate_mbps": 1e12})
    assert type(error.value) is ConfigError


def test_this_machines_limits_are_read_without_root():
    machine = MachineLimits.probe()
    assert machine.memory_available_bytes > 0 and machine.pid_max >= 301 and machine.tasks_now > 0
    assert machine.open_files_per_process >= min(OPEN_FILES_LIMIT, machine.open_files_hard)
    assert machine.file_max > machine.files_now > 0
