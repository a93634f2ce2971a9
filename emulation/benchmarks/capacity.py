"""Forwarding capacity of the emulated fabric (benchmark, not a test: prints figures).

8 cross-pod kernel-TCP pairs (iperf3, h1..h8 -> h9..h16) on a k=4 fat-tree, at several
link rates and OVS instance counts. Each pair's client port is chosen (by asking OVS which
path-id it would hash the flow to) so that no two flows share a link: a shortfall is then
the emulator's, not ECMP's. Prints per rate and variant: goodput / ideal per pair (ideal =
link rate x 1448/1538, TCP payload per wire frame), ovs-vswitchd CPU (fraction of one
core, summed over instances), hypervisor steal, and the idle RTT h1 -> h16 (5 switches).

    sudo .venv/bin/python emulation/benchmarks/capacity.py [--rates 5 10 25 50] [--instances 1 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from mininet.log import setLogLevel

from ccemu.config import parse_config
from ccemu.fabric import FabricNet
from ccemu.verify import flow_path_id

TCP_PAYLOAD_PER_WIRE_FRAME = 1448 / 1538  # MSS with timestamps / (1500 + 14 + 24)
IPERF_PORT = 5201
FIRST_CLIENT_PORT = 40000
PAIRS = [(f"h{i}", f"h{i + 8}") for i in range(1, 9)]


def disjoint_client_ports(net: FabricNet) -> dict[tuple[str, str], int]:
    """A client port per pair such that no two flows leave through the same switch port."""
    used: set[tuple[str, int]] = set()
    chosen = {}
    for src, dst in PAIRS:
        for cport in range(FIRST_CLIENT_PORT, FIRST_CLIENT_PORT + 512):
            pid = flow_path_id(net, src, dst, "tcp", cport, IPERF_PORT)
            ports = set(net.routing.ports_on_path(src, dst, pid))
            if not ports & used:
                used |= ports
                chosen[(src, dst)] = cport
                break
        else:
            raise RuntimeError(f"no client port gives {src} -> {dst} a path of its own")
    return chosen


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
        cports = disjoint_client_ports(net)
        servers = [net[dst].popen(["iperf3", "-s", "-1", "-p", str(IPERF_PORT)]) for _, dst in PAIRS]
        time.sleep(0.5)
        daemons = [d.pid for inst in net.instances for d in inst.daemons]
        ovs_before = sum(cpu_ticks(pid) for pid in daemons)
        total_before, steal_before = system_ticks()
        started = time.monotonic()
        clients = {
            (src, dst): net[src].popen(["iperf3", "-c", net[dst].IP(), "-p", str(IPERF_PORT), "--cport",
                                        str(cports[(src, dst)]), "-t", str(seconds), "-J"])
            for src, dst in PAIRS
        }
        results = {}
        for pair, proc in clients.items():
            out, err = proc.communicate(timeout=seconds + 30)
            report = json.loads(out)
            if "error" in report:
                raise RuntimeError(f"iperf3 {pair}: {report['error']}")
            results[pair] = report["end"]["sum_received"]["bits_per_second"] / 1e6
        wall = time.monotonic() - started
        ovs_cpu = (sum(cpu_ticks(pid) for pid in daemons) - ovs_before) / os.sysconf("SC_CLK_TCK") / wall
        total_after, steal_after = system_ticks()
        for proc in servers:
            proc.wait(timeout=10)
    ideal = rate_mbps * TCP_PAYLOAD_PER_WIRE_FRAME
    ratios = [results[p] / ideal for p in PAIRS]
    return {
        "rate": rate_mbps, "instances": instances, "ratios": ratios, "aggregate_mbps": sum(results.values()),
        "ovs_cpu": ovs_cpu, "steal": (steal_after - steal_before) / max(1, total_after - total_before),
        "idle_rtt_ms": rtt,
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
              f"{'aggr Mb/s':>9} {'ovs CPU':>7} {'steal':>6} {'idle RTT ms':>11}  per-pair ratios")
    print(header)
    for instances in args.instances:
        for rate in args.rates:
            for programs in (True, False) if args.compare_port_programs else (True,):
                r = run_once(rate, instances, args.seconds, args.ovs_option, args.pin_cpus, programs)
                ratios = r["ratios"]
                print(f"{instances:>8} {'on' if programs else 'off':>8} {rate:>9g} {min(ratios):>6.3f} "
                      f"{statistics.median(ratios):>6.3f} "
                      f"{max(ratios):>6.3f} {r['aggregate_mbps']:>9.1f} {r['ovs_cpu']:>7.0%} {r['steal']:>6.1%} "
                      f"{r['idle_rtt_ms']:>11.2f}  " + " ".join(f"{x:.2f}" for x in ratios), flush=True)


if __name__ == "__main__":
    main()
