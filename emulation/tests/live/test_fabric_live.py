"""Live fabrics on Mininet, forwarded by OVS or by the bpf datapath (root; CI runs these)."""

import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ccemu.model.config import parse_config
from ccemu.fabric.net import FabricNet
from ccemu.fabric.inventory import SHELL_OF, Inventory, ProcessRecord
from ccemu.fabric.namespaces import mounted_paths, pids_in_namespaces, process_start_time
from ccemu.polling import wait_until
from ccemu.fabric.checks import check_path_symmetry, check_reachability, flow_path_id

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[3]


def remove_if_left(state: dict, state_dir: Path) -> None:
    """Remove a killed run by its recorded inventory if `ccemu clean` has not (a test that fails
    half-way must not leave a fabric behind)."""
    if state_dir.exists():
        Inventory.of_state(state, state_dir).remove()


def fabric_config(topology, **sections):
    return parse_config({"name": "test", "topology": topology, **sections})


def root_interfaces() -> set[str]:
    return set(os.listdir("/sys/class/net"))


def leftovers(state: dict) -> list[str]:
    """What of a recorded run still exists: processes, anything holding its namespaces (the
    namespaces themselves, not whatever namespace got their inode numbers since), mounts."""
    # Its namespaces alone (its mounts are checked below; of_state takes them only inside a run's folder).
    with Inventory.of_state({**state, "mounts": []}, Path("/nonexistent")).held_namespaces() as held:
        found = [f"pid {pid} inside a namespace of the run" for pid in pids_in_namespaces(set(held))]
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():  # we hold them to look
                continue
            try:
                for fd in (entry / "fd").iterdir():
                    link = os.readlink(fd)
                    if link.startswith("net:[") and int(link[5:-1]) in held:
                        found.append(f"pid {entry.name} holds a namespace of the run open")
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
    for record in state["processes"]:
        if process_start_time(record["pid"]) == record["start_time"]:
            found.append(f"{record['what']} (pid {record['pid']}) still running")
    found += [f"{path} still mounted" for path in state["mounts"] if path in mounted_paths()]
    return found


@pytest.fixture(scope="module", params=["ovs", "bpf"])
def fat_tree_k4(request, tmp_path_factory):
    net = FabricNet(fabric_config({"kind": "fattree", "k": 4}, fabric={"datapath": request.param}),
                    state_root=tmp_path_factory.mktemp("state"))
    with net:
        yield net


def test_k4_fat_tree_reaches_every_pair(fat_tree_k4):
    assert check_reachability(fat_tree_k4).problems == []


def test_the_runs_bpffs_is_root_only_so_no_local_user_can_plant_pins_in_it(fat_tree_k4):
    # A bpffs mounted without a mode has a 1777 root (any user's pins beside ours); the kernel keeps
    # its sticky bit whatever the mode.
    assert oct(fat_tree_k4.bpffs.stat().st_mode & 0o777) == "0o700"


@pytest.mark.parametrize("a, b", [("h1", "h16"), ("h1", "h3"), ("h6", "h11")])
def test_port_counters_show_each_path_id_crossing_the_same_ports_both_ways(fat_tree_k4, a, b):
    assert check_path_symmetry(fat_tree_k4, a, b) == []


def test_udp_from_other_programs_takes_the_same_path_both_ways(fat_tree_k4):
    """iperf3 -u and the like: their source port is no path-id, so they get the symmetric hash
    (traced in the first switch each way, nothing sent)."""
    for sport, dport in ((5201, 33333), (40000, 5201), (50123, 33000)):
        forward = flow_path_id(fat_tree_k4, "h1", "h16", "udp", sport, dport)
        back = flow_path_id(fat_tree_k4, "h16", "h1", "udp", dport, sport)
        assert forward == back, (sport, dport)
    # A path-id port still picks its path: 0xA000 + 3 -> path-id 3.
    assert flow_path_id(fat_tree_k4, "h1", "h16", "udp", 0xA003, 5201) == 3


