"""The papers' claims beside a bundle's figures (results/papers.py, readings.py), from known tables: what
each claim reads, and that missing data never passes."""

import csv
import json
import math
import re
import statistics

import pytest
import yaml

from ccemu.model import dilation
from ccemu.cli import main
from ccemu.results import convergence_figures, figures, papers, readings, rule, stats
from ccemu.results.bundle import FLOW_FIELDS, PORT_FIELDS, ROUND_FIELDS
from ccemu.results.figures import Tables
from ccemu.results.rule import Figure

RTT = 0.052  # wall seconds


def tables(kind, flows=(), rounds=(), ports=(), rtts=(), timeline=(), dilation=1000.0, rate_mbps=10, verdict="PASS",
           counters=(), **config):
    """Tables of a bundle of `kind`; every block of `rounds` gets the fidelity verdict `verdict`."""
    manifest = {"kind": kind, "config": {"link": {"rate_mbps": rate_mbps}, "workload": {"kind": kind}, **config},
                "datacenter": {"dilation": dilation},
                "fidelity": {"blocks": [{"scheme": r["scheme"], "n": r.get("n", 0), "point": r.get("point", ""),
                                         "status": verdict} for r in rounds]}}
    return Tables(manifest, list(flows), list(rounds), list(ports), list(rtts), list(timeline),
                  transport=list(counters))


def round_row(scheme, point="", n=0, flows=0, finished=None, duration=1.0, size=0):
    finished = flows if finished is None else finished
    return {"scheme": scheme, "point": point, "n": n, "round": 1, "flows": flows, "finished": finished,
            "duration": duration, "bytes": size * finished}


def flow(scheme, fct, src="h2", point="", n=0, size=1000, dst="h1", start=0.0, **extra):
    return {"scheme": scheme, "point": point, "n": n, "round": 1, "src": src, "dst": dst, "id": 1, "size": size,
            "bucket": "S" if size < 10_000 else "M" if size < 100_000 else "L", "start": start, "end": start + fct,
            "fct": fct, "slowdown": 2.0, "timeouts": 0, "retransmits": 0, "credits_sent": 0, "credits_wasted": 0,
            **extra}


def port(scheme, point, max_queue, mean_queue=0, enqueued=1, node="s1", n=0, time_mean_queue=None, span_s=1.0):
    """A port's row: its max queue, its mean queue at arrival and (`time_mean_queue`, default the same) over time,
    the latter as the integral over `span_s`, the span its block's flows take (test flows: 0 to their FCT)."""
    time_mean = mean_queue if time_mean_queue is None else time_mean_queue
    return {"scheme": scheme, "point": point, "n": n, "node": node, "max_data_queue": max_queue,
            "mean_data_queue_arrival": mean_queue, "data_queue_byte_s": time_mean * span_s, "data_enqueued": enqueued,
            "bottleneck": 0}


def by_id(comparisons):
    return {c.claim.id: c for c in comparisons}


# The reference table ------------------------------------------------------------------------------

def test_every_claim_of_the_reference_table_has_a_source_line_a_paper_figure_and_a_reading():
    claims = papers.load_claims()
    assert len(claims) >= 30
    assert {c.experiment for c in claims} == set(papers.EXPERIMENTS) <= set(papers.settings())
    assert len({c.id for c in claims}) == len(claims)
    for c in claims:
        assert re.search(r"seed 00[0-4] lines? \d", c.source), c.id
        assert (c.reading.get("name") in readings.READINGS) != bool(c.not_run_here), c.id  # a reading, or why none
    assert {c.kind for c in claims} == {rule.NUMERIC, rule.DIRECTION_ONLY}


@pytest.mark.parametrize("change, message", [
    (lambda c: c.update(paper={"unit": "x"}), "one of: a value, a range"),
    (lambda c: c.update(paper={"unit": "x", "value": 1, "range": [0, 2]}), "one of: a value, a range"),
    (lambda c: c.update(reading={"name": "no_such_reading"}), "unknown reading 'no_such_reading'"),
    (lambda c: c["reading"].update(colour="red"), "unexpected keyword argument 'colour'"),
    (lambda c: c.update(criterion="at_least 1"), "Extra inputs are not permitted"),
    (lambda c: c.update(requires={"transport.rtomin_ms": 200}), "'transport.rtomin_ms' is not a key of an experiment"),
    (lambda c: c.update(tighter={"why": "no bound"}), "needs at_least or at_most"),
    (lambda c: c.update(not_run_here="no counter"), "a reading or says why it is not run here"),
    (lambda c: c.pop("reading"), "a reading or says why it is not run here"),
])
def test_the_reference_table_refuses_a_claim_it_cannot_judge(tmp_path, change, message):
    data = yaml.safe_load(papers.REFERENCE.read_text())
    change(data["claims"][0])
    path = tmp_path / "reference.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match=message):
        papers.load_claims(path)


