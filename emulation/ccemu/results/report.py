"""summary.md and plots/ of a results bundle, computed from its CSVs and manifest alone
(`ccemu report DIR` runs this on a finished bundle)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TypeVar

from ..bench import capacity as bench_capacity
from . import figures, papers
from .bundle import block_label
from .figures import Tables
from .stats import BUCKETS, histogram_cdf, jain_fairness

T = TypeVar("T")


def _by(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    grouped: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        grouped[tuple(row[k] for k in keys)].append(row)
    return grouped


def _schemes(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(row["scheme"] for row in rows))


def _or(value: T | None, default: T) -> T:
    return default if value is None else value


def _cell(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


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
                "data_drops": sum(int(p["data_dropped"]) for p in ports),
                "marks": sum(int(p["data_marked"]) for p in ports),
                "credit_drops": sum(int(p["credit_dropped"]) for p in ports),
                "credit_marks": sum(int(p["credit_marked"]) for p in ports),
                "timeouts": seen.timeouts, "timeout_share": seen.timeout_share,
                "retransmits": sum(int(f["retransmits"]) for f in tables.flows_of(scheme, n=n)),
                "credit_waste": figures.optional(lambda: figures.credit_waste(tables, scheme, n=n)),
            })
    return table


def summary_markdown(directory: Path) -> str:
    tables = Tables.read(directory)
    manifest = tables.manifest
    verdict = manifest.get("fidelity", {})
    lines = [f"# {manifest['config']['name']}: {manifest.get('started', '')}", ""]
    if manifest.get("interrupted"):
        lines += ["**Interrupted**: the tables hold what finished before Ctrl-C.", ""]
    if manifest.get("failed"):
        lines += [f"**Stopped by an error** ({manifest['failed']}): the tables hold what finished before it.", ""]
    lines += [f"Fidelity: **{verdict.get('status', 'unknown')}**"]
    lines += [f"- {reason}" for reason in verdict.get("reasons", [])]
    link = manifest["config"]["link"]
    if manifest.get("machine_capacity"):
        lines += ["", bench_capacity.summary_line(manifest["machine_capacity"], link["rate_mbps"])]
    if auto := manifest.get("dilation_auto_from"):
        chosen = manifest["config"]["datacenter"]["dilation"]
        lines += ["", f"`dilation: auto` chose {chosen:g} so that one link runs at most {auto['link_mbps']:g} "
                      f"Mbit/s and the workload's busy links at most {auto['aggregate_mbps']:g} in all, from "
                      f"{auto['source']}."]
    # Bundles from before the bpf datapath (2026-11-26) name none: OVS forwarded them all.
    lines += ["", f"Commit {manifest.get('git_commit')}; {manifest.get('datapath', 'ovs')} datapath; "
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
    lines += _fidelity_table(verdict.get("blocks", []))
    lines += _hosts_lines(tables)
    kind = tables.kind
    lines += {"incast": _incast_lines, "realistic": _realistic_lines, "permutation": _permutation_lines,
              "shuffle": _shuffle_lines, "convergence": _convergence_lines,
              "victim": _victim_lines}.get(kind, _incast_lines)(tables)
    if kind != "realistic":
        lines += _fct_by_bucket_lines(tables)
    beside = papers.markdown(papers.compare(tables))
    if beside:
        lines += ["## Beside the papers", "",
                  "Each claim of workloads/reference.yaml about this experiment, read from this bundle "
                  "(dilation-free figures or datacenter time). " + papers.RULE_TEXT, ""]
        lines += beside + [""]
    return "\n".join(lines)


def _hosts_lines(tables: Tables) -> list[str]:
    """Docker hosts: per block, the CPU the containers used and the ones that hit their CPU limit."""
    if not tables.hosts:
        return []
    lines = ["## Docker hosts", "", f"Image {tables.hosts[0]['image']}; CPU seconds used per block (wall), the "
             "busiest host, and every host that hit its CPU limit (throttled: the share of its CFS periods in "
             "which it used up its quota and waited; its transport ran late there).", "",
             "| block | CPU s, all hosts | busiest host (CPU s) | throttled hosts | memory peak, largest host (MiB) |",
             "|---|---|---|---|---|"]
    for (scheme, n, point), rows in _by(tables.hosts, "scheme", "n", "point").items():
        busiest = max(rows, key=lambda r: float(r["cpu_seconds"]))
        throttled = [f"{r['host']} ({int(r['throttled_periods']) / int(r['periods']):.0%} of periods, "
                     f"{float(r['throttled_seconds']):.2f} s; limit {r['cpus']} CPU)"
                     for r in rows if int(r["throttled_periods"])]
        lines.append(f"| {block_label(scheme, int(n or 0), point)} | {sum(float(r['cpu_seconds']) for r in rows):.2f} "
                     f"| {busiest['host']} ({float(busiest['cpu_seconds']):.2f}) | {', '.join(throttled) or 'none'} "
                     f"| {max(int(r['memory_peak_bytes']) for r in rows) / 2**20:.1f} |")
    return lines + [""]


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
                     "by cchost's delay line at the receiving host (what the idle fabric lacks of it).")
    setting = papers.settings().get(tables.kind)
    bdp = dc["bdp_packets_max_rtt"]
    lines += ["", "| | ccemu | paper | ccemu / paper |", "|---|---|---|---|",
              f"| base RTT, longest path (us) | {dc['base_rtt_max_us']:.1f} | "
              f"{setting['rtt_us'] if setting else '-'} | "
              f"{dc['base_rtt_max_us'] / setting['rtt_us']:.2f} |" if setting else
              f"| base RTT, longest path (us) | {dc['base_rtt_max_us']:.1f} | - | - |",
              f"| BDP at that RTT (packets of 1538 B) | {bdp:.1f} | "
              + (f"{setting['bdp_packets']} | {bdp / setting['bdp_packets']:.2f} |" if setting else "- | - |"),
              f"| idle fabric alone, longest RTT (us) | {dc['idle_fabric_rtt_max_us']:.1f} | | |", ""]
    if setting:
        lines += [f"Paper's setting: {setting['source']}.", ""]
    return lines


def _incast_lines(tables: Tables) -> list[str]:
    manifest = tables.manifest
    lines = ["## Incast: per scheme and N", "",
             "| scheme | N | rounds (unfinished) | goodput Mbit/s | goodput / link | round ms | FCT mean ms | p99 ms | "
             "max ms | max queue B | mean queue B | data drops | CE marks | timeouts (of transmissions) | "
             "retransmits | credit drops | credit CE marks | credit waste | unfinished flows |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    table = incast_table(tables)
    for row in table:
        share = _cell(row["timeout_share"], "{:.2%}")
        lines.append(f"| {row['scheme']} | {row['n']} | {row['rounds']} ({row['unfinished_rounds']}) | "
                     f"{_cell(row['goodput_mbps'])} | {_cell(row['goodput_of_link'])} | "
                     f"{_cell(row['round_ms'], '{:.1f}')} | "
                     f"{_cell(row['fct_mean_ms'], '{:.1f}')} | {_cell(row['fct_p99_ms'], '{:.1f}')} | "
                     f"{_cell(row['fct_max_ms'], '{:.1f}')} | {_cell(row['max_queue'], '{:.0f}')} | "
                     f"{_cell(row['mean_queue'], '{:.0f}')} | {row['data_drops']} | {row['marks']} | "
                     f"{row['timeouts']} ({share}) | {row['retransmits']} | {row['credit_drops']} | "
                     f"{row['credit_marks']} | {_cell(row['credit_waste'], '{:.1%}')} | {row['unfinished']} |")
    lines += ["", "Datacenter units. Goodput: the bytes of every finished round over the time they took (a round ends "
              "with its last response; an unfinished round has no end: it is counted in the rounds column, not in the "
              "goodput). Round ms: a finished round's mean duration, the request's completion time. Timeouts: "
              "retransmission timeouts, and their share of the data packets sent, first copies and retransmissions "
              "(DCTCP+ paper, Table I). Queues are the bottleneck port's (the switch port toward the aggregator), "
              "exact at every enqueue, in bytes on the wire; drops and marks are summed over every port of the fabric "
              "(CE marks: data packets marked, each counted once, by the port that marked it first; credit CE marks: "
              "credits SprayPass's ports marked with the probability they drop credits).", ""]
    lines += _incast_rounds_lines(tables)
    bound = manifest.get("expresspass_queue_bound_bytes")
    worst = [r["max_queue"] for r in table if r["scheme"] == "expresspass" and r["max_queue"] is not None]
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
    lines = ["### Goodput per round, share of the link", "",
             "| scheme | N | " + " | ".join(f"round {i}" for i in range(1, rounds + 1)) + " |",
             "|---|---|" + "---|" * rounds]
    for scheme in tables.schemes():
        for n in tables.ns(scheme):
            by_round = {int(r["round"]): r for r in tables.rounds_of(scheme, n=n)}
            cells = []
            for i in range(1, rounds + 1):
                row = by_round.get(i)
                goodput = figures.goodput_bps([row]) if row else None
                cells.append("-" if row is None else "unfinished" if goodput is None
                             else f"{goodput / tables.link_bps:.2f}")
            lines.append(f"| {scheme} | {n} | " + " | ".join(cells) + " |")
    warm = tables.config_value("workload.warm_up") and tables.config_value("transport.persistent_connections")
    settle = int(tables.config_value("workload.settle_rounds") or 0)
    lines += ["", "Each block opened its connections before round 1 (workload.warm_up: a one-packet response per "
              "connection, not counted)." if warm else "Round 1 opened the connections (workload.warm_up off, or no "
              "persistent connections): a loss there waits the initial RTO."]
    if settle:
        lines += [f"The first {settle} round(s) of each N settle (workload.settle_rounds) and are shown here only: "
                  f"goodput, round ms and timeouts above, and the claims, count rounds {settle + 1} to {rounds}."]
    return lines + [""]


def _fct_by_bucket_lines(tables: Tables) -> list[str]:
    lines = ["## FCT per scheme and flow size", "",
             "| scheme | bucket | flows | mean ms | p50 ms | p99 ms | max ms | unfinished flows |",
             "|---|---|---|---|---|---|---|---|"]
    for scheme in tables.schemes():
        present = {f["bucket"] for f in tables.flows_of(scheme)}
        for bucket in (name for name, _, _ in BUCKETS if name in present):
            s = figures.fcts(tables, scheme, bucket=bucket)
            lines.append(f"| {scheme} | {bucket} | {s.flows} | {1e3 * s.mean_s:.1f} | {1e3 * s.p50_s:.1f} | "
                         f"{1e3 * s.p99_s:.1f} | {1e3 * s.max_s:.1f} | |")
        lines.append(f"| {scheme} | all | {len(tables.flows_of(scheme))} | | | | | {tables.unfinished(scheme)} |")
    lines += ["", "Buckets: " + ", ".join(f"{name} {low}-{high} B" for name, low, high in BUCKETS) + "; "
              "datacenter time; finished flows (the unfinished ones, whose size bucket is not recorded, are counted "
              "per scheme).", ""]
    return lines


def _realistic_lines(tables: Tables) -> list[str]:
    lines = ["## Realistic workload: FCT slowdown per size bucket and load; switch queues", "",
             "| scheme | load | flows | unfinished | mean FCT ms | slowdown mean | p99 | S | M | L | XL | "
             "max queue KB (pkts) | mean queue KB (pkts) | data drops | credit waste |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for scheme in tables.schemes():
        for point in sorted(tables.points(scheme), key=figures.load_of):
            fct = figures.optional(lambda: figures.fcts(tables, scheme, point))
            buckets = figures.slowdowns_by_bucket(tables, scheme, point)
            q = figures.optional(lambda: figures.queues(tables, scheme, point))
            waste = figures.optional(lambda: figures.credit_waste(tables, scheme, point))
            lines.append(
                f"| {scheme} | {figures.load_of(point):g} | {fct.flows if fct else 0} | "
                f"{tables.unfinished(scheme, point)} | {_cell(1e3 * fct.mean_s if fct else None, '{:.3f}')} | "
                f"{_cell(fct and fct.slowdown_mean)} | {_cell(fct and fct.slowdown_p99)} | "
                + " | ".join(_cell(buckets[b].slowdown_mean) if b in buckets else "-" for b in ("S", "M", "L", "XL"))
                + f" | {f'{q.max_kb:.1f} ({q.max_packets:.1f})' if q else '-'} | "
                f"{f'{q.mean_kb:.2f} ({q.mean_packets:.2f})' if q else '-'} | "
                f"{sum(int(p['data_dropped']) for p in tables.switch_ports(scheme, point))} | "
                f"{_cell(waste, '{:.1%}')} |")
    lines += ["", "Slowdown = FCT / the flow's ideal FCT (half its pair's base RTT plus its bytes at the link rate: "
              "sent at once, alone; an FCT ends when the receiver has every byte): "
              "dilation-free; S/M/L/XL: mean slowdown per size bucket; finished flows only (unfinished: counted "
              "apart). Queues over every switch port (not host NICs): the largest any port reached, and the mean a "
              "packet found on arrival (ExpressPass Table 3's figures), in KB and in full frames.", ""]
    return lines


def _victim_lines(tables: Tables) -> list[str]:
    d = tables.dilation
    lines = ["## Victim flows (TCD, seed 004 Table 3): flows that cross only paused ports", "",
             "| scheme | victim flows | unfinished (all flows) | marked CE | marked UE | mean FCT ms | slowdown mean | "
             "p99 | pauses | paused ms | drops |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for scheme in tables.schemes():
        v = figures.optional(lambda: figures.victims(tables, scheme))
        ports = tables.ports_of(scheme)
        pauses = sum(int(p.get("pause_events") or 0) for p in ports)
        paused = sum(float(p.get("paused_s") or 0) for p in ports)
        drops = sum(int(p["data_dropped"]) for p in ports)
        if v is None:
            lines.append(f"| {scheme} | 0 | {tables.unfinished(scheme)} | - | - | - | - | - | {pauses} | "
                         f"{paused / d * 1e3:.3f} | {drops} |")
            continue
        low, high = v.ce_interval
        lines.append(f"| {scheme} | {v.flows} | {tables.unfinished(scheme)} | {v.ce_marked} ({v.ce_fraction:.1%}; "
                     f"95 %: {low:.1%} to {high:.1%}) | "
                     f"{v.ue_marked} ({v.ue_marked / v.flows:.1%}) | {1e3 * v.mean_fct_s:.3f} | "
                     f"{v.mean_slowdown:.2f} | {v.p99_slowdown:.2f} | {pauses} | {paused / d * 1e3:.3f} | {drops} |")
    lines += ["", "Marked CE: victim flows a CE-flagged CNP came back for (a packet of theirs was CE-marked on the "
              "way: taken for congested), with the share's 95 % interval (Wilson: how far this many victims pin "
              "it; the claims judge the share itself); UE: TCD's undetermined mark. FCT in datacenter ms; "
              "slowdown = FCT / ideal FCT. Pauses and paused time (datacenter) over every port; drops over every "
              "port (lossless: 0). The paper's shares are in the claims below.", ""]
    lines += _paused_ports_lines(tables)
    lines += _pause_agent_lines(tables)
    return lines


def _paused_ports_lines(tables: Tables) -> list[str]:
    """The ports PFC paused or that marked, per scheme: where congestion spread."""
    rows = [p for p in tables.ports if int(p.get("pause_events") or 0) or int(p["data_marked"])
            or int(p.get("data_ue_marked") or 0)]
    if not rows:
        return []
    d = tables.dilation
    lines = ["### Pauses and marks per port", "", "| scheme | port | pauses | paused ms | CE marks | UE marks | "
             "max queue KB |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {p['scheme']} | {p['port']} | {p.get('pause_events') or 0} | "
              f"{float(p.get('paused_s') or 0) / d * 1e3:.3f} | {p['data_marked']} | {p.get('data_ue_marked') or 0} | "
              f"{int(p['max_data_queue']) / 1e3:.1f} |" for p in rows]
    return lines + ["", "Pauses of each port (by its downstream's PFC); paused ms: datacenter time. ports.csv also has "
                        "the most each port's ingress held (max_held_bytes).", ""]


def _pause_agent_lines(tables: Tables) -> list[str]:
    agents = tables.manifest.get("pause_agent") or {}
    if not agents:
        return []
    lines = ["### PFC pause reaction", "", "| block | gates closed | opened | superseded | corrected | p50 frame times "
             "| p99 | max | failures |", "|---|---|---|---|---|---|---|---|---|"]
    for block, a in agents.items():
        frames = a.get("reaction_frames") or {}
        reaction = [f"{frames[q]:.2f}" if frames.get(q) is not None else "-" for q in ("p50", "p99", "max")]
        died = f" (agent died: {a['died']})" if a.get("died") else ""
        lines.append(f"| {block} | {a['pauses']} | {a['resumes']} | {a.get('superseded', 0)} | "
                     f"{a.get('corrections', 0)} | {' | '.join(reaction)} | {len(a.get('failures') or [])}{died} |")
    return lines + ["", "From the port program's decision to the kernel's acknowledgement of the paused port's gate "
                        "change (ports/pfc.py), in frame times at the link rate (a real PFC pause takes effect after "
                        "the frame on the wire and the link's delay). Superseded: pauses resumed before the agent "
                        "came to them; corrected: gates the agent's periodic check set (before their event was read, "
                        "or after a lost event or a failed change).", ""]


def _permutation_lines(tables: Tables) -> list[str]:
    lines = ["## Permutation: per-flow throughput", "",
             "| scheme | flows | mean Gbit/s | min | max | mean / link | Jain fairness | unfinished |",
             "|---|---|---|---|---|---|---|---|"]
    dc_link = tables.link_bps * tables.dilation
    for scheme in tables.schemes():
        tput = figures.optional(lambda: figures.flow_throughputs_bps(tables, scheme))
        unfinished = tables.unfinished(scheme)
        if not tput:
            lines.append(f"| {scheme} | 0 | - | - | - | - | - | {unfinished} |")
            continue
        mean = sum(tput) / len(tput)
        lines.append(f"| {scheme} | {len(tput)} | {mean / 1e9:.2f} | {min(tput) / 1e9:.2f} | {max(tput) / 1e9:.2f} | "
                     f"{mean / dc_link:.2f} | {jain_fairness(tput):.3f} | {unfinished} |")
    lines += ["", "A finished flow's throughput is its size over its FCT, in datacenter Gbit/s.", ""]
    return lines


def _shuffle_lines(tables: Tables) -> list[str]:
    lines = ["## Shuffle: FCT quantiles", "", "| scheme | flows | p50 ms | p99 ms | max ms | unfinished |",
             "|---|---|---|---|---|---|"]
    for scheme in tables.schemes():
        fct = figures.optional(lambda: figures.fcts(tables, scheme))
        cells = " | ".join(_cell(1e3 * fct.quantile_s(q) if fct else None) for q in (50, 99, 100))
        lines.append(f"| {scheme} | {fct.flows if fct else 0} | {cells} | {tables.unfinished(scheme)} |")
    return lines + ["", "Datacenter time, finished flows.", ""]


def _joins(joins: list[float | None], room: list[float]) -> str:
    return ", ".join(f"> {r:.0f}" if j is None else f"{j:.1f}" for j, r in zip(joins, room))


def _convergence_lines(tables: Tables) -> list[str]:
    lines = ["## Convergence: RTTs to the fair share after each flow joins", "",
             "| scheme | alpha | base RTT us | reached, per joining flow (RTTs) | median | settled, per joining flow "
             "(RTTs) | median |", "|---|---|---|---|---|---|---|"]
    for scheme in tables.schemes():
        for point in tables.points(scheme):
            alpha = point.split("=")[1] if point else "-"
            seen = figures.optional(lambda: figures.convergence(tables, scheme, point))
            if seen is None:
                lines.append(f"| {scheme} | {alpha} | - | no timeline | - | - | - |")
                continue
            reached, settled = seen.median(seen.reached), seen.median(seen.settled)
            lines.append(f"| {scheme} | {alpha} | {seen.rtt_s / tables.dilation * 1e6:.1f} | "
                         f"{_joins(seen.reached, seen.room)} | {_cell(reached, '{:.1f}')} | "
                         f"{_joins(seen.settled, seen.room)} | {_cell(settled, '{:.1f}')} |")
    band, window = f"+-{figures.CONVERGENCE_BAND:.0%}", figures.CONVERGENCE_WINDOW_RTTS
    lines += ["", f"Reached (the papers' figures label this, and the claims read it): the joining flow's throughput "
              f"over the next {window} base RTTs first at least {1 - figures.CONVERGENCE_BAND:.0%} of its fair share. "
              f"Settled (stricter): every "
              f"running flow within {band} over {window} RTTs, and so for every such window that starts within "
              f"{figures.CONVERGENCE_HOLD_RTTS} RTTs after. Both count from the join; \"> x\": not within the x RTTs "
              "the flow had before the next join or leave. Bytes sampled at the receiver by cchost --progress "
              "(plots/throughput_timeline.png).", ""]
    return lines


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
             "| block | verdict | " + " | ".join(title for _, title, _ in FIDELITY_COLUMNS) + " |",
             "|---|---|" + "---|" * len(FIDELITY_COLUMNS)]
    for block in blocks:
        cells = [fmt.format(block[name]) if name in block else "-" for name, _, fmt in FIDELITY_COLUMNS]
        lines.append(f"| {_label(block)} | {block['status']} | " + " | ".join(cells) + " |")
    return lines + ["", "Switch residence: time a packet spent inside a switch (ovs-vswitchd) between arriving at "
                    "one port and reaching the next port's queue, over every packet of every switch; a frame time "
                    "is one full frame at the link rate.", ""]


def plot(directory: Path) -> list[Path]:
    """The plots of the bundle's kind: FCT CDF and queue CDF for every kind, then the kind's own."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = Tables.read(directory)
    flows, d = tables.flows, tables.dilation
    out = directory / "plots"
    out.mkdir(exist_ok=True)
    written = []

    fig, ax = plt.subplots(figsize=(6, 4))
    for scheme in _schemes(flows):
        fcts = sorted(1e3 * float(f["fct"]) / d for f in flows if f["scheme"] == scheme)
        ax.plot(fcts, [(i + 1) / len(fcts) for i in range(len(fcts))], label=scheme)
    ax.set(xlabel="flow completion time (ms" + (", datacenter time)" if d != 1 else ")"), ylabel="CDF", title="FCT")
    ax.grid(alpha=0.3)
    ax.legend()
    written.append(_save(fig, out / "fct_cdf.png"))

    # The ports the kind's queue figures read (figures.queue_ports): the bottleneck's, or every switch port.
    bottleneck = any(p["bottleneck"] == "1" for p in tables.ports)
    fig, ax = plt.subplots(figsize=(6, 4))
    for scheme in _schemes(tables.ports):
        counts: list[int] = []
        bucket = 0
        for p in figures.queue_ports(tables, scheme):
            histogram = [int(c) for c in p["histogram"].split()]
            counts = [a + b for a, b in zip(counts, histogram)] if counts else histogram
            bucket = int(p["bucket_bytes"])
        points = histogram_cdf(counts, bucket)
        queue = figures.optional(lambda: figures.queues(tables, scheme))  # the tables' mean, every block
        if points:
            ax.step([q / 1e3 for q, _ in points], [c for _, c in points], where="post",
                    label=f"{scheme} (mean {queue.mean_kb:.1f} KB)" if queue else scheme)
    ax.set(xlabel=f"{'bottleneck' if bottleneck else 'switch port'} data queue at enqueue (KB)", ylabel="CDF",
           title="Queue length" if tables.ports else "Queue length: ports.csv holds no port")
    ax.grid(alpha=0.3)
    if tables.ports:
        ax.legend()
    written.append(_save(fig, out / "queue_cdf.png"))
    kind_plots = {"incast": _plot_incast, "realistic": _plot_realistic, "permutation": _plot_permutation,
                  "convergence": _plot_convergence}.get(tables.kind)
    if kind_plots:
        written += kind_plots(tables, out, plt)
    return written


