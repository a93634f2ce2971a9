"""`make reproduce`'s report: every experiment's bundle, and a line for every claim of
workloads/reference.yaml (judged by the one rule, or not comparable with the reason, whether its
experiment ran or not), in results/reproduce/TIME/REPORT.md with the bundles' plots beside it."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter

from ..model.config import TopologyConfig
from . import papers
from .figures import Tables
from .markdown import table
from .rule import NOT_COMPARABLE


@dataclass(frozen=True)
class Run:
    """One experiment of the reproduction: its bundle (None: it did not get as far as one). With
    `--repeats N` an experiment runs N times, repeat 1..N (seed, seed + 1, ...), under one name."""

    name: str
    bundle: Path | None
    seconds: float
    error: str = ""
    repeat: int = 1

    def label(self, repeats: int) -> str:
        return f"{self.name} ({self.repeat}/{repeats})" if repeats > 1 else self.name


def _repeats(runs: list[Run]) -> Counter:
    return Counter(run.name for run in runs)


def _comparisons(runs: list[Run], claims: list[papers.Claim]) -> list[papers.Comparison]:
    """Every claim, in reference.yaml's order, from the bundles of its experiment's kind, or not
    comparable with why. Where several experiments are of its kind (a profile that runs one at more
    than one of the papers' settings), it is read from the first, in the reproduction's order, whose
    settings are the figure's (`requires`) and whose data it finds; the report names that one. Never
    the one with the best verdict: the order is fixed before any run. Where an experiment ran several
    times, every run is read and the claim judged over them (papers.over_runs)."""
    by_name: dict[str, list[tuple[Run, Tables | None]]] = {}
    for run in runs:
        has_bundle = run.bundle is not None and (run.bundle / "manifest.json").exists()
        by_name.setdefault(run.name, []).append((run, Tables.read(run.bundle) if has_bundle else None))
    kind = {name: next((t.kind for _, t in group if t is not None), None) for name, group in by_name.items()}
    several = {k for k in kind.values() if k is not None and sum(v == k for v in kind.values()) > 1}
    out = []
    for claim in claims:
        of_kind = [name for name, k in kind.items() if k == claim.experiment]
        if claim.not_run_here:  # read from no run: none is named
            out += papers.not_run([claim], "")
            continue
        if not of_kind:
            run = next((r for r in runs if r.name == claim.experiment), None)
            out += papers.not_run([claim], f"{claim.experiment} was not part of this reproduction" if run is None
                                  else _no_bundle(run))
            continue

        def first_tables(name: str) -> Tables:
            return next(t for _, t in by_name[name] if t is not None)

        # None at the figure's settings: the first says why (compare_claim names the setting).
        candidates = [n for n in of_kind if not papers.settings_differ(claim, first_tables(n))] or of_kind[:1]
        readings = [(n, papers.over_runs(claim, [_read(claim, run, t) for run, t in by_name[n]]))
                    for n in candidates]
        name, comparison = next(((n, c) for n, c in readings if c.verdict != NOT_COMPARABLE), readings[0])
        out.append(dataclasses.replace(comparison, run=name) if claim.experiment in several else comparison)
    return out


def _read(claim: papers.Claim, run: Run, tables: Tables | None) -> papers.Comparison:
    if tables is None:
        return papers.not_run([claim], _no_bundle(run))[0]
    return papers.compare_claim(claim, tables)


def _no_bundle(run: Run) -> str:
    return f"{run.name} left no bundle ({run.error or 'no manifest'})"


def write_report(directory: Path, runs: list[Run], started: str, profile: str = "") -> Path:
    """`profile`: the named set of experiments that ran (catalog.PROFILES), "" for a list given by name."""
    plots = directory / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    total = sum(r.seconds for r in runs)
    settings = papers.settings()
    repeats = _repeats(runs)
    counted = (f"{len(repeats)} experiments" + (f" (profile {profile})" if profile else "") +
               (f", {len(runs)} runs (each run {max(repeats.values())} times, with seeds seed .. seed + "
                f"{max(repeats.values()) - 1}: each claim is judged on the median of its runs)"
                if max(repeats.values(), default=1) > 1 else ""))
    lines = [f"# ccemu reproduction: {started}", "",
             counted +
             f" in {total / 60:.1f} minutes of wall time. Each claim of "
             "workloads/reference.yaml is listed, with the paper's figure (its seed and line: workloads/README.md), "
             "ccemu's, their ratio, the claim's class and the verdict.", "",
             "## Experiments", ""]
    cells = []
    commit = ""
    names_of_kind: dict[str, list[str]] = {}  # the experiment files of each kind that left a bundle
    for run in runs:
        if run.bundle is None or not (run.bundle / "manifest.json").exists():
            cells.append([run.label(repeats[run.name]), "-", "-", "-", "-", "-", f"{run.seconds:.0f} s",
                          f"did not run: {run.error}", "-", "-"])
            continue
        tables = Tables.read(run.bundle)
        manifest, dc = tables.manifest, tables.manifest.get("datacenter", {})
        commit = commit or manifest.get("git_commit", "")
        setting = papers.setting_of(tables) or {}
        names_of_kind.setdefault(tables.kind, []).append(run.name)
        topology = manifest["config"].get("topology")
        hosts = TypeAdapter(TopologyConfig).validate_python(topology).counts().hosts if topology else "-"
        for plot in sorted((run.bundle / "plots").glob("*.png")):
            copy = f"{run.name}-{run.repeat}-{plot.name}" if repeats[run.name] > 1 else f"{run.name}-{plot.name}"
            shutil.copy(plot, plots / copy)
        status = manifest["fidelity"]["status"] + (" (interrupted)" if manifest.get("interrupted") else "")
        cells.append([
            run.label(repeats[run.name]), f"{hosts} ({setting.get('hosts', '-')})", f"{dc.get('dilation', 1):g}",
            f"{dc.get('link_rate_bps', 0) / 1e9:g} Gbit/s / {dc.get('emulated_link_mbps', 0):g} Mbit/s",
            f"{dc.get('base_rtt_max_us', 0):.1f} ({setting.get('rtt_us', '-')})",
            f"{dc.get('bdp_packets_max_rtt', 0):.1f} ({setting.get('bdp_packets', '-')})", f"{run.seconds:.0f} s",
            status, str(manifest.get("unfinished_flows", 0)), str(run.bundle)])
    lines += table(["experiment", "hosts (paper)", "dilation", "link (datacenter / emulated)", "base RTT us (paper)",
                    "BDP pkts (paper)", "wall time", "verdict", "unfinished flows", "bundle"], cells)
    comparisons = _comparisons(runs, papers.load_claims())
    lines += ["", f"Commit {commit}.", "", "## Claims", "", papers.headline(comparisons) + ".", "",
              papers.RULE_TEXT, ""]
    for name in dict.fromkeys(c.claim.experiment for c in comparisons):
        lines += [f"### {name}", ""]
        # Each experiment file of the kind that ran, with its own set-up's differences (its kind's by default).
        for file in dict.fromkeys(names_of_kind.get(name, [name])):
            differs = (settings.get(file) or settings.get(name, {})).get("differs", [])
            if differs:
                lines += [f"Where ccemu's set-up differs from the paper's ({file}.yaml):", ""] + \
                         [f"- {d}" for d in differs] + [""]
        lines += papers.markdown([c for c in comparisons if c.claim.experiment == name]) + [""]
    lines += ["## Fidelity", "", "What the verdicts said (WARN and FAIL reasons, per block) is in each bundle's "
              "summary.md; a WARN means the emulation was near the edge of what this machine keeps faithful "
              "(emulation/README.md, \"The fidelity verdict\"), not that the figure is wrong; a claim that reads a "
              "FAIL block is not comparable.", "",
              "Plots of every experiment are in plots/ (experiment-plot.png; experiment-run-plot.png where it ran "
              "several times).", ""]
    report = directory / "REPORT.md"
    report.write_text("\n".join(lines))
    (directory / "reproduction.json").write_text(json.dumps({
        "started": started, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": total,
        "profile": profile,
        "commit": commit,
        "runs": [{"name": r.name, "repeat": r.repeat, "bundle": str(r.bundle) if r.bundle else None,
                  "seconds": round(r.seconds, 1), "error": r.error} for r in runs],
        "claims": [{"id": c.claim.id, "experiment": c.claim.experiment, "run": c.run or None, "class": c.claim.kind,
                    "verdict": c.verdict,
                    "paper": c.claim.paper.text(), "ours": c.ours.text() if c.ours is not None else None,
                    "ratio": c.judgement.ratio, "why": c.why, "source": c.claim.source, **_repeats_json(c)}
                   for c in comparisons],
    }, indent=2) + "\n")
    return report


def _repeats_json(comparison: papers.Comparison) -> dict:
    """A claim judged over several runs: each run's figure and verdict, and the interval of the median."""
    r = comparison.repeats
    if r is None:
        return {}
    return {"runs_figures": [f.text() for f in r.figures], "runs_verdicts": list(r.verdicts),
            "median_interval": r.interval.text(), "median_interval_confidence": round(r.confidence, 4)}
