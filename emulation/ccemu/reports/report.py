"""summary.md and plots/ of a results bundle, computed from its CSVs and manifest alone
(`ccemu report DIR` runs this on a finished bundle)."""

from __future__ import annotations

from pathlib import Path

from ..kinds import kind
from ..results import figures, files, papers, plotting
from ..results.bundle import block_label
from ..results.fidelity import GOOD, worst
from ..results.figures import Tables
from ..results.markdown import by, cell, schemes, table
from ..ports.histograms import queue_bucket_bounds
from ..results.stats import BUCKETS, histogram_cdf

# Where a packet waits inside a switch on each datapath (the fidelity table's switch residence).
RESIDENCE_WHERE = {"ovs": "in ovs-vswitchd's receive sockets and its forwarding thread",
                   "bpf": "in the kernel's bpf forwarding, no OVS on the way"}


def _kind(tables: Tables):
    """The bundle's kind from the registry (an unknown one: an error naming the known ones)."""
    return kind(tables.kind)


def summary_markdown(directory: Path) -> str:
    tables = Tables.read(directory)
    manifest = tables.manifest
    verdict = manifest.get("fidelity", {})
    kind = _kind(tables)
    beside = papers.compare(tables)
    lines = [f"# {manifest['config']['name']}: {manifest.get('started', '')}", ""]
    if manifest.get("interrupted"):
        lines += ["**Interrupted**: the tables hold what finished before Ctrl-C.", ""]
    if manifest.get("failed"):
        lines += [f"**Stopped by an error** ({manifest['failed']}): the tables hold what finished before it.", ""]
    lines += _result_lines(tables, kind, beside)
    link = manifest["config"]["link"]
    if manifest.get("machine_capacity"):
        lines += [capacity_line(manifest["machine_capacity"], link["rate_mbps"]), ""]
    if auto := manifest.get("dilation_auto_from"):
        chosen = manifest["config"]["datacenter"]["dilation"]
        lines += [f"`dilation: auto` chose {chosen:g} so that one link runs at most {auto['link_mbps']:g} "
                  f"Mbit/s and the workload's busy links at most {auto['aggregate_mbps']:g} in all, from "
                  f"{auto['source']}.", ""]
    lines += [f"Commit {manifest.get('git_commit')}; {_datapath(manifest)} datapath; "
              f"{link['rate_mbps']:g} Mbit/s links; "
              f"seed {manifest['config']['seed']}"
              + (f"; wall time {manifest['wall_seconds']:.0f} s" if "wall_seconds" in manifest else "") + ".", ""]
    lines += _datacenter_lines(tables)
    failures = manifest.get("host_failures", [])
    if failures:
        lines += ["## Host failures", "", f"{manifest.get('unfinished_flows', 0)} flows never finished.", ""]
        lines += [f"- {_label(f)} round {f['round']}: {f['host']}'s cchost ({f['role']}) {f['status']}"
                  + (f": {f['last_error']}" if f.get("last_error") else "") for f in failures]
        lines.append("")
    lines += _fidelity_table(verdict.get("blocks", []), _datapath(manifest))
    lines += _hosts_lines(tables)
    lines += kind.summary_lines(tables)
    if kind.fct_by_bucket:
        lines += _fct_by_bucket_lines(tables)
    if beside:
        lines += ["## Beside the papers", "",
                  "Each claim of workloads/reference.yaml about this experiment, read from this bundle "
                  "(dilation-free figures or datacenter time). " + papers.RULE_TEXT, ""]
        differs = (papers.setting_of(tables) or {}).get("differs", [])
        if differs:
            lines += ["Where this set-up differs from the paper's:", ""] + [f"- {d}" for d in differs] + [""]
        lines += papers.markdown(beside) + [""]
    return "\n".join(lines)


def _datapath(manifest: dict) -> str:
    # Bundles from before the bpf datapath (2026-11-26) name none: OVS forwarded them all.
    return manifest.get("datapath", "ovs")


