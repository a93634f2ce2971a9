"""`ccemu bench transport`: what cchost's CPU went to, from known `perf script` stacks (bench/profile.py
TransportBreakdown), its system calls from `perf stat`, and its report."""

import pytest

from ccemu.bench import profile, transport

# perf script -F comm,pid,ip,sym,dso of a `perf record -g`: a header per sample, its frames leaf first.
STACKS = """\
cchost 101
\tffffffff8226dbf9 _raw_spin_unlock_irqrestore ([kernel.kallsyms])
\tffffffff8123 try_to_wake_up ([kernel.kallsyms])
\tffffffff8124 sock_def_readable ([kernel.kallsyms])
\tffffffff8125 __sys_sendmmsg ([kernel.kallsyms])
\t          d4ad7 __sendmmsg (/usr/lib/x86_64-linux-gnu/libc.so.6)

cchost 101
\tffffffff8226dbf9 _raw_spin_unlock_irqrestore ([kernel.kallsyms])
\tffffffff8126 schedule_hrtimeout_range_clock ([kernel.kallsyms])
\tffffffff8127 do_epoll_wait ([kernel.kallsyms])

cchost 101
\tffffffff8128 fib_table_lookup ([kernel.kallsyms])
\tffffffff8125 __sys_sendmmsg ([kernel.kallsyms])

cchost 102
\tffffffff8129 udp_recvmsg ([kernel.kallsyms])
\tffffffff812a do_recvmmsg ([kernel.kallsyms])

cchost 102
\t          5a1b cchost::endpoint::Endpoint::handle_packet (/work/build/cchost)

cchost 102
\t          5a1c __memset_avx512_unaligned_erms (/usr/lib/x86_64-linux-gnu/libc.so.6)

swapper 0
\tffffffff821f4dab pv_native_safe_halt ([kernel.kallsyms])

iperf3 7
\tffffffff8128 fib_table_lookup ([kernel.kallsyms])
\tffffffff8125 __sys_sendmmsg ([kernel.kallsyms])
""".splitlines()


def test_a_cchost_sample_is_counted_by_what_its_stack_was_doing_and_other_processes_only_in_the_total():
    seen = profile.TransportBreakdown.of_script(STACKS, "cchost", "cpu-clock").to_json()
    assert seen["samples"] == 8 and seen["process_samples"] == 6 and seen["process_share"] == pytest.approx(0.75)
    shares = seen["activities"]
    # A wake-up inside a send is the wake-up; a timer inside epoll is the sleep, not epoll.
    assert shares["waking the receiving process"] == pytest.approx(1 / 6, abs=1e-4)
    assert shares["timed sleep (timer armed, halt, wake)"] == pytest.approx(1 / 6, abs=1e-4)
    assert shares["sending (sendmmsg: UDP, IP, veth)"] == pytest.approx(1 / 6, abs=1e-4)
    assert shares["receiving (recvmmsg: UDP)"] == pytest.approx(1 / 6, abs=1e-4)
    assert shares[profile.OWN_CODE] == pytest.approx(1 / 6, abs=1e-4)
    assert shares[profile.LIBC] == pytest.approx(1 / 6, abs=1e-4)
    assert sum(shares.values()) == pytest.approx(1, abs=1e-3)
    table = profile.transport_table(seen | {"syscalls_per_packet": 0.5}, "cchost expresspass")
    assert "| waking the receiving process | 16.7% |" in table and "0.50 system calls per packet" in table


def test_system_calls_are_read_from_perf_stat_and_a_file_without_them_is_an_error(tmp_path):
    stat = tmp_path / "h1.stat"
    stat.write_text("# started on Fri Nov 27\n\n1234567,,raw_syscalls:sys_enter,2000,100.00,,\n")
    assert transport._syscalls(stat) == 1234567
    stat.write_text("# started on Fri Nov 27\n<not counted>,,cycles,0,100.00,,\n")
    with pytest.raises(profile.ProfileError, match="no system calls"):
        transport._syscalls(stat)


def test_the_report_has_a_row_per_goodput_run_and_per_cpu_case_with_its_profile():
    late = {"p50_us": 2, "p99_us": 60, "mean_us": 6.5, "max_us": 900}
    result = {"goodput": [{"rate_mbps": 100, "run": 1, "spin_us": 60, "expresspass": 0.995, "dctcp": 1.0,
                           "iperf3": 0.999, "lateness": late, "p99_of_gap": 60 / transport.credit_gap_us(100)}],
              "idle": [{"hosts": 256, "spin_us": 60, "seconds": 10.0, "cpu_share_of_machine": 0.037, "cpus": 2}],
              "cpu": [{"program": "cchost dctcp", "spin_us": 60, "cpu_s_per_gb": 3.2, "mbps": 4600,
                       "cpu_us_per_packet": 2.24, "sleeps_per_packet": 0.4},
                      {"program": "iperf3 TCP", "spin_us": None, "cpu_s_per_gb": 0.6, "mbps": 18000}],
              "profiles": {"dctcp spin 60": profile.TransportBreakdown.of_script(STACKS, "cchost", "cpu-clock")
                           .to_json()}}
    text = transport.markdown(result)
    assert "| 100 | 1 | 60 | 0.995 | 1.000 | 0.999 | 2 / 60 / 6 / 900 | 46% |" in text
    assert "| cchost dctcp | 60 | 3.20 | 4600 | 2.2 | 0.40 |" in text
    assert "| iperf3 TCP | | 0.60 | 18000 | | |" in text  # an empty cell is "| |", as in every table
    assert "### cchost dctcp spin 60: what its CPU went to" in text
    assert "| 256 | 60 | 3.7% of 2 | 289 |" in text


def test_a_credit_gap_at_100_mbit_s_is_about_130_us():
    assert transport.credit_gap_us(100) == pytest.approx(129.8, abs=0.1)


def test_a_cpu_row_gives_the_cost_per_packet_beside_the_cost_per_gigabyte():
    moved = {"record": {"size": 500_000_000, "fct": 4.0}, "cpu_s": 1.5, "packets": 690_000, "sleeps": 690}
    row = {"program": "cchost dctcp", "spin_us": 0, **transport._per_gigabyte(moved)}
    assert row["cpu_s_per_gb"] == pytest.approx(3.0) and row["cpu_us_per_packet"] == pytest.approx(2.17, abs=0.01)
    assert "3.00 CPU s/GB at 1000 Mbit/s, 2.2 CPU us and 0.00 sleeps per packet" in transport.cpu_line(row)
