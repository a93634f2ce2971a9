"""Summary and plots of a results bundle, from known tables (no emulation needed)."""

import csv
import json
import os

import pytest

from ccemu.results.bundle import FLOW_FIELDS, PORT_FIELDS, ROUND_FIELDS, TRANSPORT_FIELDS
from ccemu.results import files
from ccemu.results.figures import Tables
from ccemu.results.files import BundleFileError
from ccemu.kinds.incast import incast_table
from ccemu.reports.report import report


def write(path, fields, rows):
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=fields, restval=0)
        writer.writeheader()
        writer.writerows(rows)


def bundle(tmp_path, schemes=("expresspass", "dctcp")):
    flows = [{"scheme": s, "n": 2, "round": 1, "id": i, "src": f"h{i + 1}", "dst": "h1", "size": 50_000,
              "bucket": "M", "start": 1.0, "end": 1.0 + fct, "fct": fct, "retransmits": 1 if s == "dctcp" else 0,
              "timeouts": 0, "spurious_timeouts": 0, "credits_sent": 40 if s == "expresspass" else 0,
              "credits_wasted": 2 if s == "expresspass" else 0}
             for s in schemes for i, fct in ((1, 0.1), (2, 0.3))]
    rounds = [{"scheme": s, "n": 2, "round": 1, "flows": 2, "finished": 2, "bytes": 100_000, "duration": 0.4,
               "goodput_bps": 2_000_000, "unfinished": ""} for s in schemes]
    ports = [{"scheme": s, "n": 2, "node": "ovs0", "port": "s1-eth1", "bottleneck": 1, "data_dropped": drops,
              "max_data_queue": queue, "mean_data_queue_arrival": queue // 2, "data_queue_byte_s": queue / 10,
              "data_enqueued": 4, "histogram": "0 0 1 1 2"}
             for s, drops, queue in zip(schemes, (0, 5, 7, 9), (3000, 9000, 4000, 6000))]
    write(tmp_path / "flows.csv", FLOW_FIELDS, flows)
    write(tmp_path / "rounds.csv", ROUND_FIELDS, rounds)
    write(tmp_path / "ports.csv", PORT_FIELDS, ports)
    # ExpressPass's senders: 80 credits reached them, 4 with nothing left to send.
    write(tmp_path / "transport.csv", TRANSPORT_FIELDS,
          [{"scheme": "expresspass", "n": 2, "point": "", "host": h, "credits_sent": 40, "credits_received": 40,
            "credits_wasted": 2} for h in ("h2", "h3") if "expresspass" in schemes])
    (tmp_path / "manifest.json").write_text(json.dumps({
        "config": {"name": "t", "seed": 1, "link": {"rate_mbps": 10}}, "git_commit": "abc",
        "fidelity": {"status": "WARN", "reasons": ["WARN: steal"]}, "expresspass_queue_bound_bytes": 97320,
        "expresspass_credit_queues_on_longest_path": 6, "dctcp_k_bytes": 30000}))
    return tmp_path


def test_the_incast_table_puts_each_scheme_and_n_in_one_row(tmp_path):
    directory = bundle(tmp_path)
    rows = incast_table(Tables.read(directory))
    by_scheme = {r["scheme"]: r for r in rows}
    assert by_scheme["expresspass"]["goodput_mbps"] == 2.0
    assert by_scheme["expresspass"]["fct_mean_ms"] == 200.0
    assert by_scheme["expresspass"]["credit_waste"] == 0.05
    assert (by_scheme["dctcp"]["data_drops"], by_scheme["dctcp"]["max_queue"], by_scheme["dctcp"]["retransmits"]) == \
        (5, 9000, 2)


def test_report_writes_the_summary_and_three_plots_from_the_tables_alone(tmp_path):
    directory = bundle(tmp_path)
    summary = report(directory).read_text()
    assert "Fidelity: **WARN**" in summary and "- WARN: steal" in summary
    assert "| expresspass | 2 | 1 (0) | 2.00 | 0.20 | 400.0 | 200.0 |" in summary
    assert "Largest measured: 3000 B: within the bound" in summary
    assert sorted(p.name for p in (directory / "plots").iterdir()) == ["fct_cdf.png", "incast_vs_n.png",
                                                                       "queue_cdf.png"]
    assert report(directory).read_text() == summary  # deterministic


def test_the_report_has_a_row_and_a_plot_line_for_every_scheme_including_dctcp_plus(tmp_path):
    schemes = ("expresspass", "spraypass", "dctcp", "dctcp+")
    directory = bundle(tmp_path, schemes)
    summary = report(directory).read_text()
    for scheme in schemes:
        assert f"| {scheme} | 2 | 1 (0) | 2.00 | 0.20 | 400.0 | 200.0 |" in summary
        assert f"| {scheme} | M | 2 |" in summary
    # Queues: at arrival 3000 B; over time 600 B x s over the flows' span of 0.3 s: 2000 B (the incast table's
    # second part: the queues, after the goodput and FCTs).
    assert "| dctcp+ | 2 | 1 (0) | 2.00 | 0.20 | 400.0 | 200.0 | 298.0 | 300.0 | 0 |" in summary
    assert "| dctcp+ | 2 | 6000 | 3000 | 2000 | 9 |" in summary
    assert sorted(p.name for p in (directory / "plots").iterdir()) == ["fct_cdf.png", "incast_vs_n.png",
                                                                       "queue_cdf.png"]


