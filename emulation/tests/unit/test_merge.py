"""Several bundles side by side (a sweep's points), from known tables (no emulation needed)."""

import csv
import json

import pytest

from ccemu.results.bundle import FLOW_FIELDS, PORT_FIELDS, ROUND_FIELDS
from ccemu.reports.merge import (METRICS, Entry, entries_of_bundles, merge, varied_parameters,
                                 write_points)


def write(path, fields, rows):
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)


def config(n, schemes=("dctcp",), k=32000, name=None, **extra):
    return {"name": name or f"incast-{n}", "seed": 1, "link": {"rate_mbps": 10},
            "schemes": [{"scheme": s, "port": {"profile": "dctcp", "ecn_threshold_bytes": k}} for s in schemes],
            "workload": {"kind": "incast", "flows": [n], "rounds": 3}, **extra}


def bundle(directory, n, schemes=("dctcp",), k=32000, slowdowns=(1.0, 2.0, 3.0, 5.0), interrupted=False,
           verdict="PASS"):
    """Per scheme: three rounds of N (8 and 6 Mbit/s of goodput on 10 Mbit/s links, the third never
    finished one flow), five flows (one without a slowdown), a switch port and a host NIC."""
    directory.mkdir(parents=True)
    flows = [{"scheme": s, "n": n, "round": 1, "id": i, "src": f"h{i + 2}", "dst": "h1", "size": 50_000,
              "bucket": "M", "fct": fct, "slowdown": slowdowns[i] if i < len(slowdowns) else "",
              "timeouts": 2 if i == 0 else 0}
             for s in schemes for i, fct in enumerate((0.1, 0.2, 0.3, 0.4, 0.5))]
    rounds = [{"scheme": s, "n": n, "round": r, "flows": 4, "finished": 3 if r == 3 else 4, "duration": duration,
               "bytes": round(goodput * duration / 8), "goodput_bps": goodput}
              for s in schemes for r, duration, goodput in ((1, 0.5, 8e6), (2, 0.5, 6e6), (3, 0, 0))]
    ports = [row for s in schemes for row in (
        {"scheme": s, "n": n, "node": "ovs0", "port": "s1-eth1", "bottleneck": 1, "data_dropped": 2,
         "data_marked": 3, "credit_marked": 1, "max_data_queue": 15380, "data_enqueued": 20,
         "mean_data_queue_arrival": 3000, "data_queue_byte_s": 900},
        {"scheme": s, "n": n, "node": "h1", "port": "h1-eth0", "bottleneck": 0, "data_dropped": 1,
         "data_marked": 0, "credit_marked": 0, "max_data_queue": 99999, "data_enqueued": 20,
         "mean_data_queue_arrival": 0, "data_queue_byte_s": 0})]
    write(directory / "flows.csv", FLOW_FIELDS, flows)
    write(directory / "rounds.csv", ROUND_FIELDS, rounds)
    write(directory / "ports.csv", PORT_FIELDS, ports)
    (directory / "manifest.json").write_text(json.dumps({
        "kind": "incast", "config": config(n, schemes, k), "datacenter": {"dilation": 100}, "wall_seconds": 42.0,
        "interrupted": interrupted, "failed": None,
        "fidelity": {"status": verdict, "reasons": [],
                     "blocks": [{"scheme": s, "n": n, "point": "", "status": verdict} for s in schemes]}}))
    return directory


def blocks(directory):
    with open(directory / "blocks.csv", newline="") as source:
        return list(csv.DictReader(source))


def sweep(tmp_path):
    """Points a ([32], dctcp) and b ([8], dctcp and expresspass): labels opposite to the natural order."""
    a = bundle(tmp_path / "bundles" / "a", 32)
    b = bundle(tmp_path / "bundles" / "b", 8, schemes=("dctcp", "expresspass"))
    return [Entry("a", a, {"workload.flows": "[32]"}, machine="m1", status="done"),
            Entry("b", b, {"workload.flows": "[8]"}, machine="m2", status="done")]


def test_varied_parameters_finds_the_differing_key_and_ignores_the_name_and_a_scheme_absent_elsewhere():
    configs = [config(8, ("dctcp", "expresspass")), config(32, ("dctcp",))]
    assert varied_parameters(configs) == {"workload.flows": ["[8]", "[32]"]}