def _result_lines(tables: Tables, kind, beside: list[papers.Comparison]) -> list[str]:
    """What the run found, first, in three paragraphs: the kind's headline figure per scheme, the fidelity
    verdict (per scheme where the schemes' differ), and how the claims beside the papers came out."""
    headline = kind.headline(tables)
    lines = [f"**{headline.what}**: " + "; ".join(f"{scheme} {text}" for scheme, text in headline.by_scheme.items())
             + ".", ""] if headline.by_scheme else []
    status = (tables.manifest.get("fidelity") or {}).get("status", "unknown")
    per_scheme = {}
    for scheme, n, point in tables.blocks():
        block = tables.verdict(scheme, n, point)
        if block is not None:
            per_scheme[scheme] = worst(per_scheme.get(scheme, block), block)
    if len(set(per_scheme.values())) > 1:
        verdicts = " (" + ", ".join(f"{scheme} {v}" for scheme, v in per_scheme.items()) + ")"
    else:
        verdicts = " for every scheme" if per_scheme else ""
    lines += [f"Fidelity: **{status}**{verdicts}."]
    lines += [f"- {reason}" for reason in (tables.manifest.get("fidelity") or {}).get("reasons", [])]
    if beside:
        lines += ["", f"Beside the papers: {papers.headline(beside)}; each claim in the last section."]
    return lines + [""]


def _hosts_lines(tables: Tables) -> list[str]:
    """Docker hosts: per block, the CPU the containers used and the ones that hit their CPU limit."""
    if not tables.hosts:
        return []
    lines = ["## Docker hosts", "", f"Image {tables.hosts[0]['image']}; CPU seconds used per block (wall), the "
             "busiest host, and every host that hit its CPU limit (throttled: the share of its CFS periods in "
             "which it used up its quota and waited; its transport ran late there).", ""]
    cells = []
    for rows in by(tables.hosts, "scheme", "n", "point").values():
        busiest = max(rows, key=lambda r: float(r["cpu_seconds"]))
        throttled = [f"{r['host']} ({int(r['throttled_periods']) / int(r['periods']):.0%} of periods, "
                     f"{float(r['throttled_seconds']):.2f} s; limit {r['cpus']} CPU)"
                     for r in rows if int(r["throttled_periods"])]
        cells.append([_label(rows[0]), f"{sum(float(r['cpu_seconds']) for r in rows):.2f}",
                      f"{busiest['host']} ({float(busiest['cpu_seconds']):.2f})", ", ".join(throttled) or "none",
                      f"{max(int(r['memory_peak_bytes']) for r in rows) / 2**20:.1f}"])
    return lines + table(["block", "CPU s, all hosts", "busiest host (CPU s)", "throttled hosts",
                          "memory peak, largest host (MiB)"], cells) + [""]


def _label(row: dict) -> str:
    return block_label(row["scheme"], int(row.get("n") or 0), row.get("point") or "")


def _datacenter_lines(tables: Tables) -> list[str]:
    """What the run stood for, in datacenter units, beside the paper's setting."""
    dc = tables.manifest.get("datacenter")
    if not dc:
        return []
    d = dc["dilation"]
    lines = ["## Datacenter time", ""]
    if d == 1:
        lines.append(f"Not dilated: {dc['emulated_link_mbps']:g} Mbit/s links stand for themselves.")
    else:
        lines.append(f"Dilation **{d:g}**: {dc['link_rate_bps'] / 1e9:g} Gbit/s links run at "
                     f"{dc['emulated_link_mbps']:g} Mbit/s, every time x {d:g} (propagation, RTO_min, transport "
                     f"timers, inter-arrivals); sizes as given. Times below are datacenter time (wall / {d:g}) "
                     "unless marked wall.")
    if dc.get("link_delay_us") is not None:
        lines.append(f"Propagation: {dc['link_delay_us']:g} us per link, {dc['host_delay_us']:g} us per host, added "
                     "by cchost's delay line at the receiving host (what the idle fabric lacks of it), with every "
                     "packet's serialization at each link of its path (store-and-forward: the emulated ports release "
                     "a frame as its transmission starts). The base RTT is the propagation, as the papers give it.")
    setting = papers.setting_of(tables)
    cells = [[title, f"{ours:.1f}", *([str(setting[key]), f"{ours / setting[key]:.2f}"] if setting else ["-", "-"])]
             for title, ours, key in (
                 ("base RTT, longest path (us)", dc["base_rtt_max_us"], "rtt_us"),
                 ("BDP at that RTT (packets of 1538 B)", dc["bdp_packets_max_rtt"], "bdp_packets"))]
    cells += [[title, f"{dc[key]:.1f}", "", ""] for title, key in (
        *([("with a full frame's serialization at every link there and a minimum frame's back, longest (us)",
            "frame_rtt_max_us")] if "frame_rtt_max_us" in dc else []),
        ("idle fabric alone, longest RTT (us)", "idle_fabric_rtt_max_us"))]
    lines += ["", *table(["", "ccemu", "paper", "ccemu / paper"], cells), ""]
    if setting:
        lines += [f"Paper's setting: {setting['source']}.", ""]
    return lines


