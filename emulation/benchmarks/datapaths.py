"""Both datapaths measure the same (benchmark, not a test: prints figures).

The same incast on ccemu's bpf datapath and on OVS (userspace where the machine has no openvswitch
module, as here): workloads/experiments/incast.yaml's schemes, ports, datacenter and seed at one N,
a few rounds, `--repeats` runs per datapath, the two datapaths taking turns to go first (a drift of
the machine's load falls on both). Each run is `ccemu experiment --datapath NAME` (no fabric check,
no monitoring), its bundle under RESULTS/datapaths/TIME/. The link rate must be one both datapaths
keep faithful (what `dilation: auto` would follow: `ccemu bench capacity`'s measurement of this
machine, else model/dilation.py's figures; userspace OVS's 10 Mbit/s per link is the lower): its
dilation, 200, runs the 1 Gbit/s links at 5 Mbit/s.

Each run's fidelity verdict is printed as it ends: a run that fell behind is no measure of its
datapath. Then one table: per scheme and datapath, goodput, mean and p99 FCT (datacenter units), the
bottleneck's largest and mean queue (bytes on the wire, the mean as arriving frames found it), CE
marks of data and of credits, each the median of the runs [lowest-highest]; and per scheme whether
the datapaths agree (`agreement`): their medians differ by no more than the wider of the two
datapaths' run-to-run spreads (highest - lowest of its runs). The figures are the bundles' own
(kinds/incast.py incast_table, over results/figures.py).

    sudo .venv/bin/python emulation/benchmarks/datapaths.py [--n 8] [--rounds 3] [--repeats 3] [--dilation 200]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from ccemu import interrupts
from ccemu.bench.capacity import faithful_rates
from ccemu.kinds.incast import incast_table
from ccemu.fabric.kernel import probe_kernel
from ccemu.model.config import EXPERIMENTS_DIR, default_faithful, parse_config, read_yaml, with_datapath
from ccemu.results.figures import Tables

DATAPATHS = ("bpf", "ovs")
INCAST = EXPERIMENTS_DIR / "incast.yaml"
# incast_table's figures the table shows: (key, column header, format of one value).
FIGURES = (("goodput_mbps", "goodput Mbit/s", "{:.1f}"), ("fct_mean_ms", "FCT mean ms", "{:.2f}"),
           ("fct_p99_ms", "FCT p99 ms", "{:.2f}"), ("max_queue", "max queue B", "{:.0f}"),
           ("mean_queue", "mean queue B", "{:.0f}"), ("marks", "CE marks", "{:.0f}"),
           ("credit_marks", "credit CE marks", "{:.0f}"))


# The comparison (pure) ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Runs:
    """One figure of one scheme on one datapath, over its runs; None: a run without it (a figure with
    nothing to stand on, e.g. no flow finished, is no number: results/figures.py NoData)."""

    values: tuple

    @property
    def present(self) -> list[float]:
        return [v for v in self.values if v is not None]

    @property
    def missing(self) -> int:
        return len(self.values) - len(self.present)

    @property
    def median(self) -> float:
        return statistics.median(self.present)

    @property
    def spread(self) -> float:
        """Run-to-run spread: highest - lowest."""
        return max(self.present) - min(self.present)

    def cell(self, form: str) -> str:
        """The median [lowest-highest], or "-" with no run that has the figure."""
        present = self.present
        if not present:
            return "-"
        text = f"{form.format(self.median)} [{form.format(min(present))}-{form.format(max(present))}]"
        return text + (f" ({self.missing} -)" if self.missing else "")


@dataclass(frozen=True)
class Agreement:
    verdict: str  # "agree", "DIFFER", or "not judged"
    why: str


def agreement(a: Runs, b: Runs, form: str = "{:.3g}") -> Agreement:
    """Whether two datapaths' runs of one figure agree within the run-to-run spread of one datapath:
    their medians differ by no more than the wider of the two spreads. Not judged where either
    datapath has a run without the figure (what it would have been is unknown) or fewer than two
    runs (no spread to judge by)."""
    if a.missing or b.missing:
        return Agreement("not judged", f"{a.missing + b.missing} run(s) without it")
    if min(len(a.values), len(b.values)) < 2:
        return Agreement("not judged", "one run: no spread")
    difference, spread = abs(a.median - b.median), max(a.spread, b.spread)
    shown = f"{form.format(difference)} {'<=' if difference <= spread else '>'} {form.format(spread)}"
    return Agreement("agree" if difference <= spread else "DIFFER", shown)


def table_lines(runs: dict) -> list[str]:
    """The table: `runs` is scheme -> datapath -> figure key -> Runs (datapaths in DATAPATHS order)."""
    width = 26
    lines = [f"{'scheme':<12} {'datapath':<9} " + " ".join(f"{header:<{width}}" for _, header, _ in FIGURES).rstrip()]
    for scheme, by_datapath in runs.items():
        for datapath in DATAPATHS:
            lines.append(f"{scheme:<12} {datapath:<9} " + " ".join(
                f"{by_datapath[datapath][key].cell(form):<{width}}" for key, _, form in FIGURES).rstrip())
        judged = [agreement(*(by_datapath[d][key] for d in DATAPATHS), form) for key, _, form in FIGURES]
        lines.append(f"{'':<12} {'agree?':<9} " + " ".join(f"{j.verdict + ' (' + j.why + ')':<{width}}"
                                                           for j in judged).rstrip())
    return lines


def figures_of(bundles: list[Path | None], n: int) -> dict:
    """scheme -> figure key -> Runs, over the runs of one datapath (each its bundle; None: it left
    none), from each bundle's incast table at N = n; a run without a bundle, or whose bundle lacks a
    scheme, counts as a run without that scheme's figures."""
    rows = [{row["scheme"]: row for row in incast_table(Tables.read(bundle)) if row["n"] == n} if bundle else {}
            for bundle in bundles]
    schemes = list(dict.fromkeys(scheme for by_scheme in rows for scheme in by_scheme))
    return {scheme: {key: Runs(tuple((by_scheme.get(scheme) or {}).get(key) for by_scheme in rows))
                     for key, _, _ in FIGURES} for scheme in schemes}


