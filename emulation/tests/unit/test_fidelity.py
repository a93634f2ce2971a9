import json
import pytest

from types import SimpleNamespace

from ccemu.results.fidelity import (FAIL, PASS, WARN, CpuTimes, Observation, SwitchFigures, below_ideal, judge,
                                    worst_port_lag)
from ccemu.ports.stats import Residence
from ccemu.ports.histograms import RESIDENCE_BUCKETS, residence_bucket_bounds

FRAME = 1538
FRAME_NS = 1_230_400  # one 1538-byte frame at 10 Mbit/s


def residence_at(ns: float, packets: int, untracked: int = 0) -> Residence:
    """`packets` residences of about `ns` each, in their histogram bucket."""
    bucket = next(b for b in range(RESIDENCE_BUCKETS) if ns < residence_bucket_bounds(b)[1])
    histogram = [0] * RESIDENCE_BUCKETS
    histogram[bucket] = packets
    return Residence(packets=packets, sum_ns=int(ns * packets), max_ns=int(ns), untracked_packets=untracked,
                     histogram=tuple(histogram))


def switches(residence: Residence, arrived: int = 10_000, lost: int = 0, **others: Residence) -> SwitchFigures:
    """Switch e1 with `residence`, and `others` by name."""
    return SwitchFigures({"e1": residence, **others}, FRAME_NS, arrived, lost)


def test_a_run_that_kept_up_passes_with_its_figures_recorded():
    verdict = judge(Observation(steal=0.02, busy=0.6, frame_bytes=FRAME, bottleneck_lag_bytes=1000,
                                credit_lag_bytes=84, switches=switches(residence_at(0.2 * FRAME_NS, 1000)),
                                lateness_us=50, credit_gap_us=1300))
    assert (verdict.status, verdict.reasons) == (PASS, [])
    assert verdict.figures["bottleneck_lag_frames"] == round(1000 / FRAME, 4)
    assert verdict.figures["credit_lag_credits"] == 1.0
    assert 0.15 < verdict.figures["switch_residence_p99_frames"] < 0.25
    assert verdict.figures["worst_switch_residence_p99_frames"] == verdict.figures["switch_residence_p99_frames"]


def test_the_worst_finding_decides_and_every_finding_is_a_reason():
    verdict = judge(Observation(steal=0.2, busy=0.99, frame_bytes=FRAME, bottleneck_lag_bytes=7000,
                                lateness_us=2000, credit_gap_us=1300))
    assert verdict.status == FAIL
    assert [r.split(":")[0] for r in verdict.reasons] == [WARN, WARN, FAIL, FAIL]
    assert "links drained slower than configured" in verdict.reasons[2]


def port(name: str, enqueued: int, mean_lag_frames: float, pauses: int = 0):
    """A port's figures as far as the lag is concerned."""
    return SimpleNamespace(node="sw0", port=name, pfc=SimpleNamespace(pause_events=pauses),
                           data=SimpleNamespace(enqueued_packets=enqueued, mean_lag_bytes=mean_lag_frames * FRAME))


def test_the_port_that_lagged_most_is_judged_among_those_that_carried_a_thousand_packets():
    quiet = [port(f"e{i}-eth1", 50_000, 0.5) for i in range(1, 20)]
    assert worst_port_lag([*quiet, port("c1-eth4", 1000, 17.7), port("a1-eth1", 999, 40)]) == (17.7 * FRAME,
                                                                                                  "sw0/c1-eth4")
    assert worst_port_lag([port("a1-eth1", 999, 40)]) is None
    # PFC paused it: its ideal twin drained through the pauses (the victim experiment's: 54-72 frames).
    assert worst_port_lag([*quiet, port("s1-eth9", 50_000, 53.9, pauses=12)]) == (0.5 * FRAME, "sw0/e1-eth1")
    for frames, status in ((1.5, PASS), (3, WARN), (17.7, FAIL)):
        verdict = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME, bottleneck_lag_bytes=0.5 * FRAME,
                                    worst_port_lag=(frames * FRAME, "sw0/c1-eth4")))
        assert verdict.status == status, frames
    assert "port sw0/c1-eth4's queue was" in verdict.reasons[0]
    assert "drained slower than configured" in verdict.reasons[0]
    assert verdict.figures["worst_port_lag_frames"] == 17.7


def test_packets_held_inside_the_switches_warn_from_two_frame_times_and_fail_from_eight():
    for frames, status in ((1.5, PASS), (3, WARN), (10, FAIL)):
        verdict = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME,
                                    switches=switches(residence_at(frames * FRAME_NS, 1000))))
        assert verdict.status == status, frames
    assert "waited inside the switches" in verdict.reasons[0]


