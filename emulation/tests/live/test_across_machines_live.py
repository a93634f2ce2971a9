"""One fabric across machines, for real: "machines" made of network namespaces, each with its own
sshd and state root, joined by a network with a jumbo MTU (tests/live/netns_machines.py), and the
controller (`ccemu` itself) in a namespace on that network. They share this machine's CPUs: these
tests show the mechanism, not the capacity. Every test's name ends in `across_machines`
(`pytest -k across_machines` runs them as a group)."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from ccemu.polling import wait_until
from netns_machines import NetnsMachines

EXIT_FABRIC = 6


@pytest.fixture
def machines(tmp_path):
    made = NetnsMachines(tmp_path, ["m1", "m2"])
    try:
        yield made.start()
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
    `within_s`: a part that tears down by itself is given that long)."""
    wait_until(lambda: not left_on(machines), within_s, 0.2)
    assert left_on(machines) == {}


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


def up_across(machines: NetnsMachines) -> subprocess.Popen:
    """`ccemu up --inventory` on the controller, once every machine's part is up."""
    proc = subprocess.Popen(machines.controller_command("up", str(Path(__file__).parents[3] / "workloads" /
                                                                  "experiments" / "incast.yaml"),
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
def test_a_cut_links_port_is_a_vxlan_device_that_runs_the_same_port_model_as_a_local_link_across_machines(machines):
    controller = up_across(machines)
    try:
        # a1 (pod 1, on m1): port 3 leads to core c1 (m1 too), port 4 to c2 (on m2): cut, the first cut link.
        namespace = next(line.split()[1] for line in machines.on_machine("m1", "ports").stdout.splitlines()
                         if " a1-eth4 " in line)
        on_m1 = lambda *argv: machines.on_machine("m1", "exec", namespace, *argv)  # noqa: E731
        (device,) = json.loads(on_m1("ip", "-d", "-j", "link", "show", "a1-eth4").stdout)
        vxlan = device["linkinfo"]["info_data"]
        assert device["linkinfo"]["info_kind"] == "vxlan" and vxlan["id"] == 1
        assert (vxlan["local"], vxlan["remote"]) == (machines.address("m1"), machines.address("m2"))
        # The port model on the tunnel's device is the local link's: the same qdiscs, classes and
        # program (a qdisc's reference count aside: a veth holds its root once more than a VXLAN device).
        def tc(*argv: str) -> list:
            done = on_m1("tc", "-j", *argv)
            assert done.returncode == 0 and done.stdout, (argv, done.stderr)
            if not done.stdout.startswith("["):  # HTB's classes: iproute2 prints them as text even with -j
                return done.stdout.split()
            return [{k: v for k, v in item.items() if k != "refcnt"} for item in json.loads(done.stdout)]

        for what, after in (("qdisc", ()), ("class", ()), ("filter", ("egress",))):
            tunnel, local = (tc(what, "show", "dev", port, *after) for port in ("a1-eth4", "a1-eth3"))
            assert tunnel == local and tunnel, (what, tunnel, local)
    finally:
        controller.terminate()
        controller.communicate(timeout=60)
    assert controller.returncode == 0
    nothing_left_on(machines)
