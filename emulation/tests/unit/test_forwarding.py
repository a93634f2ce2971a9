"""The bpf datapath's routes (fabric/forwarding.py) against the routing tables they come from,
and the loader's check of them (no root: every line is checked before any map is opened)."""

import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ccemu.fabric.forwarding import host_route_count, path_id, route_lines
from ccemu.model.routing import PATH_IDS, Routing
from ccemu.model.topology import fat_tree, leaf_spine
from ccemu.ports.program import BPF_BUILD_DIR, ifindex_of, number_ports

BPF_SOURCE = Path(__file__).resolve().parents[2] / "ccemu" / "ports" / "bpf"


def installed(routing):
    """The maps `port_loader routes` would fill from the lines: port -> switch, switch ->
    (stride, uplinks), (switch, address) -> (ifindex, MAC or None)."""
    ids = number_ports(link.interface_names() for link in routing.topo.links)
    port_switch, uplinks, hosts = {}, {}, {}
    for line in route_lines(routing, ids):
        kind, *fields = line.split()
        if kind == "port":
            port_switch[int(fields[0])] = int(fields[1])
        elif kind == "uplinks":
            uplinks[int(fields[0])] = (int(fields[1]), [int(f) for f in fields[2:]])
        else:
            hosts[(int(fields[0]), fields[1])] = (int(fields[2]), None if fields[3] == "-" else fields[3])
    return ids, port_switch, uplinks, hosts


def forwarded(uplinks, hosts, switch_id, address, pid):
    """switch.h forward(): a host route, else the uplink for the path-id."""
    if (switch_id, address) in hosts:
        return hosts[(switch_id, address)][0]
    stride, ports = uplinks[switch_id]
    return ports[pid // stride % len(ports)]


@pytest.mark.parametrize("topo", [fat_tree(4), fat_tree(6), leaf_spine(3, 2, 2)], ids=lambda t: t.kind)
def test_every_switch_sends_every_host_and_path_id_out_of_the_port_routing_names(topo):
    routing = Routing(topo)
    ids, port_switch, uplinks, hosts = installed(routing)
    for number, switch in enumerate(topo.switch_names, start=1):
        assert {port_switch[ids[f"{switch}-eth{port}"].port_id] for port in topo.ports(switch)} == {number}
        for host in topo.hosts:
            for pid in range(PATH_IDS):
                expected = ifindex_of(ids[f"{switch}-eth{routing.tables[switch].port_toward(host.name, pid)}"].port_id)
                assert forwarded(uplinks, hosts, number, host.ip, pid) == expected, (switch, host.name, pid)
    assert len(hosts) == host_route_count(routing)


def test_a_hosts_mac_is_written_in_only_at_the_switch_it_hangs_off():
    topo = fat_tree(4)
    routing = Routing(topo)
    ids, _, _, hosts = installed(routing)
    numbers = {switch: n for n, switch in enumerate(topo.switch_names, start=1)}
    for host in topo.hosts:
        own, _ = topo.attachment(host.name)
        rewritten = {switch for switch, n in numbers.items() if hosts.get((n, host.ip), (0, None))[1]}
        assert rewritten == {own}, host.name
        assert hosts[(numbers[own], host.ip)][1] == host.mac


addresses = st.tuples(*[st.integers(0, 255)] * 4).map(lambda b: ".".join(map(str, b)))
ports = st.integers(0, 65535)


@given(addresses, addresses, st.sampled_from(["tcp", "udp"]), ports, ports)
def test_a_flow_and_its_reverse_get_the_same_path_id(a, b, proto, sport, dport):
    forward = path_id(a, b, proto, sport, dport)
    assert 0 <= forward < PATH_IDS
    if not (proto == "udp" and (0xA000 <= sport <= 0xBFFF or 0xA000 <= dport <= 0xBFFF)):
        assert path_id(b, a, proto, dport, sport) == forward


def test_a_path_id_port_carries_its_path_id_and_other_ports_spread_over_all_of_them():
    assert path_id("10.0.0.1", "10.0.0.16", "udp", 0xA000 + 37, 5201) == 37
    assert path_id("10.0.0.1", "10.0.0.16", "udp", 0xBFFF, 5201) == 0xFF
    spread = {path_id("10.0.0.1", "10.0.0.16", "tcp", sport, 5201) for sport in range(40000, 42000)}
    assert len(spread) == PATH_IDS


@pytest.mark.parametrize("line", ["uplinks 1 1", "uplinks 0 1 5", "uplinks 1 0 5", "uplinks 1 1 " + "5 " * 17,
                                  "host 1 10.0.0.300 5 -", "host 1 10.0.0.1 5 02:00", "port 3", "port 3 0",
                                  "route 1 2 3"])
def test_the_loader_refuses_a_bad_route_line_naming_it_before_it_writes_any(tmp_path, line):
    loader = BPF_BUILD_DIR / "port_loader"
    if not loader.exists():
        pytest.skip("the port loader is not built (make setup)")
    routes = tmp_path / "routes"
    routes.write_text(f"port 1 1\nuplinks 1 1 5 6\n{line}\n")
    done = subprocess.run([str(loader), "routes", str(tmp_path / "no-bpffs"), str(routes)], capture_output=True,
                          text=True)
    assert done.returncode == 1
    assert done.stderr == f"port_loader: {routes} line 3: not a route: {line}\n"


def test_the_loader_accepts_good_route_lines_and_then_needs_the_runs_maps(tmp_path):
    loader = BPF_BUILD_DIR / "port_loader"
    if not loader.exists():
        pytest.skip("the port loader is not built (make setup)")
    routing = Routing(fat_tree(4))
    routes = tmp_path / "routes"
    ids = number_ports(link.interface_names() for link in routing.topo.links)
    routes.write_text("\n".join(route_lines(routing, ids)) + "\n")
    done = subprocess.run([str(loader), "routes", str(tmp_path / "no-bpffs"), str(routes)], capture_output=True,
                          text=True)
    assert done.returncode == 1 and "no-bpffs/port_switch" in done.stderr and "not a route" not in done.stderr


def test_the_programs_path_id_constants_mirror_the_routing_models():
    """switch.h reads these from port.h; a drift would route packets where the tables do not say."""
    from ccemu.fabric.forwarding import MAX_UPLINKS
    from ccemu.model.routing import PATH_ID_PORT_MASK, PATH_ID_PORTS

    header = (BPF_SOURCE / "port.h").read_text()
    defines = {name: int(value, 0) for name, value in re.findall(r"#define (\w+) (0x[0-9A-Fa-f]+|\d+)", header)}
    assert (defines["PATH_IDS"], defines["PATH_ID_PORT_BASE"], defines["PATH_ID_PORT_MASK"],
            defines["SWITCH_MAX_UPLINKS"]) == (PATH_IDS, PATH_ID_PORTS[0], PATH_ID_PORT_MASK, MAX_UPLINKS)