def test_one_switch_that_holds_packets_is_judged_on_its_own_p99_not_drowned_by_quiet_ones():
    quiet = {f"e{i}": residence_at(0.1 * FRAME_NS, 20_000) for i in range(2, 12)}
    held = residence_at(10 * FRAME_NS, 1000)
    verdict = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME, switches=switches(held, **quiet)))
    assert verdict.figures["switch_residence_p99_frames"] < 2  # the fabric's pooled p99 looks fine
    assert verdict.status == FAIL and "inside switch e1 " in verdict.reasons[0]
    # A switch with a handful of packets has no p99 of its own: they count in the fabric's.
    verdict = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME,
                                switches=switches(residence_at(10 * FRAME_NS, 5), **quiet)))
    assert verdict.status == PASS


def test_packets_the_switch_map_lost_track_of_count_as_the_longest_residences():
    """Untracked packets were evicted from the arrival map while they waited: the oldest."""
    fine = residence_at(0.1 * FRAME_NS, 1000)
    assert fine.quantile_ns(0.99) < 0.2 * FRAME_NS
    evicted = Residence(**{**fine.__dict__, "untracked_packets": 50, "max_ns": 5 * FRAME_NS})
    assert evicted.quantile_ns(0.99) == 5 * FRAME_NS


def test_residence_quantiles_interpolate_inside_their_bucket():
    low, high = residence_bucket_bounds(41)
    histogram = [0] * RESIDENCE_BUCKETS
    histogram[41] = 100
    residence = Residence(packets=100, sum_ns=0, max_ns=int(high), histogram=tuple(histogram))
    assert residence.quantile_ns(0.5) == pytest.approx((low + high) / 2)
    assert residence_bucket_bounds(1) == (1024.0, 1280.0) and residence_bucket_bounds(4)[1] == 2048.0


def test_packets_lost_inside_the_switches_are_a_finding():
    verdict = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME,
                                switches=switches(residence_at(1000, 100), arrived=10_000, lost=200)))
    assert verdict.status == FAIL and "lost inside the switches" in verdict.reasons[0]


def test_queues_left_over_and_failed_hosts_are_warnings_that_name_them():
    failure = "round 1: h5's cchost (sender) killed by SIGKILL: its flows never finished"
    verdict = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME, residues=["ovs0/s1-eth1 data 1538 B"],
                                host_failures=[failure]))
    assert verdict.status == WARN
    assert "ovs0/s1-eth1 data 1538 B" in verdict.reasons[0]
    assert verdict.reasons[1] == f"WARN: {failure}"


def test_window_schemes_are_not_judged_on_credit_pacing_or_credit_lag():
    verdict = judge(Observation(steal=0.0, busy=0.5, frame_bytes=FRAME))
    assert "pacing_lateness_of_gap" not in verdict.figures and "credit_lag_credits" not in verdict.figures


def test_cpu_shares_come_from_proc_stat_differences(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 ...\n")
    before = CpuTimes.now(stat)
    stat.write_text("cpu  150 0 150 800 100 0 0 100 0 0\n")
    steal, busy = CpuTimes.now(stat).since(before)
    assert (steal, busy) == (100 / 300, 100 / 300)


def test_credit_pacing_is_judged_on_the_pacer_latest_on_average_and_hosts_without_counters_are_skipped(tmp_path):
    import json
    from ccemu.results.fidelity import pacing_lateness_us
    for host, late in (("h1", 40.0), ("h2", 120.0)):
        (tmp_path / f"{host}.counters").write_text(json.dumps({"timer_lateness": {"mean_us": late, "count": 3}}))
    pacers = [tmp_path / "h1.counters", tmp_path / "h2.counters", tmp_path / "h3.counters"]
    assert pacing_lateness_us(pacers) == (120.0, None)  # no p99: written by a cchost from before it
    assert pacing_lateness_us([tmp_path / "h3.counters"]) == (None, None)


def test_the_worst_pacers_p99_is_judged_beside_the_mean_and_counters_from_before_it_are_skipped(tmp_path):
    import json
    from ccemu.results.fidelity import pacing_lateness_us
    (tmp_path / "h1.counters").write_text(json.dumps({"timer_lateness": {"mean_us": 5.0, "p99_us": 60.0}}))
    (tmp_path / "h2.counters").write_text(json.dumps({"timer_lateness": {"mean_us": 9.0}}))  # an older cchost's
    pacers = [tmp_path / "h1.counters", tmp_path / "h2.counters"]
    assert pacing_lateness_us(pacers) == (9.0, 60.0)
    seen = Observation.of_block((0.0, 0.5), FRAME, [], 1000.0, None, lateness_us=9.0, credit_gap_us=130.0,
                                lateness_p99_us=130.0)
    verdict = judge(seen)
    assert verdict.figures["pacing_p99_of_gap"] == 1.0 and verdict.status == PASS  # and the mean: 9 / 130
    assert "pacing_p99_of_gap" not in judge(Observation.of_block((0.0, 0.5), FRAME, [], 1000.0, None,
                                                                 lateness_p99_us=130.0)).figures


@pytest.mark.parametrize("p99_gaps, status", [(1.9, PASS), (2.0, WARN), (3.9, WARN), (4.0, FAIL), (7.6, FAIL)])
def test_a_pacer_late_by_more_gaps_than_it_catches_up_on_fails_the_block_at_the_99th_percentile(p99_gaps, status):
    # cchost sends at most 4 owed credits at once (CATCH_UP_CREDITS): later, credits are lost.
    seen = Observation.of_block((0.0, 0.5), FRAME, [], 1000.0, None, lateness_us=9.0, credit_gap_us=100.0,
                                lateness_p99_us=p99_gaps * 100.0)
    verdict = judge(seen)
    assert verdict.status == status
    assert (status == PASS) == (not any("1 % of cchost's timers" in r for r in verdict.reasons))


def test_a_tunnel_whose_delay_varies_by_frames_is_judged_as_a_switch_residence_would_be():
    from ccemu.fabric.tunnels import spread_us

    quiet = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME, tunnel_spread=(0.02, "m1 -> m2")))
    assert quiet.status == PASS and quiet.figures["tunnel_spread_p99_frames"] == 0.02
    loud = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME, tunnel_spread=(3.0, "m2 -> m1")))
    assert loud.status == WARN
    assert loud.reasons == ["WARN: the tunnels between machines (m2 -> m1, the worst) varied their one-way delay by "
                            "3.0 frame times (p99 over their least): cut links were slower than wires"]
    assert judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME, tunnel_spread=(9.0, "m1 -> m2"))).status == FAIL
    # The p99 of 100 round trips is the 99th (nearest rank), of 40 the greatest; no round trip, no figure.
    assert spread_us([100.0] * 98 + [300.0, 900.0]) == 100.0 and spread_us([100.0] * 39 + [900.0]) == 400.0
    assert spread_us([]) is None