def _plot_incast(tables: Tables, out: Path, plt) -> list[Path]:
    table = incast_table(tables)
    nan = float("nan")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for color, scheme in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], tables.schemes()):
        rows = [r for r in table if r["scheme"] == scheme]
        ns = [r["n"] for r in rows]
        left.plot(ns, [_or(r["goodput_mbps"], nan) for r in rows], marker="o", color=color, label=scheme)
        right.plot(ns, [_or(r["fct_p99_ms"], nan) for r in rows], marker="o", color=color, label=f"{scheme} p99")
        right.plot(ns, [_or(r["fct_mean_ms"], nan) for r in rows], marker="x", linestyle="--", color=color,
                   label=f"{scheme} mean")
    left.set(ylabel="goodput (Mbit/s)", title="Incast goodput", ylim=(0, None))
    right.set(ylabel="FCT (ms)", title="Incast FCT", ylim=(0, None))
    for ax in (left, right):
        ax.set(xlabel="incast flows N", xscale="log")
        ax.set_xticks(tables.ns(), [str(n) for n in tables.ns()])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        ax.legend()
    return [_save(fig, out / "incast_vs_n.png")]


def _plot_realistic(tables: Tables, out: Path, plt) -> list[Path]:
    buckets, nan = ("S", "M", "L", "XL"), float("nan")
    fig, axes = plt.subplots(1, len(tables.points()) or 1, figsize=(4 * max(1, len(tables.points())), 3.6),
                             sharey=True, squeeze=False)
    for ax, point in zip(axes[0], sorted(tables.points(), key=figures.load_of)):
        for scheme in tables.schemes():
            by = figures.slowdowns_by_bucket(tables, scheme, point)
            ax.plot(buckets, [_or(by[b].slowdown_mean, nan) if b in by else nan for b in buckets], marker="o",
                    label=scheme)
        ax.set(title=f"load {figures.load_of(point):g}", xlabel="flow size bucket", yscale="log")
        ax.grid(alpha=0.3)
    axes[0][0].set(ylabel="mean FCT slowdown")
    axes[0][-1].legend()
    written = [_save(fig, out / "slowdown_by_size.png")]

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for scheme in tables.schemes():
        points = sorted(tables.points(scheme), key=figures.load_of)
        loads = [figures.load_of(p) for p in points]
        seen = [figures.optional(lambda p=p: figures.queues(tables, scheme, p)) for p in points]
        left.plot(loads, [q.max_kb if q else nan for q in seen], marker="o", label=scheme)
        right.plot(loads, [q.mean_kb if q else nan for q in seen], marker="o", label=scheme)
    left.set(xlabel="load", ylabel="max switch queue (KB)", title="Max queue vs load", ylim=(0, None))
    right.set(xlabel="load", ylabel="mean queue at arrival (KB)", title="Mean queue vs load", ylim=(0, None))
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    return written + [_save(fig, out / "queue_vs_load.png")]