def _fct_by_bucket_lines(tables: Tables) -> list[str]:
    cells = []
    for scheme in tables.schemes():
        present = {f["bucket"] for f in tables.flows_of(scheme)}
        for bucket in (name for name, _, _ in BUCKETS if name in present):
            s = figures.fcts(tables, scheme, bucket=bucket)
            cells.append([scheme, bucket, str(s.flows),
                          *(f"{1e3 * seconds:.1f}" for seconds in (s.mean_s, s.p50_s, s.p99_s, s.max_s)), ""])
        cells.append([scheme, "all", str(len(tables.flows_of(scheme))), "", "", "", "", str(tables.unfinished(scheme))])
    lines = ["## FCT per scheme and flow size", "",
             *table(["scheme", "bucket", "flows", "mean ms", "p50 ms", "p99 ms", "max ms", "unfinished flows"], cells)]
    lines += ["", "Buckets: " + ", ".join(f"{name} {low}-{high} B" for name, low, high in BUCKETS) + "; "
              "datacenter time; finished flows (the unfinished ones, whose size bucket is not recorded, are counted "
              "per scheme).", ""]
    return lines


FIDELITY_COLUMNS = [  # (figure in the verdict, column title, format)
    ("steal", "steal", "{:.1%}"), ("cpu_busy", "CPU busy", "{:.0%}"),
    ("bottleneck_lag_frames", "bottleneck lag (frames)", "{:.2f}"),
    ("worst_port_lag_frames", "worst port lag (frames)", "{:.2f}"),
    ("credit_lag_credits", "credit lag (credits)", "{:.2f}"),
    ("switch_residence_p50_frames", "switch residence p50 (frames)", "{:.2f}"),
    ("switch_residence_p99_frames", "p99 (frames)", "{:.2f}"),
    ("worst_switch_residence_p99_frames", "worst switch p99 (judged)", "{:.2f}"),
    ("switch_lost_ratio", "lost in switches", "{:.3%}"),
    ("pacing_lateness_of_gap", "timer lateness / credit gap", "{:.0%}"),
    ("pacing_p99_of_gap", "timer lateness p99 / gap", "{:.0%}"),
    ("least_fct_of_ideal", "least FCT / ideal", "{:.3f}"),
]


def _fidelity_table(blocks: list[dict], datapath: str) -> list[str]:
    """The verdict's figures per fabric (scheme and N); residence and lag in frame times at
    the link rate."""
    if not blocks:
        return []
    cells = [[_label(block), block["status"],
              *(fmt.format(block[name]) if name in block else "-" for name, _, fmt in FIDELITY_COLUMNS)]
             for block in blocks]
    # Two tables: the machine and the ports' drain, then the switches and the hosts' timers.
    lines = ["## Fidelity per fabric", "",
             *table(["block", "verdict", *(title for _, title, _ in FIDELITY_COLUMNS)], cells,
                    breaks=("switch residence p50 (frames)",))]
    where = RESIDENCE_WHERE.get(datapath, f"in the {datapath} datapath's forwarding")
    return lines + ["", f"Switch residence: time a packet spent inside a switch, {where}, between arriving at "
                    "one port and reaching the next port's queue, over every packet of every switch; a frame time "
                    "is one full frame at the link rate.", ""]


