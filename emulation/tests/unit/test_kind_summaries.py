"""Each experiment kind's section of summary.md (kinds/<kind>.py), from a bundle stored on
disk with the bundle's own writer and typed rows (results/bundle.py, rows.py): the numbers of its table
computed by hand from the stored rows, its lines for missing or partial data, and a block that never
ran. test_report.py holds the sections every kind shares and the incast bundle of its older tests."""

from dataclasses import fields

import pytest

from ccemu.kinds import KINDS
from ccemu.model.dilation import CREDITED_PAYLOAD_SHARE
from ccemu.results.bundle import BlockKey, Bundle
from ccemu.reports.report import report, summary_markdown
from ccemu.results.rows import FlowRow, PortRow, RoundRow, Row, RttRow, TimelineRow, TransportRow

RATE_MBPS = 10  # every bundle's emulated links (wall)


def row(cls: type[Row], key: BlockKey, **given) -> Row:
    """A row of `cls` for block `key`: the fields given, every other one zero ("" for text)."""
    zero = {f.name: "" if f.type == "str" else 0 for f in fields(cls) if f.name != "key"}
    return cls(key, **{**zero, **given})


def flow(key: BlockKey, src: str, size: int, fct: float, ideal_fct: float = 0.0, *, dst: int = 1, start: float = 1.0,
         round_number: int = 1, flow_id: int = 1, **counters) -> FlowRow:
    """A finished flow as the runner records it (FlowRow.of: its bucket, its slowdown fct / ideal_fct);
    times wall seconds."""
    record = {"id": flow_id, "src_host": src, "dst": dst, "size": size, "start": start, "end": start + fct,
              "fct": fct, "retransmits": 0, "timeouts": 0, "spurious_timeouts": 0, "credits_sent": 0,
              "credits_wasted": 0, **counters}
    return FlowRow.of(key, round_number, record, ideal_fct)


def ran(key: BlockKey, finished: list[FlowRow], unfinished: int = 0, duration: float = 1.0,
        round_number: int = 1) -> RoundRow:
    """The round of `key` in which `finished` finished and `unfinished` more flows did not (a round with
    unfinished flows has no duration, as the runner writes it)."""
    return RoundRow.of(key, round_number, len(finished) + unfinished, [{"size": f.size} for f in finished],
                       duration if not unfinished else 0.0, [f"h9#{i}" for i in range(unfinished)], [])


def stored(tmp_path, kind: str, *rows: Row, dilation: float = 1.0, **manifest):
    """A bundle of `kind` written by the bundle's writer: `rows` in their tables, and a manifest with
    10 Mbit/s links, `dilation` (a datacenter section when it is not 1) and `manifest`'s keys
    (`workload`: the config's workload, beside its kind)."""
    out = Bundle(tmp_path, kind)
    out.add(*rows)
    out.write_tables()
    workload = {"kind": kind, **manifest.pop("workload", {})}
    datacenter = {"datacenter": {"dilation": dilation, "link_rate_bps": RATE_MBPS * 1e6 * dilation,
                                 "emulated_link_mbps": RATE_MBPS, "base_rtt_max_us": 10.0, "bdp_packets_max_rtt": 8.1,
                                 "idle_fabric_rtt_max_us": 3.0}} if dilation != 1 else {}
    out.write_manifest({"kind": kind, "started": "now", "git_commit": "abc", **datacenter,
                        "config": {"name": kind, "seed": 1, "link": {"rate_mbps": RATE_MBPS}, "workload": workload},
                        **manifest})
    return out.dir


def section(summary: str, heading: str) -> list[str]:
    """The lines of the summary's section that starts with `heading`, up to the next heading."""
    lines = summary.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    return lines[start:end]


def tables_of(lines: list[str]) -> list[tuple[list[str], list[str]]]:
    """Each markdown table of `lines`: (its header's cells, its rows as written)."""
    found: list[tuple[list[str], list[str]]] = []
    inside = False
    for line in lines:
        if not line.startswith("|"):
            inside = False
        elif not line.startswith("|---"):
            if not inside:
                found.append((cells_of(line), []))
            else:
                found[-1][1].append(line)
            inside = True
    return found


def cells_of(row: str) -> list[str]:
    return [c.strip() for c in row.strip()[1:-1].split("|")]


