"""CI smoke emulation (`make smoke`): a k=4 fabric check, then one incast round of N = 8 per
scheme (ci/smoke.yaml), then invariants asserted from the results bundle, not from logs. Prints
every check with its figures; exits 0 only if all hold. --datapath runs it on that fabric.datapath
(`make smoke DATAPATH=ovs`), whatever smoke.yaml says; `.ci/run` runs it on both.

    sudo .venv/bin/python ci/smoke.py [--datapath ovs|bpf] [--results DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from ccemu.kinds.incast import incast_table
from ccemu.model.config import (CREDIT_SCHEMES, ConfigError, ExperimentConfig, load_config, parse_config, read_yaml,
                                with_datapath)
from ccemu.results.fidelity import below_ideal
from ccemu.results.figures import Tables

CONFIG = Path(__file__).resolve().parent / "smoke.yaml"
# The schemes smoke.yaml runs. CREDIT_SCHEMES (cchost's table): data goes only against credits,
# so no data drop, and queues within the credit queues' bound; every one of them must run here.
SCHEMES = tuple(s.scheme for s in load_config(CONFIG).schemes)
# DCTCP's queue sits at K: its bottleneck's mean queue seen by arriving packets must be within
# these multiples of K.
DCTCP_QUEUE_OF_K = (0.5, 2.0)


def smoke_config(datapath: str | None) -> ExperimentConfig:
    """smoke.yaml as the smoke runs it on `datapath` (None: the file's): the datapath set before
    anything is derived from the file, as `ccemu experiment --datapath` sets it. ConfigError (one
    line naming fabric.datapath) for a name that is not a datapath."""
    source = f"{CONFIG}" + (f" --datapath {datapath}" if datapath is not None else "")
    return parse_config(with_datapath(read_yaml(CONFIG), datapath), source=source)


def ccemu(*args: str) -> int:
    """Runs `ccemu ARGS` with its output passing through; its exit status."""
    print(f"$ ccemu {' '.join(args)}", flush=True)
    return subprocess.run([sys.executable, "-m", "ccemu.cli", *args]).returncode


def ran_on(manifest: dict) -> str:
    """The datapath a bundle's fabric forwarded with (`auto` resolved); bundles from before the bpf
    datapath name none: OVS forwarded them all (reports/report.py reads it so too)."""
    return manifest.get("datapath", "ovs")


def checks(bundle: Path, datapath: str | None = None) -> list[tuple[bool, str]]:
    """(held, what) for every invariant of the smoke run's bundle; with `datapath` (ovs, bpf), also
    that the fabric forwarded with it."""
    tables = Tables.read(bundle)
    manifest, flows, rounds, ports = tables.manifest, tables.flows, tables.rounds, tables.ports
    by_scheme = {row["scheme"]: row for row in incast_table(tables)}
    expected = sum(int(r["flows"]) for r in rounds)
    result = [(len(flows) == expected > 0 and manifest["unfinished_flows"] == 0 and not manifest["host_failures"],
               f"every flow finished: {len(flows)} of {expected}, {len(manifest['host_failures'])} host failures")]
    if datapath not in (None, "auto"):
        result.append((ran_on(manifest) == datapath, f"the fabric forwarded with the datapath asked for, "
                                                     f"{datapath}: {ran_on(manifest)}"))

    # Store-and-forward (emulation/README.md, "Datacenter time"): no flow beats the flow alone on the idle path.
    faster, judged, least = below_ideal(flows) or (0, 0, float("nan"))
    result.append((judged > 0 and faster == 0, f"no flow finished faster than its own ideal FCT: {faster} of {judged} "
                                               f"did (the least FCT / ideal: {least:.4f})"))

    if set(by_scheme) != set(SCHEMES):
        return result + [(False, f"every scheme ran: {sorted(SCHEMES)} (ran: {sorted(by_scheme)})")]
    bound = manifest["expresspass_queue_bound_bytes"]
    for scheme in CREDIT_SCHEMES:
        scheme_ports = [p for p in ports if p["scheme"] == scheme]
        if not scheme_ports:  # a credit scheme of cchost's table that smoke.yaml does not run
            result.append((False, f"{scheme}, a credit scheme, ran in the smoke: no port of it in the bundle "
                                  f"(add it to {CONFIG.name})"))
            continue
        drops = sum(int(p["data_dropped"]) for p in scheme_ports)
        result.append((drops == 0, f"{scheme} dropped no data: {drops} data drops over {len(scheme_ports)} ports"))
        largest = max(int(p["max_data_queue"]) for p in scheme_ports)
        result.append((largest <= bound, f"{scheme}'s largest data queue, {largest} B at any port, is within "
                                         f"ExpressPass's bound of {bound} B"))
    credit_marks = by_scheme["spraypass"]["credit_marks"]
    result.append((credit_marks > 0, f"SprayPass's ports CE-marked credits: {credit_marks}"))

    marks = by_scheme["dctcp"]["marks"]
    result.append((marks > 0, f"DCTCP's ports CE-marked packets: {marks}"))
    k = manifest["dctcp_k_bytes"]
    mean = by_scheme["dctcp"]["mean_queue"]  # None: no bottleneck port in ports.csv
    low, high = (f * k for f in DCTCP_QUEUE_OF_K)
    shown = "no" if mean is None else f"{mean:.0f} B"
    result.append((mean is not None and low <= mean <= high, f"DCTCP's bottleneck mean queue, {shown}, is within "
                                        f"{list(DCTCP_QUEUE_OF_K)} x K = [{low:.0f}, {high:.0f}] B"))

    verdict = manifest["fidelity"]
    result.append((verdict["status"] != "FAIL", f"the fidelity verdict is not FAIL: {verdict['status']}"
                   + "".join(f"\n        {reason}" for reason in verdict["reasons"])))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datapath", metavar="NAME", help="the fabric.datapath to run on (ovs, bpf; default: "
                                                          "smoke.yaml's)")
    parser.add_argument("--results", type=Path, default=Path("results"), help="the bundle goes to RESULTS/smoke/TIME")
    args = parser.parse_args()
    started = time.monotonic()
    try:
        config = smoke_config(args.datapath)
    except ConfigError as exc:
        print(f"smoke: {exc}", file=sys.stderr)
        return 2
    print(f"smoke: fabric.datapath {config.fabric.datapath}, links at {config.link.rate_mbps:g} Mbit/s", flush=True)
    datapath = ["--datapath", args.datapath] if args.datapath is not None else []

    status = ccemu("check", "--config", str(CONFIG), *datapath)
    if status:
        print(f"smoke: FAILED: the fabric check failed (exit status {status})")
        return 1
    before = set((args.results / "smoke").glob("*")) if (args.results / "smoke").is_dir() else set()
    status = ccemu("experiment", str(CONFIG), "--skip-check", "--results", str(args.results), *datapath)
    bundles = sorted(set((args.results / "smoke").glob("*")) - before) if (args.results / "smoke").is_dir() else []
    if not bundles:
        print(f"smoke: FAILED: the experiment left no bundle (exit status {status})")
        return 1
    (bundle,) = bundles
    results = checks(bundle, args.datapath)
    ran = ran_on(Tables.read(bundle).manifest)
    print(f"\nsmoke checks of {bundle}, forwarded with datapath {ran} (ccemu experiment exited {status}):")
    for held, what in results:
        print(f"  {'PASS' if held else 'FAIL'}  {what}")
    failed = sum(not held for held, _ in results)
    print(f"smoke on datapath {ran}: {'OK' if not failed else f'FAILED ({failed} of {len(results)} checks)'} "
          f"in {time.monotonic() - started:.0f} s")
    return 1 if failed or status else 0


if __name__ == "__main__":
    sys.exit(main())
