"""Bring-up and teardown time of fat-trees, ccemu beside plain Mininet (benchmark, not a
test: prints figures).

For each k: ccemu's FabricNet (OVS instances 'auto' and 1) with the idle RTT across the
longest (5-switch) path, the same with Docker hosts (containers of the host image; for the k of
--docker-k), and the same topology built by plain Mininet 2.3.0 (plain_mininet.py, run in a
private network namespace). Every figure comes from this run. Docker's engine (started if the
machine runs none) and the host image are made ready first, timed on their own line: a fabric's
figures are what each run pays.

    sudo .venv/bin/python emulation/benchmarks/bringup.py [--k 4 6 8] [--docker-k 4]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mininet.log import setLogLevel

from ccemu import interrupts
from ccemu.bench.capacity import idle_rtt_ms
from ccemu.containers import image
from ccemu.containers.engine import DockerEngine
from ccemu.fabric.net import FabricNet
from ccemu.model.config import parse_config


PLAIN_MININET = Path(__file__).with_name("plain_mininet.py")


def ccemu_fabric(k: int, instances: int | str, hosts: str = "namespace") -> dict:
    config = parse_config({"name": f"bringup-k{k}", "topology": {"kind": "fattree", "k": k},
                           "fabric": {"ovs_instances": instances}, "hosts": {"kind": hosts}})
    net = FabricNet(config)
    started = time.monotonic()
    with net:
        up = time.monotonic() - started
        rtt = idle_rtt_ms(net, "h1", net.fabric_topo.host_names[-1])
        count = len(net.instances)
        stopping = time.monotonic()
    return {"up": up, "down": time.monotonic() - stopping, "rtt": rtt, "instances": count}


def plain_mininet(k: int) -> dict:
    # A session of its own: Mininet runs ovs-vsctl and friends as its children, unrecorded, and one
    # caught by the stop (e.g. del-br while its ovsdb-server is being removed) would wait for ever.
    with subprocess.Popen(["unshare", "--net", sys.executable, str(PLAIN_MININET), str(k)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as baseline:
        try:
            out, err = baseline.communicate(timeout=900)
        except BaseException:
            # Stopped (or too slow): SIGTERM, so that it tears its OVS down as we do ours
            # (subprocess.run would SIGKILL it, leaving its daemons to `ccemu clean`).
            baseline.terminate()
            baseline.wait()
            raise
        finally:
            try:  # what is left of its session (its group: the shells of its hosts setsid away)
                os.killpg(baseline.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if baseline.returncode:
        raise RuntimeError(f"plain Mininet k={k} failed: {err.strip()[-500:]}")
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[4, 6, 8])
    parser.add_argument("--docker-k", type=int, nargs="*", default=[4], help="k of the Docker-host rows")
    args = parser.parse_args()
    setLogLevel("warning")
    with contextlib.ExitStack() as stack:
        if args.docker_k:
            started = time.monotonic()
            engine = stack.enter_context(DockerEngine.acquire())
            tag = image.require(engine.client, None)
            print(f"Docker engine ({'started by ccemu' if engine.started_here else 'running'}) and host image {tag} "
                  f"ready in {time.monotonic() - started:.2f} s")
        print(f"{'k':>3} {'what':<40} {'up s':>7} {'down s':>7} {'idle RTT ms':>11}")
        for k in args.k:
            rows = [(instances, "namespace") for instances in ("auto", 1)]
            rows += [("auto", "docker")] if k in args.docker_k else []
            for instances, hosts in rows:
                r = ccemu_fabric(k, instances, hosts)
                what = f"ccemu, {r['instances']} OVS instance(s), {hosts} hosts"
                print(f"{k:>3} {what:<40} {r['up']:>7.2f} {r['down']:>7.2f} {r['rtt']:>11.2f}", flush=True)
            r = plain_mininet(k)
            print(f"{k:>3} {'plain Mininet 2.3.0':<40} {r['up']:>7.2f} {r['down']:>7.2f} {'-':>11}", flush=True)


if __name__ == "__main__":
    interrupts.run_script(main, "benchmarks/bringup.py")
