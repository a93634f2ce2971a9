"""Summary and plots of a results bundle, from known tables (no emulation needed)."""

import csv
import json

from ccemu.results.bundle import FLOW_FIELDS, PORT_FIELDS, ROUND_FIELDS, TRANSPORT_FIELDS
from ccemu.results.figures import Tables
from ccemu.experiments.kinds.incast import incast_table
from ccemu.results.report import report


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