# Missing data never passes -----------------------------------------------------------------------

def realistic(loads=("load=0.2", "load=0.6"), unfinished=0, verdict="PASS", with_ports=True, cdf="webserver"):
    """ExpressPass and DCTCP at two loads: S, M and L flows (DCTCP's twice as slow), queues of 10 and
    300 KB (ExpressPass 12 KB at the higher load)."""
    flows, rounds, ports, counters = [], [], [], []
    for scheme, slower, queue in (("expresspass", 1.0, 10_000), ("dctcp", 2.0, 300_000)):
        for point in loads:
            sizes = (1000, 50_000, 500_000)
            flows += [flow(scheme, slower * size / 1e6, point=point, size=size, credits_sent=10, credits_wasted=2)
                      for size in sizes]
            # Two senders' counters: 20 credits reached them, 4 with nothing to send (1 after its flow's record).
            counters += [{"scheme": scheme, "n": 0, "point": point, "host": h, "credits_sent": 14,
                           "credits_received": 10, "credits_wasted": 2} for h in ("h1", "h2")]
            rounds.append(round_row(scheme, point, flows=3 + unfinished, finished=3))
            if with_ports:
                grown = queue * 6 // 5 if point == "load=0.6" and scheme == "expresspass" else queue
                ports += [port(scheme, point, grown, mean_queue=grown / 10, enqueued=100),
                          port(scheme, point, 900_000, node="h3")]  # a host NIC: not a switch queue
    return tables("realistic", flows, rounds, ports, verdict=verdict, counters=counters,
                  workload={"kind": "realistic", "cdf": cdf},
                  transport={"alpha": 0.0625},
                  schemes=[{"scheme": s, "port": {"buffer_bytes": 384_500}} for s in ("expresspass", "dctcp")])


def test_the_papers_comparisons_of_comparisons_read_as_defined():
    t = realistic(loads=("load=0.2", "load=0.6", "load=0.8"))
    # DCTCP twice as slow on every flow: as far ahead at the 99th percentile as on average; so too at 0.6 and 0.8.
    assert readings.p99_gap_over_mean_gap(t, "dctcp", "expresspass", 0.6, "S") == Figure.of(1.0)
    assert readings.mean_fct_gain_between_loads(t, "dctcp", "expresspass", 0.6, 0.8) == Figure.of(1.0)
    assert by_id(papers.compare(t))["xp-gap-larger-p99"].verdict == rule.DIRECTION_FAILS  # on the pivot
    for f in t.flows:  # ExpressPass's S flows at 0.6: one of two quick, one as slow as DCTCP's
        if f["scheme"] == "expresspass" and f["point"] == "load=0.6" and f["size"] == 1000:
            t.flows.append(dict(f, fct=0.0001, end=f["start"] + 0.0001))
            break
    # S at 0.6: ExpressPass 0.001 and 0.0001 s (mean 0.00055, p99 0.000991), DCTCP 0.002.
    gap = readings.p99_gap_over_mean_gap(t, "dctcp", "expresspass", 0.6, "S").low
    assert gap == pytest.approx((0.002 / (0.0001 + 0.99 * 0.0009)) / (0.002 / 0.00055))
    # Queues over time grow with the load: DCTCP's 30 KB everywhere (no growth); ports' drops summed.
    assert readings.mean_queue_growth(t, "dctcp", 0.2, 0.6) == Figure.of(1.0)
    for p in t.ports:
        p["data_dropped"] = 2 if p["scheme"] == "dctcp" and p["node"] == "s1" else 0
    assert readings.data_drops(t, "dctcp") == Figure.of(2 * 3)  # its switch port at each of three loads
    assert readings.data_drops(t, "expresspass") == Figure.of(0)


