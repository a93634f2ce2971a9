"""`make reproduce`'s report: every experiment's bundle, and a line for every claim of
workloads/reference.yaml (judged by the one rule, or not comparable with the reason, whether its
experiment ran or not), in results/reproduce/TIME/REPORT.md with the bundles' plots beside it."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from . import papers
from .figures import Tables
from .rule import NOT_COMPARABLE


@dataclass(frozen=True)
class Run:
    """One experiment of the reproduction: its bundle (None: it did not get as far as one)."""

    name: str
    bundle: Path | None
    seconds: float
    error: str = ""


def _comparisons(runs: list[Run], claims: list[papers.Claim]) -> list[papers.Comparison]:
    """Every claim, in reference.yaml's order, from a bundle of its experiment's kind, or not
    comparable with why. Where several runs are of its kind (a profile that runs an experiment at
    more than one of the papers' settings), it is read from the first run, in the reproduction's
    order, whose settings are the figure's (`requires`) and whose data it finds; the report names
    that run. Never the run with the best verdict: the order is fixed before any run."""
    tables = {run.name: Tables.read(run.bundle) for run in runs
              if run.bundle is not None and (run.bundle / "manifest.json").exists()}
    several = {kind for kind in {t.kind for t in tables.values()}
               if sum(t.kind == kind for t in tables.values()) > 1}
    out = []
    for claim in claims:
        of_kind = [name for name, t in tables.items() if t.kind == claim.experiment]
        if not of_kind:
            run = next((r for r in runs if r.name == claim.experiment), None)
            out += papers.not_run([claim], f"{claim.experiment} was not part of this reproduction" if run is None
                                  else f"{claim.experiment} left no bundle ({run.error or 'no manifest'})")
            continue
        # None at the figure's settings: the first run says why (compare_claim names the setting).
        candidates = [n for n in of_kind if not papers.settings_differ(claim, tables[n])] or of_kind[:1]
        readings = [(n, papers.compare_claim(claim, tables[n])) for n in candidates]
        name, comparison = next(((n, c) for n, c in readings if c.verdict != NOT_COMPARABLE), readings[0])
        out.append(dataclasses.replace(comparison, run=name) if claim.experiment in several else comparison)
    return out


def write_report(directory: Path, runs: list[Run], started: str, profile: str = "") -> Path:
    """`profile`: the named set of experiments that ran (cli.PROFILES), "" for a list given by name."""
    plots = directory / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    total = sum(r.seconds for r in runs)
    settings = papers.settings()
    lines = [f"# ccemu reproduction: {started}", "",
             f"{len(runs)} experiments" + (f" (profile {profile})" if profile else "") +
             f" in {total / 60:.1f} minutes of wall time. Each claim of "
             "workloads/reference.yaml is listed, with the paper's figure (its source line in ../shared/seeds/), "
             "ccemu's, their ratio, the claim's class and the verdict.", "",
             "## Experiments", "",
             "| experiment | dilation | link (datacenter / emulated) | base RTT us (paper) | BDP pkts (paper) | "
             "wall time | verdict | unfinished flows | bundle |",
             "|---|---|---|---|---|---|---|---|---|"]
    commit = ""
    for run in runs:
        if run.bundle is None or not (run.bundle / "manifest.json").exists():
            lines.append(f"| {run.name} | - | - | - | - | {run.seconds:.0f} s | did not run: {run.error} | - | - |")
            continue
        tables = Tables.read(run.bundle)
        manifest, dc = tables.manifest, tables.manifest.get("datacenter", {})
        commit = commit or manifest.get("git_commit", "")
        setting = settings.get(tables.kind, {})
        for plot in sorted((run.bundle / "plots").glob("*.png")):
            shutil.copy(plot, plots / f"{run.name}-{plot.name}")
        status = manifest["fidelity"]["status"] + (" (interrupted)" if manifest.get("interrupted") else "")
        lines.append(
            f"| {run.name} | {dc.get('dilation', 1):g} | {dc.get('link_rate_bps', 0) / 1e9:g} Gbit/s / "
            f"{dc.get('emulated_link_mbps', 0):g} Mbit/s | {dc.get('base_rtt_max_us', 0):.1f} "
            f"({setting.get('rtt_us', '-')}) | {dc.get('bdp_packets_max_rtt', 0):.1f} "
            f"({setting.get('bdp_packets', '-')}) | {run.seconds:.0f} s | {status} | "
            f"{manifest.get('unfinished_flows', 0)} | {run.bundle} |")
    comparisons = _comparisons(runs, papers.load_claims())
    lines += ["", f"Commit {commit}.", "", "## Claims", "", papers.headline(comparisons) + ".", "",
              papers.RULE_TEXT, ""]
    for name in dict.fromkeys(c.claim.experiment for c in comparisons):
        lines += [f"### {name}", ""]
        differs = settings.get(name, {}).get("differs", [])
        if differs:
            lines += ["Where ccemu's set-up differs from the paper's:", ""] + [f"- {d}" for d in differs] + [""]
        lines += papers.markdown([c for c in comparisons if c.claim.experiment == name]) + [""]
    lines += ["## Fidelity", "", "What the verdicts said (WARN and FAIL reasons, per block) is in each bundle's "
              "summary.md; a WARN means the emulation was near the edge of what this machine keeps faithful "
              "(DESIGN.md), not that the figure is wrong; a claim that reads a FAIL block is not comparable.", "",
              "Plots of every experiment are in plots/ (experiment-plot.png).", ""]
    report = directory / "REPORT.md"
    report.write_text("\n".join(lines))
    (directory / "reproduction.json").write_text(json.dumps({
        "started": started, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": total,
        "profile": profile,
        "commit": commit,
        "runs": [{"name": r.name, "bundle": str(r.bundle) if r.bundle else None, "seconds": round(r.seconds, 1),
                  "error": r.error} for r in runs],
        "claims": [{"id": c.claim.id, "experiment": c.claim.experiment, "run": c.run or None, "class": c.claim.kind,
                    "verdict": c.verdict,
                    "paper": c.claim.paper.text(), "ours": c.ours.text() if c.ours is not None else None,
                    "ratio": c.judgement.ratio, "why": c.why, "source": c.claim.source} for c in comparisons],
    }, indent=2) + "\n")
    return report