def table_rows(lines: list[str], scheme: str | None = None) -> list[str]:
    """The table rows of a section (of one scheme), without its header; a wide table that markdown.table split
    into parts read back whole: each part after the first repeats the first's leading columns (the row's
    name), and its other columns go on the same row."""
    rows: list[str] = []
    first: list[str] = []
    for header, part in tables_of(lines):
        keys = next((i for i, (a, b) in enumerate(zip(header, first)) if a != b), min(len(header), len(first)))
        before = rows[len(rows) - len(part):]
        if keys and part and len(before) == len(part) and all(cells_of(a)[:keys] == cells_of(b)[:keys]
                                                               for a, b in zip(before, part)):
            rows[len(rows) - len(part):] = [a + " " + " | ".join(cells_of(b)[keys:]) + " |"
                                            for a, b in zip(before, part)]
            continue
        first = header
        rows += part
    return [r for r in rows if scheme is None or r.startswith(f"| {scheme} |")]


# Incast -------------------------------------------------------------------------------------------

INCAST_HEADING = "## Incast: per scheme and N"


def test_the_incast_section_counts_goodput_and_timeouts_over_the_settled_rounds_and_fcts_over_every_flow(tmp_path):
    n2, n4 = BlockKey("dctcp", (("N", 2),)), BlockKey("dctcp", (("N", 4),))
    # Round 1 settles (workload.settle_rounds: 1): its 1 s, its timeout and its 3 retransmits count only in the
    # FCTs and the retransmits; rounds 2 and 3 carry 100 000 B each in 0.2 s.
    rounds = [[flow(n2, "h2", 50_000, 0.9, round_number=1, timeouts=1, retransmits=3),
               flow(n2, "h3", 50_000, 0.5, round_number=1)],
              [flow(n2, "h2", 50_000, 0.1, round_number=2), flow(n2, "h3", 50_000, 0.2, round_number=2)],
              [flow(n2, "h2", 50_000, 0.15, round_number=3, timeouts=1, retransmits=2),
               flow(n2, "h3", 50_000, 0.05, round_number=3)]]
    directory = stored(
        tmp_path, "incast",
        *(ran(n2, f, duration=d, round_number=i) for i, (f, d) in enumerate(zip(rounds, (1.0, 0.2, 0.2)), start=1)),
        *(f for r in rounds for f in r),
        RoundRow.not_run(n4, 1, 4, "no aggregator"),
        row(PortRow, n2, node="s1", port="s1-eth1", bottleneck=1, data_enqueued=100, max_data_queue=12_000,
            mean_data_queue_arrival=3_000, data_queue_byte_s=1_800, data_dropped=1, data_marked=4),
        row(PortRow, n2, node="s2", port="s2-eth3", data_enqueued=50, max_data_queue=50_000,
            mean_data_queue_arrival=9_000, data_queue_byte_s=9_000, data_dropped=2, data_marked=6),
        dilation=10, workload={"settle_rounds": 1})
    lines = section(summary_markdown(directory), INCAST_HEADING)
    # Goodput: 200 000 B x 8 / 0.4 s = 4 Mbit/s wall = 40 Mbit/s datacenter, 0.40 of the 10 Mbit/s link; a
    # round: 0.2 s / 10 = 20 ms. FCTs / 10 in ms: 90 50 10 20 15 5: mean 190 / 6 = 31.7; p99 at rank
    # 5 x 0.99 = 4.95: 50 + 0.95 x 40 = 88.0; max 90. Queues: the bottleneck port's only (12 000, 3 000 at
    # arrival, and over time 1 800 B x s over the flows' span of 0.9 s wall: 2 000);
    # drops 1 + 2 and marks 4 + 6 over every port. Timeouts of the settled rounds: 1 of 4 x ceil(50 000 /
    # 1450) = 140 first copies + 2 retransmissions: 1 / 142 = 0.70 %; a flow's: h2's in round 3, 1 of 35 + 2,
    # the other three 0: mean 2.70 % / 4 = 0.68 %, the 90th percentile (rank 2.7 of 0..3, interpolated:
    # 0.7 x 2.70 %) 1.9 %, the largest 2.7 %;
    # retransmits over every round: 3 + 2.
    assert table_rows(lines, "dctcp") == [
        "| dctcp | 2 | 3 (0) | 40.00 | 0.40 | 20.0 | 31.7 | 88.0 | 90.0 | 0 | 12000 | 3000 | 2000 | 3 | 10 | "
        "1 (0.70%) | 0.68% (1.9%, 2.7%) | 5 | 0 | 0 | - |",
        "| dctcp | 4 | 1 (1) | - | - | - | - | - | - | 4 | - | - | - | 0 | 0 | 0 (-) | - | 0 | 0 | 0 | - |"]
    rounds_lines = section(summary_markdown(directory), "### Goodput per round")
    # 100 000 B x 8 / 1 s = 0.8 Mbit/s: 0.08 of the link; 0.40 in rounds 2 and 3; N=4's one round never ran.
    assert table_rows(rounds_lines) == ["| dctcp | 2 | 0.08 | 0.40 | 0.40 |", "| dctcp | 4 | unfinished | - | - |"]
    assert any("The first 1 round(s) of each N settle" in line and "count rounds 2 to 3" in line
               for line in rounds_lines)