def test_queue_claims_read_switch_ports_only_and_are_judged_by_the_rule():
    seen = by_id(papers.compare(realistic()))
    assert seen["xp-maxq-load-indep"].ours == Figure.of(1.2)  # 12 / 10 KB, not the host NIC's 900 KB
    assert seen["xp-maxq-load-indep"].verdict == rule.REPRODUCED
    # Its criterion is tighter than the rule (the rule's 1.5 would pass DCTCP's rows): printed with why.
    (line,) = [line for line in papers.markdown([seen["xp-maxq-load-indep"]]) if "max queue does not grow" in line]
    assert "criterion tighter than the rule: <= 1.25, DCTCP's rows of Table 3 grow" in line
    assert seen["dctcp-maxq-ratio"].ours == Figure.of(300 / 12)
    assert seen["dctcp-maxq-ratio"].verdict == rule.SAME_DIRECTION  # 25 against the paper's 8.37
    assert seen["xp-maxq-kb"].verdict == rule.NOT_REPRODUCED  # 12 KB against 46.14
    assert seen["dctcp-maxq-at-buffer"].ours == Figure.of(300 / 384.5)


def test_queue_claims_without_switch_port_rows_are_not_comparable_instead_of_zero():
    seen = by_id(papers.compare(realistic(with_ports=False)))
    for claim in ("xp-maxq-kb", "xp-maxq-load-indep", "dctcp-maxq-ratio", "xp-avgq-kb"):
        assert seen[claim].verdict == rule.NOT_COMPARABLE, claim
        assert "ports.csv has no switch port of" in seen[claim].why


def test_an_unfinished_flow_makes_every_claim_that_reads_its_block_not_comparable():
    seen = by_id(papers.compare(realistic(unfinished=1)))
    assert seen["xp-s-flows-vs-dctcp"].verdict == rule.NOT_COMPARABLE
    assert "1 flows of dctcp load=0.6 did not finish" in seen["xp-s-flows-vs-dctcp"].why
    assert seen["xp-credit-waste"].verdict == rule.NOT_COMPARABLE
    # A queue read while a block's traffic was cut short would be too small: not comparable either.
    assert "1 flows of expresspass load=0.2 did not finish" in seen["xp-maxq-kb"].why


def test_a_block_with_a_fail_verdict_or_none_makes_its_claims_not_comparable():
    failed = by_id(papers.compare(realistic(verdict="FAIL")))
    assert failed["xp-maxq-kb"].verdict == rule.NOT_COMPARABLE
    assert "expresspass load=0.2's fidelity verdict is FAIL" in failed["xp-maxq-kb"].why
    t = realistic()
    t.manifest["fidelity"] = {"status": "PASS"}
    assert "has no fidelity verdict" in by_id(papers.compare(t))["xp-maxq-kb"].why


def test_a_flow_row_missing_from_flows_csv_makes_its_block_not_comparable():
    t = realistic()
    t.flows.pop()  # DCTCP load=0.6's L flow: its round still counts it as finished
    seen = by_id(papers.compare(t))
    assert "1 finished flows of dctcp load=0.6 have no row in flows.csv" in seen["xp-l-flows-vs-dctcp"].why


def test_a_missing_scheme_or_load_or_another_workload_is_not_comparable_with_the_reason():
    seen = by_id(papers.compare(realistic(loads=("load=0.2", "load=0.8"))))
    assert seen["sp-fct-avg"].why == "the run has no spraypass"
    assert seen["xp-avgq-kb"].why == "expresspass did not run at load 0.6"
    other = by_id(papers.compare(realistic(cdf="search")))
    assert other["xp-maxq-kb"].why == "the paper's figure is for workload.cdf webserver (this run: search)"
    assert other["xp-queue-bound"].verdict == rule.NOT_COMPARABLE  # no bound in this manifest


def test_credit_waste_is_read_at_load_0_6_alone_from_the_senders_counters_not_the_flow_records():
    t = realistic()
    for row in t.transport:
        if row["point"] == "load=0.2":
            row["credits_wasted"] = 9
    for f in t.flows:
        f["credits_wasted"] = 0  # the records miss credits that came after them; the counters have them all
    assert by_id(papers.compare(t))["xp-credit-waste"].ours == Figure.of(0.2)  # 4 of the 20 that reached senders


