"""benchmarks/datapaths.py's comparison of the two datapaths (pure): when their runs agree within
the run-to-run spread of one datapath, and the table it prints from the bundles' own figures."""

import importlib.util
import sys
from pathlib import Path

import pytest

from ccemu.kinds.incast import incast_table
from ccemu.results.figures import Tables
from test_smoke_checks import write_bundle

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "datapaths.py"
_spec = importlib.util.spec_from_file_location("datapaths_benchmark", BENCHMARK)
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # its dataclasses look their module up
_spec.loader.exec_module(bench)
Runs, agreement = bench.Runs, bench.agreement


@pytest.mark.parametrize("bpf, ovs, verdict, why", [
    # Medians 12 and 15: 3 apart, within the bpf runs' own spread of 4.
    ((10, 12, 14), (13, 15, 16), "agree", "3 <= 4"),
    ((10, 10.5, 11), (20, 20.5, 21), "DIFFER", "10 > 1"),
    ((0, 0, 0), (0, 0, 0), "agree", "0 <= 0"),  # e.g. no marks on either
    ((0, 0, 0), (1, 1, 1), "DIFFER", "1 > 0"),
    ((900, None, 910), (905, 906, 907), "not judged", "1 run(s) without it"),
    ((900,), (905,), "not judged", "one run: no spread"),
])
def test_two_datapaths_agree_when_their_medians_differ_no_more_than_the_wider_run_to_run_spread(bpf, ovs, verdict,
                                                                                               why):
    assert agreement(Runs(bpf), Runs(ovs)) == bench.Agreement(verdict, why)
    assert agreement(Runs(ovs), Runs(bpf)) == bench.Agreement(verdict, why)  # symmetric


def test_a_cell_is_the_median_and_the_range_of_the_runs_and_counts_the_runs_without_the_figure():
    assert Runs((3.0, 1.0, 2.0)).cell("{:.1f}") == "2.0 [1.0-3.0]"
    assert Runs((3.0, None, 1.0)).cell("{:.0f}") == "2 [1-3] (1 -)"
    assert Runs((None, None)).cell("{:.0f}") == "-"


def test_the_table_has_a_row_per_scheme_and_datapath_and_a_verdict_row_per_scheme():
    figure = {key: Runs((1.0, 2.0, 3.0)) for key, _, _ in bench.FIGURES}
    lines = bench.table_lines({"dctcp": {"bpf": figure, "ovs": figure}, "expresspass": {"bpf": figure, "ovs": figure}})
    assert [line.split()[:2] for line in lines[1:]] == [["dctcp", "bpf"], ["dctcp", "ovs"], ["agree?", "agree"],
                                                        ["expresspass", "bpf"], ["expresspass", "ovs"],
                                                        ["agree?", "agree"]]
    assert all(header in lines[0] for _, header, _ in bench.FIGURES)
    assert lines[3].count("agree (") == len(bench.FIGURES) and "agree (0.0 <= 2.0)" in lines[3]
    assert lines[1].split()[2:4] == ["2.0", "[1.0-3.0]"]  # goodput, one decimal


def test_the_figures_are_the_bundles_own_and_a_run_without_a_bundle_has_none(tmp_path):
    bundle = write_bundle(tmp_path)
    figures = bench.figures_of([bundle, None], 2)
    rows = {row["scheme"]: row for row in incast_table(Tables.read(bundle))}
    assert set(figures) == set(rows)
    for scheme, by_key in figures.items():
        for key, _, _ in bench.FIGURES:
            assert by_key[key] == Runs((rows[scheme][key], None)), (scheme, key)
    assert bench.figures_of([bundle], 8) == {}  # no block of that N


def test_the_benchmark_runs_incast_at_one_n_and_refuses_a_rate_a_datapath_does_not_keep_faithful(tmp_path):
    data = bench.experiment_data(8, 3, None)
    assert (data["workload"]["flows"], data["workload"]["rounds"], data["datacenter"]["dilation"]) == ([8], 3, 200)
    assert bench.faithful_problem(data, tmp_path) is None  # 5 Mbit/s per link
    problem = bench.faithful_problem(bench.experiment_data(8, 3, 50), tmp_path)  # 20 Mbit/s: above OVS's 10
    assert problem.startswith("ovs: links at 20 Mbit/s (1 busy) exceed what it keeps faithful, 10 per link")
