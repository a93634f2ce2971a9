"""The convergence reading (convergence_figures.convergence) and the throughput series it and the plot share
(convergence_figures.flow_rate_series), on synthetic timelines: flows at a receiver sampled as cchost --progress
samples them, in the convergence experiment's datacenter (10 Gbit/s, 52 us base RTT, dilation 1000)."""

import math
import random

import matplotlib
import pytest

from ccemu.model import dilation
from ccemu.kinds import KINDS
from ccemu.kinds import convergence as kind_module
from ccemu.results import convergence_figures, readings, rule
from ccemu.results.figures import Tables

D = 1000  # dilation: 10 Mbit/s links stand for 10 Gbit/s
RTT = 52e-6 * D  # wall seconds
EVERY = 0.010  # wall seconds between a receiver's --progress lines
SHARE_GBPS = 10 * dilation.CREDITED_PAYLOAD_SHARE / 2  # each of two flows' fair share: 4.47 Gbit/s (datacenter)
LINK_GBPS = 10 * dilation.PAYLOAD_BYTES / dilation.DATA_WIRE_BYTES  # the most payload a link delivers: 9.43


def block(rates, joins_rtts, length_rtts, scheme="dctcp", point="", times=None) -> Tables:
    """Tables of one block of flows to h1: flow i from h{i+2} starts `joins_rtts[i]` RTTs after t = 0 and
    runs to `length_rtts`, at `rates[i](x)` datacenter Gbit/s x RTTs after t = 0 (each sample interval at
    its middle's rate). Samples every EVERY (or at `times`, wall seconds) while the flow runs."""
    times = times or [i * EVERY for i in range(1, int(length_rtts * RTT / EVERY) + 1)]
    flows, timeline = [], []
    for i, (rate, join) in enumerate(zip(rates, joins_rtts)):
        src, start, sent, last = f"h{i + 2}", join * RTT, 0.0, join * RTT
        for t in (t for t in times if t > start):
            sent += rate((last + t) / 2 / RTT) * 1e9 / D / 8 * (t - last)
            timeline.append({"scheme": scheme, "point": point, "t": t, "src": src, "id": 1, "bytes": round(sent)})
            last = t
        flows.append({"scheme": scheme, "point": point, "n": 0, "src": src, "dst": "h1", "id": 1,
                      "start": start, "end": length_rtts * RTT})
    rtts = [{"scheme": scheme, "point": point, "src": "h2", "dst": "h1", "floor_ms": 4.0, "target_ms": RTT * 1e3}]
    manifest = {"kind": "convergence", "config": {"link": {"rate_mbps": 10}, "workload": {"kind": "convergence"}},
                "datacenter": {"dilation": D},
                "fidelity": {"blocks": [{"scheme": scheme, "n": 0, "point": point, "status": "PASS"}]}}
    rounds = [{"scheme": scheme, "point": point, "n": 0, "round": 1, "flows": len(flows), "finished": len(flows)}]
    return Tables(manifest, flows, rounds, [], rtts, timeline)


def alone_then(after_join, join=20):
    """Two flows: h2 alone on the link until h3 joins at `join` RTTs, then what `after_join(x)` gives for
    (h2, h3) x RTTs after the join."""
    def first(x):
        return 2 * SHARE_GBPS if x < join else after_join(x - join)[0]

    def second(x):
        return after_join(x - join)[1]
    return [first, second], [0, join]


# The readings -----------------------------------------------------------------------------------

@pytest.mark.parametrize("step", [3, 6])
def test_a_flow_that_jumps_to_its_share_and_stays_is_read_at_the_rtt_it_jumped_and_the_papers_labels_hold(step):
    rates, joins = alone_then(lambda x: (SHARE_GBPS, SHARE_GBPS) if x >= step else (2 * SHARE_GBPS, 0.0))
    t = block(rates, joins, 60, scheme="expresspass", point="alpha=0.5")
    seen = convergence_figures.convergence(t, "expresspass", "alpha=0.5")
    # A window of w RTTs read at its middle is within the band once 80 % of it is past the step: step + 0.3 w,
    # to within a sample interval (0.19 RTT). Reached (2-RTT windows): fine enough for the papers' labels (seed
    # 000 line 16: 3 and 6 RTTs), judged by the one rule; converged (10-RTT windows) 3 RTTs later.
    assert seen.reached[0] == pytest.approx(step + 0.3 * convergence_figures.REACHED_WINDOW_RTTS, abs=EVERY / RTT)
    assert rule.judge(rule.Paper(value=step), rule.Figure.of(seen.reached[0])).verdict == rule.REPRODUCED
    assert seen.converged[0] == pytest.approx(step + 0.3 * convergence_figures.CONVERGENCE_WINDOW_RTTS, abs=EVERY / RTT)