def test_varied_parameters_flattens_schemes_by_name_and_keeps_lists_of_scalars_whole():
    configs = [config(8, ("dctcp",), k=32000), config(8, ("expresspass", "dctcp"), k=64000),
               {**config(8, ("dctcp",)), "workload": {"kind": "incast", "flows": [8, 32], "rounds": 3}}]
    assert varied_parameters(configs) == {
        "schemes[dctcp].port.ecn_threshold_bytes": ["32000", "64000", "32000"],
        "workload.flows": ["[8]", "[8]", "[8, 32]"],
    }


def test_a_key_only_some_configs_hold_is_empty_where_absent_and_varied_only_if_the_holders_differ():
    configs = [config(8, transport={"alpha": 0.5}), config(8), config(8, transport={"alpha": 0.0625})]
    assert varied_parameters(configs) == {"transport.alpha": ["0.5", "", "0.0625"]}
    assert varied_parameters([config(8, transport={"alpha": 0.5}), config(8)]) == {}


def test_merge_writes_one_block_row_per_bundle_and_block_with_goodput_slowdown_and_queue(tmp_path):
    merge(tmp_path / "merged", sweep(tmp_path), "incast sweep")
    rows = blocks(tmp_path / "merged")
    assert list(rows[0]) == ["label", "machine", "workload.flows", "scheme", "n", "point", *METRICS]
    # By scheme, then by the parameter in natural order ([8] before [32]).
    assert [(r["scheme"], r["label"], r["n"]) for r in rows] == [("dctcp", "b", "8"), ("dctcp", "a", "32"),
                                                                  ("expresspass", "b", "8")]
    for row in rows:
        assert float(row["goodput_of_link"]) == pytest.approx(0.7)  # mean of 8 and 6 over 10 Mbit/s
        assert float(row["goodput_mbps"]) == pytest.approx(7.0)
        assert float(row["slowdown_p50"]) == pytest.approx(2.5)
        assert float(row["slowdown_p99"]) == pytest.approx(4.94)  # the flow without a slowdown is left out
        assert float(row["fct_p99_dc_ms"]) == pytest.approx(4.96)  # 0.496 s wall / dilation 100
        assert (row["max_queue_bytes"], float(row["max_queue_packets"])) == ("15380", 10.0)  # not the host NIC
        assert (row["flows"], row["unfinished"], row["data_drops"], row["marks"], row["timeouts"], row["verdict"]) \
            == ("6", "1", "3", "4", "2", "PASS")


def test_the_summary_lists_every_point_and_every_block_with_links_to_the_bundles(tmp_path):
    entries = sweep(tmp_path)
    (entries[0].bundle / "summary.md").write_text("# a\n")
    summary = merge(tmp_path / "merged", entries, "incast sweep").read_text()
    assert summary.startswith("# incast sweep\n\n2 points: 2 ran, 0 failed, 0 did not run.\n")
    assert "| [a](../bundles/a/summary.md) | [32] | m1 | done | 42 s | PASS | - |" in summary
    # The blocks' table in three parts, each naming the block by its parameters, scheme and N.
    assert "| [8] | dctcp | 8 | [b](../bundles/b) | m2 | 6 | 1 | 7 | 0.7 |" in summary
    assert "| [8] | dctcp | 8 | 2.5 | 4.94 | 4.96 |" in summary
    assert "| [8] | dctcp | 8 | 15380 | 10 | 3 | 4 | 2 | PASS |" in summary
    assert summary.index("| [8] | dctcp |") < summary.index("| [32] | dctcp |") < summary.index("| [8] | expresspass |")


