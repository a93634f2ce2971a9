"""summary.md and plots/ of a results bundle, computed from its CSVs and manifest alone
(`ccemu report DIR` runs this on a finished bundle)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from ..results.bundle import read_table
from ..results.stats import BUCKETS, fct_by_bucket, histogram_cdf, histogram_mean, percentile


def _by(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    grouped: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        grouped[tuple(row[k] for k in keys)].append(row)
    return grouped


def _schemes(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(row["scheme"] for row in rows))


def _ns(rows: list[dict]) -> list[int]:
    return sorted({int(row["n"]) for row in rows})


def incast_table(flows: list[dict], rounds: list[dict], ports: list[dict]) -> list[dict]:
    """One row per scheme and N: what the summary and the plots show."""
    flows_by, rounds_by, ports_by = _by(flows, "scheme", "n"), _by(rounds, "scheme", "n"), _by(ports, "scheme", "n")
    table = []
    for scheme in _schemes(rounds):
        for n in _ns(rounds):
            key = (scheme, str(n))
            fcts = [float(f["fct"]) for f in flows_by.get(key, [])]
            done = [r for r in rounds_by.get(key, []) if float(r["duration"]) > 0]
            port_rows = ports_by.get(key, [])
            bottleneck = [p for p in port_rows if p["bottleneck"] == "1"]
            credits_sent = sum(int(f["credits_sent"]) for f in flows_by.get(key, []))
            table.append({
                "scheme": scheme, "n": n, "rounds": len(rounds_by.get(key, [])),
                "unfinished": sum(int(r["flows"]) - int(r["finished"]) for r in rounds_by.get(key, [])),
                "goodput_mbps": (sum(float(r["goodput_bps"]) for r in done) / len(done) / 1e6) if done else 0.0,
                "fct_mean_ms": 1e3 * sum(fcts) / len(fcts) if fcts else 0.0,
                "fct_p99_ms": 1e3 * percentile(fcts, 99) if fcts else 0.0,
                "fct_max_ms": 1e3 * max(fcts) if fcts else 0.0,
                "max_queue": max((int(p["max_data_queue"]) for p in bottleneck), default=0),
                "mean_queue": max((float(p["mean_data_queue"]) for p in bottleneck), default=0.0),
                "data_drops": sum(int(p["data_dropped"]) for p in port_rows),
                "marks": sum(int(p["data_marked"]) for p in port_rows),
                "credit_drops": sum(int(p["credit_dropped"]) for p in port_rows),
                "credit_marks": sum(int(p["credit_marked"]) for p in port_rows),
                "timeouts": sum(int(f["timeouts"]) for f in flows_by.get(key, [])),
                "retransmits": sum(int(f["retransmits"]) for f in flows_by.get(key, [])),
                "credit_waste": (sum(int(f["credits_wasted"]) for f in flows_by.get(key, [])) / credits_sent
                                 if credits_sent else 0.0),
            })
    return table


def summary_markdown(directory: Path) -> str:
    manifest = json.loads((directory / "manifest.json").read_text())
    flows, rounds, ports = (read_table(directory, name) for name in ("flows", "rounds", "ports"))
    verdict = manifest.get("fidelity", {})
    lines = [f"# {manifest['config']['name']}: {manifest.get('started', '')}", ""]
    if manifest.get("interrupted"):
        lines += ["**Interrupted**: the tables hold what finished before Ctrl-C.", ""]
    if manifest.get("failed"):
        lines += [f"**Stopped by an error** ({manifest['failed']}): the tables hold what finished before it.", ""]
    lines += [f"Fidelity: **{verdict.get('status', 'unknown')}**"]
    lines += [f"- {reason}" for reason in verdict.get("reasons", [])]
    link = manifest["config"]["link"]
    lines += ["", f"Commit {manifest.get('git_commit')}; {link['rate_mbps']} Mbit/s links; "
              f"seed {manifest['config']['seed']}.", ""]
    failures = manifest.get("host_failures", [])
    if failures:
        lines += ["## Host failures", "", f"{manifest.get('unfinished_flows', 0)} flows never finished.", ""]
        lines += [f"- {f['scheme']} N={f['n']} round {f['round']}: {f['host']}'s cchost ({f['role']}) {f['status']}"
                  + (f": {f['last_error']}" if f.get("last_error") else "") for f in failures]
        lines.append("")
    lines += _fidelity_table(verdict.get("blocks", []))

    lines += ["## Incast: per scheme and N", "",
              "| scheme | N | goodput Mbit/s | FCT mean ms | p99 ms | max ms | max queue B | mean queue B | "
              "data drops | CE marks | timeouts | retransmits | credit drops | credit CE marks | credit waste | "
              "unfinished |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    table = incast_table(flows, rounds, ports)
    for row in table:
        lines.append(f"| {row['scheme']} | {row['n']} | {row['goodput_mbps']:.2f} | {row['fct_mean_ms']:.1f} | "
                     f"{row['fct_p99_ms']:.1f} | {row['fct_max_ms']:.1f} | {row['max_queue']} | "
                     f"{row['mean_queue']:.0f} | {row['data_drops']} | {row['marks']} | {row['timeouts']} | "
                     f"{row['retransmits']} | {row['credit_drops']} | {row['credit_marks']} | "
                     f"{row['credit_waste']:.1%} | "
                     f"{row['unfinished']} |")
    lines += ["", "Queues are the bottleneck port's (the switch port toward the aggregator), exact at every "
              "enqueue, in bytes on the wire; drops and marks are summed over every port of the fabric (CE marks: "
              "data packets marked, each counted once, by the port that marked it first; credit CE marks: credits "
              "SprayPass's ports marked with the probability they drop credits).", ""]

    bound = manifest.get("expresspass_queue_bound_bytes")
    if bound:
        worst = max((r["max_queue"] for r in table if r["scheme"] == "expresspass"),
                    default=0)
        lines += [f"ExpressPass data queue bound: {bound} B = (credit buffer + burst) x (84 + 1538) B x "
                  f"{manifest.get('expresspass_credit_queues_on_longest_path')} credit queues on the longest "
                  f"credit path (the link rate times the largest spread of credit-path delays). "
                  f"Largest measured: {worst} B: {'within' if worst <= bound else 'ABOVE'} the bound.", ""]
    k = manifest.get("dctcp_k_bytes")
    if k:
        lines += [f"DCTCP marks above K = {k} B.", ""]

    lines += ["## FCT per scheme and flow size", "",
              "| scheme | bucket | flows | mean ms | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|---|---|"]
    for scheme in _schemes(flows):
        summary = fct_by_bucket((int(f["size"]), float(f["fct"])) for f in flows if f["scheme"] == scheme)
        for bucket, s in summary.items():
            lines.append(f"| {scheme} | {bucket} | {s.flows} | {1e3 * s.mean:.1f} | {1e3 * s.p50:.1f} | "
                         f"{1e3 * s.p99:.1f} | {1e3 * s.max:.1f} |")
    lines += ["", "Buckets: " + ", ".join(f"{name} {low}-{high} B" for name, low, high in BUCKETS) + ".", ""]
    return "\n".join(lines)


FIDELITY_COLUMNS = [  # (figure in the verdict, column title, format)
    ("steal", "steal", "{:.1%}"), ("cpu_busy", "CPU busy", "{:.0%}"),
    ("bottleneck_lag_frames", "bottleneck lag (frames)", "{:.2f}"),
    ("credit_lag_credits", "credit lag (credits)", "{:.2f}"),
    ("switch_residence_p50_frames", "switch residence p50 (frames)", "{:.2f}"),
    ("switch_residence_p99_frames", "p99 (frames)", "{:.2f}"),
    ("worst_switch_residence_p99_frames", "worst switch p99 (judged)", "{:.2f}"),
    ("switch_lost_ratio", "lost in switches", "{:.3%}"),
    ("pacing_lateness_of_gap", "timer lateness / credit gap", "{:.0%}"),
]


def _fidelity_table(blocks: list[dict]) -> list[str]:
    """The verdict's figures per fabric (scheme and N); residence and lag in frame times at
    the link rate."""
    if not blocks:
        return []
    lines = ["## Fidelity per fabric", "",
             "| scheme | N | verdict | " + " | ".join(title for _, title, _ in FIDELITY_COLUMNS) + " |",
             "|---|---|---|" + "---|" * len(FIDELITY_COLUMNS)]
    for block in blocks:
        cells = [fmt.format(block[name]) if name in block else "-" for name, _, fmt in FIDELITY_COLUMNS]
        lines.append(f"| {block['scheme']} | {block['n']} | {block['status']} | " + " | ".join(cells) + " |")
    return lines + ["", "Switch residence: time a packet spent inside a switch (ovs-vswitchd) between arriving at "
                    "one port and reaching the next port's queue, over every packet of every switch; a frame time "
                    "is one full frame at the link rate.", ""]


def plot(directory: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    flows, rounds, ports = (read_table(directory, name) for name in ("flows", "rounds", "ports"))
    out = directory / "plots"
    out.mkdir(exist_ok=True)
    written = []

    fig, ax = plt.subplots(figsize=(6, 4))
    for scheme in _schemes(flows):
        fcts = sorted(1e3 * float(f["fct"]) for f in flows if f["scheme"] == scheme)
        ax.plot(fcts, [(i + 1) / len(fcts) for i in range(len(fcts))], label=scheme)
    ax.set(xlabel="flow completion time (ms)", ylabel="CDF", title="FCT")
    ax.grid(alpha=0.3)
    ax.legend()
    written.append(_save(fig, out / "fct_cdf.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    for scheme in _schemes(ports):
        counts: list[int] = []
        bucket = 0
        for p in ports:
            if p["scheme"] == scheme and p["bottleneck"] == "1":
                histogram = [int(c) for c in p["histogram"].split()]
                counts = [a + b for a, b in zip(counts, histogram)] if counts else histogram
                bucket = int(p["bucket_bytes"])
        points = histogram_cdf(counts, bucket)
        if points:
            ax.step([q / 1e3 for q, _ in points], [c for _, c in points], where="post",
                    label=f"{scheme} (mean {histogram_mean(counts, bucket) / 1e3:.1f} KB)")
    ax.set(xlabel="bottleneck data queue at enqueue (KB)", ylabel="CDF", title="Queue length")
    ax.grid(alpha=0.3)
    ax.legend()
    written.append(_save(fig, out / "queue_cdf.png"))

    table = incast_table(flows, rounds, ports)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for color, scheme in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], _schemes(rounds)):
        rows = [r for r in table if r["scheme"] == scheme]
        ns = [r["n"] for r in rows]
        left.plot(ns, [r["goodput_mbps"] for r in rows], marker="o", color=color, label=scheme)
        right.plot(ns, [r["fct_p99_ms"] for r in rows], marker="o", color=color, label=f"{scheme} p99")
        right.plot(ns, [r["fct_mean_ms"] for r in rows], marker="x", linestyle="--", color=color,
                   label=f"{scheme} mean")
    left.set(ylabel="goodput (Mbit/s)", title="Incast goodput", ylim=(0, None))
    right.set(ylabel="FCT (ms)", title="Incast FCT", ylim=(0, None))
    for ax in (left, right):
        ax.set(xlabel="incast flows N", xscale="log")
        ax.set_xticks(_ns(rounds), [str(n) for n in _ns(rounds)])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        ax.legend()
    written.append(_save(fig, out / "incast_vs_n.png"))
    return written


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


def report(directory: Path) -> Path:
    """Writes summary.md and plots/ from the bundle's tables; returns summary.md's path."""
    summary = directory / "summary.md"
    summary.write_text(summary_markdown(directory))
    plot(directory)
    return summary