@pytest.mark.parametrize("dip_rtts, converged", [(3, False), (20, False), (30, True)])
def test_flows_that_dip_into_the_band_and_leave_it_are_not_converged_unless_they_stay_the_hold(dip_rtts, converged):
    # Unfair (6.9 and 2 Gbit/s) but for `dip_rtts` at their shares, 5 RTTs after the join. A 10-RTT window is in the
    # band once 64 % of it is in the dip: from 1.4 RTTs after the dip starts to 1.4 before it ends; the hold asks
    # for 20 of those.
    def after_join(x):
        return (SHARE_GBPS, SHARE_GBPS) if 5 <= x < 5 + dip_rtts else (2 * SHARE_GBPS - 2, 2.0)
    rates, joins = alone_then(after_join)
    seen = convergence_figures.convergence(block(rates, joins, 80), "dctcp", "")
    reading = convergence_figures
    assert (reading.CONVERGENCE_WINDOW_RTTS, reading.CONVERGENCE_HOLD_RTTS) == (10, 20)  # the dips around them
    if converged:
        assert seen.converged[0] == pytest.approx(6.4, abs=2 * EVERY / RTT)
    else:
        assert seen.converged == [None]
    # The joiner reached its share as the dip began, whatever its length.
    assert seen.reached[0] == pytest.approx(5 + 0.3 * convergence_figures.REACHED_WINDOW_RTTS, abs=2 * EVERY / RTT)


def test_a_noisy_but_fair_pair_is_converged_though_single_samples_leave_the_band():
    rng = random.Random(7)
    swing = {}  # per sample interval: +s then -s (h2 gets what h3 does not), so every RTT of it is nearly fair

    def noise(x):
        i = int(x * RTT / EVERY)
        if i not in swing:
            s = rng.uniform(-0.35, 0.35)
            swing[i], swing[i + 1] = s, -s
        return swing[i] * SHARE_GBPS

    def after_join(x):
        return (2 * SHARE_GBPS, 0.0) if x < 2 else (SHARE_GBPS - noise(x), SHARE_GBPS + noise(x))
    rates, joins = alone_then(after_join)
    t = block(rates, joins, 60)
    seen = convergence_figures.convergence(t, "dctcp", "")
    assert seen.converged[0] == pytest.approx(2 + 0.3 * convergence_figures.CONVERGENCE_WINDOW_RTTS, abs=1)
    # Noisy indeed: a sample interval's own rate is often outside the band.
    one = convergence_figures.flow_rate_series([(float(s["t"]), s["bytes"]) for s in t.timeline if s["src"] == "h3"],
                                   EVERY / 2, convergence_figures.link_payload_bytes_per_s(t), start=20 * RTT)
    shares = [r.bytes_per_s * 8 * D / 1e9 / SHARE_GBPS for r in one if r.t > 23 * RTT]
    assert sum(abs(s - 1) > convergence_figures.CONVERGENCE_BAND for s in shares) > len(shares) / 4


