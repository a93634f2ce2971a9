"""Incast (the DCTCP+ paper's setup): for each scheme and N, rounds in which N senders answer one
aggregator with total_bytes / N each (experiments/incast.py runs them). Its blocks: one per scheme and N;
its bottleneck: the aggregator's link."""

from __future__ import annotations

from pathlib import Path

from ..model.config import ExperimentConfig, IncastWorkload
from ..results import figures, plotting
from ..results.bundle import BlockKey
from ..results.figures import Tables
from ..results.markdown import cell, or_, table
from ..results.stats import percentile
from .blocks import BlockSpec
from .kind import Headline, Kind

# The N the DCTCP+ paper leads with: goodput and a request's completion with more than 200 concurrent flows
# (seed 002 line 267, Fig. 7; the claims read N >= 200). A run without such an N is read at its largest.
HEADLINE_N = 200


class Incast(Kind):
    name = "incast"
    workload = IncastWorkload

    runner = "rounds"

    def blocks(self, config: ExperimentConfig):
        return [BlockSpec(s, BlockKey(s.scheme, (("N", n),))) for s in config.schemes for n in config.workload.flows]

    def progress_total(self, config: ExperimentConfig, block) -> int:
        return config.workload.rounds

    def bottleneck_host(self, config: ExperimentConfig) -> str:
        return config.workload.aggregator

    def summary_lines(self, tables: Tables) -> list[str]:
        return _incast_lines(tables)

    def headline(self, tables: Tables) -> Headline:
        ns = tables.ns()
        n = min((n for n in ns if n >= HEADLINE_N), default=max(ns, default=0))
        by_scheme = {}
        for scheme in tables.schemes():
            seen = figures.incast(tables, scheme, n) if n in tables.ns(scheme) else None
            # Goodput and a round's duration both come from the finished rounds: one is None with the other.
            by_scheme[scheme] = "-" if seen is None or seen.goodput_bps is None else (
                f"{seen.goodput_bps / tables.link_bps:.2f} ({1e3 * seen.round_mean_s:.1f} ms)")
        return Headline(f"Goodput at N = {n}, share of the link (a request's completion, datacenter time)", by_scheme)

    def points_text(self, tables: Tables) -> str:
        return "N = " + ", ".join(str(n) for n in tables.ns()) if tables.ns() else ""

    def plots(self, tables: Tables, out: Path, plt) -> list[Path]:
        return _plot_incast(tables, out, plt, self.where(tables))


def incast_table(tables: Tables) -> list[dict]:
    """One row per scheme and N, in datacenter units: what the summary and the plots show."""
    table = []
    for scheme in tables.schemes():
        for n in tables.ns(scheme):
            seen = figures.incast(tables, scheme, n)
            fct = figures.optional(lambda: figures.fcts(tables, scheme, n=n))
            queue = figures.optional(lambda: figures.queues(tables, scheme, n=n))
            ports = tables.ports_of(scheme, n=n)
            table.append({
                "scheme": scheme, "n": n, "rounds": seen.rounds,
                "unfinished_rounds": seen.rounds - seen.finished_rounds,
                "unfinished": tables.unfinished(scheme, n=n),
                "goodput_mbps": seen.goodput_bps * tables.dilation / 1e6 if seen.goodput_bps is not None else None,
                "goodput_of_link": seen.goodput_bps / tables.link_bps if seen.goodput_bps is not None else None,
                "round_ms": 1e3 * seen.round_mean_s if seen.round_mean_s is not None else None,
                "fct_mean_ms": 1e3 * fct.mean_s if fct else None, "fct_p99_ms": 1e3 * fct.p99_s if fct else None,
                "fct_max_ms": 1e3 * fct.max_s if fct else None,
                "max_queue": queue.max_bytes if queue else None, "mean_queue": queue.mean_bytes if queue else None,
                "time_mean_queue": queue.time_mean_bytes if queue else None,
                "data_drops": sum(int(p["data_dropped"]) for p in ports),
                "marks": sum(int(p["data_marked"]) for p in ports),
                "credit_drops": sum(int(p["credit_dropped"]) for p in ports),
                "credit_marks": sum(int(p["credit_marked"]) for p in ports),
                "timeouts": seen.timeouts, "timeout_share": seen.timeout_share,
                "flow_timeout_share": seen.flow_timeout_share,
                "flow_timeout_share_p90": (percentile(seen.flow_timeout_shares, 90)
                                           if seen.flow_timeout_shares else None),
                "flow_timeout_share_max": max(seen.flow_timeout_shares, default=None),
                "retransmits": sum(int(f["retransmits"]) for f in tables.flows_of(scheme, n=n)),
                "credit_waste": figures.optional(lambda: figures.credit_waste(tables, scheme, n=n)),
            })
    return table