# Realistic ----------------------------------------------------------------------------------------

REALISTIC_HEADING = "## Realistic workload: FCT slowdown per size bucket and load"


def test_the_realistic_section_puts_each_load_in_order_with_slowdowns_per_bucket_switch_queues_and_credit_waste(
        tmp_path):
    low, high = BlockKey("dctcp", (("load", 0.2),)), BlockKey("dctcp", (("load", 0.8),))
    xp = BlockKey("expresspass", (("load", 0.2),))
    # Slowdowns (fct / ideal): S 2 and 4, M 3, L 10.
    flows = [flow(low, "h2", 5_000, 0.002, 0.001), flow(low, "h3", 8_000, 0.004, 0.001),
             flow(low, "h4", 50_000, 0.03, 0.01), flow(low, "h5", 500_000, 0.5, 0.05)]
    directory = stored(
        tmp_path, "realistic",
        RoundRow.not_run(high, 1, 5, "a host failed"),  # ran first: the section still lists load 0.2 first
        ran(low, flows), *flows,
        row(PortRow, low, node="s1", port="s1-eth1", data_enqueued=100, max_data_queue=15_380,
            mean_data_queue_arrival=1_538, data_queue_byte_s=769, data_dropped=2),
        row(PortRow, low, node="s2", port="s2-eth2", data_enqueued=300, max_data_queue=3_076,
            mean_data_queue_arrival=3_076, data_queue_byte_s=1_538, data_dropped=3),
        # A host NIC: neither its queue nor its drops are a switch port's.
        row(PortRow, low, node="h1", port="h1-eth0", data_enqueued=900, max_data_queue=99_999,
            mean_data_queue_arrival=50_000, data_queue_byte_s=50_000, data_dropped=7),
        ran(xp, [xp_flow := flow(xp, "h2", 5_000, 0.002, 0.001)]), xp_flow,
        row(TransportRow, xp, host="h2", credits_received=100, credits_wasted=5),
        row(TransportRow, xp, host="h3", credits_received=300, credits_wasted=15),
        dilation=1000)
    lines = section(summary_markdown(directory), REALISTIC_HEADING)
    # FCTs / 1000 in ms: (0.002 + 0.004 + 0.03 + 0.5) / 4 = 0.134. Slowdowns 2 4 3 10: mean 4.75; p99 at
    # rank 3 x 0.99 = 2.97 of 2 3 4 10: 4 + 0.97 x 6 = 9.82; S (2 + 4) / 2 = 3, M 3, L 10, no XL. Queues over
    # the two switch ports: max 15 380 B = 15.4 KB = 10 frames of 1538 B; over time, each port's integral over
    # the flows' span (0.5 s wall): 1538 and 3076 B, their mean 2307 B = 2.307 KB = 1.5 frames; per packet
    # (1538 x 100 + 3076 x 300) / 400 = 2691.5 B = 2.69 KB = 1.75 frames; drops 2 + 3. ExpressPass's
    # credit waste: (5 + 15) / (100 + 300) = 5 %.
    assert table_rows(lines) == [
        "| dctcp | 0.2 | 4 | 0 | 0.134 | 4.75 | 9.82 | 3.00 | 3.00 | 10.00 | - | 15.4 (10.0) | 2.307 (1.500) | "
        "2.69 (1.75) | 5 | - |",
        "| dctcp | 0.8 | 0 | 5 | - | - | - | - | - | - | - | - | - | - | 0 | - |",
        "| expresspass | 0.2 | 1 | 0 | 0.002 | 2.00 | 2.00 | 2.00 | - | - | - | - | - | - | 0 | 5.0% |"]


# Permutation --------------------------------------------------------------------------------------

PERMUTATION_HEADING = "## Permutation: per-flow throughput"