def test_a_flow_without_a_path_id_crosses_the_ports_of_the_path_id_the_fabric_gives_it(fat_tree_k4):
    """flow_path_id (OVS: traced; bpf: forwarding.path_id, the program's hash mirrored) against
    what the switches' port counters saw of a real flow, for several port pairs."""
    net = fat_tree_k4
    send = ("import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
            "s.bind(('', int(sys.argv[2]))); [s.sendto(b'x', (sys.argv[1], int(sys.argv[3]))) for _ in range(50)]")
    last_hop = net.fabric_topo.attachment("h16")  # on every path: when it has sent them, every port has
    for sport, dport in ((5201, 33333), (40001, 5201), (50123, 33000)):
        before = net.port_counters()
        net["h1"].cmd(f"{sys.executable} -c {shlex.quote(send)} {net['h16'].IP()} {sport} {dport}")
        # Read once all 50 are through (the first takes OVS's slow path: late on a loaded machine).
        assert wait_until(lambda: net.port_counters()[last_hop][1] - before[last_hop][1] >= 50, 10, 0.1), (sport, dport)
        after = net.port_counters()
        sent = {key for key, (_, tx) in after.items() if tx - before[key][1] >= 50}
        pid = flow_path_id(net, "h1", "h16", "udp", sport, dport)
        assert sent == set(net.routing.ports_on_path("h1", "h16", pid)), (sport, dport, pid)


def test_every_port_keeps_its_htb_tree_and_port_program_after_the_fabric_adds_it(fat_tree_k4):
    net = fat_tree_k4
    nodes = [(h, [h.defaultIntf().name]) for h in net.hosts]
    nodes += [(ns, [intf.name for s in net.switches_in(ns) for intf in s.intfList()]) for ns in net.switch_namespaces]
    for node, ports in nodes:
        qdiscs = node.cmd("tc qdisc show")
        ingress = "switch_ingress" if net.forwards_in_bpf and node in net.switch_namespaces else "port_ingress"
        for port in ports:
            assert f"qdisc htb 1: dev {port} root" in qdiscs, (node.name, port)
            assert f"qdisc clsact ffff: dev {port}" in qdiscs, (node.name, port)
            assert "port_egress" in node.cmd(f"tc filter show dev {port} egress"), (node.name, port)
            assert ingress in node.cmd(f"tc filter show dev {port} ingress"), (node.name, port)
    assert sum(len(ports) for _, ports in nodes) == 2 * 48


# UDP payload per wire frame with `-l 1448`: UDP, IP and Ethernet headers and the wire overhead.
UDP_PAYLOAD_PER_WIRE_FRAME = 1448 / (1448 + 8 + 20 + 14 + 24)


def udp_goodputs(net, pairs, offered_mbps):
    """Each pair's received UDP goodput (bit/s), every sender offering more than its path carries:
    unlike TCP, whose timeouts at a 0.1 ms RTT (the bpf datapath) left a 5 Mbit/s link 24 % idle in
    one fresh-clone CI run, what arrives is what the shaping lets through."""
    servers = [net[dst].popen(["iperf3", "-s", "-1"]) for _, dst in pairs]
    # Each server listening before its client connects (a client that comes first is refused).
    for (_, dst), server in zip(pairs, servers):
        assert wait_until(lambda: server.poll() is not None or net[dst].cmd("ss -Hltn 'sport = :5201'").strip(), 30)
        assert server.poll() is None, f"iperf3 -s on {dst} exited with status {server.returncode}"
    clients = [net[src].popen(["iperf3", "-c", net[dst].IP(), "-u", "-b", f"{offered_mbps}M", "-l", "1448", "-t", "5",
                               "-J"]) for src, dst in pairs]
    goodputs = [json.loads(c.communicate()[0])["end"]["sum_received"]["bits_per_second"] for c in clients]
    for server in servers:
        server.wait(timeout=10)
    return goodputs


def test_two_flows_through_one_switch_to_switch_link_share_its_rate(tmp_path):
    """Host NICs alone would let each flow have the link rate: the s1 -> s2 port must shape."""
    net = FabricNet(fabric_config({"kind": "dumbbell", "hosts_per_side": 2}, link={"rate_mbps": 5}),
                    state_root=tmp_path)
    with net:
        goodputs = udp_goodputs(net, [("h1", "h3"), ("h2", "h4")], offered_mbps=8)
    ideal = 5e6 * UDP_PAYLOAD_PER_WIRE_FRAME
    assert 0.9 * ideal <= sum(goodputs) <= 1.03 * ideal, goodputs


def test_a_link_between_switches_runs_at_the_fabric_share_and_a_hosts_link_at_the_full_rate(tmp_path):
    """Oversubscription at the ToR (link.fabric_share): a flow across s1 -> s2 gets a third of the
    rate, one to a host on its own switch the whole rate, at the same time."""
    config = fabric_config({"kind": "dumbbell", "hosts_per_side": 2}, link={"rate_mbps": 6, "fabric_share": 1 / 3})
    net = FabricNet(config, state_root=tmp_path)
    with net:
        across, local = udp_goodputs(net, [("h1", "h3"), ("h2", "h1")], offered_mbps=8)
    ideal = 6e6 * UDP_PAYLOAD_PER_WIRE_FRAME
    assert 0.9 * ideal / 3 <= across <= 1.03 * ideal / 3, across
    assert 0.9 * ideal <= local <= 1.03 * ideal, local


def test_different_path_ids_of_a_cross_pod_pair_use_different_cores(fat_tree_k4):
    cores = {path[2] for path in fat_tree_k4.routing.paths("h1", "h16")}
    assert cores == {"c1", "c2", "c3", "c4"}


@pytest.mark.parametrize("datapath", ["ovs", "bpf"])
@pytest.mark.parametrize("topology, instances", [
    ({"kind": "fattree", "k": 4}, 2),
    ({"kind": "leafspine", "leaves": 3, "spines": 2, "hosts_per_leaf": 2}, 1),
    ({"kind": "dumbbell", "hosts_per_side": 2}, 1),
], ids=["fattree-2-ovs-instances", "leafspine", "dumbbell"])
def test_other_fabrics_reach_every_pair(tmp_path, topology, instances, datapath):
    net = FabricNet(fabric_config(topology, fabric={"ovs_instances": instances, "datapath": datapath}),
                    state_root=tmp_path)
    with net:
        assert check_reachability(net).problems == []
        a, b = net.fabric_topo.host_names[0], net.fabric_topo.host_names[-1]
        assert check_path_symmetry(net, a, b) == []


@pytest.mark.parametrize("allocator, library", [("jemalloc", "libjemalloc.so.2"), ("glibc", None)])
def test_ovs_vswitchd_forwards_with_the_allocator_the_fabric_asks_for(tmp_path, allocator, library):
    net = FabricNet(fabric_config({"kind": "dumbbell", "hosts_per_side": 2},
                                  fabric={"ovs_allocator": allocator, "datapath": "ovs"}), state_root=tmp_path)
    with net:
        assert check_reachability(net).problems == []
        assert net.instances
        for instance in net.instances:
            maps = Path(f"/proc/{instance.vswitchd_pid}/maps").read_text()
            preloaded = {name for name in ("libjemalloc.so.2", "libtcmalloc_minimal.so.4") if f"/{name}" in maps}
            assert preloaded == ({library} if library else set()), instance.index


@pytest.mark.parametrize("datapath", ["ovs", "bpf"])
def test_normal_teardown_leaves_nothing(tmp_path, datapath):
    interfaces_before = root_interfaces()
    net = FabricNet(fabric_config({"kind": "fattree", "k": 4}, fabric={"datapath": datapath}), state_root=tmp_path)
    with net:
        state = json.loads((net.inventory.state_dir / "state.json").read_text())
        assert len(state["namespaces"]) == 16 + len(net.switch_namespaces)
    assert leftovers(state) == []
    assert root_interfaces() == interfaces_before
    assert list(tmp_path.iterdir()) == []


def ccemu(env, *args):
    return subprocess.run([sys.executable, "-m", "ccemu.cli", *args], capture_output=True, text=True, env=env)


def start_ccemu_up(tmp_path, config_yaml: str):
    """`ccemu up --no-cli` in its own process, once its fabric is up: (process, env, state dir,
    recorded state). The caller stops the process."""
    config = tmp_path / "fabric.yaml"
    config.write_text(config_yaml)
    env = {**os.environ, "CCEMU_STATE_ROOT": str(tmp_path / "state")}
    up = subprocess.Popen([sys.executable, "-m", "ccemu.cli", "up", "--no-cli", str(config)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # Its lines read by a thread (which goes on draining them), so that the deadline holds even
    # while ccemu up says nothing.
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=lambda: ([lines.put(line) for line in up.stdout], lines.put(None)), daemon=True).start()
    deadline = time.monotonic() + 60
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        if line is None:
            up.kill()
            pytest.fail(f"ccemu up did not come up within 60 s: {up.stderr.read()}")
        if "is up" in line:
            break
    (state_dir,) = (tmp_path / "state").iterdir()
    return up, env, state_dir, json.loads((state_dir / "state.json").read_text())


def test_ccemu_clean_removes_everything_a_sigkilled_orchestrator_left(tmp_path):
    interfaces_before = root_interfaces()
    up, env, state_dir, state = start_ccemu_up(
        tmp_path, "name: killed\ntopology: {kind: fattree, k: 4}\nfabric: {ovs_instances: 2}\n")
    try:
        assert leftovers(state), "the running fabric should be visible to the leak check"
    finally:
        up.send_signal(signal.SIGKILL)
        up.wait()

    try:
        clean = ccemu(env, "clean")

        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert "killed-" in clean.stdout
        assert leftovers(state) == []
        assert root_interfaces() == interfaces_before
        assert not state_dir.exists()
        assert Inventory.all_runs(tmp_path / "state") == []
    finally:
        remove_if_left(state, state_dir)


class NamespacesReusingInodes:
    """Processes each in a new network namespace, started one at a time until the kernel hands one
    of them an inode number of `freed` (namespaces that are gone). The kernel gives the lowest free
    number, and frees a gone namespace's only after its deferred cleanup has run: so a namespace
    that gets a lower number than the highest of `freed` fills a gap the next run would have taken
    first, and is kept; one above them means they are not free yet, and is let go."""

    def __init__(self, freed: set[int], timeout_s: float):
        self.held: list[subprocess.Popen] = []
        self.reusing: dict[int, subprocess.Popen] = {}
        deadline = time.monotonic() + timeout_s
        while not self.reusing and time.monotonic() < deadline:
            probe = subprocess.Popen(["unshare", "--net", "sleep", "600"])
            own = os.stat("/proc/self/ns/net").st_ino
            assert wait_until(lambda: _netns_inode_or_none(probe.pid) not in (None, own), 10)
            inode = os.stat(f"/proc/{probe.pid}/ns/net").st_ino
            if inode in freed:
                self.reusing[inode] = probe
            elif inode < max(freed):
                self.held.append(probe)
            else:
                probe.kill()
                probe.wait()
                time.sleep(0.2)
        self.held += self.reusing.values()

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.held)

    def stop(self) -> None:
        for probe in self.held:
            probe.kill()
            probe.wait()


