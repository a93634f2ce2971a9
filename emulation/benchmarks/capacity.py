"""Forwarding capacity of the emulated fabric (benchmark, not a test: prints figures).

8 cross-pod kernel-TCP pairs (iperf3, h1..h8 -> h9..h16) on a k=4 fat-tree, each on a path of
its own (ccemu.hosts.tcpload), at several link rates and OVS instance counts. Prints per rate and
variant: goodput / ideal per pair (ideal = link rate x 1448/1538, TCP payload per wire frame),
ovs-vswitchd CPU (fraction of one core, summed over instances), hypervisor steal, the idle
RTT h1 -> h16 (5 switches), and switch residence: how long packets waited inside the
switches between ports (p50 and p99 in frame times at the link rate over all switches, and
the p99 of the worst switch, which the fidelity verdict judges: WARN from 2, FAIL from 8) and
how many the switches lost in there.

    sudo .venv/bin/python emulation/benchmarks/capacity.py [--rates 5 10 25 50] [--instances 1 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from mininet.log import setLogLevel

from ccemu.model.config import parse_config
from ccemu.fabric.net import FabricNet
from ccemu.results.fidelity import SwitchFigures
from ccemu.ports.maps import PortMaps
from ccemu.hosts.tcpload import PAIRS, TCP_PAYLOAD_PER_WIRE_FRAME, run_pairs


def cpu_ticks(pid: int) -> int:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def system_ticks() -> tuple[int, int]:
    """(all ticks, steal ticks) summed over CPUs."""
    values = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    return sum(values), values[7]


def idle_rtt_ms(net: FabricNet, src: str, dst: str, count: int = 20) -> float:
    host = net[src]
    host.cmd(f"ping -c 2 -i 0.2 {net[dst].IP()}")  # first packets take OVS's slow path
    out = host.cmd(f"ping -c {count} -i 0.05 {net[dst].IP()}")
    rtts = [float(part.split("=")[1]) for part in out.split() if part.startswith("time=")]
    return statistics.median(rtts) if rtts else float("nan")


def detach_port_programs(net: FabricNet) -> None:
    """Take the port programs off every port (HTB then classifies everything as data)."""
    for node_name, ports in net.port_index.items():
        node = next(n for n in net.hosts + [i.namespace for i in net.instances] if n.name == node_name)
        for port in ports:  # one port a command: a shell line of them all overflows Mininet's
            node.cmd(f"tc filter del dev {port} egress; tc filter del dev {port} ingress")
        left = [port for port in ports for hook in ("egress", "ingress")
                if node.cmd(f"tc filter show dev {port} {hook}").strip()]
        if left:
            raise RuntimeError(f"port programs still attached in {node_name}: {left}")


def run_once(rate_mbps: float, instances: int, seconds: float, ovs_options: list[str], pin_cpus: bool,
             port_programs: bool = True) -> dict:
    config = parse_config({"name": "capacity", "topology": {"kind": "fattree", "k": 4},
                           "link": {"rate_mbps": rate_mbps}, "fabric": {"ovs_instances": instances}})
    with FabricNet(config) as net:
        for instance in net.instances:
            for option in ovs_options:
                instance.vsctl("set", "Open_vSwitch", ".", f"other_config:{option}")
            if pin_cpus:
                cpu = instance.index % os.cpu_count()
                for daemon in instance.daemons:
                    os.sched_setaffinity(daemon.pid, {cpu})
        if not port_programs:
            detach_port_programs(net)
        rtt = idle_rtt_ms(net, "h1", "h16")
        daemons = [d.pid for inst in net.instances for d in inst.daemons]
        before = {}

        def start_measuring():
            before.update(ovs=sum(cpu_ticks(pid) for pid in daemons), system=system_ticks(),
                          started=time.monotonic())

        results = run_pairs(net, seconds, on_start=start_measuring)
        wall = time.monotonic() - before["started"]
        ovs_cpu = (sum(cpu_ticks(pid) for pid in daemons) - before["ovs"]) / os.sysconf("SC_CLK_TCK") / wall
        total_after, steal_after = system_ticks()
        total_before, steal_before = before["system"]
        time.sleep(0.5)  # what is still inside a switch arrives
        with PortMaps(net.inventory.state_dir) as maps:
            switches = SwitchFigures.of(maps.read(), maps.frame_ns)
    ideal = rate_mbps * TCP_PAYLOAD_PER_WIRE_FRAME
    ratios = [results[p] / ideal for p in PAIRS]
    return {
        "rate": rate_mbps, "instances": instances, "ratios": ratios, "aggregate_mbps": sum(results.values()),
        "ovs_cpu": ovs_cpu, "steal": (steal_after - steal_before) / max(1, total_after - total_before),
        "idle_rtt_ms": rtt, "switches": switches,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[5, 10, 25, 50])
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--pin-cpus", action="store_true", help="pin OVS instance i's daemons to CPU i mod CPUs")
    parser.add_argument("--compare-port-programs", action="store_true",
                        help="run every case twice: with the port programs and with them detached")
    parser.add_argument("--ovs-option", action="append", default=[], metavar="KEY=VALUE",
                        help="set Open_vSwitch other_config:KEY=VALUE on every instance (to try tunings)")
    args = parser.parse_args()
    setLogLevel("warning")
    print(f"k=4 fat-tree, 8 cross-pod iperf3 TCP pairs on disjoint paths, {args.seconds:g} s each; "
          f"ratio = goodput / (rate x {TCP_PAYLOAD_PER_WIRE_FRAME:.4f}); OVS options: {args.ovs_option or 'none'}"
          f"{'; OVS instances pinned to CPUs' if args.pin_cpus else ''}")
    header = (f"{'OVS inst':>8} {'programs':>8} {'rate Mb/s':>9} {'min':>6} {'median':>6} {'max':>6} "
              f"{'aggr Mb/s':>9} {'ovs CPU':>7} {'steal':>6} {'idle RTT ms':>11} {'res p50':>7} {'res p99':>7} "
              f"{'worst sw':>8} {'sw lost':>7}  per-pair ratios")
    print(header)
    for instances in args.instances:
        for rate in args.rates:
            for programs in (True, False) if args.compare_port_programs else (True,):
                r = run_once(rate, instances, args.seconds, args.ovs_option, args.pin_cpus, programs)
                ratios = r["ratios"]
                print(f"{instances:>8} {'on' if programs else 'off':>8} {rate:>9g} {min(ratios):>6.3f} "
                      f"{statistics.median(ratios):>6.3f} "
                      f"{max(ratios):>6.3f} {r['aggregate_mbps']:>9.1f} {r['ovs_cpu']:>7.0%} {r['steal']:>6.1%} "
                      f"{r['idle_rtt_ms']:>11.2f} {r['switches'].residence_frames(0.5):>7.2f} "
                      f"{r['switches'].residence_frames(0.99):>7.2f} {r['switches'].worst_switch()[1]:>8.2f} "
                      f"{r['switches'].lost_packets:>7}  "
                      + " ".join(f"{x:.2f}" for x in ratios), flush=True)


if __name__ == "__main__":
    main()
