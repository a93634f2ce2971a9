"""How much HTB burst a port needs to keep its line (benchmark, not a test: prints numbers).

A port of a 3-host star (s1 -> h3) is overloaded by two UDP senders at 0.75 of its line each; its
data class and link class get each burst in turn (`tc class change`: the port's HTB tree is
ports/tc.py's, but for the burst), and the port's drain rate is read where its departures are
counted, at its peer's ingress (the port programs' maps), over 3 s of saturation. HTB sends while
its tokens are not below 0 and its timer fires late: a burst too small to absorb that lateness
loses the line for good (ports/tc.py data_burst_bytes says what the fabric uses, and why).

    sudo .venv/bin/python emulation/benchmarks/bursts.py [RATE_MBPS [REPEATS [BURST ...]]]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mininet.log import setLogLevel

from ccemu import interrupts
from ccemu.fabric.net import FabricNet
from ccemu.model.config import parse_config
from ccemu.ports.maps import PortMaps
from ccemu.ports.tc import MIN_WIRE_FRAME_BYTES, WIRE_OVERHEAD_BYTES
from ccemu.results.markdown import table

PAYLOAD = 1000
WIRE = PAYLOAD + 8 + 20 + 14 + WIRE_OVERHEAD_BYTES
SETTLE_S, MEASURE_S = 2.0, 3.0


def drained(rate_mbps: float, burst: int) -> float:
    """The saturated port's drain rate with HTB burst `burst` bytes, of its line rate."""
    line_pps = rate_mbps * 1e6 / 8 / WIRE
    config = parse_config({"name": "bursts", "topology": {"kind": "star", "hosts": 3},
                           "link": {"rate_mbps": rate_mbps}, "port": {"profile": "droptail", "buffer_bytes": 100_000}})
    with tempfile.TemporaryDirectory(prefix="ccemu-bench-") as state_root, \
            FabricNet(config, state_root=Path(state_root)) as net:
        switch, egress = net.switches[0], net.switches[0].intfs[3].name
        bps = round(rate_mbps * 1e6)
        for classid in ("1:1", "1:20"):
            switch.cmd(f"tc class change dev {egress} classid {classid} htb rate {bps}bit ceil {bps}bit "
                       f"burst {burst}b cburst {burst}b overhead {WIRE_OVERHEAD_BYTES} mpu {MIN_WIRE_FRAME_BYTES}")
        senders = [net[h].popen([sys.executable, "-m", "ccemu.programs.udpgen", "send", "--dst", net["h3"].IP(),
                                 "--size", str(PAYLOAD), "--rate-pps", str(0.75 * line_pps), "--seconds",
                                 str(SETTLE_S + MEASURE_S + 1)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for h in ("h1", "h2")]
        try:
            with PortMaps(net.inventory.state_dir) as maps:
                def departed() -> tuple[float, int]:
                    (nic,) = [p for p in maps.read() if p.node == "h3"]
                    return time.monotonic(), nic.arrived_packets  # what left s1 -> h3

                time.sleep(SETTLE_S)
                t0, first = departed()
                time.sleep(MEASURE_S)
                t1, last = departed()
        finally:
            for sender in senders:
                sender.wait()
    return (last - first) / (t1 - t0) / line_pps


def main() -> None:
    setLogLevel("warning")
    rate = float(sys.argv[1]) if len(sys.argv) > 1 else 25.0
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    bursts = [int(b) for b in sys.argv[3:]] or [1, MIN_WIRE_FRAME_BYTES, 1538, 2 * 1538]
    seen: dict[int, list[float]] = {b: [] for b in bursts}
    for _ in range(repeats):  # alternating, so that a slow minute of the machine is every burst's
        for burst in bursts:
            seen[burst].append(drained(rate, burst))
            print(f"  burst {burst:5d} B: {seen[burst][-1]:.4f}", flush=True)
    print(f"\nA saturated port at {rate:g} Mbit/s: its drain rate / its line rate, by HTB burst ({repeats} runs each)")
    print("\n".join(table(["burst B", "median", "least", "most"],
                          [[str(burst), *(f"{f(ratios):.4f}" for f in (statistics.median, min, max))]
                           for burst, ratios in seen.items()])))


if __name__ == "__main__":
    interrupts.run_script(main, "benchmarks/bursts.py")
