"""cchost figures (benchmark, not a test: prints numbers).

1. Goodput of one 20 MB flow h1 -> h2 across a 2-host star (one OVS switch, shaped ports,
   port programs), as a fraction of ideal (the link's data share x 1450/1538), for
   ExpressPass and DCTCP, next to kernel TCP (iperf3) on the same fabric in the same run:
   what the fabric itself carries. Also the credit pacing error: how late cchost's timer
   fired for the credits (the credit gap at 100 Mbit/s is ~130 us).
2. CPU seconds per GB transferred, both ends together (getrusage of the processes), cchost
   next to iperf3 on one unshaped veth pair between two namespaces.

    sudo .venv/bin/python emulation/benchmarks/transport.py [--rates 100 50] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from mininet.log import setLogLevel
from mininet.net import Mininet

from ccemu import interrupts
from ccemu.programs.cchost import ScheduledFlow, command, read_counters, read_records, write_schedule
from ccemu.model.config import parse_config
from ccemu.fabric.net import FabricNet

FLOW_BYTES = 20_000_000
CPU_BYTES = 500_000_000
PAYLOAD_EFFICIENCY = 1450 / 1538
CREDIT_SHARE = 84 / 1622
PROFILES = {
    "expresspass": {"profile": "expresspass"},
    "dctcp": {"profile": "dctcp", "ecn_threshold_bytes": 30_000, "buffer_bytes": 150_000},
}


def wait_cpu_seconds(proc) -> float:
    """Waits for a child and returns the CPU time it used (it is the command itself: Mininet's
    mnexec execs it in place)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{proc.args} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def cchost_transfer(net, workdir: Path, scheme: str, link_mbps: float, size: int) -> tuple[dict, dict, float]:
    """One flow h1 -> h2; returns (record, receiver counters, CPU seconds of both ends)."""
    workdir.mkdir(parents=True, exist_ok=True)
    schedule = write_schedule(workdir / "h1.flows", [ScheduledFlow(id=1, dst=2, size=size, start=0.2)])
    epoch = time.monotonic_ns()
    receiver = net["h2"].popen(command("h2", link_mbps, scheme, epoch, workdir, duration_s=120))
    sender = net["h1"].popen(command("h1", link_mbps, scheme, epoch, workdir, schedule=schedule,
                                     exit_when_done=True, extra=("--linger", "0.2")))
    cpu = wait_cpu_seconds(sender)
    receiver.terminate()
    cpu += wait_cpu_seconds(receiver)
    (record,) = read_records(workdir / "h1.records")
    return record, read_counters(workdir / "h2.counters"), cpu


def iperf3_transfer(net, size: int | None = None, seconds: int = 5) -> tuple[float, float]:
    """Kernel TCP h1 -> h2; returns (bits/s received, CPU seconds of both ends)."""
    server = net["h2"].popen(["iperf3", "-s", "-1", "-B", net["h2"].IP()])
    time.sleep(0.5)
    amount = ["-n", str(size)] if size else ["-t", str(seconds)]
    client = net["h1"].popen(["iperf3", "-c", net["h2"].IP(), "-J", *amount])
    out = client.stdout.read()
    cpu = wait_cpu_seconds(client) + wait_cpu_seconds(server)
    return json.loads(out)["end"]["sum_received"]["bits_per_second"], cpu


def goodput_on_the_fabric(rates: list[float], repeat: int) -> None:
    print(f"1. one {FLOW_BYTES // 10**6} MB flow across a 2-host star; ratio = goodput / ideal")
    print(f"{'Mbit/s':>7} {'run':>3} {'expresspass':>11} {'dctcp':>6} {'iperf3 TCP':>10}   credit timer late: "
          f"mean / max us, share within 50 us")
    for rate in rates:
        for run in range(1, repeat + 1):
            ratios, lateness = {}, None
            for scheme, port in PROFILES.items():
                config = parse_config({"name": f"bench-{scheme}", "topology": {"kind": "star", "hosts": 2},
                                       "link": {"rate_mbps": rate}, "port": port})
                with tempfile.TemporaryDirectory(prefix="ccemu-bench-") as tmp, \
                        FabricNet(config, state_root=Path(tmp)) as net:
                    record, counters, _ = cchost_transfer(net, Path(tmp) / "work", scheme, rate, FLOW_BYTES)
                    share = 1 - CREDIT_SHARE if scheme == "expresspass" else 1
                    ratios[scheme] = FLOW_BYTES / record["fct"] / (rate * 1e6 / 8 * PAYLOAD_EFFICIENCY * share)
                    if scheme == "expresspass":
                        lateness = counters["timer_lateness"]
                    else:
                        bps, _ = iperf3_transfer(net)
                        ratios["iperf3"] = bps / (rate * 1e6 * 1448 / 1538)
            within = (lateness["within_us"]["10"] + lateness["within_us"]["50"]) / max(1, lateness["count"])
            print(f"{rate:7.0f} {run:3d} {ratios['expresspass']:11.3f} {ratios['dctcp']:6.3f} {ratios['iperf3']:10.3f}"
                  f"   {lateness['mean_us']:.0f} / {lateness['max_us']:.0f} us, {within:.0%}")


def cpu_per_gigabyte() -> None:
    print(f"2. CPU seconds per GB, both ends, {CPU_BYTES // 10**6} MB over one unshaped veth pair")
    net = Mininet(controller=None, autoStaticArp=True)
    try:
        h1, h2 = net.addHost("h1"), net.addHost("h2")
        net.addLink(h1, h2)
        net.start()
        with tempfile.TemporaryDirectory(prefix="ccemu-bench-") as tmp:
            for scheme in PROFILES:
                record, _, cpu = cchost_transfer(net, Path(tmp) / scheme, scheme, 1000, CPU_BYTES)
                paced = " (credits paced for a 1 Gbit/s link)" if scheme == "expresspass" else ""
                print(f"  cchost {scheme:12} {cpu / (CPU_BYTES / 1e9):6.2f} CPU s/GB at "
                      f"{CPU_BYTES * 8 / record['fct'] / 1e6:.0f} Mbit/s{paced}")
        bps, cpu = iperf3_transfer(net, size=CPU_BYTES)
        print(f"  iperf3 TCP          {cpu / (CPU_BYTES / 1e9):6.2f} CPU s/GB at {bps / 1e6:.0f} Mbit/s")
    finally:
        net.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[100, 50])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    setLogLevel("warning")
    goodput_on_the_fabric(args.rates, args.repeat)
    cpu_per_gigabyte()


if __name__ == "__main__":
    interrupts.run_script(main, "benchmarks/transport.py")