# The runs ----------------------------------------------------------------------------------------

# Both datapaths at a rate userspace OVS keeps faithful (10 Mbit/s per link): 1 Gbit/s at 5 Mbit/s.
# incast.yaml's own dilation (40) is the bpf datapath's.
DILATION = 200


def experiment_data(n: int, rounds: int, dilation: float | None) -> dict:
    """incast.yaml at one N, `rounds` rounds, and `dilation` (None: DILATION)."""
    data = read_yaml(INCAST)
    data = {**data, "name": "datapaths", "workload": {**data["workload"], "flows": [n], "rounds": rounds,
                                                      "settle_rounds": 0}}
    data["datacenter"] = {**data["datacenter"], "dilation": DILATION if dilation is None else dilation}
    return data


def faithful_problem(data: dict, results: Path) -> str | None:
    """Why a datapath would not run `data` faithfully here (its link rate, or all its busy links
    together, above what it keeps faithful); None where both do."""
    kernel = probe_kernel()
    for datapath in DATAPATHS:
        config = parse_config(with_datapath(data, datapath), source=f"incast --datapath {datapath}", kernel=kernel)
        faithful = faithful_rates(config.fabric, results) or default_faithful(config.fabric, kernel)
        rate = config.link.rate_mbps
        busy = config.workload.busy_links(config.topology.counts(), config.link.fabric_share)
        if rate > faithful.link_mbps or rate * busy > faithful.aggregate_mbps:
            return (f"{datapath}: links at {rate:g} Mbit/s ({busy:g} busy) exceed what it keeps faithful, "
                    f"{faithful.link_mbps:g} per link and {faithful.aggregate_mbps:g} in all ({faithful.source}): "
                    "give a larger --dilation")
    return None