def plot(directory: Path) -> list[Path]:
    """The plots of the bundle's kind: FCT CDF and queue CDF for every kind, then the kind's own."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = Tables.read(directory)
    kind = _kind(tables)
    where = kind.where(tables)
    out = directory / "plots"  # made, not through a link, by the first plot saved (plotting.save)
    return [_plot_fct_cdf(tables, out, plt, where), _plot_queue_cdf(tables, out, plt, where),
            *kind.plots(tables, out, plt)]


def _plot_fct_cdf(tables: Tables, out: Path, plt, where: str) -> Path:
    """Every finished flow's FCT, per scheme, on a log axis that keeps 0 (FCTs span decades)."""
    fig, ax = plotting.subplots(plt, figsize=(7, 4))
    smallest = []
    for scheme in schemes(tables.flows):
        at_zero, points = plotting.ecdf([1e3 * float(f["fct"]) / tables.dilation for f in tables.flows_of(scheme)])
        plotting.draw_cdf(ax, at_zero, points, plotting.scheme_color(scheme), scheme)
        smallest += points[:1]
    if smallest:
        plotting.symlog_from_zero(ax, min(x for x, _ in smallest))
    pooled = ", every block of a scheme pooled" if len(tables.blocks()) > len(tables.schemes()) else ""
    ax.set(xlabel="flow completion time (ms, datacenter time; log scale)", ylabel="CDF (share of finished flows)",
           title=plotting.title(f"FCT of every finished flow{pooled}", where), ylim=(0, 1.02))
    ax.grid(alpha=0.3)
    plotting.legend_beside(ax)
    return plotting.save(fig, out / "fct_cdf.png")


def _plot_queue_cdf(tables: Tables, out: Path, plt, where: str) -> Path:
    """The queue each data frame joined, per scheme, from the ports' histograms, with K and the buffer marked."""
    # The ports the kind's queue figures read (figures.queue_ports): the bottleneck's, or every switch port.
    bottleneck = any(p["bottleneck"] == "1" for p in tables.ports)
    fig, ax = plotting.subplots(plt, figsize=(8, 5.5))
    drawn = False
    for scheme in schemes(tables.ports):
        ports = figures.queue_ports(tables, scheme)
        counts = [sum(column) for column in zip(*([int(c) for c in p["histogram"].split()] for p in ports))]
        largest = max((int(p["max_data_queue"]) for p in ports), default=0)
        edges = [min(queue_bucket_bounds(i)[1], largest) / plotting.KB for i in range(len(counts))]
        points = histogram_cdf(counts, edges)
        if not points:
            continue
        queue = figures.optional(lambda: figures.queues(tables, scheme))  # the tables' means, every block
        # Bucket 0 holds queues under 64 B, less than any frame: read as 0, the CDF's value there.
        plotting.draw_cdf(ax, points[0][1], points[1:], plotting.scheme_color(scheme),
                          f"{scheme}: mean {queue.mean_kb:.2f} KB at arrival, "
                          f"{cell(queue.time_mean_kb, '{:.2f}')} KB over time" if queue else scheme)
        drawn = True
    if drawn:
        plotting.symlog_from_zero(ax, queue_bucket_bounds(0)[1] / plotting.KB)
        plotting.mark_levels(ax, plotting.queue_levels(tables))
    port = "the bottleneck port" if bottleneck else "every switch port"
    ax.set(xlabel=f"data queue at {port} as a frame joined it, the frame included (KB on the wire; log scale, "
                  "in buckets a quarter of a doubling wide)", ylabel="CDF (share of data frames)", ylim=(0, 1.02),
           title=plotting.title("Queue each data frame joined" if tables.ports else
                                "Queue length: ports.csv holds no port", where))
    ax.grid(alpha=0.3)
    plotting.legend_below(fig, [ax])  # the labels carry each scheme's means: too long to sit beside
    return plotting.save(fig, out / "queue_cdf.png")


def report(directory: Path) -> Path:
    """Writes summary.md and plots/ from the bundle's tables; returns summary.md's path."""
    summary = directory / "summary.md"
    files.write_text(summary, summary_markdown(directory))  # never through a link: files.py
    plot(directory)
    return summary


def capacity_line(measured: dict, rate_mbps: float) -> str:
    """One line for an experiment's summary: the machine's capacity beside the run's link rate."""
    best = measured.get("capacity_mbps")
    where = f"`ccemu bench capacity` of {measured['when']}, {measured['variant']}"
    if best is None:
        return f"This machine's capacity ({where}): no rate measured kept every pair >= {GOOD}."
    verdict = "within it" if rate_mbps <= best else "**above it**: expect the fidelity verdict to say so"
    return (f"This machine's capacity ({where}): every pair of 8 TCP flows on a k=4 fat-tree >= {GOOD} up to "
            f"{best:g} Mbit/s per link; this experiment runs {rate_mbps:g} Mbit/s per link, {verdict}.")