def test_the_incast_summary_shows_each_rounds_goodput_and_says_whether_the_connections_were_opened_before(tmp_path):
    directory = bundle(tmp_path, ("dctcp",))
    with open(directory / "rounds.csv", "a", newline="") as out:  # round 2 finished at twice the goodput, 3 did not
        writer = csv.DictWriter(out, fieldnames=ROUND_FIELDS, restval=0)
        writer.writerow({"scheme": "dctcp", "n": 2, "round": 2, "flows": 2, "finished": 2, "bytes": 100_000,
                         "duration": 0.2, "goodput_bps": 4_000_000, "unfinished": ""})
        writer.writerow({"scheme": "dctcp", "n": 2, "round": 3, "flows": 2, "finished": 1, "bytes": 50_000,
                         "duration": 0, "goodput_bps": 0, "unfinished": "h3#6"})
    summary = report(directory).read_text()
    assert "| scheme | N | round 1 | round 2 | round 3 |" in summary
    assert "| dctcp | 2 | 0.20 | 0.40 | unfinished |" in summary  # of the 10 Mbit/s link
    assert "Round 1 opened the connections" in summary
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["config"] |= {"workload": {"warm_up": True}, "transport": {"persistent_connections": True}}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    assert "Each block opened its connections before round 1" in report(directory).read_text()


def test_the_summary_says_what_dilation_auto_was_resolved_from(tmp_path):
    directory = bundle(tmp_path)
    summary = report(directory).read_text()
    assert "`dilation: auto` chose" not in summary  # the file gave its dilation (or declares no datacenter)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["config"]["datacenter"] = {"link_gbps": 10, "dilation": 500.0}
    manifest["dilation_auto_from"] = {"link_mbps": 25, "aggregate_mbps": 100.0, "source": "`ccemu bench capacity` of X"}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    assert ("`dilation: auto` chose 500 so that one link runs at most 25 Mbit/s and the workload's busy links at "
            "most 100 in all, from `ccemu bench capacity` of X.") in report(directory).read_text()


def test_the_summary_names_the_datapath_that_forwarded_and_ovs_for_bundles_from_before_there_was_a_choice(tmp_path):
    directory = bundle(tmp_path)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest.pop("datapath", None)
    (directory / "manifest.json").write_text(json.dumps(manifest))
    assert "; ovs datapath; " in report(directory).read_text()
    manifest["datapath"] = "bpf"
    (directory / "manifest.json").write_text(json.dumps(manifest))
    assert "; bpf datapath; " in report(directory).read_text()


# Bundles are files people exchange, read and rewritten as root (results/files.py) ----------------


def made_bundle(tmp_path):
    (tmp_path / "b").mkdir()
    return bundle(tmp_path / "b")


def test_a_bundle_whose_summary_is_a_link_is_refused_and_what_it_points_to_is_left_as_it_was(tmp_path):
    victim = tmp_path / "profile.d-x.sh"
    victim.write_text("# a root shell file\n")
    directory = made_bundle(tmp_path)
    (directory / "summary.md").symlink_to(victim)
    with pytest.raises(BundleFileError, match="summary.md is a link"):
        report(directory)
    assert victim.read_text() == "# a root shell file\n"


def test_a_bundle_whose_plots_folder_is_a_link_is_refused_and_nothing_is_written_where_it_points(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    directory = made_bundle(tmp_path)
    (directory / "plots").symlink_to(elsewhere)
    with pytest.raises(BundleFileError, match="plots is a link"):
        report(directory)
    assert list(elsewhere.iterdir()) == []


def test_a_bundle_holding_a_fifo_is_refused_before_anything_reads_it(tmp_path):
    directory = made_bundle(tmp_path)
    os.mkfifo(directory / "rtts.csv")  # a read would block forever
    with pytest.raises(BundleFileError, match="rtts.csv is not a regular file"):
        report(directory)


def test_a_manifest_whose_experiment_name_is_not_a_name_is_refused_in_one_line(tmp_path):
    directory = made_bundle(tmp_path)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["config"]["name"] = "t\n. /etc/profile"
    (directory / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleFileError, match="config.name must be a name") as refused:
        report(directory)
    assert len(str(refused.value).splitlines()) == 1


def test_text_from_a_bundle_reaches_the_summary_with_its_control_characters_shown_not_obeyed(tmp_path):
    directory = made_bundle(tmp_path)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["failed"] = "disk full\n# Injected heading\x1b[2J"
    (directory / "manifest.json").write_text(json.dumps(manifest))
    summary = report(directory).read_text()
    assert "disk full\\x0a# Injected heading\\x1b[2J" in summary
    assert "\n# Injected heading" not in summary and "\x1b" not in summary


def test_an_output_is_written_beside_a_link_at_its_name_and_renamed_over_it_never_through_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "summary.md").symlink_to(victim)
    files.write_text(tmp_path / "out" / "summary.md", "new")
    assert victim.read_text() == "keep"
    assert not (tmp_path / "out" / "summary.md").is_symlink()
    assert (tmp_path / "out" / "summary.md").read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["summary.md"]  # no temporary left
