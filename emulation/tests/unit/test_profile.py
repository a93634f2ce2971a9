"""Where the forwarding CPU goes (bench/profile.py), from known `perf script` lines."""

import pytest

from ccemu.bench import capacity, profile

# perf script -F pid,tid,comm,ip,sym,dso, as it prints them (threads of ovs-vswitchd 31163 have other names).
LINES = """\
         swapper     0/0      ffffffff821f4dab pv_native_safe_halt ([kernel.kallsyms])
    ovs-vswitchd 31163/31163      7f00b3faf9d7 malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)
    ovs-vswitchd 31163/31163      7f00b3fad682 _int_free (/usr/lib/x86_64-linux-gnu/libc.so.6)
    ovs-vswitchd 31163/31163      7f00b3faff11 cfree@GLIBC_2.2.5 (/usr/lib/x86_64-linux-gnu/libc.so.6)
    ovs-vswitchd 31163/31163      7f00b3fa33bc pthread_mutex_lock@@GLIBC_2.2.5 (/usr/lib/x86_64-linux-gnu/libc.so.6)
    ovs-vswitchd 31163/31163  ffffffff81e4d0f6 __skb_recv_datagram ([kernel.kallsyms])
    ovs-vswitchd 31163/31163  ffffffff81e4d0f6 __skb_recv_datagram ([kernel.kallsyms])
    ovs-vswitchd 31163/31163  ffffffffc0012345 bpf_prog_6deef7357e7b4530_port_egress ([kernel.kallsyms])
    ovs-vswitchd 31163/31163      560ffbef04c0 [unknown] (/usr/lib/openvswitch-switch/ovs-vswitchd)
        handler1 31163/31170      7f4ca52cf9d7 je_malloc_default (/usr/lib/x86_64-linux-gnu/libjemalloc.so.2)
          iperf3 31458/31458  ffffffff81e4d0f6 tcp_v4_rcv ([kernel.kallsyms])
    ovs-vswitchd 40000/40000  ffffffff81e4d0f6 __skb_recv_datagram ([kernel.kallsyms])
a line perf prints that is not a sample
""".splitlines()


def test_samples_are_counted_by_process_and_by_the_kind_of_code_that_ran():
    seen = profile.Breakdown.of_script(LINES, ovs_pids={31163})
    assert seen.samples == 12
    assert seen.share(profile.OVS) == pytest.approx(9 / 12)  # handler1 is a thread of ovs-vswitchd
    kinds = seen.kinds(profile.OVS)
    assert kinds["allocator"] == pytest.approx(4 / 9)  # malloc, _int_free, cfree, jemalloc
    assert kinds["libc"] == pytest.approx(1 / 9)  # pthread_mutex_lock is libc, not the allocator
    assert kinds["kernel"] == pytest.approx(2 / 9)
    assert kinds["port programs"] == pytest.approx(1 / 9) and kinds["ovs"] == pytest.approx(1 / 9)
    # Another ovs-vswitchd (not one of this run's) is a process like any other; idle is pid 0.
    assert seen.busiest() == [profile.OVS, "iperf3", "ovs-vswitchd", profile.IDLE]
    assert seen.busiest(least=0.1) == [profile.OVS, profile.IDLE]  # iperf3 and the other: 1/12 each
    rows = seen.to_json()["processes"]
    assert list(rows) == [profile.OVS, "iperf3", "ovs-vswitchd", profile.IDLE]
    # A process below MIN_SHARE (0.5 %) of the samples is counted with the others like it, not dropped.
    kworker = "     kworker/0:1 77/77  ffffffff81e4d0f6 process_one_work ([kernel.kallsyms])"
    rows = profile.Breakdown.of_script(LINES * 20 + [kworker], ovs_pids={31163}).to_json()["processes"]
    assert list(rows) == [profile.OVS, "iperf3", "ovs-vswitchd", profile.IDLE, profile.REST]
    assert rows[profile.REST] == {"share": pytest.approx(1 / 241, abs=1e-4),
                                  "kinds": {k: (1.0 if k == "kernel" else 0.0) for k in profile.KINDS}}
    assert seen.share(profile.IDLE) == pytest.approx(1 / 12)
    assert seen.ovs_symbols.most_common(1) == [("__skb_recv_datagram ([kernel.kallsyms])", 2)]