INCAST_COLUMNS = ["scheme", "N", "rounds (unfinished)", "goodput Mbit/s", "goodput / link", "round ms",
                  "FCT mean ms", "p99 ms", "max ms", "unfinished flows", "max queue B", "mean queue B at arrival",
                  "over time", "data drops", "CE marks", "timeouts (of transmissions)",
                  "a flow's timeouts of its transmissions: mean (p90, max)", "retransmits", "credit drops",
                  "credit CE marks", "credit waste"]


def _flow_shares_cell(row: dict) -> str:
    if row["flow_timeout_share"] is None:
        return "-"
    return (f"{cell(row['flow_timeout_share'], '{:.2%}')} ({cell(row['flow_timeout_share_p90'], '{:.1%}')}, "
            f"{cell(row['flow_timeout_share_max'], '{:.1%}')})")


def _incast_lines(tables: Tables) -> list[str]:
    manifest = tables.manifest
    lines = ["## Incast: per scheme and N", ""]
    rows = incast_table(tables)
    cells = [[row["scheme"], str(row["n"]), f"{row['rounds']} ({row['unfinished_rounds']})",
              cell(row["goodput_mbps"]), cell(row["goodput_of_link"]), cell(row["round_ms"], "{:.1f}"),
              cell(row["fct_mean_ms"], "{:.1f}"), cell(row["fct_p99_ms"], "{:.1f}"), cell(row["fct_max_ms"], "{:.1f}"),
              str(row["unfinished"]), cell(row["max_queue"], "{:.0f}"), cell(row["mean_queue"], "{:.0f}"),
              cell(row["time_mean_queue"], "{:.0f}"), str(row["data_drops"]), str(row["marks"]),
              f"{row['timeouts']} ({cell(row['timeout_share'], '{:.2%}')})",
              _flow_shares_cell(row), str(row["retransmits"]),
              str(row["credit_drops"]), str(row["credit_marks"]), cell(row["credit_waste"], "{:.1%}")]
             for row in rows]
    # Three tables: what the request got, what the bottleneck queue did, what was lost and resent.
    lines += table(INCAST_COLUMNS, cells, keys=2, breaks=("max queue B", "timeouts (of transmissions)"))
    lines += ["", "Datacenter units. Goodput: the bytes of every finished round over the time they took (a round ends "
              "with its last response; an unfinished round has no end: it is counted in the rounds column, not in the "
              "goodput). Round ms: a finished round's mean duration, the request's completion time. Timeouts: "
              "retransmission timeouts, and their share of the data packets sent, first copies and retransmissions, "
              "every flow's together; a flow's share: its timeouts of its own transmissions, averaged over the flows "
              "(with the 90th percentile and the largest), as the DCTCP+ paper's Table I counts them for one flow "
              "picked at random (its claims read this mean). Queues are the bottleneck port's (the switch port "
              "toward the aggregator), "
              "in bytes on the wire, from the port program's exact sums: the largest, the mean a data frame joined on "
              "arrival (itself included), and the mean over time from the first flow's start to the last one's end "
              "(the gaps between rounds included); drops and marks are summed over every port of the fabric "
              "(CE marks: data packets marked, each counted once, by the port that marked it first; credit CE marks: "
              "credits SprayPass's ports marked with the probability they drop credits).", ""]
    lines += _incast_rounds_lines(tables)
    bound = manifest.get("expresspass_queue_bound_bytes")
    worst = [r["max_queue"] for r in rows if r["scheme"] == "expresspass" and r["max_queue"] is not None]
    if bound and worst:
        lines += [f"ExpressPass data queue bound: {bound} B = (credit buffer + burst) x (84 + 1538) B x "
                  f"{manifest.get('expresspass_credit_queues_on_longest_path')} credit queues on the longest "
                  f"credit path (the link rate times the largest spread of credit-path delays). "
                  f"Largest measured: {max(worst)} B: {'within' if max(worst) <= bound else 'ABOVE'} the bound.", ""]
    k = manifest.get("dctcp_k_bytes")
    if k:
        lines += [f"DCTCP marks above K = {k} B.", ""]
    return lines


