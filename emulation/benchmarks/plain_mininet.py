"""Baseline for bringup.py: the same fat-tree built by plain Mininet 2.3.0.

Defaults except what this machine forces: userspace datapath (no OVS kernel module) and
no controller (none is installed; switches are bring-up only). Mininet.init()'s global
sysctl changes are skipped so the baseline changes nothing outside its namespace.

Run by bringup.py inside a private network namespace (`unshare --net`): what plain Mininet
puts in "the root namespace" (switch ports, OVS taps) goes away with it. Prints one JSON
line: {"up": seconds, "down": seconds}.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from functools import partial

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import OVSSwitch
from mininet.topo import Topo

from ccemu import interrupts
from ccemu.fabric.inventory import Inventory
from ccemu.model.topology import fat_tree

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


class MininetFatTree(Topo):
    """ccemu's fat-tree, same names and ports, as a plain Mininet Topo."""

    def build(self, k: int):
        topo = fat_tree(k)
        for switch in topo.switches:
            self.addSwitch(switch.name, dpid=f"{switch.dpid:016x}")
        for host in topo.hosts:
            self.addHost(host.name)
        for link in topo.links:
            self.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port)


def start_ovs(inventory: Inventory) -> None:
    rundir = inventory.state_dir
    os.environ.update(OVS_RUNDIR=str(rundir), OVS_DBDIR=str(rundir))  # Mininet's ovs-vsctl finds them
    subprocess.run(["ovsdb-tool", "create", f"{rundir}/conf.db", SCHEMA], check=True)
    for argv in (
        ["ovsdb-server", f"{rundir}/conf.db", f"--remote=punix:{rundir}/db.sock", f"--log-file={rundir}/db.log"],
        ["ovs-vswitchd", f"unix:{rundir}/db.sock", f"--log-file={rundir}/vswitchd.log"],
    ):
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        inventory.add_process(proc.pid, argv[0])
        if argv[0] == "ovsdb-server":
            while not (rundir / "db.sock").exists():
                time.sleep(0.01)
            subprocess.run(["ovs-vsctl", "--no-wait", "init"], check=True)


def main() -> None:
    k = int(sys.argv[1])
    setLogLevel("warning")
    Mininet.inited = True
    inventory = Inventory.create(f"bench-plain-mininet-k{k}-{os.getpid()}")
    try:
        start_ovs(inventory)
        net = Mininet(topo=MininetFatTree(k=k), switch=partial(OVSSwitch, datapath="user"), controller=None,
                      build=False)
        started = time.monotonic()
        net.build()
        net.start()
        up = time.monotonic() - started
        started = time.monotonic()
        net.stop()
        down = time.monotonic() - started
        print(json.dumps({"up": up, "down": down}))
    finally:
        problems = inventory.remove()
        if problems:
            print(f"baseline left: {problems}", file=sys.stderr)


if __name__ == "__main__":
    interrupts.run_script(main, "benchmarks/plain_mininet.py")