def _plot_permutation(tables: Tables, out: Path, plt) -> list[Path]:
    fig, ax = plt.subplots(figsize=(7, 4))
    schemes = tables.schemes()
    width = 0.8 / max(1, len(schemes))
    for i, scheme in enumerate(schemes):
        tput = sorted(figures.flow_throughputs_bps(tables, scheme), reverse=True)
        ax.bar([x + i * width for x in range(len(tput))], [t / 1e9 for t in tput], width=width, label=scheme)
    ax.set(xlabel="flows, fastest first", ylabel="throughput (Gbit/s, datacenter)", title="Permutation")
    ax.grid(alpha=0.3, axis="y")
    ax.legend()
    return [_save(fig, out / "flow_throughput.png")]


def _plot_convergence(tables: Tables, out: Path, plt) -> list[Path]:
    blocks = [(s, p) for s in tables.schemes() for p in tables.points(s)]
    if not blocks or not tables.timeline:
        return []
    # Each block on its own time axis: DCTCP's flows join hundreds of RTTs apart, the credit schemes' tens.
    fig, axes = plt.subplots(len(blocks), 1, figsize=(8, 2.4 * len(blocks)), squeeze=False)
    d = tables.dilation
    for ax, (scheme, point) in zip(axes[:, 0], blocks):
        series: dict[str, list[tuple[float, int]]] = defaultdict(list)
        for s in tables.timeline:
            if s["scheme"] == scheme and s["point"] == point:
                series[f"{s['src']}#{s['id']}"].append((float(s["t"]), int(s["bytes"])))
        flows = tables.flows_of(scheme, point)
        rtt = figures.base_rtt_s(tables, scheme, point, flows[0]["dst"]) if flows else 0.0
        first = min((float(f["start"]) for f in flows), default=0.0)
        for name, samples in sorted(series.items()):
            samples.sort()
            # Throughput over one base RTT (or 50 ms of wall time without one), datacenter Gbit/s.
            window = rtt or 0.05
            ts = [t for t, _ in samples if t >= samples[0][0] + window]
            rates = [(figures.bytes_at(samples, t) - figures.bytes_at(samples, t - window)) * 8 / window * d / 1e9
                     for t in ts]
            ax.plot([(t - first) / d * 1e3 for t in ts], rates, label=name, linewidth=1)
        ax.set(ylabel="Gbit/s", title=f"{scheme} {point}".strip())
        ax.grid(alpha=0.3)
    axes[-1, 0].set(xlabel="time since the block's first flow started (ms, datacenter)")
    axes[0, 0].legend(fontsize="small", ncol=4)
    return [_save(fig, out / "throughput_timeline.png")]


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