def test_two_flows_at_6_5_and_2_9_gbits_for_480_rtts_then_meeting_converge_at_about_480_not_at_an_early_crossing():
    # DCTCP on a bundle: the joiner overshoots through the band in its first RTTs (both near their share
    # for 2 RTTs), the two then run at 6.5 and 2.9 Gbit/s, each +-5 % from one sample to the next, and meet
    # 480 RTTs after the join; the join leaves them 600. The reached reading takes the early crossing: the
    # converged one, the meeting (the 10-RTT window in the band once 56 % of it is past: 480.6).
    rng = random.Random(3)

    def after_join(x):
        wobble = 1 + rng.uniform(-0.05, 0.05)
        if x < 3:
            return 2 * SHARE_GBPS, 0.0
        if x < 5:
            return SHARE_GBPS * wobble, SHARE_GBPS / wobble
        if x < 480:
            return 6.5 * wobble, 2.9 / wobble
        return SHARE_GBPS * wobble, SHARE_GBPS / wobble
    rates, joins = alone_then(after_join, join=10)
    seen = convergence_figures.convergence(block(rates, joins, 610), "dctcp", "")
    assert seen.converged[0] == pytest.approx(480.6, abs=0.5)
    assert seen.reached[0] < 5
    reading = readings.convergence_rtts(block(rates, joins, 610), "dctcp", until="converged")
    assert reading.low == pytest.approx(480.6, abs=0.5)


def test_a_joiner_at_its_share_is_not_converged_while_the_flows_already_running_are_not_at_theirs():
    # h2 and h3 share the link 2:1; h4 joins at 40 RTTs and has its third from 2 RTTs on, while h2 keeps
    # half and h3 a sixth until 20 RTTs after the join, when all three even out (their 10-RTT windows in the
    # band once 60 % of them are past: 21 RTTs after the join).
    link = 2 * SHARE_GBPS

    def phases(before, during):
        return lambda x: before if x < 42 else during if x < 60 else link / 3

    rates = [phases(2 * link / 3, link / 2), phases(link / 3, link / 6), phases(0.0, link / 3)]
    seen = convergence_figures.convergence(block(rates, [0, 20, 40], 100), "dctcp", "")
    assert seen.converged[0] is None  # h3's join: 2:1 for its 20 RTTs
    assert seen.converged[1] == pytest.approx(21.0, abs=2 * EVERY / RTT)
    assert seen.reached[1] == pytest.approx(2 + 0.3 * convergence_figures.REACHED_WINDOW_RTTS, abs=2 * EVERY / RTT)


def test_a_flow_that_never_converges_reads_as_not_converged_with_the_room_it_had():
    rates, joins = alone_then(lambda x: (2 * SHARE_GBPS - 1, 1.0))
    t = block(rates, joins, 60)
    seen = convergence_figures.convergence(t, "dctcp", "")
    assert seen.converged == [None] and seen.reached == [None]
    # Its last window ends with the flows, 40 RTTs after the join, and is read at its middle, half a window
    # earlier (a window is whole sample intervals: to within two of them); a converged reading needs the hold
    # after it.
    room = 40 - convergence_figures.CONVERGENCE_WINDOW_RTTS / 2 - convergence_figures.CONVERGENCE_HOLD_RTTS
    assert seen.room[0] == pytest.approx(room, abs=2 * EVERY / RTT)
    assert seen.reached_room[0] == pytest.approx(40 - convergence_figures.REACHED_WINDOW_RTTS / 2, abs=2 * EVERY / RTT)
    assert readings.convergence_rtts(t, "dctcp", until="converged") == rule.Figure.at_least(seen.room[0])
    assert readings.convergence_rtts(t, "dctcp") == rule.Figure.at_least(seen.reached_room[0])
    lines = KINDS["convergence"].summary_lines(t)
    assert f"| dctcp | - | 52.0 | > {seen.reached_room[0]:.0f} | - | > {seen.room[0]:.0f} | - |" in lines


# The rate series -------------------------------------------------------------------------------

def late_and_bunched():
    """A flow at the link's payload rate (wall bytes/s), counted by a receiver that stalls: its --progress
    lines every 10 ms, but from 30 ms on it counts nothing (a late loop; the bytes wait in the socket and
    the delay line): its 40 and 50 ms lines keep the count of 30 ms, its 60 ms line comes late, at 75 ms,
    still with it, and at 76 ms it has caught up (a second line a millisecond later: the burst); a shorter
    stall the same way at 150-161 ms. (Returns the rate and the (t, bytes) samples.)"""
    rate = convergence_figures.link_payload_bytes_per_s(block([lambda x: 0.0], [0], 1))
    counted = {0.010: 0.010, 0.020: 0.020, 0.030: 0.030, 0.040: 0.030, 0.050: 0.030, 0.075: 0.030, 0.076: 0.076,
               0.090: 0.090, 0.100: 0.100, 0.110: 0.110, 0.120: 0.120, 0.130: 0.130, 0.140: 0.140, 0.150: 0.150,
               0.160: 0.150, 0.161: 0.161, 0.170: 0.170, 0.180: 0.180, 0.190: 0.190, 0.200: 0.200}
    return rate, [(t, round(rate * arrived)) for t, arrived in counted.items()]


