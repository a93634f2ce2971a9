"""Routing tables and their symmetry proof, timed (benchmark, not a test: prints figures; no
root needed).

For fat-trees of each k: building the tables (model/routing.py Routing), proving them
symmetric from their structure (prove_symmetric: per edge switch and path, not per pair) and,
for the k of --walk-k, walking every pair and path-id as the check did before
(asymmetric_paths), with the number of walks each needs.

    .venv/bin/python emulation/benchmarks/routing.py [--k 4 8 12 16] [--walk-k 4 6 8]
"""

from __future__ import annotations

import argparse
import time

from ccemu import interrupts
from ccemu.model.routing import Routing, asymmetric_paths, prove_symmetric
from ccemu.model.topology import fat_tree


def timed(call):
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[4, 8, 12, 16])
    parser.add_argument("--walk-k", type=int, nargs="*", default=[4, 6, 8])
    args = parser.parse_args()
    print(f"{'k':>3} {'hosts':>6} {'switches':>8} {'tables s':>9} {'proof s':>8} {'proved':>6} "
          f"{'walk s':>8} {'walks':>11}")
    for k in sorted(set(args.k) | set(args.walk_k)):
        topo = fat_tree(k)
        routing, build = timed(lambda: Routing(topo))
        problems, proof = timed(lambda: prove_symmetric(routing))
        hosts = len(topo.hosts)
        walks = sum(routing.n_paths(topo.host_names[0], other) for other in topo.host_names[1:]) * hosts // 2
        walk = "-"
        if k in args.walk_k:
            asymmetric, seconds = timed(lambda: asymmetric_paths(routing))
            assert asymmetric == [] and not problems, (k, asymmetric[:3], problems[:3])
            walk = f"{seconds:.3f}"
        proved = "yes" if not problems else "NO"
        print(f"{k:>3} {hosts:>6} {len(topo.switches):>8} {build:>9.3f} {proof:>8.3f} {proved:>6} {walk:>8} "
              f"{walks:>11,}", flush=True)


if __name__ == "__main__":
    interrupts.run_script(main, "benchmarks/routing.py")
