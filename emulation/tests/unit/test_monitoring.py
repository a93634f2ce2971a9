"""The run's live metrics: the collector names a block by its BlockKey, with the labels it always
had, and exports durations in datacenter time; a run without monitoring starts nothing, and a
session interrupted as it starts leaves nothing (that one starts a real Prometheus)."""

import io
import json
import secrets

from rich.console import Console

from ccemu.metrics.collector import Block, ExperimentCollector
from ccemu.metrics.monitoring import MonitoringSession
from ccemu.results.bundle import BlockKey


def test_a_blocks_metric_labels_are_the_experiment_and_its_keys_table_columns_as_text(tmp_path):
    incast = Block(BlockKey("dctcp", (("N", 64),)), tmp_path, tmp_path)
    assert incast.labels("e") == {"experiment": "e", "scheme": "dctcp", "n": "64", "point": ""}
    load = Block(BlockKey("expresspass", (("load", 0.5), ("alpha", 0.0625))), tmp_path, tmp_path)
    assert load.labels("e") == {"experiment": "e", "scheme": "expresspass", "n": "0", "point": "load=0.5 alpha=0.0625"}


def test_the_collectors_flow_records_carry_their_blocks_columns_and_slowdown(tmp_path):
    record = {"id": 1, "src": 2, "dst": 1, "size": 1000, "fct": 0.5, "retransmits": 0}
    (tmp_path / "h2.records").write_text(json.dumps(record) + "\n")
    block = Block(BlockKey("dctcp", (("N", 8),)), tmp_path, tmp_path, dilation=100.0, ideal_fct=lambda r: 0.25)
    (seen,) = ExperimentCollector("e")._flow_records(block)
    assert seen == {**record, "scheme": "dctcp", "n": 8, "point": "", "slowdown": 2.0, "fct_dc": 0.005}


def test_a_session_that_is_off_starts_nothing_watches_nothing_and_adds_nothing_to_the_manifest(tmp_path):
    session = MonitoringSession(tmp_path, "e", Console(file=io.StringIO()), on=False)
    with session:
        with session.watching(BlockKey("dctcp"), tmp_path, tmp_path, 1.0):
            session.set_round(1)
        assert session.figures(10.0) is None and session.collector is None
    assert not (tmp_path / "prometheus").exists()


def test_durations_are_exported_in_datacenter_seconds_and_each_block_says_its_dilation(tmp_path):
    from ccemu.metrics.collector import _pause_buckets
    from ccemu.ports.stats import pause_bucket_bounds_s

    histogram = (0, 2, 1, 0)
    wall, _ = _pause_buckets(histogram, 1.0)
    datacenter, total = _pause_buckets(histogram, 100.0)
    assert [float(b) for b, _ in datacenter[:-1]] == [float(b) / 100 for b, _ in wall[:-1]]
    assert [c for _, c in datacenter] == [0, 2, 3, 3] and datacenter[-1][0] == "+Inf"
    low, high = pause_bucket_bounds_s(1)
    assert total > 0 and abs(total - (2 * (low + high) / 2 + sum(pause_bucket_bounds_s(2)) / 2) / 100) < 1e-12
    block = Block(BlockKey("dctcp", (("N", 8),)), tmp_path, tmp_path, dilation=250.0, cpu_shares=lambda: (0.0, 0.5))
    gauges = {family.name: family for family in ExperimentCollector("e")._fidelity(block, block.labels("e"))}
    (sample,) = gauges["ccemu_block_dilation"].samples
    assert sample.value == 250.0 and sample.labels == block.labels("e")


def test_a_ctrl_c_while_the_session_starts_stops_the_prometheus_and_server_it_started(tmp_path):
    # No __exit__ follows a failed __enter__: the session itself must stop what it started (its
    # inventory's directory goes once every process it recorded is gone).
    import pytest

    from ccemu.fabric.inventory import DEFAULT_STATE_ROOT

    class Interrupted(Console):
        def print(self, *args, **kwargs):
            raise KeyboardInterrupt

    name = f"ctrl-c-{secrets.token_hex(3)}"  # its own: a leftover of another run is not this one's
    session = MonitoringSession(tmp_path, name, Interrupted(file=io.StringIO()))
    with pytest.raises(KeyboardInterrupt):
        session.__enter__()
    assert list((DEFAULT_STATE_ROOT / "monitoring").glob(f"{name}-prometheus-*")) == []
    assert session.prometheus is None and session.server is None