def test_a_profiled_run_writes_its_breakdown_and_cpu_per_packet_hop_into_the_capacity_report(tmp_path):
    breakdown = profile.Breakdown.of_script(LINES, ovs_pids={31163}, event="cpu-clock")
    run = {"variant": "2", "rate_mbps": 15, "ratios": [0.93, 0.99], "aggregate_mbps": 106.0, "placement": "2 here",
           "ovs_cpu": 1.14, "steal": 0.0, "idle_rtt_ms": 3.0, "residence_p50_frames": 0.5, "residence_p99_frames": 7.0,
           "worst_switch_p99_frames": 7.5, "switch_lost_packets": 0, "cpu_us_per_packet_hop": 17.0,
           "packet_hops": 600_000, "profile": breakdown.to_json()}
    report = (capacity.write(tmp_path, [run], ["2"], 10) / "capacity.md").read_text()
    assert "12 samples (cpu-clock) at 999 Hz on every CPU; OVS daemons: **17.0 us of CPU per packet per switch " \
           "hop** (600000 packet-hops). No hardware PMU: time spent with interrupts off" in report
    assert "| ovs-vswitchd (the fabric's) | 75.0% | 22% | 44% | 11% | 11% | 11% | 0% |" in report
    assert "ovs-vswitchd's top symbols: __skb_recv_datagram ([kernel.kallsyms]) 22.2%" in report
    assert capacity.detail_line(run).split()[14] == "17.0"  # the us/hop column


def test_profile_refuses_in_one_line_where_perf_is_missing(monkeypatch):
    monkeypatch.setattr(profile.shutil, "which", lambda name: None)
    with pytest.raises(profile.ProfileError, match=r"^perf is not installed \(Debian: apt-get install linux-perf\)"):
        profile.perf_binary()


def test_an_allocator_is_preloaded_by_its_library_and_a_missing_one_names_its_package(tmp_path, monkeypatch):
    from ccemu.fabric import allocators
    monkeypatch.setattr(allocators, "LIBRARY_DIRS", (str(tmp_path),))
    assert allocators.allocator_library("glibc") is None
    with pytest.raises(allocators.AllocatorMissing, match=r"^fabric.ovs_allocator jemalloc: libjemalloc.so.2 is not "
                                                          r"installed \(Debian package libjemalloc2; "):
        allocators.allocator_library("jemalloc")
    (tmp_path / "libjemalloc.so.2").write_bytes(b"")
    assert allocators.allocator_library("jemalloc") == "libjemalloc.so.2"
    with pytest.raises(allocators.AllocatorMissing, match="no allocator 'hoard'"):
        allocators.allocator_library("hoard")


def test_the_bench_runs_each_allocator_asked_for_as_a_variant_of_its_own():
    import argparse
    parser = argparse.ArgumentParser()
    capacity.add_arguments(parser)
    args = parser.parse_args(["--instances", "2", "--pinned", "no", "--ovs-allocator", "glibc", "jemalloc",
                              "--datapath", "ovs"])
    assert [str(v) for v in capacity.variants_of(args)] == ["2 glibc", "2"]  # jemalloc: the default, unnamed


def test_perf_samples_on_cycles_where_the_cpu_has_a_pmu_and_on_the_clock_where_it_has_none(tmp_path):
    (tmp_path / "software").mkdir()
    assert profile.sampling_event(tmp_path) == "cpu-clock"
    (tmp_path / "cpu").mkdir()
    assert profile.sampling_event(tmp_path) == "cycles"


def test_a_profiled_bpf_run_reports_every_cpus_time_per_packet_hop_and_no_ovs_daemon(tmp_path):
    breakdown = profile.Breakdown.of_script(LINES, ovs_pids=set(), event="cycles")
    run = {"variant": "bpf", "rate_mbps": 50, "ratios": [0.99, 1.0], "aggregate_mbps": 376.0,
           "placement": "kernel (bpf)", "ovs_cpu": 0.0, "steal": 0.0, "idle_rtt_ms": 0.13, "residence_p50_frames": 0.0,
           "residence_p99_frames": 0.06, "worst_switch_p99_frames": 0.06, "switch_lost_packets": 0,
           "cpu_us_per_packet_hop": None, "machine_cpu_us_per_packet_hop": 6.6, "packet_hops": 900_000,
           "profile": breakdown.to_json()}
    report = (capacity.write(tmp_path, [run], ["bpf"], 10) / "capacity.md").read_text()
    assert "on every CPU; no OVS daemon (the bpf datapath); every CPU: **6.6 us per packet per switch hop** " \
           "(900000 packet-hops)." in report
    assert "top symbols" not in report
    assert capacity.detail_line(run).split()[14:16] == ["-", "6.6"]  # us/hop (OVS's), all us/hop
