from ccemu.fidelity import FAIL, PASS, WARN, CpuTimes, judge


def test_a_run_that_kept_up_passes_with_its_figures_recorded():
    verdict = judge(steal=0.02, busy=0.6, lag_bytes=1000, frame_bytes=1538, lateness_us=50, credit_gap_us=1300)
    assert (verdict.status, verdict.reasons) == (PASS, [])
    assert verdict.figures["bottleneck_lag_frames"] == round(1000 / 1538, 4)


def test_the_worst_finding_decides_and_every_finding_is_a_reason():
    verdict = judge(steal=0.2, busy=0.99, lag_bytes=7000, frame_bytes=1538, lateness_us=2000, credit_gap_us=1300)
    assert verdict.status == FAIL
    assert [r.split(":")[0] for r in verdict.reasons] == [WARN, WARN, FAIL, FAIL]
    assert "links drained slower than configured" in verdict.reasons[2]


def test_window_schemes_are_not_judged_on_credit_pacing():
    verdict = judge(steal=0.0, busy=0.5, lag_bytes=0, frame_bytes=1538, lateness_us=None, credit_gap_us=None)
    assert "pacing_lateness_of_gap" not in verdict.figures


def test_cpu_shares_come_from_proc_stat_differences(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 ...\n")
    before = CpuTimes.now(stat)
    stat.write_text("cpu  150 0 150 800 100 0 0 100 0 0\n")
    steal, busy = CpuTimes.now(stat).since(before)
    assert (steal, busy) == (100 / 300, 100 / 300)