def _incast_rounds_lines(tables: Tables) -> list[str]:
    """Goodput round by round, so that a reader sees whether the rounds settle (the paper averages
    1000 requests)."""
    rounds = max((int(r["round"]) for r in tables.rounds), default=0)
    header = ["scheme", "N", *(f"round {i}" for i in range(1, rounds + 1))]
    cells = []
    for scheme in tables.schemes():
        for n in tables.ns(scheme):
            by_round = {int(r["round"]): r for r in tables.rounds_of(scheme, n=n)}
            by_round_cells = []
            for i in range(1, rounds + 1):
                row = by_round.get(i)
                goodput = figures.goodput_bps([row]) if row else None
                by_round_cells.append("-" if row is None else "unfinished" if goodput is None
                                      else f"{goodput / tables.link_bps:.2f}")
            cells.append([scheme, str(n), *by_round_cells])
    lines = ["### Goodput per round, share of the link", "", *table(header, cells, keys=2)]
    warm = tables.config_value("workload.warm_up") and tables.config_value("transport.persistent_connections")
    settle = int(tables.config_value("workload.settle_rounds") or 0)
    lines += ["", "Each block opened its connections before round 1 (workload.warm_up: a one-packet response per "
              "connection, not counted)." if warm else "Round 1 opened the connections (workload.warm_up off, or no "
              "persistent connections): a loss there waits the initial RTO."]
    if settle:
        lines += [f"The first {settle} round(s) of each N settle (workload.settle_rounds) and are shown here only: "
                  f"goodput, round ms and timeouts above, and the claims, count rounds {settle + 1} to {rounds}."]
    return lines + [""]


def _plot_incast(tables: Tables, out: Path, plt, where: str) -> list[Path]:
    rows = incast_table(tables)
    nan = float("nan")
    fig, (left, right) = plotting.subplots(plt, 1, 2, figsize=(10, 4))
    for scheme in tables.schemes():
        color = plotting.scheme_color(scheme)
        mine = [r for r in rows if r["scheme"] == scheme]
        ns = [r["n"] for r in mine]
        # A missing figure is NaN: the line breaks there rather than joining its neighbours.
        left.plot(ns, [or_(r["goodput_mbps"], nan) for r in mine], marker="o", color=color, label=scheme)
        right.plot(ns, [or_(r["fct_p99_ms"], nan) for r in mine], marker="o", color=color, label=f"{scheme} p99")
        right.plot(ns, [or_(r["fct_mean_ms"], nan) for r in mine], marker="x", linestyle="--", color=color,
                   label=f"{scheme} mean")
    left.set(ylabel="goodput (Mbit/s, datacenter rate)", title="Goodput of a request", ylim=(0, None))
    right.set(ylabel="FCT (ms, datacenter time)", title="Flow completion time: p99 (solid), mean (dashed)",
              ylim=(0, None))
    for ax in (left, right):
        ax.set(xlabel="incast flows N (log scale)", xscale="log")
        plotting.plain_log_ticks(ax)
        ax.set_xticks(tables.ns(), [str(n) for n in tables.ns()])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    fig.suptitle(plotting.title("Incast: goodput and completion time against N", where))
    plotting.legend_below(fig, [left])
    return [plotting.save(fig, out / "incast_vs_n.png")]