def run(config: Path, datapath: str, results: Path, log: Path) -> tuple[Path | None, int]:
    """`ccemu experiment CONFIG --datapath DATAPATH` into `results`, its output into `log`: (its
    bundle, None if it left none; its exit status). Stopped (Ctrl-C, SIGTERM): ccemu is asked to stop
    as it would be from a terminal (it tears its fabric down), then waited for."""
    with open(log, "w") as out, subprocess.Popen(
            [sys.executable, "-m", "ccemu.cli", "experiment", str(config), "--datapath", datapath, "--skip-check",
             "--no-monitoring", "--results", str(results)], stdout=out, stderr=subprocess.STDOUT) as ccemu:
        try:
            status = ccemu.wait()
        except BaseException:
            ccemu.terminate()
            ccemu.wait()
            raise
    bundles = sorted(results.glob("*/*/manifest.json"))
    return (bundles[-1].parent if bundles else None), status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8, help="incast flows N")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="runs per datapath")
    parser.add_argument("--dilation", type=float, help=f"datacenter.dilation (default: {DILATION})")
    parser.add_argument("--results", type=Path, default=Path("results"),
                        help="bundles under RESULTS/datapaths/TIME; `ccemu bench capacity` results read from it")
    args = parser.parse_args()
    data = experiment_data(args.n, args.rounds, args.dilation)
    problem = faithful_problem(data, args.results)
    if problem:
        raise SystemExit(f"benchmarks/datapaths.py: {problem}")
    config = parse_config(data, source=str(INCAST))
    out = args.results / "datapaths" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    print(f"incast N = {args.n}, {args.rounds} rounds, {len(config.schemes)} schemes, links at "
          f"{config.link.rate_mbps:g} Mbit/s (datacenter {config.datacenter.link_gbps:g} Gbit/s, dilation "
          f"{config.dilation.factor:g}); {args.repeats} runs per datapath; bundles under {out}", flush=True)
    bundles: dict[str, list[Path | None]] = {datapath: [] for datapath in DATAPATHS}
    with tempfile.TemporaryDirectory(prefix="ccemu-bench-") as tmp:
        path = Path(tmp) / "datapaths.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        for repeat in range(1, args.repeats + 1):
            for datapath in DATAPATHS if repeat % 2 else DATAPATHS[::-1]:
                started = time.monotonic()
                where = out / datapath / f"run{repeat}"
                where.mkdir(parents=True)
                bundle, status = run(path, datapath, where, where / "ccemu.log")
                verdict = (Tables.read(bundle).manifest.get("fidelity") or {}).get("status") if bundle else None
                print(f"run {repeat} of {args.repeats} on {datapath}: ccemu exited {status} in "
                      f"{time.monotonic() - started:.0f} s, fidelity verdict {verdict or '-'}, bundle "
                      f"{bundle or 'none'} (log {where / 'ccemu.log'})", flush=True)
                bundles[datapath].append(bundle)
    figures = {datapath: figures_of(found, args.n) for datapath, found in bundles.items()}
    missing = Runs((None,) * args.repeats)  # a scheme no run of a datapath has
    runs = {scheme.scheme: {datapath: {key: figures[datapath].get(scheme.scheme, {}).get(key, missing)
                                       for key, _, _ in FIGURES} for datapath in DATAPATHS}
            for scheme in config.schemes}
    print()
    print("\n".join(table_lines(runs)))
    print("\nDatacenter units; each cell the median of the runs [lowest-highest], '(k -)': k runs without the figure. "
          "agree: the datapaths' medians differ by no more than the wider of their run-to-run spreads.")


if __name__ == "__main__":
    interrupts.run_script(main, "benchmarks/datapaths.py")
