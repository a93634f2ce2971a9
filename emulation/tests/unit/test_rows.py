"""The bundle's rows (results/rows.py): each table's columns, in the order bundles have always had
them, and each row as the dict the CSV writer takes, made from what a run measured."""

import csv
import json

import pytest

from ccemu.results import bundle
from ccemu.results.bundle import BlockKey, Bundle
from ccemu.results.rows import ROWS, FlowRow, RoundRow, RttRow, TimelineRow, TransportRow
from ccemu.model.dilation import PairDelay, Serialization

# The columns bundles are written with: readers (report, merge, papers, smoke) rely on them. ports.csv's
# mean_data_queue (the histogram's bucket midpoints) and bucket_bytes gave way to the exact averages
# (mean_data_queue_arrival, data_queue_byte_s) and log-linear buckets: readers refuse older bundles' queue
# means (figures.queues: NoData) rather than take midpoints for averages.
COLUMNS = {
    "flows": ["scheme", "n", "point", "round", "id", "src", "dst", "size", "bucket", "start", "end", "fct",
              "ideal_fct", "slowdown", "retransmits", "timeouts", "spurious_timeouts", "credits_sent",
              "credits_wasted", "cnps_ce", "cnps_ue"],
    "rounds": ["scheme", "n", "point", "round", "flows", "finished", "bytes", "duration", "goodput_bps",
               "unfinished", "failures"],
    "rtts": ["scheme", "n", "point", "src", "dst", "links", "floor_ms", "target_ms", "added_one_way_ms",
             "frame_there_ms", "answer_back_ms"],
    "timeline": ["scheme", "point", "t", "src", "id", "bytes"],
    "transport": ["scheme", "n", "point", "host", "credits_sent", "credits_received", "credits_wasted"],
    "hosts": ["scheme", "n", "point", "host", "image", "cpus", "memory_mb", "cpu_seconds", "periods",
              "throttled_periods", "throttled_seconds", "memory_bytes", "memory_peak_bytes"],
    "ports": ["scheme", "n", "point", "node", "port", "bottleneck", "data_enqueued", "data_dropped", "data_marked",
              "max_data_queue", "mean_data_queue_arrival", "data_queue_byte_s", "mean_lag", "max_lag",
              "credit_enqueued", "credit_dropped", "credit_marked", "max_credit_queue", "mean_credit_lag",
              "max_credit_lag", "residence_packets", "residence_untracked", "residence_p50_us", "residence_p99_us",
              "residence_max_us", "residue_bytes", "data_ue_marked", "pause_events", "paused_s", "max_held_bytes",
              "tunnel_lost", "histogram"],
}
INCAST = BlockKey("dctcp", (("N", 8),))
LOAD = BlockKey("expresspass", (("load", 0.5),))
RECORD = {"id": 3, "src_host": "h2", "dst": 1, "size": 100_000, "start": 1.0, "end": 1.5, "fct": 0.5,
          "retransmits": 1, "timeouts": 0, "spurious_timeouts": 0, "credits_sent": 0, "credits_wasted": 0}


def test_every_tables_columns_are_its_row_classs_fields_in_the_order_bundles_are_written_with():
    assert {row.table: row.column_names() for row in ROWS} == COLUMNS
    assert (bundle.FLOW_FIELDS, bundle.ROUND_FIELDS, bundle.RTT_FIELDS, bundle.TIMELINE_FIELDS,
            bundle.TRANSPORT_FIELDS, bundle.HOST_FIELDS, bundle.PORT_FIELDS) == tuple(
        COLUMNS[t] for t in ("flows", "rounds", "rtts", "timeline", "transport", "hosts", "ports"))


def test_a_flow_row_carries_its_blocks_columns_its_ideal_fct_and_slowdown_and_no_cnps_as_zero():
    row = FlowRow.of(INCAST, 2, RECORD, 0.125).as_dict()
    assert row == {"scheme": "dctcp", "n": 8, "point": "", "round": 2, "id": 3, "src": "h2", "dst": "h1",
                   "size": 100_000, "bucket": row["bucket"], "start": 1.0, "end": 1.5, "fct": 0.5, "ideal_fct": 0.125,
                   "slowdown": 4.0, "retransmits": 1, "timeouts": 0, "spurious_timeouts": 0, "credits_sent": 0,
                   "credits_wasted": 0, "cnps_ce": 0, "cnps_ue": 0}
    assert list(row) == COLUMNS["flows"]
    assert FlowRow.of(INCAST, 1, RECORD, 0.0).slowdown == 0.0