@pytest.mark.parametrize("window_s", [0.001, EVERY, RTT])
def test_no_throughput_sample_exceeds_what_the_link_delivers_when_samples_come_late_and_bunched(window_s):
    rate, samples = late_and_bunched()
    series = convergence_figures.flow_rate_series(samples, window_s, rate, start=0.0)
    assert series and max(r.bytes_per_s for r in series) <= rate * (1 + 1e-9)
    # Each window is over two real samples, at least the window apart (or the next one after).
    times = {t for t, _ in samples} | {0.0}
    assert all(r.t0 in times and r.t1 in times and r.t1 - r.t0 >= min(window_s, 0.001) - 1e-12 for r in series)
    # The bytes are kept: back to back, the windows of one interval carry them all, the burst's moved into
    # the stall before it.
    if window_s == 0.001:
        assert sum(r.bytes_per_s * (r.t1 - r.t0) for r in series) == pytest.approx(samples[-1][1], abs=1)
        stalled = [r for r in series if 0.030 <= r.t0 and r.t1 <= 0.076]
        assert all(r.bytes_per_s == pytest.approx(rate) for r in stalled)


def test_a_gap_in_the_samples_is_a_gap_in_the_series_not_a_line_to_zero():
    rate = convergence_figures.link_payload_bytes_per_s(block([lambda x: 0.0], [0], 1))
    # Samples every 10 ms, but none from 100 to 200 ms (ten intervals): the flow's rate there is not known.
    samples = [(i * EVERY, round(rate / 2 * i * EVERY)) for i in range(1, 31) if not 10 < i < 20]
    series = convergence_figures.flow_rate_series(samples, EVERY, rate, start=0.0)
    over_gap = [r for r in series if r.t0 < 0.15 < r.t1]
    assert len(over_gap) == 1 and math.isnan(over_gap[0].bytes_per_s)
    assert all(r.bytes_per_s == pytest.approx(rate / 2, rel=1e-3) for r in series if r not in over_gap)


def test_the_throughput_plot_draws_the_readings_series_with_gaps_and_never_above_the_link(tmp_path, monkeypatch):
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # h2 at its share with a stall (no samples for 40 ms of wall time) after the join; h3 at its share.
    rates, joins = alone_then(lambda x: (SHARE_GBPS, SHARE_GBPS))
    every = [i * EVERY for i in range(1, int(60 * RTT / EVERY) + 1)]
    t = block(rates, joins, 60, times=every)
    stall = (30 * RTT, 30 * RTT + 0.040)
    t.timeline = [s for s in t.timeline if not (s["src"] == "h2" and stall[0] < s["t"] < stall[1])]
    drawn = []
    monkeypatch.setattr(kind_module.plotting, "save", lambda fig, path: drawn.append(fig) or path)
    kind_module._plot_convergence(t, tmp_path, plt, "")
    # Each flow's line is labelled "h2#1, joined at ... ms"; the fair share is drawn beside them.
    lines = {line.get_label().split(",")[0]: line for line in drawn[0].axes[0].get_lines()}
    assert set(lines) == {"h2#1", "h3#1", "fair share"}
    window_s = convergence_figures.PLOT_WINDOW_RTTS * RTT
    for name, series in convergence_figures.flow_rates(t, "dctcp", "", window_s).items():
        ys = list(lines[name].get_ydata())
        assert ys == pytest.approx([r.bytes_per_s * 8 * D / 1e9 for r in series], nan_ok=True)
        assert max(y for y in ys if not math.isnan(y)) <= LINK_GBPS * (1 + 1e-9)
        assert min(y for y in ys if not math.isnan(y)) > 0  # no line down to 0: h3 starts at its join
    assert any(math.isnan(y) for y in lines["h2#1"].get_ydata())  # the stall: the line breaks
    assert not any(math.isnan(y) for y in lines["h3#1"].get_ydata())
