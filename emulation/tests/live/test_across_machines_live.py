"""One fabric across machines, for real: "machines" made of network namespaces, each with its own
sshd and state root, joined by a network with a jumbo MTU (tests/live/netns_machines.py), and the
controller (`ccemu` itself) in a namespace on that network. They share this machine's CPUs: these
tests show the mechanism, not the capacity. Every test's name ends in `across_machines`
(`pytest -k across_machines` runs them as a group)."""

import calendar
import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from statistics import mean

import psutil
import pytest
import yaml

from ccemu.experiments.validation import load_experiment
from ccemu.model.partition import Partition
from ccemu.model.topology import fat_tree
from ccemu.polling import wait_until
from ccemu.results.fidelity import CLOCK_ERROR_WARN
from netns_machines import NetnsMachines

EXIT_FABRIC = 6
REPO = Path(__file__).resolve().parents[3]


# Each machine's CLOCK_MONOTONIC hours from the controller's and from the other's, as real machines'
# (booted at different times) are: every time that crosses machines must be in the run's shared epoch.
CLOCKS_AHEAD_S = {"m1": 3 * 3600, "m2": 7 * 3600}


@pytest.fixture
def machines(tmp_path):
    made = NetnsMachines(tmp_path, ["m1", "m2"], clock_ahead_s=CLOCKS_AHEAD_S)
    try:
        made.start()
        # The premise: a session on each machine reads its own clock, hours from ours.
        for name, ahead in CLOCKS_AHEAD_S.items():
            assert abs(made.monotonic_s(name) - time.monotonic() - ahead) < 60, name
        yield made
    finally:
        made.stop()
    assert made.processes() == [] and not made.made


def interfaces_here() -> set[str]:
    return set(os.listdir("/sys/class/net"))


def shown(proc: psutil.Process) -> str:
    try:
        return f"{proc.pid} {' '.join(proc.cmdline())[:80]}"
    except psutil.Error:
        return f"{proc.pid} (ended)"


def left_on(machines: NetnsMachines) -> dict[str, tuple[list, list]]:
    """Per machine that holds anything: (what its state root holds, what runs there but its sshd)."""
    left = {}
    for name in machines.names:
        root = machines.state_root(name)
        held = list(root.iterdir()) if root.exists() else []
        running = [shown(p) for p in machines.processes_in(name)]
        if held or running:
            left[name] = (held, running)
    return left


def nothing_left_on(machines: NetnsMachines, within_s: float = 0) -> None:
    """Each machine holds no run (its state root is empty) and runs nothing but its sshd (within
    `within_s`: a part that tears down by itself is given that long), and the controller recorded
    no run it left (its Prometheus)."""
    wait_until(lambda: not left_on(machines), within_s, 0.2)
    assert left_on(machines) == {}
    assert list(machines.controller_state_root.rglob("state.json")) == []
    assert {name: chains_on(machines, name) for name in machines.names} == {name: [] for name in machines.names}


def chains_on(machines: NetnsMachines, name: str) -> list[str]:
    """ccemu's tunnel filters (fabric/firewall.py) in machine `name`'s namespace."""
    listed = subprocess.run(["ip", "netns", "exec", machines.namespace(name), "iptables", "-w", "-S"],
                            capture_output=True, text=True, check=True)
    return [line.split()[1] for line in listed.stdout.splitlines() if line.startswith("-N CCEMU-VX-")]


def run_ids_on(machines: NetnsMachines, name: str) -> list[Path]:
    root = machines.state_root(name)
    return [p for p in root.iterdir() if (p / "state.json").exists()] if root.exists() else []


@pytest.mark.root
@pytest.mark.parametrize("datapath", ["ovs", "bpf"])
def test_a_k4_fat_tree_split_over_two_machines_passes_all_pairs_and_path_symmetry_across_machines(machines,
                                                                                                 datapath):
    before = interfaces_here()
    done = subprocess.run(machines.controller_command("check", "--inventory", str(machines.inventory()), "--k", "4",
                                                      "--datapath", datapath), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    # The plan, before anything started: by pod, the cores spread, 8 links cut.
    assert "8 of 32 links between switches cut" in out
    assert "m1: 10 switches (e1-e4, a1-a4, c1, c3), 8 hosts (h1-h8), 8 cut links" in out
    assert "m2: 10 switches (e5-e8, a5-a8, c2, c4), 8 hosts (h9-h16), 8 cut links" in out
    assert "reachability of 240 ordered pairs checked" in out
    # A pair on each machine: its every path-id crosses the tunnels (h9 is on m2).
    assert "h1 <-> h9" in out and "OK: all pairs reachable, paths symmetric" in out
    nothing_left_on(machines)
    assert interfaces_here() == before


@pytest.mark.root
def test_a_network_too_small_for_the_tunnels_is_refused_before_anything_starts_across_machines(tmp_path):
    machines = NetnsMachines(tmp_path, ["m1", "m2"], underlay_mtu=1500)
    try:
        machines.start()
        done = subprocess.run(machines.controller_command("check", "--inventory", str(machines.inventory())),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == EXIT_FABRIC, done.stdout + done.stderr
        line = done.stderr.strip()
        assert len(line.splitlines()) == 1, line
        assert ("m1: its network to m2 (100.64.250.2, over ul0) carries 1500 B packets; the tunnels of links of MTU "
                "1500 need 1550") in line
        assert "ip link set ul0 mtu 1550" in line
        nothing_left_on(machines)
    finally:
        machines.stop()


@pytest.mark.root
def test_a_machine_running_another_cchost_is_refused_in_one_line_before_anything_starts_across_machines(machines,
                                                                                                     tmp_path):
    """m2's ccemu runs a cchost one byte longer than the controller's (CCEMU_CCHOST in a build root of
    its own): `ccemu check` names m2 and what brings it up to date, and leaves nothing anywhere."""
    other = tmp_path / "other-build"
    (other / ".venv" / "bin").mkdir(parents=True)
    cchost = other / "cchost"
    cchost.write_bytes((REPO / "build" / "cchost").read_bytes() + b"\0")
    wrapper = other / ".venv" / "bin" / "ccemu"
    wrapper.write_text(f'#!/bin/sh\nCCEMU_CCHOST={cchost} exec {REPO / ".venv" / "bin" / "ccemu"} "$@"\n')
    wrapper.chmod(0o755)
    inventory = machines.inventory(own={"m2": {"ccemu_build_root": str(other)}})
    done = subprocess.run(machines.controller_command("check", "--inventory", str(inventory)), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == EXIT_FABRIC, done.stdout + done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert line.startswith("ccemu: machine m2 runs another build than this controller (cchost "), line
    assert "make provision INVENTORY=" in line and "machine m1" not in line
    nothing_left_on(machines)


def up_across(machines: NetnsMachines) -> subprocess.Popen:
    """`ccemu up --inventory` on the controller, once every machine's part is up."""
    proc = subprocess.Popen(machines.controller_command("up", str(REPO / "workloads" / "experiments" / "incast.yaml"),
                                                        "--inventory", str(machines.inventory())),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = ""
    while "is up over 2 machines" not in line:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            raise AssertionError(f"ccemu up --inventory ended: {proc.stderr.read()[-2000:]}")
    return proc


@pytest.mark.root
def test_sigkill_of_the_controller_then_ccemu_clean_on_each_machine_leaves_nothing_across_machines(machines):
    before = interfaces_here()
    controller = up_across(machines)
    try:
        assert all(run_ids_on(machines, name) for name in machines.names)
        # m1's part is killed outright too (an OOM kill, say): only `ccemu clean` there can remove its fabric.
        (m1_run,) = run_ids_on(machines, "m1")
        m1_part = json.loads((m1_run / "state.json").read_text())["orchestrator"]["pid"]
        controller.send_signal(signal.SIGKILL)
        os.kill(m1_part, signal.SIGKILL)
        controller.wait(30)
    finally:
        controller.kill()
        controller.wait()
    # m2's part saw its controller go (its input ended) and tore its part down by itself.
    assert wait_until(lambda: "m2" not in left_on(machines), 60, 0.2), left_on(machines)
    assert run_ids_on(machines, "m1")
    cleaned = subprocess.run(machines.controller_command("clean", "--inventory", str(machines.inventory())),
                             capture_output=True, text=True, timeout=300)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert f"m1: {m1_run.name}: removed" in cleaned.stdout and "m2: nothing to clean" in cleaned.stdout, cleaned.stdout
    nothing_left_on(machines)
    assert interfaces_here() == before


@pytest.mark.root
def test_a_machine_that_disappears_mid_run_is_named_in_one_line_and_the_run_ends_across_machines(machines):
    controller = up_across(machines)
    try:
        cut_at = time.monotonic()
        machines.cut("m2")
        _, err = controller.communicate(timeout=60)
        noticed = time.monotonic() - cut_at
    finally:
        controller.kill()
        controller.wait()
    assert controller.returncode == EXIT_FABRIC, err
    line = err.strip()
    assert len(line.splitlines()) == 1, line
    assert line.startswith("ccemu: machine m2 (100.64.250.2:22) stopped answering while the fabric was up"), line
    assert noticed < 15, noticed  # ssh's keep-alive: 3 unanswered probes a second apart
    # m1 tore its part down; m2's ended when its sshd gave the lost session up (ClientAliveInterval).
    nothing_left_on(machines, within_s=60)


@pytest.mark.root
def test_a_cut_links_port_runs_the_same_port_model_as_a_local_link_and_its_wire_is_a_vxlan_tunnel_across_machines(
        machines):
    controller = up_across(machines)
    try:
        # a1 (pod 1, on m1): port 3 leads to core c1 (m1 too), port 4 to c2 (on m2): cut, the first cut link.
        namespace = next(line.split()[1] for line in machines.on_machine("m1", "ports").stdout.splitlines()
                         if " a1-eth4 " in line)
        on_m1 = lambda node, *argv: machines.on_machine("m1", "exec", node, *argv)  # noqa: E731

        def tc(*argv: str) -> list:
            done = on_m1(namespace, "tc", "-j", *argv)
            assert done.returncode == 0 and done.stdout, (argv, done.stderr)
            if not done.stdout.startswith("["):  # HTB's classes: iproute2 prints them as text even with -j
                return done.stdout.split()
            return [{k: v for k, v in item.items() if k != "refcnt"} for item in json.loads(done.stdout)]

        # The port model on the cut link's port is the local link's: the same qdiscs, classes and program.
        for what, after in (("qdisc", ()), ("class", ()), ("filter", ("egress",))):
            cut, local = (tc(what, "show", "dev", port, *after) for port in ("a1-eth4", "a1-eth3"))
            assert cut == local and cut, (what, cut, local)
        # Its peer is the wire end, which hands every frame to the link's VXLAN device (key 1), m1 to m2, and back.
        (port,) = json.loads(on_m1(namespace, "ip", "-d", "-j", "link", "show", "a1-eth4").stdout)
        assert port["linkinfo"]["info_kind"] == "veth"
        wire = {link["ifname"]: link for link in json.loads(on_m1("wire0", "ip", "-d", "-j", "link", "show").stdout)}
        for dev, to in (("wire1", "vx1"), ("vx1", "wire1")):
            filters = on_m1("wire0", "tc", "filter", "show", "dev", dev, "ingress").stdout
            assert f"mirred (Egress Redirect to device {to})" in filters, filters
        vxlan = wire["vx1"]["linkinfo"]["info_data"]
        # Its identifier is the run's first (random: model/tunnel.py), and its filter is named by it.
        assert chains_on(machines, "m1") == [f"CCEMU-VX-{vxlan['id']:06x}"]
        assert (vxlan["local"], vxlan["remote"]) == (machines.address("m1"), machines.address("m2"))
        # The wire end's port program only counts: it drops and marks nothing the tunnel hands it.
        (ports,) = machines.state_root("m1").glob("*/config/wire0.ports")
        line = ports.read_text().splitlines()[0]
        assert line.startswith("port=wire1 ") and " marker=none " in line and " buffer_bytes=1073741824," in line, line
        # One outer source port for all its frames, and nothing merged or split on the way.
        assert vxlan["port_range"] == {"low": 49152, "high": 49153}
        for dev in ("vx1", "wire1"):
            features = on_m1("wire0", "ethtool", "-k", dev).stdout
            for offload in ("generic-receive-offload", "generic-segmentation-offload", "tcp-segmentation-offload"):
                assert f"{offload}: off" in features, (dev, offload, features)
    finally:
        controller.terminate()
        controller.communicate(timeout=60)
    assert controller.returncode == 0
    nothing_left_on(machines)


FORGED_FRAMES = 50
FORGE = """
import socket, sys
address, vni, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
header = bytes([0x08, 0, 0, 0]) + vni.to_bytes(3, "big") + bytes(1)  # VXLAN: flags (VNI valid), VNI
frame = bytes.fromhex("ffffffffffff" "020000000001" "88b5") + bytes(46)  # broadcast, local experimental type
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
    for _ in range(count):
        out.sendto(header + frame, (address, 4789))
"""


@pytest.mark.root
def test_a_host_outside_the_inventory_cannot_put_frames_into_a_cut_link_across_machines(machines):
    """The controller's namespace is on the machines' network but is no machine of the run: VXLAN
    packets it sends with the identifier of m1's first tunnel must not reach the fabric."""
    controller = up_across(machines)
    try:
        def vx1() -> dict:
            shown = machines.on_machine("m1", "exec", "wire0", "ip", "-d", "-s", "-j", "link", "show", "vx1")
            assert shown.returncode == 0, shown.stderr
            return json.loads(shown.stdout)[0]

        before = vx1()
        vni = before["linkinfo"]["info_data"]["id"]
        sent = subprocess.run(["ip", "netns", "exec", machines.controller, "python3", "-c", FORGE,
                               machines.address("m1"), str(vni), str(FORGED_FRAMES)], capture_output=True, text=True)
        assert sent.returncode == 0, sent.stderr
        time.sleep(0.5)
        taken = vx1()["stats64"]["rx"]["packets"] - before["stats64"]["rx"]["packets"]
        # Before the filter, every one of them was decapsulated into the fabric.
        assert taken == 0, f"{taken} of {FORGED_FRAMES} forged frames entered the fabric"
        (chain,) = chains_on(machines, "m1")
        dropped = subprocess.run(["ip", "netns", "exec", machines.namespace("m1"), "iptables", "-w", "-L", chain,
                                  "-n", "-v", "-x"], capture_output=True, text=True, check=True).stdout
        assert any(line.split()[:3] == [str(FORGED_FRAMES), str(FORGED_FRAMES * 96), "DROP"]
                   for line in dropped.splitlines()), dropped
    finally:
        controller.terminate()
        controller.communicate(timeout=60)
    assert controller.returncode == 0
    nothing_left_on(machines)


@pytest.mark.root
def test_sustained_tcp_across_a_cut_link_gets_the_links_rate_across_machines(machines, tmp_path):
    """Kernel TCP from h1 (on m1) to h9 (on m2) for 8 s: every path between them crosses a cut
    link, whose port must drain as a local one does (fabric/tunnels.py)."""
    controller = up_across(machines)
    server = None
    try:
        server = subprocess.Popen(machines.on_machine_argv("m2", "exec", "h9", "iperf3", "-s", "-1", "-p", "5201"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert wait_until(lambda: "5201" in machines.on_machine("m2", "exec", "h9", "ss", "-Hltn").stdout, 30, 0.2)
        client = machines.on_machine("m1", "exec", "h1", "iperf3", "-c", "10.0.0.9", "-p", "5201", "-t", "8", "-J")
        assert client.returncode == 0, client.stdout[-2000:] + client.stderr[-2000:]
        received = json.loads(client.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
        # incast.yaml's links (1 Gbit/s / its dilation: 25 Mbit/s since 2026-11-23; this test said 5
        # until 2026-11-29 and so passed at a fifth of the rate); TCP's payload per wire frame.
        (config, _) = load_experiment(REPO / "workloads" / "experiments" / "incast.yaml", tmp_path)
        ideal = config.link.rate_mbps * 1448 / 1538
        print(f"h1 -> h9 across the machines: {received:.3f} Mbit/s of an ideal {ideal:.3f}")  # -rP shows it
        assert 0.9 * ideal <= received <= 1.02 * ideal, (received, ideal)
    finally:
        if server is not None:
            server.kill()
            server.wait()
        controller.terminate()
        controller.communicate(timeout=60)
    nothing_left_on(machines, within_s=30)


def incast_file(tmp_path: Path, schemes: int = 4, **workload) -> Path:
    """workloads/experiments/incast.yaml with its first `schemes` schemes and `workload` changed, in
    the datacenter these tests were measured in (d = 200, RTO_min 10 ms): they check the split
    fabric, not the paper's operating point, which may move."""
    incast = yaml.safe_load((REPO / "workloads" / "experiments" / "incast.yaml").read_text())
    incast["workload"].update({"settle_rounds": 0, **workload})  # each round counted, one round or several
    incast["schemes"] = incast["schemes"][:schemes]
    incast["datacenter"]["dilation"] = 200
    incast["transport"]["rto_min_ms"] = 10
    path = tmp_path / "incast.yaml"
    path.write_text(yaml.safe_dump(incast))
    return path


def across(machines: NetnsMachines, experiment: Path, results: Path, *options: str) -> list[str]:
    """`ccemu experiment` of `experiment` over the machines, on the controller."""
    return machines.controller_command("experiment", str(experiment), "--results", str(results), "--inventory",
                                       str(machines.inventory()), *options)


def fcts_of(bundle_root: Path) -> dict[tuple[str, str], list[float]]:
    """(scheme, N) -> its flows' FCTs (s), in the only bundle under `bundle_root`."""
    (bundle,) = [p.parent for p in bundle_root.glob("*/*/manifest.json")]
    fcts: dict[tuple[str, str], list[float]] = {}
    with open(bundle / "flows.csv") as rows:
        for row in csv.DictReader(rows):
            fcts.setdefault((row["scheme"], row["n"]), []).append(float(row["fct"]))
    return fcts


def rounds_of(bundle_root: Path) -> dict[tuple[str, str], tuple[int, float, float, int]]:
    """(scheme, N) -> (bytes, seconds, goodput in bit/s, flows' timeouts) of its round, in the only
    bundle under `bundle_root`."""
    (bundle,) = [p.parent for p in bundle_root.glob("*/*/manifest.json")]
    timeouts: dict[tuple[str, str], int] = {}
    with open(bundle / "flows.csv") as rows:
        for row in csv.DictReader(rows):
            key = (row["scheme"], row["n"])
            timeouts[key] = timeouts.get(key, 0) + int(row["timeouts"] or 0)
    with open(bundle / "rounds.csv") as rows:
        return {(row["scheme"], row["n"]): (int(row["bytes"]), float(row["duration"]), float(row["goodput_bps"]),
                                            timeouts[row["scheme"], row["n"]])
                for row in csv.DictReader(rows)}


def goodput_of(rounds: dict[tuple[str, str], tuple[int, float, float, int]], blocks: set) -> float:
    """The goodput of `blocks` together: their bytes over their rounds' time."""
    mine = [rounds[block] for block in blocks]
    return sum(figures[0] for figures in mine) * 8 / sum(figures[1] for figures in mine)


@pytest.mark.root
def test_incast_on_a_fabric_split_over_two_machines_gets_the_goodput_of_one_machine_across_machines(machines,
                                                                                                    tmp_path):
    """`make experiment NAME=incast` with one round per N, on one machine and over two (k=4: 8 cut
    links) whose clocks run 3 and 7 hours ahead of the controller's (the fixture's), side by side in
    one test: ExpressPass's, SprayPass's and DCTCP's goodput, and their flows' mean FCT, over their
    blocks that no timeout decided within 10 % of the one machine's, every flow of every scheme
    finished, and ExpressPass drops no data on the split fabric.

    Each scheme's, not each block's: one round is one sample, and two runs on one machine alone
    read 0.946-1.068 of each other per block (ExpressPass N=20: 3.899 and 3.689 Mbit/s). Over a
    scheme's five blocks the same runs read 0.983-1.027.

    Blocks in which a flow timed out in either run are left out: at d = 200 one 10 ms RTO_min
    stalls a 1.6 s round for 2 s, so such a round's time counts timeouts, a lottery of the
    transport rather than a property of the fabric. DCTCP's and DCTCP+'s incast rounds time out
    from N = 20 on (3-9 flows at N = 20 in three rounds on one machine), and DCTCP+'s N = 256 round
    took 6.3 s or 2.9 s by whether its paced flows escaped them; a CI run went red on it (DCTCP+
    over its five blocks 1.131, N = 256 1.447; 2026-11-27). DCTCP+ is left out altogether: with
    its timeouts gone, its one judged block (N = 8) is a draw of its randomised slow_time (three
    rounds on one machine: 4.07-4.66 Mbit/s), and a CI run went red on it too (0.882, no timeout
    in either run; 2026-11-27). DCTCP, the same windows without the random pacing, stands for it
    (N = 8: 1.000, 0.992 and 1.000 in three runs), and since 2026-11-29 DCTCP+ does not run here
    at all: judged by nothing, its rounds (timeouts included) took much of the test's 347 s in a
    35-minute CI. These rules were written down before the runs that test them; the credit schemes
    time out never, so all their blocks are judged, and DCTCP's N = 8 is judged (asserted). The
    per-block figures are printed (-rP)."""
    experiment = incast_file(tmp_path, schemes=3, rounds=1)
    here = subprocess.run([str(REPO / ".venv" / "bin" / "ccemu"), "experiment", str(experiment), "--results",
                           str(tmp_path / "here"), "--no-monitoring"], capture_output=True, text=True, timeout=1800)
    assert here.returncode == 0, here.stdout[-3000:] + here.stderr[-3000:]
    split = subprocess.run(across(machines, experiment, tmp_path / "across", "--no-monitoring"),
                           capture_output=True, text=True, timeout=1800)
    assert split.returncode == 0, split.stdout[-3000:] + split.stderr[-3000:]
    one, two = rounds_of(tmp_path / "here"), rounds_of(tmp_path / "across")
    assert one.keys() == two.keys() and len(one) == 3 * 5
    for block in sorted(one):  # shown with -rP
        print(f"{block[0]:12} N={block[1]:>3}  one machine {one[block][2] / 1e6:.3f} Mbit/s ({one[block][3]} timeouts)"
              f"  two {two[block][2] / 1e6:.3f} ({two[block][3]})  ratio {two[block][2] / one[block][2]:.3f}")
    judged = {block for block in one if one[block][3] == two[block][3] == 0 and block[0] != "dctcp+"}
    must = {("dctcp", "8")} | {block for block in one if block[0] in ("expresspass", "spraypass")}
    assert must <= judged, sorted(must - judged)
    ratios = {scheme: goodput_of(two, {b for b in judged if b[0] == scheme})
              / goodput_of(one, {b for b in judged if b[0] == scheme})
              for scheme in ("expresspass", "spraypass", "dctcp")}
    print("each scheme's goodput over its judged blocks, two machines / one:", ratios)
    assert all(0.9 <= ratio <= 1.1 for ratio in ratios.values()), ratios
    # Every flow's time, not only the round's (whose end is the last flow's, often one on the
    # aggregator's own machine): a flow across machines ends on its receiver's clock.
    fcts_one, fcts_two = fcts_of(tmp_path / "here"), fcts_of(tmp_path / "across")
    assert all(fct > 0 for fcts in fcts_two.values() for fct in fcts), "a flow across machines took no time"
    fct_ratios = {scheme: mean(f for b in judged if b[0] == scheme for f in fcts_two[b])
                  / mean(f for b in judged if b[0] == scheme for f in fcts_one[b])
                  for scheme in ("expresspass", "spraypass", "dctcp")}
    print("each scheme's mean FCT over its judged blocks, two machines / one:", fct_ratios)
    assert all(0.9 <= ratio <= 1.1 for ratio in fct_ratios.values()), fct_ratios
    (bundle,) = [p.parent for p in (tmp_path / "across").glob("*/*/manifest.json")]
    with open(bundle / "ports.csv") as rows:
        ports = list(csv.DictReader(rows))
    assert sum(int(row["data_dropped"]) for row in ports if row["scheme"] == "expresspass") == 0
    assert sum(int(row["tunnel_lost"]) for row in ports) == 0  # the bridge between the machines loses nothing
    # The clocks hours apart were measured to a fraction of the base RTT, at each block's start and end.
    blocks = json.loads((bundle / "manifest.json").read_text())["fidelity"]["blocks"]
    assert all(block["clock_error_of_base_rtt"] < CLOCK_ERROR_WARN for block in blocks), blocks
    nothing_left_on(machines, within_s=30)


def drop_vxlan_toward(machines: NetnsMachines, name: str, tmp_path: Path) -> None:
    """1 in 100 of the tunnels' packets toward machine `name` lost on the machines' network: a bpf
    program on the bridge port that leads there (it goes with the controller's namespace)."""
    obj = tmp_path / "drop_vxlan.o"
    machine_type = subprocess.run(["gcc", "-dumpmachine"], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["clang", "-O2", "-Wall", "-target", "bpf", f"-I/usr/include/{machine_type}", "-c",
                    str(Path(__file__).parent / "drop_vxlan.bpf.c"), "-o", str(obj)], check=True)
    port = f"ul-{name}"
    for argv in (["qdisc", "add", "dev", port, "clsact"],
                 ["filter", "add", "dev", port, "egress", "bpf", "da", "obj", str(obj), "sec", "tc"]):
        subprocess.run(["tc", "-n", machines.controller, *argv], check=True)


@pytest.mark.root
def test_frames_the_network_between_machines_loses_fail_the_block_naming_each_cut_link_across_machines(machines,
                                                                                                      tmp_path):
    """1 % of the tunnels' packets toward m2 dropped on the machines' network: every block FAILs naming
    cut links from m1 to m2 and their lost frames, ports.csv counts them on m1's ports alone, and
    no frame of the other direction is counted lost."""
    drop_vxlan_toward(machines, "m2", tmp_path)
    run = subprocess.run(across(machines, incast_file(tmp_path, 1, rounds=1, flows=[8]), tmp_path / "across",
                                "--no-monitoring", "--skip-check"), capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (bundle,) = [p.parent for p in (tmp_path / "across").glob("*/*/manifest.json")]
    manifest = json.loads((bundle / "manifest.json").read_text())
    (block,) = manifest["fidelity"]["blocks"]
    losses = [r for r in manifest["fidelity"]["reasons"] if "the network between the machines lost" in r]
    assert block["status"] == "FAIL" and losses, manifest["fidelity"]["reasons"]
    with open(bundle / "ports.csv") as rows:
        lost = {row["port"]: int(row["tunnel_lost"]) for row in csv.DictReader(rows)}
    lost_on = {port for port, n in lost.items() if n}
    assert lost_on and all(f"cut link {port} -> " in " ".join(losses) for port in lost_on)
    # Only frames leaving m1 were lost (the plan's split of incast's k=4 fat-tree: model/partition.py).
    machine_of = Partition.of(fat_tree(4), list(machines.names)).machine_of
    assert {machine_of[port.split("-eth")[0]] for port in lost_on} == {"m1"}
    assert sum(lost.values()) == sum(int(r.split(" lost ")[1].split(" of ")[0]) for r in losses)
    print(losses)
    nothing_left_on(machines, within_s=30)


@pytest.mark.root
def test_a_machine_that_disappears_mid_experiment_is_named_in_one_line_and_the_run_ends_across_machines(machines,
                                                                                                       tmp_path):
    run = subprocess.Popen(across(machines, incast_file(tmp_path, 1, rounds=20, flows=[8]), tmp_path / "across",
                                  "--skip-check"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Mid-run: once the warm-up's 15 responses and the first round's 8 are recorded (mirrored back).
        assert wait_until(lambda: sum(len(p.read_text().splitlines())
                                      for p in (tmp_path / "across").glob("*/*/work/*/*.records")) >= 15 + 8, 300, 0.2)
        machines.cut("m2")
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
        run.wait()
    assert run.returncode == EXIT_FABRIC, out[-2000:] + err
    line = err.strip()
    assert len(line.splitlines()) == 1, line
    assert line.startswith("ccemu: machine m2 (100.64.250.2:22) stopped answering"), line
    (manifest,) = (tmp_path / "across").glob("*/*/manifest.json")
    assert json.loads(manifest.read_text())["failed"].startswith("machine m2")  # the bundle keeps what finished
    nothing_left_on(machines, within_s=60)


@pytest.mark.root
def test_the_live_metrics_of_a_fabric_over_two_machines_cover_the_ports_of_both_across_machines(machines, tmp_path):
    """The controller's collector reads every machine's ports at each scrape and the hosts' records
    as they are mirrored back; its Prometheus keeps them in the bundle, as on one machine."""
    from test_monitoring_live import wait_for_line

    from ccemu.metrics.monitoring import query_range

    split = subprocess.run(across(machines, incast_file(tmp_path, 1, rounds=2, flows=[8]), tmp_path / "across",
                                  "--skip-check"), capture_output=True, text=True, timeout=900)
    assert split.returncode == 0, split.stdout[-3000:] + split.stderr[-3000:]
    (bundle,) = [p.parent for p in (tmp_path / "across").glob("*/*/manifest.json")]
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["monitoring"]["scrapes"] >= manifest["monitoring"]["seconds"] * 0.5
    monitor = subprocess.Popen([str(REPO / ".venv" / "bin" / "ccemu"), "monitor", str(bundle), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "CCEMU_STATE_ROOT": str(tmp_path / "state")})
    try:
        url = wait_for_line(monitor, r"(http://127\.0\.0\.1:\d+)").group(1)
        start = calendar.timegm(time.strptime(manifest["started"], "%Y-%m-%dT%H:%M:%SZ"))
        end = calendar.timegm(time.strptime(manifest["finished"], "%Y-%m-%dT%H:%M:%SZ")) + 2
        for switches in ("e1|e2|e3|e4|a1|a2|a3|a4|c1|c3", "e5|e6|e7|e8|a5|a6|a7|a8|c2|c4"):  # m1's, m2's
            query = f'ccemu_port_enqueued_packets_total{{experiment="incast",switch=~"{switches}"}} > 0'
            series = query_range(url, query, start, end)
            assert series, switches
        assert query_range(url, 'ccemu_fidelity_cpu_busy_ratio{experiment="incast"}', start, end)
    finally:
        monitor.send_signal(signal.SIGINT)
        monitor.wait(timeout=30)
    assert list((tmp_path / "state").rglob("state.json")) == []  # the monitor's Prometheus went with it
    nothing_left_on(machines, within_s=30)