def test_one_round_row_serves_a_round_that_ran_a_block_of_scheduled_flows_and_a_round_not_run():
    ran = RoundRow.of(INCAST, 3, 4, [RECORD, RECORD], 0.25, ["h5#9", "h6#10"], ["h5's cchost died", "h6's too"])
    assert ran.as_dict() == {"scheme": "dctcp", "n": 8, "point": "", "round": 3, "flows": 4, "finished": 2,
                             "bytes": 200_000, "duration": 0.25, "goodput_bps": 6_400_000, "unfinished": "h5#9 h6#10",
                             "failures": "h5's cchost died; h6's too"}
    nothing = RoundRow.of(LOAD, 1, 2, [], 0.0, [], []).as_dict()
    assert nothing == {"scheme": "expresspass", "n": 0, "point": "load=0.5", "round": 1, "flows": 2, "finished": 0,
                       "bytes": 0, "duration": 0.0, "goodput_bps": 0, "unfinished": "", "failures": ""}
    assert RoundRow.not_run(INCAST, 4, 8, "no aggregator").as_dict() == {
        "scheme": "dctcp", "n": 8, "point": "", "round": 4, "flows": 8, "finished": 0, "bytes": 0, "duration": 0.0,
        "goodput_bps": 0, "unfinished": "not run", "failures": "not run: no aggregator"}


def test_a_timeline_row_has_no_n_and_an_rtt_row_says_wall_milliseconds():
    alpha = BlockKey("expresspass", (("alpha", 0.0625),))
    assert TimelineRow.of(alpha, {"t": 1.5, "src": 4, "id": 7, "bytes": 1450}).as_dict() == {
        "scheme": "expresspass", "point": "alpha=0.0625", "t": 1.5, "src": "h4", "id": 7, "bytes": 1450}
    pair = PairDelay("h1", "h5", floor_rtt_s=0.0004, target_rtt_s=0.001, there=Serialization.of([10e6] * 6),
                     back=Serialization.of([10e6] * 6))
    # Six links at 10 Mbit/s (800 ns a byte each): 1538 B take 7.3824 ms there, 84 B 0.4032 ms back.
    assert RttRow.of(INCAST, pair, 6).as_dict() == {"scheme": "dctcp", "n": 8, "point": "", "src": "h1", "dst": "h5",
                                                   "links": 6, "floor_ms": 0.4, "target_ms": 1.0,
                                                   "added_one_way_ms": 0.3, "frame_there_ms": 7.3824,
                                                   "answer_back_ms": 0.4032}


def test_transport_rows_sum_each_hosts_cchosts_in_host_order():
    def counters(sent, received, wasted):
        return {"sent_packets": {"credit": sent}, "received_packets": {"credit": received}, "credits_wasted": wasted}
    rows = TransportRow.per_host(INCAST, [("h10", counters(1, 2, 3)), ("h2", counters(10, 20, 30)),
                                          ("h10", counters(1, 1, 1))])
    assert [r.as_dict() for r in rows] == [
        {"scheme": "dctcp", "n": 8, "point": "", "host": "h2", "credits_sent": 10, "credits_received": 20,
         "credits_wasted": 30},
        {"scheme": "dctcp", "n": 8, "point": "", "host": "h10", "credits_sent": 2, "credits_received": 3,
         "credits_wasted": 4}]


def test_a_bundle_files_each_row_under_its_table_and_writes_no_hosts_csv_without_docker_hosts(tmp_path):
    out = Bundle(tmp_path, "t")
    out.add(RoundRow.not_run(INCAST, 1, 8, "no aggregator"), FlowRow.of(INCAST, 1, RECORD, 0.125))
    assert [r["round"] for r in out.rounds] == [1] and [r["id"] for r in out.flows] == [3]
    out.write_tables()
    assert not (out.dir / "hosts.csv").exists()
    for table in ("flows", "rounds", "ports", "rtts", "timeline", "transport"):
        with open(out.dir / f"{table}.csv", newline="") as written:
            assert next(csv.reader(written)) == COLUMNS[table]
    assert json.dumps(out.flows)  # plain values: the manifest and the readers take them as they are


@pytest.mark.parametrize("row", [FlowRow, RoundRow])
def test_a_row_is_frozen(row):
    made = row.of(INCAST, 1, RECORD, 0.1) if row is FlowRow else row.not_run(INCAST, 1, 8, "x")
    with pytest.raises(AttributeError):
        made.round = 2
