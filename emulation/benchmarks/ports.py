"""Port program figures (benchmark, not a test: prints numbers).

1. The port program's queue vs the real backlog: two senders overload a 10 Mbit/s star port
   by 20 %; the program's data queue of s1 -> h3 (admitted minus arrived at h3, read from
   the maps) is compared with the backlog of the port's data FIFO (netlink, as `tc -s qdisc`,
   in wire bytes) every 20 ms.
2. The real queue vs an ideal port's (the fluid model beside it): mean and max |difference|
   at every enqueue, as the program counts them: how far this machine lags a real switch.
3. Cost of the programs per packet: kernel.bpf_stats_enabled is switched on for the run
   (and restored), then run time / run count of every loaded port program, per program.

    sudo .venv/bin/python emulation/benchmarks/ports.py
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mininet.log import setLogLevel

from ccemu import interrupts
from ccemu.model.config import parse_config
from ccemu.fabric.net import FabricNet
from ccemu.ports.maps import PortMaps, queue_minus_backlog

DATA_WIRE_BYTES = 1000 + 8 + 20 + 14 + 24
BPF_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")


def udpgen(net, host, *args):
    return net[host].popen([sys.executable, "-m", "ccemu.programs.udpgen", *args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)


def port_program_cost(name: str) -> tuple[int, int]:
    """(run count, run time ns) summed over the loaded port programs called `name`."""
    progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                                      check=True).stdout)
    mine = [p for p in progs if p.get("name") == name]
    return sum(p.get("run_cnt", 0) for p in mine), sum(p.get("run_time_ns", 0) for p in mine)


def main() -> None:
    setLogLevel("warning")
    rate_mbps = float(sys.argv[1]) if len(sys.argv) > 1 else 10
    line_pps = rate_mbps * 1e6 / 8 / DATA_WIRE_BYTES
    config = parse_config({"name": "ports-bench", "topology": {"kind": "star", "hosts": 3},
                           "link": {"rate_mbps": rate_mbps}, "port": {"profile": "droptail", "buffer_bytes": 60000}})
    stats_before = BPF_STATS.read_text().strip()
    BPF_STATS.write_text("1\n")
    try:
        with tempfile.TemporaryDirectory(prefix="ccemu-bench-") as state_root, \
                FabricNet(config, state_root=Path(state_root)) as net:
            egress = net.switches[0].intfs[3].name
            namespace = net.instances[0].namespace
            receiver = udpgen(net, "h3", "recv", "--bind", net["h3"].IP(), "--seconds", "7")
            time.sleep(0.3)
            senders = [udpgen(net, h, "send", "--dst", net["h3"].IP(), "--rate-pps", str(0.6 * line_pps),
                              "--seconds", "5") for h in ("h1", "h2")]
            time.sleep(1.0)
            with PortMaps(net.inventory.state_dir) as maps:
                differences = queue_minus_backlog(maps, namespace.name, egress, namespace.pid, 200, 0.02)
                for proc in senders + [receiver]:
                    proc.communicate(timeout=30)
                (port,) = [p for p in maps.read() if p.port == egress]
            costs = {name: port_program_cost(name) for name in ("port_egress", "port_ingress")}
            real_drops = re.search(r"qdisc bfifo 20:.*?dropped (\d+)", namespace.cmd(f"tc -s qdisc show dev {egress}"),
                                   re.S).group(1)
    finally:
        BPF_STATS.write_text(stats_before + "\n")
    absolute = [abs(d) for d in differences]
    print(f"program queue - tc backlog, {len(differences)} samples under 1.2x overload of a {rate_mbps} Mbit/s "
          f"port (buffer 60000 B): mean {statistics.mean(differences):.0f} B, "
          f"mean |diff| {statistics.mean(absolute):.0f} B, median |diff| {statistics.median(absolute):.0f} B, "
          f"max |diff| {max(absolute):.0f} B; "
          f"FIFO drops (should be 0: the program drops first): {real_drops}")
    print(f"real - ideal queue at {port.data.enqueued_packets} enqueues: mean |diff| {port.data.mean_lag_bytes:.0f} B, "
          f"max {port.data.max_lag_bytes} B; program drops {port.data.dropped_packets}")
    for name, (runs, run_ns) in costs.items():
        print(f"{name}: {runs} runs, {run_ns / max(1, runs):.0f} ns per packet")


if __name__ == "__main__":
    interrupts.run_script(main, "benchmarks/ports.py")