def test_a_point_without_a_bundle_shows_in_the_points_table_with_its_reason_and_adds_no_rows(tmp_path):
    (tmp_path / "bundles" / "d").mkdir(parents=True)
    entries = sweep(tmp_path) + [
        Entry("c", None, {"workload.flows": "[64]"}, machine="m3", status="not run", reason="m3 unreachable"),
        Entry("d", tmp_path / "bundles" / "d", {"workload.flows": "[128]"}, machine="m1", status="failed",
              reason="ccemu experiment exited 1", wall_seconds=3.0),
        Entry("e", tmp_path / "bundles" / "missing", {"workload.flows": "[256]"}),
    ]
    summary = merge(tmp_path / "merged", entries, "incast sweep").read_text()
    assert "5 points: 2 ran, 2 failed, 1 did not run." in summary
    assert "| c | [64] | m3 | not run | - | - | m3 unreachable |" in summary
    assert "| d | [128] | m1 | failed | 3 s | - | ccemu experiment exited 1 |" in summary
    assert f"| e | [256] | - | failed | - | - | no bundle at {tmp_path / 'bundles' / 'missing'} |" in summary
    assert {r["label"] for r in blocks(tmp_path / "merged")} == {"a", "b"}


def test_an_interrupted_bundle_is_marked_so_in_both_tables(tmp_path):
    entries = [entries_of_bundles([bundle(tmp_path / "p1", 8, interrupted=True)])[0]]
    summary = merge(tmp_path / "merged", entries, "t").read_text()
    assert "1 point: 1 ran (1 interrupted), 0 failed, 0 did not run." in summary
    assert "| interrupted | 42 s | PASS | interrupted: the tables hold what finished before it |" in summary
    assert "[p1 (interrupted)](../p1)" in summary


def test_empty_tables_give_rows_of_dashes_not_an_exception(tmp_path):
    directory = tmp_path / "p1"
    directory.mkdir()
    write(directory / "flows.csv", FLOW_FIELDS, [])
    write(directory / "rounds.csv", ROUND_FIELDS, [{"scheme": "dctcp", "n": 8, "round": 1, "flows": 4,
                                                    "finished": 0, "duration": 0, "goodput_bps": 0}])
    (directory / "manifest.json").write_text(json.dumps({"config": config(8), "fidelity": {"status": "FAIL"}}))
    summary = merge(tmp_path / "merged", entries_of_bundles([directory]), "t").read_text()
    [row] = blocks(tmp_path / "merged")
    assert (row["flows"], row["unfinished"], row["goodput_of_link"], row["slowdown_p99"], row["max_queue_bytes"],
            row["verdict"]) == ("4", "4", "", "", "", "FAIL")
    assert "| dctcp | 8 | [p1](../p1) | 4 | 4 | - | - |" in summary
    assert "| dctcp | 8 | - | - | - |" in summary
    assert "| dctcp | 8 | - | - | 0 | 0 | 0 | FAIL |" in summary
    assert not (tmp_path / "merged" / "plots" / "sweep_goodput_of_link.png").exists()


def test_merging_twice_gives_the_same_summary_and_blocks(tmp_path):
    entries = sweep(tmp_path) + [Entry("c", None, {"workload.flows": "[64]"}, status="not run", reason="skipped")]
    first = merge(tmp_path / "merged", entries, "incast sweep").read_text()
    first_blocks = (tmp_path / "merged" / "blocks.csv").read_text()
    assert merge(tmp_path / "merged", entries, "incast sweep").read_text() == first
    assert (tmp_path / "merged" / "blocks.csv").read_text() == first_blocks


def test_write_points_stores_bundles_inside_the_directory_relative_to_it_and_others_absolute(tmp_path):
    directory = tmp_path / "sweep"
    entries = [Entry("p01", directory / "bundles" / "p01", {"workload.flows": "[8]", "scheme": "dctcp"},
                     machine="m1", status="done", wall_seconds=12.25),
               Entry("p02", tmp_path / "elsewhere" / "p02", {"workload.flows": "[32]"}, status="failed",
                     reason="exit 1"),
               Entry("p03", None, {"workload.flows": "[64]", "scheme": "dctcp"}, status="not run", reason="skipped")]
    path = write_points(directory, entries)
    with open(path, newline="") as source:
        rows = {row["label"]: row for row in csv.DictReader(source)}
    assert {label: row["bundle"] for label, row in rows.items()} == {
        "p01": "bundles/p01", "p02": str(tmp_path / "elsewhere" / "p02"), "p03": ""}
    assert (rows["p01"]["machine"], rows["p01"]["wall_seconds"], rows["p01"]["scheme"]) == ("m1", "12.25", "dctcp")
    assert (rows["p02"]["status"], rows["p02"]["reason"], rows["p02"]["scheme"]) == ("failed", "exit 1", "")