def test_the_permutation_section_gives_each_schemes_flow_throughputs_in_datacenter_gbits_and_their_fairness(
        tmp_path):
    dctcp, xp = BlockKey("dctcp"), BlockKey("expresspass")
    # 1 MB in 1, 2 and 0.8 s wall = 1, 2 and 0.8 ms datacenter: 8, 4 and 10 Gbit/s.
    flows = [flow(dctcp, "h2", 1_000_000, 1.0), flow(dctcp, "h3", 1_000_000, 2.0), flow(dctcp, "h4", 1_000_000, 0.8)]
    directory = stored(tmp_path, "permutation", ran(dctcp, flows, unfinished=1), *flows, ran(xp, [], unfinished=2),
                       dilation=1000)
    lines = section(summary_markdown(directory), PERMUTATION_HEADING)
    # Mean 22 / 3 = 7.33 Gbit/s, 0.73 of the 10 Gbit/s datacenter link; Jain 22^2 / (3 x (64 + 16 + 100)) = 0.896.
    assert table_rows(lines) == ["| dctcp | 3 | 7.33 | 4.00 | 10.00 | 0.73 | 0.896 | 1 |",
                                 "| expresspass | 0 | - | - | - | - | - | 2 |"]


# Shuffle ------------------------------------------------------------------------------------------

SHUFFLE_HEADING = "## Shuffle: FCT quantiles"


def test_the_shuffle_section_gives_each_schemes_fct_quantiles_in_datacenter_ms_and_its_unfinished_flows(tmp_path):
    dctcp, xp = BlockKey("dctcp"), BlockKey("expresspass")
    flows = [flow(dctcp, f"h{i + 2}", 20_000, fct, flow_id=i) for i, fct in enumerate((0.1, 0.2, 0.3, 0.4, 1.0))]
    directory = stored(tmp_path, "shuffle", ran(dctcp, flows, unfinished=1), *flows, ran(xp, [], unfinished=2),
                       dilation=100)
    summary = summary_markdown(directory)
    # FCTs / 100 in ms: 1 2 3 4 10: p50 3; p99 at rank 4 x 0.99 = 3.96: 4 + 0.96 x 6 = 9.76; max 10.
    assert table_rows(section(summary, SHUFFLE_HEADING)) == ["| dctcp | 5 | 3.00 | 9.76 | 10.00 | 1 |",
                                                            "| expresspass | 0 | - | - | - | 2 |"]
    # The FCT per size bucket section follows: 20 000 B flows are M, mean (1 + 2 + 3 + 4 + 10) / 5 = 4 ms.
    assert table_rows(section(summary, "## FCT per scheme and flow size"), "dctcp") == [
        "| dctcp | M | 5 | 4.0 | 3.0 | 9.8 | 10.0 | |", "| dctcp | all | 5 | | | | | 1 |"]


# Convergence --------------------------------------------------------------------------------------

CONVERGENCE_HEADING = "## Convergence: RTTs to the fair share after each flow joins"
RTT = 0.005  # wall seconds: rtts.csv's target (its floor is 4 ms)
PAYLOAD = RATE_MBPS * 1e6 * CREDITED_PAYLOAD_SHARE / 8  # bytes per wall second the flows share


def converging(key: BlockKey, joined_share: float = 0.5) -> list[Row]:
    """A block of two flows to h1, sampled every RTT / 4 from t = 1 s: h2#1 from 1 s alone at the whole
    payload rate P; h3#2 joins at 1.1 s (20 RTTs later) and ends with it 50 RTTs after that. The joiner
    delivers nothing for 2.8 RTTs, then `joined_share` of P; the first keeps P until 4.8 RTTs after the join,
    then half of it."""
    join, end = 1.1, 1.1 + 50 * RTT
    drop, wake = join + 4.8 * RTT, join + 2.8 * RTT

    def first(t: float) -> float:
        return PAYLOAD * (min(t, drop) - 1.0) + PAYLOAD / 2 * max(0.0, t - drop)

    def joiner(t: float) -> float:
        return PAYLOAD * joined_share * max(0.0, t - wake)

    flows = [flow(key, "h2", 200_000, end - 1.0, start=1.0, flow_id=1),
             flow(key, "h3", 100_000, end - join, start=join, flow_id=2)]
    times = [1.0 + i * RTT / 4 for i in range(1, round((end - 1.0) / (RTT / 4)) + 1)]
    return [ran(key, flows), *flows, row(RttRow, key, src="h2", dst="h1", floor_ms=4.0, target_ms=RTT * 1e3),
            *(row(TimelineRow, key, t=t, src="h2", id=1, bytes=round(first(t))) for t in times),
            *(row(TimelineRow, key, t=t, src="h3", id=2, bytes=round(joiner(t))) for t in times if t > join)]