def test_a_flow_that_finished_faster_than_its_own_ideal_fct_warns_with_the_least_ratio():
    flows = [{"fct": "0.0105", "ideal_fct": "0.01"}, {"fct": "0.004", "ideal_fct": "0.004"},
             {"fct": "0.5", "ideal_fct": ""}]  # a flow without an ideal is not judged
    assert below_ideal(flows) == (0, 2, 1.0)
    verdict = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME, below_ideal=below_ideal(flows)))
    assert (verdict.status, verdict.figures["least_fct_of_ideal"]) == (PASS, 1.0)
    fast = below_ideal([*flows, {"fct": "0.00655", "ideal_fct": "0.01"}])
    verdict = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME, below_ideal=fast))
    assert verdict.status == WARN and "1 of 3 flows finished faster than their own ideal FCT" in verdict.reasons[0]
    assert "0.655" in verdict.reasons[0]
    assert below_ideal([]) is None


def test_a_host_that_started_a_flow_a_base_rtt_after_its_schedule_warns_naming_it(tmp_path):
    from ccemu.results.records import counters_under
    from ccemu.results.fidelity import start_lateness_us

    for host, late_us in ((2, 40.0), (17, 900.0)):
        (tmp_path / f"h{host}.counters").write_text(json.dumps({"host": host, "start_lateness": {"count": 3,
                                                                                                 "max_us": late_us}}))
    (tmp_path / "h3.counters").write_text(json.dumps({"host": 3, "timer_lateness": {}}))  # from before: skipped
    (tmp_path / "h4.counters").write_text(json.dumps({"host": 4, "start_lateness": {"count": 0, "max_us": 0.0}}))
    late = start_lateness_us(counters_under(tmp_path))
    assert late == (900.0, "h17")
    on_time = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME, base_rtt_us=1000.0, start_late=late))
    assert on_time.status == PASS and on_time.figures["start_lateness_of_base_rtt"] == 0.9
    behind = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME, base_rtt_us=800.0, start_late=late))
    assert behind.status == WARN
    assert behind.reasons == ["WARN: h17 started a flow 900 us after its scheduled time (the latest of any host), base "
                              "RTT 800 us: flows meant to start together did not (the controller or the host fell "
                              "behind)"]
    assert start_lateness_us([("h3", {"host": 3, "timer_lateness": {}})]) is None


@pytest.mark.parametrize("error_us, status", [(50.0, PASS), (100.0, WARN), (1000.0, FAIL)])
def test_clocks_apart_by_a_tenth_of_the_base_rtt_warn_and_by_a_whole_one_fail(error_us, status):
    verdict = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME, base_rtt_us=1000.0,
                                clock_error=(error_us, "m2")))
    assert verdict.status == status and verdict.figures["clock_error_of_base_rtt"] == error_us / 1000
    assert status == PASS or "machine m2's clock may be" in verdict.reasons[0]


def test_frames_the_network_between_machines_lost_fail_the_block_naming_the_cut_link():
    lost = "the network between the machines lost 12 of the 4000 frames of cut link a1-eth3 -> c1-eth1"
    verdict = judge(Observation(steal=0, busy=0.5, frame_bytes=FRAME, tunnel_losses=[lost]))
    assert verdict.status == FAIL and verdict.reasons == [f"FAIL: {lost}"]