def test_plots_put_the_numeric_parameter_on_x_and_are_written_for_each_figure(tmp_path):
    summary = merge(tmp_path / "merged", sweep(tmp_path), "incast sweep").read_text()
    plots = sorted((tmp_path / "merged" / "plots").iterdir())
    assert [p.name for p in plots] == ["sweep_goodput_of_link.png", "sweep_max_queue_packets.png",
                                       "sweep_slowdown_p99.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in plots)
    assert "![sweep_goodput_of_link](plots/sweep_goodput_of_link.png)" in summary


def test_without_a_numeric_parameter_the_plots_are_bars_and_a_figure_no_block_has_is_skipped(tmp_path):
    bundles = [bundle(tmp_path / "x", 8, slowdowns=()), bundle(tmp_path / "y", 8, schemes=("expresspass",),
                                                               slowdowns=())]
    entries = [Entry("x", bundles[0], {"transport.mode": "pull"}), Entry("y", bundles[1], {"transport.mode": "push"})]
    merge(tmp_path / "merged", entries, "t")
    assert sorted(p.name for p in (tmp_path / "merged" / "plots").iterdir()) == [
        "sweep_goodput_of_link.png", "sweep_max_queue_packets.png"]


def test_entries_of_bundles_label_by_directory_name_made_unique_with_the_varied_parameters(tmp_path):
    first = bundle(tmp_path / "incast" / "20260101-000000", 8)
    second = bundle(tmp_path / "other" / "20260101-000000", 32, k=64000)
    entries = entries_of_bundles([first, second])
    assert [(e.label, e.bundle, e.status) for e in entries] == [("20260101-000000", first, ""),
                                                                ("20260101-000000-2", second, "")]
    assert entries[0].params == {"schemes[dctcp].port.ecn_threshold_bytes": "32000", "workload.flows": "[8]"}
    assert entries[1].params == {"schemes[dctcp].port.ecn_threshold_bytes": "64000", "workload.flows": "[32]"}


def test_a_scheme_parameter_gets_its_own_column_in_blocks_csv_and_is_not_repeated_beside_the_blocks(tmp_path):
    entries = [Entry(f"p{i}", bundle(tmp_path / f"p{i}", 8, schemes=(scheme,)), {"scheme": scheme}, status="done")
               for i, scheme in enumerate(("expresspass", "dctcp"))]
    summary = merge(tmp_path / "merged", entries, "t").read_text()
    assert [(r["param:scheme"], r["scheme"]) for r in blocks(tmp_path / "merged")] == [("dctcp", "dctcp"),
                                                                                      ("expresspass", "expresspass")]
    assert "| label | scheme | status |" in summary  # the Points table shows the parameter
    assert "| scheme | N | label | flows |" in summary  # the blocks' own scheme only


def test_a_bundle_with_a_broken_table_fails_its_point_and_the_others_still_merge(tmp_path):
    entries = sweep(tmp_path)
    write(entries[0].bundle / "rounds.csv", ROUND_FIELDS, [{"scheme": "dctcp", "n": 32, "flows": "many",
                                                            "finished": 4}])
    summary = merge(tmp_path / "merged", entries, "t").read_text()
    assert "2 points: 1 ran, 1 failed, 0 did not run." in summary
    assert "| a | [32] | m1 | failed | 42 s | PASS | unreadable tables: ValueError(" in summary
    assert {r["label"] for r in blocks(tmp_path / "merged")} == {"b"}


def test_ccemu_report_puts_several_bundles_side_by_side_in_the_out_folder(tmp_path, capsys):
    from ccemu.cli import main

    first, second = bundle(tmp_path / "a" / "t1", 8), bundle(tmp_path / "b" / "t1", 32)
    assert main(["report", str(first), str(second), "--out", str(tmp_path / "merged")]) == 0
    assert "wrote" in capsys.readouterr().out
    rows = blocks(tmp_path / "merged")
    # Both bundles are named t1: the second label is made unique; N came from each config.
    assert [(r["label"], r["workload.flows"]) for r in rows] == [("t1", "[8]"), ("t1-2", "[32]")]
    assert main(["report", str(tmp_path / "nothing"), str(first)]) == 1
    assert "is not a results bundle (no manifest.json) nor a sweep" in capsys.readouterr().err