def test_the_convergence_section_reads_in_base_rtts_when_the_joiner_reached_and_when_every_flow_converged(tmp_path):
    # Windows end at every sample (RTT / 4 apart) and are read at their middle. Reached, 2-RTT windows: the
    # joiner's share of the window starting x RTTs after the join is (x - 0.8) / 2, at least 0.8 from x = 2.4,
    # first on the grid at 2.5: 3.5. Converged, 10-RTT windows: the first flow's share is 1 + (4.8 - x) / 10,
    # within 1.2 from x = 2.8, first on the grid at 3.0 (a float's hair past it), read at 8.0 (the joiner's is
    # in the band already),
    # and both keep it to the end, beyond the 20-RTT hold. A joiner at a tenth of P does neither: "> 49" (the
    # last 2-RTT window's middle) and "> 25" (the last 10-RTT window's, less the hold). Base RTT 5 ms / 100.
    alpha, slow = BlockKey("expresspass", (("alpha", 0.5),)), BlockKey("expresspass", (("alpha", 1.0),))
    directory = stored(tmp_path, "convergence", *converging(alpha), *converging(slow, joined_share=0.1), dilation=100)
    lines = section(summary_markdown(directory), CONVERGENCE_HEADING)
    assert table_rows(lines) == ["| expresspass | 0.5 | 50.0 | 3.5 | 3.5 | 8.0 | 8.0 |",
                                 "| expresspass | 1 | 50.0 | > 49 | - | > 25 | - |"]


def test_the_convergence_section_names_what_a_block_lacks_the_timeline_the_base_rtt_or_a_second_flow(tmp_path):
    untimed, unmeasured, alone = BlockKey("dctcp"), BlockKey("expresspass", (("alpha", 0.5),)), BlockKey("dcqcn")
    directory = stored(tmp_path, "convergence",
                       *(r for r in converging(untimed) if not isinstance(r, TimelineRow)),  # cchost without --progress
                       *(r for r in converging(unmeasured) if not isinstance(r, RttRow)),
                       *(r for r in converging(alone) if not isinstance(r, FlowRow) or r.src == "h2"))
    lines = section(summary_markdown(directory), CONVERGENCE_HEADING)
    assert table_rows(lines) == [
        "| dctcp | - | - | timeline.csv has no throughput samples of dctcp | - | - | - |",
        "| expresspass | 0.5 | - | rtts.csv has no base RTT of expresspass alpha=0.5 | - | - | - |",
        "| dcqcn | - | - | fewer than two flows of dcqcn finished | - | - | - |"]


# Victim -------------------------------------------------------------------------------------------

VICTIM_HEADING = "## Victim flows (TCD, seed 004 Table 3)"


