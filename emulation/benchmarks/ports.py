"""Port program figures (benchmark, not a test: prints numbers).

1. Fluid queue vs real backlog: two senders overload a 10 Mbit/s star port by 20 %; the
   port program's fluid queue of s1 -> h3 (read from its map, drained to the moment of
   reading) is compared with the real backlog of the port's data FIFO (netlink, counted in
   wire bytes) every 20 ms.
2. Cost of the program per packet: kernel.bpf_stats_enabled is switched on for the run
   (and restored), then run time / run count of every loaded port program.

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

from pyroute2 import IPRoute
from pyroute2.netns import popns, pushns

from ccemu.config import parse_config
from ccemu.fabric import FabricNet
from ccemu.ports import PortMaps

DATA_WIRE_BYTES = 1000 + 8 + 20 + 14 + 24
BPF_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")


def netlink_in(namespace) -> IPRoute:
    """A netlink socket of `namespace` (a socket stays in the namespace it was made in)."""
    pushns(f"/proc/{namespace.pid}/ns/net")
    try:
        return IPRoute()
    finally:
        popns()


def data_fifo_backlog_wire_bytes(netlink: IPRoute, ifindex: int) -> int:
    """Backlog of the port's data FIFO (qdisc 20:) as the wire counts it."""
    for qdisc in netlink.get_qdiscs(index=ifindex):
        if qdisc["handle"] == 0x200000:
            queue = qdisc.get_attr("TCA_STATS2").get_attr("TCA_STATS_QUEUE")
            return queue["backlog"] + 24 * queue["qlen"]
    raise RuntimeError(f"no data FIFO on ifindex {ifindex}")


def udpgen(net, host, *args):
    return net[host].popen([sys.executable, "-m", "ccemu.udpgen", *args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)


def port_program_cost() -> tuple[int, int]:
    """(run count, run time ns) summed over loaded port_egress programs."""
    progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                                      check=True).stdout)
    mine = [p for p in progs if p.get("name") == "port_egress"]
    return sum(p.get("run_cnt", 0) for p in mine), sum(p.get("run_time_ns", 0) for p in mine)


def main() -> None:
    setLogLevel("warning")
    rate_mbps = 10
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
            differences = []
            netlink = netlink_in(namespace)
            ifindex = net.port_index[namespace.name][egress]
            with PortMaps(net.inventory.state_dir) as maps:
                def fluid() -> float:
                    (queue,) = [p.queue_bytes[0] for p in maps.read() if p.port == egress]
                    return queue
                for _ in range(200):
                    # The real backlog is read between two reads of the fluid queue.
                    before = fluid()
                    real = data_fifo_backlog_wire_bytes(netlink, ifindex)
                    differences.append((before + fluid()) / 2 - real)
                    time.sleep(0.02)
            netlink.close()
            for proc in senders + [receiver]:
                proc.communicate(timeout=30)
            runs, run_ns = port_program_cost()
            real_drops = re.search(r"qdisc bfifo 20:.*?dropped (\d+)", namespace.cmd(f"tc -s qdisc show dev {egress}"),
                                   re.S).group(1)
    finally:
        BPF_STATS.write_text(stats_before + "\n")
    absolute = [abs(d) for d in differences]
    print(f"fluid - real backlog, {len(differences)} samples under 1.2x overload of a {rate_mbps} Mbit/s port "
          f"(buffer 60000 B): mean {statistics.mean(differences):.0f} B, "
          f"mean |diff| {statistics.mean(absolute):.0f} B, median |diff| {statistics.median(absolute):.0f} B, "
          f"max |diff| {max(absolute):.0f} B; "
          f"real FIFO drops (should be 0: the fluid queue drops first): {real_drops}")
    print(f"port program: {runs} runs, {run_ns / max(1, runs):.0f} ns per packet")


if __name__ == "__main__":
    main()