def _netns_inode_or_none(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except FileNotFoundError:
        return None


def test_ccemu_clean_after_a_sigkill_removes_that_runs_leftovers_and_nothing_in_namespaces_that_reused_its_inodes(
        tmp_path):
    interfaces_before = root_interfaces()
    up, env, killed_dir, killed = start_ccemu_up(
        tmp_path, "name: killed\ntopology: {kind: fattree, k: 4}\nfabric: {ovs_instances: 2}\n")
    # Like a cchost, a process in a host that outlives the host's shell keeps its namespace.
    holder = subprocess.Popen([sys.executable, "-m", "ccemu.cli", "exec", "--run", killed["run_id"], "h1", "sleep",
                               "600"], env=env)
    reusing = None
    try:
        # Inside the run's namespaces: every shell and OVS daemon it recorded, and the holder.
        assert wait_until(lambda: len(Inventory.of_state(killed, tmp_path).processes_inside()) ==
                          len(killed["processes"]) + 1, 10)
    finally:
        up.send_signal(signal.SIGKILL)
        up.wait()
    try:
        # The other hosts' shells die with the orchestrator, and their namespaces with them. What
        # makes inodes unsafe: the kernel hands a freed namespace's number to the next one. Arranged
        # here rather than hoped for (a CI run's second fabric once got none of them: the kernel's
        # deferred cleanup had not run yet, or an earlier test's namespaces had freed lower numbers).
        shells = [ProcessRecord(**p) for p in killed["processes"] if p["what"].startswith(SHELL_OF)]
        assert wait_until(lambda: not any(shell.alive() for shell in shells), 10)
        holder_inode = os.stat(f"/proc/{holder.pid}/ns/net").st_ino
        freed = {ns["inode"] for ns in killed["namespaces"]} - {holder_inode}
        reusing = NamespacesReusingInodes(freed, timeout_s=60)
        assert reusing.reusing, "the kernel handed none of the killed run's inode numbers out again within 60 s"
        second = FabricNet(fabric_config({"kind": "fattree", "k": 4}), state_root=tmp_path / "state")
        with second:
            clean = ccemu(env, "clean")

            assert clean.returncode == 0, clean.stdout + clean.stderr
            assert "killed-" in clean.stdout and f"{second.run_id}: still running" in clean.stdout
            assert leftovers(killed) == []
            assert holder.wait(timeout=10) == -signal.SIGKILL
            assert reusing.alive(), "ccemu clean killed a process in a namespace that only reused an inode number"
            assert all(p.alive() for p in second.inventory.processes)
            assert check_reachability(second).problems == []
    finally:
        if reusing is not None:
            reusing.stop()
        remove_if_left(killed, killed_dir)  # when an assertion stopped the test before `ccemu clean`
    assert root_interfaces() == interfaces_before


def test_ccemu_clean_leaves_a_live_run_alone(tmp_path):
    net = FabricNet(fabric_config({"kind": "star", "hosts": 2}), state_root=tmp_path)
    with net:
        clean = ccemu({**os.environ, "CCEMU_STATE_ROOT": str(tmp_path)}, "clean")
        assert "still running" in clean.stdout
        assert net.inventory.state_dir.exists()


def test_ccemu_exec_and_ports_work_on_a_live_fabric_and_ctrl_c_tears_everything_down(tmp_path):
    interfaces_before = root_interfaces()
    up, env, state_dir, state = start_ccemu_up(tmp_path, "name: interrupted\ntopology: {kind: star, hosts: 3}\n")
    try:
        # One reply within 30 s (-w: ping sends again each second until one comes): the first packet of
        # a flow takes OVS's slow path, whose upcall can be dropped on a loaded machine.
        ping = ccemu(env, "exec", "h1", "ping", "-c", "1", "-w", "30", "10.0.0.3")
        assert ping.returncode == 0, ping.stdout + ping.stderr
        ports = ccemu(env, "ports")
        assert ports.returncode == 0, ports.stderr
        assert all(name in ports.stdout for name in ("h1-eth1", "s1-eth1", "s1-eth3"))
    finally:
        up.send_signal(signal.SIGINT)
        status = up.wait(timeout=30)

    assert status == 0
    assert leftovers(state) == []
    assert root_interfaces() == interfaces_before
    assert not state_dir.exists()