def test_the_victim_section_counts_marked_victims_with_their_interval_and_every_ports_pauses(tmp_path):
    dctcp, dcqcn = BlockKey("dctcp"), BlockKey("dcqcn")
    victims = [flow(dctcp, "h5", 20_000, 0.02, 0.01, dst=7, cnps_ce=2),
               flow(dctcp, "h6", 20_000, 0.04, 0.01, dst=7),
               flow(dctcp, "h5", 20_000, 0.06, 0.01, dst=7, cnps_ue=1),
               flow(dctcp, "h6", 20_000, 0.08, 0.01, dst=7, cnps_ce=1)]
    # Not victims: to another receiver, and from a burster.
    others = [flow(dctcp, "h5", 20_000, 0.5, 0.01, dst=1, cnps_ce=5), flow(dctcp, "h2", 20_000, 0.5, 0.01, dst=7,
                                                                          cnps_ce=5)]
    directory = stored(
        tmp_path, "victim", ran(dctcp, victims + others, unfinished=1), *victims, *others,
        row(PortRow, dctcp, node="s1", port="s1-eth1", pause_events=3, paused_s=0.05, data_marked=2,
            max_data_queue=30_760, data_dropped=1),
        row(PortRow, dctcp, node="s2", port="s2-eth2", max_data_queue=1_538),  # neither paused nor marking
        row(PortRow, dctcp, node="h5", port="h5-eth0", pause_events=1, paused_s=0.01),
        ran(dcqcn, [], unfinished=2), row(PortRow, dcqcn, node="s1", port="s1-eth1", pause_events=2, paused_s=0.02),
        dilation=100, workload={"victim_senders": ["h5", "h6"], "victim_receiver": "h7"},
        pause_agent={"dctcp": {"pauses": 3, "resumes": 3, "reaction_frames": {"p50": 0.5, "p99": 1.25, "max": None},
                               "failures": ["gate"], "died": "boom"}})
    summary = summary_markdown(directory)
    # 4 victims, 2 of them CE-marked: 50 % (Wilson 95 % for 2 of 4: 0.5 -+ 0.34996), 1 UE-marked (25 %);
    # FCT (0.02 + 0.04 + 0.06 + 0.08) / 4 / 100 = 0.5 ms; slowdowns 2 4 6 8: mean 5, p99 at rank 2.97: 7.94;
    # pauses 3 + 1, paused (0.05 + 0.01) / 100 = 0.6 ms; 1 drop.
    assert table_rows(section(summary, VICTIM_HEADING)) == [
        "| dctcp | 4 | 1 | 2 (50.0%; 95 %: 15.0% to 85.0%) | 1 (25.0%) | 0.500 | 5.00 | 7.94 | 4 | 0.600 | 1 |",
        "| dcqcn | 0 | 2 | - | - | - | - | - | 2 | 0.200 | 0 |"]
    assert table_rows(section(summary, "### Pauses and marks per port")) == [
        "| dctcp | s1-eth1 | 3 | 0.500 | 2 | 0 | 30.8 |", "| dctcp | h5-eth0 | 1 | 0.100 | 0 | 0 | 0.0 |",
        "| dcqcn | s1-eth1 | 2 | 0.200 | 0 | 0 | 0.0 |"]
    assert table_rows(section(summary, "### PFC pause reaction")) == [
        "| dctcp | 3 | 3 | 0 | 0 | 0.50 | 1.25 | - | 1 (agent died: boom) |"]


# Every kind ---------------------------------------------------------------------------------------

# A block of each kind that never ran (RoundRow.not_run, 4 flows) and nothing else: its row in the kind's table.
NOT_RUN = {
    "incast": (BlockKey("dctcp", (("N", 8),)), INCAST_HEADING,
               "| dctcp | 8 | 1 (1) | - | - | - | - | - | - | 4 | - | - | - | 0 | 0 | 0 (-) | - | 0 | 0 | 0 | - |"),
    "realistic": (BlockKey("dctcp", (("load", 0.5),)), REALISTIC_HEADING,
                  "| dctcp | 0.5 | 0 | 4 | - | - | - | - | - | - | - | - | - | - | 0 | - |"),
    "permutation": (BlockKey("dctcp"), PERMUTATION_HEADING, "| dctcp | 0 | - | - | - | - | - | 4 |"),
    "shuffle": (BlockKey("dctcp"), SHUFFLE_HEADING, "| dctcp | 0 | - | - | - | 4 |"),
    "convergence": (BlockKey("expresspass", (("alpha", 0.5),)), CONVERGENCE_HEADING,
                    "| expresspass | 0.5 | - | fewer than two flows of expresspass alpha=0.5 finished | - | - | - |"),
    "victim": (BlockKey("dctcp"), VICTIM_HEADING, "| dctcp | 0 | 4 | - | - | - | - | - | 0 | 0.000 | 0 |"),
}


def test_every_kind_of_the_registry_is_held_by_the_block_that_never_ran():
    assert set(NOT_RUN) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(NOT_RUN))
@pytest.mark.filterwarnings("ignore:No artists with labels:UserWarning")  # matplotlib: a legend of no line
def test_each_kinds_report_shows_a_block_that_never_ran_as_dashes_with_its_flows_unfinished_and_still_plots(
        tmp_path, kind):
    key, heading, expected = NOT_RUN[kind]
    directory = stored(tmp_path, kind, RoundRow.not_run(key, 1, 4, "no host"))
    assert table_rows(section(report(directory).read_text(), heading)) == [expected]
    assert (directory / "plots" / "fct_cdf.png").exists()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kinds_summary_of_a_bundle_whose_tables_hold_no_row_is_its_heading_and_no_block(tmp_path, kind):
    heading = NOT_RUN[kind][1]
    assert table_rows(section(summary_markdown(stored(tmp_path, kind)), heading)) == []
