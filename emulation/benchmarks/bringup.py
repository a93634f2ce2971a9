"""Bring-up and teardown time of fat-trees, ccemu beside plain Mininet (benchmark, not a
test: prints figures).

For each k: ccemu's FabricNet (OVS instances 'auto' and 1) with the idle RTT across the
longest (5-switch) path, and the same topology built by plain Mininet 2.3.0
(plain_mininet.py, run in a private network namespace). Every figure comes from this run.

    sudo .venv/bin/python emulation/benchmarks/bringup.py [--k 4 6 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from mininet.log import setLogLevel

from ccemu.model.config import parse_config
from ccemu.fabric.net import FabricNet

sys.path.insert(0, str(Path(__file__).parent))
from capacity import idle_rtt_ms  # noqa: E402

PLAIN_MININET = Path(__file__).with_name("plain_mininet.py")


def ccemu_fabric(k: int, instances: int | str) -> dict:
    config = parse_config({"name": f"bringup-k{k}", "topology": {"kind": "fattree", "k": k},
                           "fabric": {"ovs_instances": instances}})
    net = FabricNet(config)
    started = time.monotonic()
    with net:
        up = time.monotonic() - started
        rtt = idle_rtt_ms(net, "h1", net.fabric_topo.host_names[-1])
        count = len(net.instances)
        stopping = time.monotonic()
    return {"up": up, "down": time.monotonic() - stopping, "rtt": rtt, "instances": count}


def plain_mininet(k: int) -> dict:
    result = subprocess.run(["unshare", "--net", sys.executable, str(PLAIN_MININET), str(k)],
                            capture_output=True, text=True, timeout=900)
    if result.returncode:
        raise RuntimeError(f"plain Mininet k={k} failed: {result.stderr.strip()[-500:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[4, 6, 8])
    args = parser.parse_args()
    setLogLevel("warning")
    print(f"{'k':>3} {'what':<28} {'up s':>7} {'down s':>7} {'idle RTT ms':>11}")
    for k in args.k:
        for instances in ("auto", 1):
            r = ccemu_fabric(k, instances)
            what = f"ccemu, {r['instances']} OVS instance(s)"
            print(f"{k:>3} {what:<28} {r['up']:>7.2f} {r['down']:>7.2f} {r['rtt']:>11.2f}", flush=True)
        r = plain_mininet(k)
        print(f"{k:>3} {'plain Mininet 2.3.0':<28} {r['up']:>7.2f} {r['down']:>7.2f} {'-':>11}", flush=True)


if __name__ == "__main__":
    main()