def test_credit_waste_of_a_bundle_without_transport_counters_is_not_comparable():
    t = realistic()
    t.transport.clear()
    seen = by_id(papers.compare(t))["xp-credit-waste"]
    assert seen.verdict == rule.NOT_COMPARABLE and "no transport counters" in seen.why


def test_fct_claims_read_each_size_bucket_at_load_0_6():
    seen = by_id(papers.compare(realistic()))
    for claim in ("xp-s-flows-vs-dctcp", "xp-m-flows-vs-dctcp"):
        assert seen[claim].ours == Figure.of(2.0) and seen[claim].verdict == rule.REPRODUCED
    assert seen["xp-l-flows-vs-dctcp"].verdict == rule.DIRECTION_FAILS  # DCTCP's L flows are slower here


# Incast ------------------------------------------------------------------------------------------

def incast_tables(goodput_by_n, scheme="dctcp", rto_min_ms=10, timeouts=0, retransmits=0, finished=None,
                  min_window=2):
    """One round per N of 1 MB; its duration gives the goodput (of 10 Mbit/s links, dilation 200);
    DCTCP's minimum window `min_window` segments (section IV's 2, Fig. 7's 1)."""
    rounds, flows = [], []
    for n, fraction in goodput_by_n.items():
        duration = 1e6 * 8 / (fraction * 10e6)
        done = n if finished is None else finished
        rounds.append(round_row(scheme, n=n, flows=n, finished=done, duration=duration, size=1_000_000 // n))
        flows += [flow(scheme, duration, n=n, size=1_000_000 // n, src=f"h{2 + i % 15}",
                       timeouts=timeouts if i == 0 else 0, retransmits=retransmits if i == 0 else 0)
                  for i in range(done)]
    return tables("incast", flows, rounds, dilation=200, transport={"rto_min_ms": rto_min_ms},
                  schemes=[{"scheme": "dctcp", "params": {"min_window_segments": min_window}}, {"scheme": "dctcp+"}])


def test_incast_timeouts_are_a_flows_share_of_its_transmissions_averaged_over_flows_as_in_table_i_at_its_rto():
    t = incast_tables({20: 0.9, 40: 0.5}, timeouts=2, retransmits=3, rto_min_ms=200)
    # N = 40: 40 flows of 25 000 B, 18 packets of 1450 B each; one flow timed out twice and resent 3:
    # its share 2 / 21, the others' 0. Table I follows one flow picked at random: in expectation the
    # mean over flows, 2 / 21 / 40 = 0.24 %, where pooling every flow's packets reads 2 / 723 = 0.28 %.
    assert readings.incast_timeout_share(t, "dctcp", n=40) == Figure.of(statistics.fmean([2 / 21] + [0] * 39))
    seen = by_id(papers.compare(t))
    assert seen["dctcp-timeouts-n20"].verdict == rule.NOT_REPRODUCED  # 2 timeouts: the paper's N = 20 had none
    assert seen["dctcp-timeouts-n40"].verdict == rule.SAME_DIRECTION  # 0.24 % against 1.9 %
    assert seen["dctcp-timeouts-n60"].why == "dctcp did not run at N = 60"
    at_10_ms = by_id(papers.compare(incast_tables({20: 0.9, 40: 0.5}, timeouts=2, rto_min_ms=10)))
    assert at_10_ms["dctcp-timeouts-n40"].why == "the paper's figure is for transport.rto_min_ms 200 (this run: 10)"


def test_a_claim_may_require_a_schemes_own_setting_and_an_unset_one_reads_as_what_its_hosts_ran():
    t = tables("incast", transport={"rto_min_ms": 200},
               schemes=[{"scheme": "dctcp", "rto_min_ms": 10}, {"scheme": "dctcp+", "params": {"g": 0.125}}])
    assert t.config_value("schemes.dctcp.rto_min_ms") == 10
    assert t.config_value("schemes.dctcp+.rto_min_ms") == 200  # the transport's
    assert t.config_value("schemes.dctcp.params.min_window_segments") == 2  # cchost's default
    assert t.config_value("schemes.dctcp+.params.g") == 0.125
    assert t.config_value("schemes.expresspass.rto_min_ms") is None  # did not run
    claim = papers.Claim("c", "incast", "", "", "", rule.Paper(value=1.0), {"name": "incast_collapse_n"},
                         {"schemes.dctcp.params.min_window_segments": 1})
    assert papers.settings_differ(claim, t) == ("the paper's figure is for schemes.dctcp.params.min_window_segments 1 "
                                                "(this run: 2.0)")
    with pytest.raises(ValueError, match="is not a key of an experiment file"):
        papers.ClaimEntry.model_validate({"id": "c", "experiment": "incast", "claim": "", "source": "",
                                          "paper": {"value": 1, "unit": ""}, "reading": {"name": "incast_collapse_n",
                                                                                         "scheme": "dctcp"},
                                          "requires": {"schemes.dctcp.params.min_window": 1}})


def test_an_incast_reading_over_a_range_of_n_needs_every_n_and_every_round_of_the_config():
    t = incast_tables({8: 0.9, 20: 0.8}, scheme="dctcp+", rto_min_ms=200, min_window=1)
    t.rounds += [dict(r, scheme="dctcp") for r in t.rounds if r["n"] == 8]
    t.flows += [dict(f, scheme="dctcp") for f in t.flows if f["n"] == 8]
    t.manifest["fidelity"]["blocks"].append({"scheme": "dctcp", "n": 8, "point": "", "status": "PASS"})
    t.manifest["config"]["workload"].update(flows=[8, 20, 40], rounds=1)
    seen = by_id(papers.compare(t))["plus-equals-dctcp-low-n"]
    assert seen.verdict == rule.NOT_COMPARABLE
    assert seen.why == "dctcp+ did not run N = 40 of the config's grid"
    t.manifest["config"]["workload"].update(flows=[8, 20], rounds=2)
    assert by_id(papers.compare(t))["plus-equals-dctcp-low-n"].why == \
        "dctcp+ N=8 ran 1 of its 2 rounds; dctcp+ N=20 ran 1 of its 2 rounds"


def test_incast_figures_count_the_rounds_after_the_settling_ones_and_every_round_must_have_run():
    t = incast_tables({256: 0.1}, scheme="dctcp+", rto_min_ms=200, timeouts=3)  # round 1: 0.1 of the link, 3 timeouts
    t.rounds += [dict(t.rounds[0], round=r, duration=1e6 * 8 / (0.7 * 10e6)) for r in (2, 3)]  # then 0.7
    t.flows += [dict(f, round=r, timeouts=0) for r in (2, 3) for f in t.flows]
    t.manifest["config"]["workload"].update(flows=[256], rounds=3)
    whole = 256 * (1_000_000 // 256) / 1_000_000  # of the 1 MB a round's durations were set for
    assert readings.incast_goodput_fraction(t, "dctcp+", n_min=200).low == \
        pytest.approx(whole * 3 / (1 / 0.1 + 2 / 0.7))
    t.manifest["config"]["workload"]["settle_rounds"] = 1
    assert readings.incast_goodput_fraction(t, "dctcp+", n_min=200).low == pytest.approx(whole * 0.7)
    assert readings.incast_timeout_share(t, "dctcp+", n_min=200) == Figure.of(0.0)
    assert readings.incast_round_ms(t, "dctcp+", n_min=200).low == pytest.approx(1e3 * 8 / 7 / 200)
    assert by_id(papers.compare(t))["plus-goodput"].verdict == rule.REPRODUCED
    seen = figures.incast(t, "dctcp+", 256)
    assert (seen.rounds, seen.finished_rounds, seen.timeouts) == (3, 3, 0)  # every round shown, the settled counted
    t.rounds = [r for r in t.rounds if r["round"] != 3]
    assert by_id(papers.compare(t))["plus-goodput"].why == "dctcp+ N=256 ran 2 of its 3 rounds"


def test_a_requests_completion_is_read_at_the_papers_n_and_dctcp_plus_queue_against_dctcps_over_time():
    t = incast_tables({60: 0.5, 200: 0.2}, scheme="dctcp+", rto_min_ms=200, min_window=1)
    t.rounds += [dict(r, scheme="dctcp") for r in t.rounds]
    t.flows += [dict(f, scheme="dctcp") for f in t.flows]
    t.manifest["fidelity"]["blocks"] += [dict(b, scheme="dctcp") for b in t.manifest["fidelity"]["blocks"]]
    # N = 200 alone: its round of 1 MB at 0.2 of 10 Mbit/s, 4 s wall, 20 ms of datacenter time at d = 200.
    assert readings.incast_round_ms(t, "dctcp+", n=200).low == pytest.approx(20)
    assert readings.incast_round_ms(t, "dctcp+", n_min=60).low == pytest.approx((20 + 8) / 2)
    assert by_id(papers.compare(t))["plus-round-fct"].verdict == rule.REPRODUCED  # 20 ms: 1.18 x 17
    # Bottleneck queues over time at N = 60: DCTCP+'s 3 000 B, DCTCP's 12 000 B, each over its flows' span.
    t.ports = [dict(port("dctcp+", "", 40_000, 5_000, n=60, time_mean_queue=3_000, span_s=1.6), bottleneck=1),
               dict(port("dctcp", "", 90_000, 20_000, n=60, time_mean_queue=12_000, span_s=1.6), bottleneck=1),
               port("dctcp", "", 120_000, 60_000, n=60, node="s2")]  # not the bottleneck: left out
    for f in t.flows:
        f.update(start=0.0, end=1.6)
    assert readings.incast_queue_ratio(t, "dctcp+", "dctcp", n=60) == Figure.of(0.25)
    assert by_id(papers.compare(t))["plus-shorter-queue"].verdict == rule.DIRECTION_HOLDS


def test_incast_collapse_lies_between_the_last_n_above_half_the_best_and_the_first_below():
    t = incast_tables({8: 0.9, 20: 0.8, 32: 0.7, 40: 0.3, 64: 0.2})
    assert readings.incast_collapse_n(t, "dctcp") == Figure(33, 40)
    assert readings.incast_collapse_n(incast_tables({8: 0.9, 64: 0.8}), "dctcp") == Figure.at_least(65)
    seen = by_id(papers.compare(t))
    assert "transport.rto_min_ms 200 (this run: 10)" in seen["dctcp-collapse-n"].why  # Fig. 1's RTO
    assert by_id(papers.compare(incast_tables({8: 0.9, 20: 0.8, 32: 0.7, 40: 0.3}, rto_min_ms=200)))[
        "dctcp-collapse-n"].verdict == rule.REPRODUCED


def test_incast_goodput_pools_bytes_over_time_and_an_unfinished_round_is_not_comparable():
    t = incast_tables({256: 0.8}, scheme="dctcp+", rto_min_ms=200)
    assert by_id(papers.compare(t))["plus-goodput"].verdict == rule.REPRODUCED
    unfinished = incast_tables({256: 0.8}, scheme="dctcp+", rto_min_ms=200, finished=255)
    seen = by_id(papers.compare(unfinished))["plus-goodput"]
    assert seen.verdict == rule.NOT_COMPARABLE and "1 flows of dctcp+ N=256 did not finish" in seen.why


def test_the_incast_table_and_the_claim_give_the_same_goodput():
    from ccemu.kinds.incast import incast_table
    t = incast_tables({256: 0.8}, scheme="dctcp+", rto_min_ms=200)
    (row,) = incast_table(t)
    assert row["goodput_of_link"] == pytest.approx(by_id(papers.compare(t))["plus-goodput"].ours.low)
    assert row["round_ms"] == pytest.approx(1e3 / 200)  # 1 s of wall time at dilation 200


# Shuffle, permutation, victims ---------------------------------------------------------------------

def test_shuffle_ratios_compare_fct_quantiles_in_datacenter_time():
    flows = [flow("expresspass", f) for f in (2.0, 2.1, 2.2)] + [flow("dctcp", f) for f in (1.9, 2.0, 9.0)]
    t = tables("shuffle", flows, [round_row("expresspass", flows=3), round_row("dctcp", flows=3)])
    assert figures.fcts(t, "expresspass").max_s == pytest.approx(2.2e-3)
    seen = by_id(papers.compare(t))
    assert seen["shuffle-max"].ours.low == pytest.approx(9.0 / 2.2)
    # 1.05 against 1.09; 4.0 against 1.51 and 4.1 against 6.65: ExpressPass better, not by the paper's factor.
    assert (seen["shuffle-median"].verdict, seen["shuffle-p99"].verdict, seen["shuffle-max"].verdict) == \
        (rule.REPRODUCED, rule.SAME_DIRECTION, rule.SAME_DIRECTION)


def test_a_scheme_whose_flows_all_failed_makes_the_permutation_claims_not_comparable():
    t = tables("permutation", [flow("expresspass", 1.0)],
               [round_row("expresspass", flows=1), round_row("spraypass", flows=1, finished=0)])
    seen = papers.compare(t)
    assert {c.verdict for c in seen} == {rule.NOT_COMPARABLE}
    assert all("spraypass did not finish" in c.why for c in seen if not c.claim.not_run_here)
    assert all(c.why == f"not run here: {c.claim.not_run_here}" for c in seen if c.claim.not_run_here)


def test_victim_claims_count_only_the_victims_flows_with_a_ce_cnp():
    def victim(scheme, src, dst, cnps_ce, cnps_ue=0, fct=0.1):
        return flow(scheme, fct, src=src, dst=dst, cnps_ce=cnps_ce, cnps_ue=cnps_ue)
    flows = [victim("dcqcn", "h1", "h10", 3), victim("dcqcn", "h1", "h10", 0), victim("dcqcn", "h1", "h10", 0),
             victim("dcqcn", "h1", "h10", 1), victim("dcqcn", "h2", "h9", 5),  # a congesting flow: not a victim
             victim("dcqcn+tcd", "h1", "h10", 0, 4, fct=0.05), victim("dcqcn+tcd", "h1", "h10", 0, fct=0.05)]
    t = tables("victim", flows, [round_row("dcqcn", flows=5), round_row("dcqcn+tcd", flows=2)],
               workload={"kind": "victim", "victim_senders": ["h1"], "victim_receiver": "h10"})
    assert figures.victims(t, "dcqcn+tcd").ue_marked == 1
    seen = by_id(papers.compare(t))
    assert seen["ecn-marks-victims"].ours == Figure.of(0.5)
    assert seen["ecn-marks-victims"].verdict == rule.SAME_DIRECTION  # 50 % against 26.6 %
    assert seen["tcd-spares-victims"].verdict == rule.REPRODUCED
    assert seen["tcd-victim-fct"].verdict == rule.DIRECTION_HOLDS
    for f in t.flows:
        f["cnps_ce"] = ""  # a bundle without CNP counts: no share of marked victims, not 0
    assert "flows.csv has no CNP counts" in by_id(papers.compare(t))["tcd-spares-victims"].why


def test_the_victim_summary_gives_the_marked_share_with_its_95_percent_interval(tmp_path):
    flows = [flow("dcqcn", 0.1, src="h1", dst="h10", cnps_ce=int(i < 2), cnps_ue=0) for i in range(4)]
    t = tables("victim", flows, [round_row("dcqcn", flows=4)],
               workload={"kind": "victim", "victim_senders": ["h1"], "victim_receiver": "h10"})
    bundle = write_bundle(tmp_path / "victim", t)
    assert main(["report", str(bundle)]) == 0
    low, high = stats.wilson_interval(2, 4)
    assert f"| dcqcn | 4 | 0 | 2 (50.0%; 95 %: {low:.1%} to {high:.1%}) |" in (bundle / "summary.md").read_text()
    assert (round(low, 3), round(high, 3)) == (0.15, 0.85)  # 4 victims pin a share only this far


# Convergence -----------------------------------------------------------------------------------

def two_flows_timeline(converge_after_rtts, scheme="expresspass", point="alpha=0.5"):
    """h2 alone at 1000 B per RTT-quarter; h3 joins at 10 RTTs and gets a fifth of the link for
    `converge_after_rtts`, then overshoots (three quarters of it, h2 a quarter) for 3 RTTs, then both
    get half, to 60 RTTs."""
    step = RTT / 4
    link = 1000 / step  # bytes per second
    samples, sent = [], {"h2": 0.0, "h3": 0.0}
    for i in range(0, 60 * 4):
        t = (i + 0.5) * step  # the middle of the quarter: its rates
        if t < 10 * RTT:
            rates = {"h2": link}
        elif t < (10 + converge_after_rtts) * RTT:
            rates = {"h2": 0.8 * link, "h3": 0.2 * link}
        elif t < (13 + converge_after_rtts) * RTT:
            rates = {"h2": 0.25 * link, "h3": 0.75 * link}
        else:
            rates = {"h2": link / 2, "h3": link / 2}
        for src, rate in rates.items():
            sent[src] += rate * step
            samples.append({"scheme": scheme, "point": point, "t": (i + 1) * step, "src": src, "id": 1,
                            "bytes": round(sent[src])})
    flows = [flow(scheme, 60 * RTT, src="h2", point=point), flow(scheme, 50 * RTT, src="h3", point=point,
                                                                  start=10 * RTT)]
    rtts = [{"scheme": scheme, "point": point, "src": "h1", "dst": "h2", "floor_ms": 2.0, "target_ms": RTT * 1e3}]
    # The flows share the payload rate: the link less the credits.
    return tables("convergence", flows, [round_row(scheme, point, flows=2)], rtts=rtts, timeline=samples,
                  rate_mbps=link * 8 / 1e6 / dilation.CREDITED_PAYLOAD_SHARE)


@pytest.mark.parametrize("after, converged", [(3, 5.0), (6, 5.25)])
def test_convergence_is_reached_when_the_joiner_passes_its_share_and_converged_when_ten_rtt_windows_are_fair(
        after, converged):
    seen = convergence_figures.convergence(two_flows_timeline(after), "expresspass", "alpha=0.5")
    assert seen.rtt_s == pytest.approx(RTT)
    # Windows end at every sample (a quarter RTT apart), each read at its middle. Reached, 2-RTT windows: the
    # joiner's (0.2 of the link, then 0.75) is at least 0.4 once 0.727 RTTs of the window are in the overshoot:
    # the window from after - 1.25 on the grid, read at after - 0.25.
    assert seen.reached == [pytest.approx(after - 0.25)]
    # Converged, 10-RTT windows, band 0.4-0.6 of the link: the first one after the join averages a short unfair
    # phase away (after 3: h3 0.485, h2 0.515), after 6 it takes a quarter RTT more (h3 0.4025, h2 0.5975):
    # read at the middle, 5.0 and 5.25; every window after is fair to the end (the 20-RTT hold fits).
    assert seen.converged == [pytest.approx(converged)]
    # The join (10 RTTs) to the last windows' middles (59 and 55), less the hold for converged.
    assert (seen.reached_room, seen.room) == ([pytest.approx(49)], [pytest.approx(55 - 10 - 20)])
    assert readings.convergence_rtts(two_flows_timeline(after), "expresspass", 0.5).low == pytest.approx(after - 0.25)
    assert readings.convergence_rtts(two_flows_timeline(after), "expresspass", 0.5,
                                     until="converged").low == pytest.approx(converged)


def test_a_flow_that_never_reaches_its_share_gives_at_least_the_room_it_had():
    t = two_flows_timeline(100)
    seen = convergence_figures.convergence(t, "expresspass", "alpha=0.5")
    assert (seen.reached, seen.converged) == ([None], [None])
    room = readings.convergence_rtts(t, "expresspass", 0.5)
    assert (room.low, room.high) == (pytest.approx(49), math.inf)
    assert by_id(papers.compare(t))["xp-conv-a12"].verdict == rule.NOT_REPRODUCED  # > 49 RTTs against 3


def test_a_flow_without_throughput_samples_makes_convergence_not_comparable():
    t = two_flows_timeline(3)
    t.timeline = [s for s in t.timeline if s["src"] != "h3"]
    seen = by_id(papers.compare(t))["xp-conv-a12"]
    assert seen.verdict == rule.NOT_COMPARABLE
    assert seen.why == "timeline.csv has no samples of expresspass alpha=0.5's flow h3#1"


# Reports -----------------------------------------------------------------------------------------


def write_bundle(directory, t: Tables):
    directory.mkdir(parents=True)
    for name, fields, rows in (("flows", FLOW_FIELDS, t.flows), ("rounds", ROUND_FIELDS, t.rounds),
                               ("ports", PORT_FIELDS, t.ports)):
        with open(directory / f"{name}.csv", "w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=fields, restval="0")
            writer.writeheader()
            writer.writerows(rows)
    datacenter = {"link_rate_bps": 10e9, "emulated_link_mbps": 10, "base_rtt_max_us": 52.0, "bdp_packets_max_rtt": 42.3,
                  "idle_fabric_rtt_max_us": 3.0, **t.manifest["datacenter"]}
    manifest = {**t.manifest, "started": "now", "git_commit": "abc", "datacenter": datacenter,
                "config": {**t.manifest["config"], "name": "doctored", "seed": 1}}
    manifest["fidelity"] = {"status": "PASS", "reasons": [], **manifest["fidelity"]}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory
