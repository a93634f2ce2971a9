"""`make reproduce`'s report: every experiment's bundle, and a line per paper claim (reproduced,
not reproduced, not comparable) with the numbers, in results/reproduce/TIME/REPORT.md with the
bundles' plots beside it."""

from __future__ import annotations

import json
import math
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from . import papers
from .figures import Tables


@dataclass(frozen=True)
class Run:
    """One experiment of the reproduction: its bundle (None: it did not get as far as one)."""

    name: str
    bundle: Path | None
    seconds: float
    error: str = ""


def write_report(directory: Path, runs: list[Run], started: str) -> Path:
    plots = directory / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    total = sum(r.seconds for r in runs)
    lines = [f"# ccemu reproduction: {started}", "",
             f"{len(runs)} experiments in {total / 60:.1f} minutes of wall time. Each line of the claims table "
             "compares a figure computed from ccemu's bundle with the paper's (workloads/reference.yaml: the "
             "source, the value, and when ccemu counts it as reproduced).", "",
             "## Experiments", "",
             "| experiment | dilation | link (datacenter / emulated) | base RTT us (paper) | BDP pkts (paper) | "
             "wall time | verdict | unfinished flows | bundle |",
             "|---|---|---|---|---|---|---|---|---|"]
    comparisons: list[papers.Comparison] = []
    settings = papers.settings()
    commit = ""
    for run in runs:
        if run.bundle is None or not (run.bundle / "manifest.json").exists():
            lines.append(f"| {run.name} | - | - | - | - | {run.seconds:.0f} s | did not run: {run.error} | - | - |")
            continue
        tables = Tables.read(run.bundle)
        manifest, dc = tables.manifest, tables.manifest.get("datacenter", {})
        commit = commit or manifest.get("git_commit", "")
        setting = settings.get(tables.kind, {})
        comparisons += papers.compare(tables)
        for plot in sorted((run.bundle / "plots").glob("*.png")):
            shutil.copy(plot, plots / f"{run.name}-{plot.name}")
        status = manifest["fidelity"]["status"] + (" (interrupted)" if manifest.get("interrupted") else "")
        lines.append(
            f"| {run.name} | {dc.get('dilation', 1):g} | {dc.get('link_rate_bps', 0) / 1e9:g} Gbit/s / "
            f"{dc.get('emulated_link_mbps', 0):g} Mbit/s | {dc.get('base_rtt_max_us', 0):.1f} "
            f"({setting.get('rtt_us', '-')}) | {dc.get('bdp_packets_max_rtt', 0):.1f} "
            f"({setting.get('bdp_packets', '-')}) | {run.seconds:.0f} s | {status} | "
            f"{manifest.get('unfinished_flows', 0)} | {run.bundle} |")
    tally = Counter(c.status for c in comparisons)
    lines += ["", f"Commit {commit}.", "", "## Claims", "",
              f"**{tally[papers.REPRODUCED]} reproduced, {tally[papers.NOT_REPRODUCED]} not reproduced, "
              f"{tally[papers.NOT_COMPARABLE]} not comparable** (of {len(comparisons)}).", ""]
    for name in dict.fromkeys(c.claim.experiment for c in comparisons):
        lines += [f"### {name}", ""] + papers.markdown([c for c in comparisons if c.claim.experiment == name]) + [""]
    lines += ["## Fidelity", "", "What the verdicts said (WARN and FAIL reasons, per block) is in each bundle's "
              "summary.md; a WARN means the emulation was near the edge of what this machine keeps faithful "
              "(DESIGN.md), not that the figure is wrong.", "",
              "Plots of every experiment are in plots/ (experiment-plot.png).", ""]
    report = directory / "REPORT.md"
    report.write_text("\n".join(lines))
    (directory / "reproduction.json").write_text(json.dumps({
        "started": started, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": total,
        "runs": [{"name": r.name, "bundle": str(r.bundle) if r.bundle else None, "seconds": round(r.seconds, 1),
                  "error": r.error} for r in runs],
        "claims": [{"id": c.claim.id, "experiment": c.claim.experiment, "status": c.status,
                    "ours": c.ours if c.ours is None or math.isfinite(c.ours) else "never",
                    "paper": c.claim.paper, "why": c.why} for c in comparisons],
    }, indent=2, default=str) + "\n")
    return report
