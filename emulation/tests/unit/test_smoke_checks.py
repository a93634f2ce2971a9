"""The smoke run's invariants (ci/smoke.py) on hand-made bundles: each one can fail."""

import csv
import importlib.util
import json
from pathlib import Path

import pytest

from ccemu.ports.histograms import QUEUE_BUCKETS, queue_bucket_bounds
from ccemu.results.bundle import FLOW_FIELDS, PORT_FIELDS, ROUND_FIELDS

SMOKE = Path(__file__).resolve().parents[3] / "ci" / "smoke.py"
_spec = importlib.util.spec_from_file_location("smoke", SMOKE)
smoke = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(smoke)

K = 30_000


def write_bundle(directory: Path, *, unfinished=0, drops=None, max_queue=None, credit_marks=40, dctcp_marks=50,
                 dctcp_queue=K, verdict="PASS", host_failures=(), schemes=smoke.SCHEMES, fastest=1.25) -> Path:
    """A bundle of one incast round of N=2 per scheme with the given figures; `drops` and
    `max_queue` by scheme (credit schemes: none and 10 000 B unless given); `fastest`: the least
    FCT / ideal FCT, DCTCP's first flow's (the others' 1.25)."""
    drops, max_queue = drops or {}, max_queue or {}
    credit_schemes = smoke.CREDIT_SCHEMES
    def rows(name, fields, rows):
        with open(directory / f"{name}.csv", "w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=fields, restval="0")
            writer.writeheader()
            writer.writerows(rows)

    flows, rounds, ports = [], [], []
    for scheme in schemes:
        finished = 2 - (unfinished if scheme == "expresspass" else 0)
        flows += [{"scheme": scheme, "n": 2, "round": 1, "id": i, "size": 500_000, "fct": 0.5, "credits_sent": 0,
                   "ideal_fct": 0.5 / (fastest if (scheme, i) == ("dctcp", 0) else 1.25)} for i in range(finished)]
        rounds.append({"scheme": scheme, "n": 2, "round": 1, "flows": 2, "finished": finished,
                       "duration": 1.0, "bytes": 1_000_000, "goodput_bps": 8e6,
                       "unfinished": "h3#2" if finished < 2 else ""})
        histogram = [0] * QUEUE_BUCKETS
        queue = dctcp_queue if scheme == "dctcp" else 1000
        histogram[next(b for b in range(QUEUE_BUCKETS) if queue < queue_bucket_bounds(b)[1])] = 100
        ports.append({"scheme": scheme, "n": 2, "node": "ovs0", "port": "s1-eth1", "bottleneck": 1,
                      "data_dropped": drops.get(scheme, 0 if scheme in credit_schemes else 7),
                      "data_marked": dctcp_marks if scheme == "dctcp" else 0,
                      "credit_marked": credit_marks if scheme == "spraypass" else 0,
                      "max_data_queue": max_queue.get(scheme, 10_000 if scheme in credit_schemes else 40_000),
                      "mean_data_queue_arrival": dctcp_queue, "data_queue_byte_s": dctcp_queue, "data_enqueued": 100,
                      "histogram": " ".join(map(str, histogram))})
    rows("flows", FLOW_FIELDS, flows)
    rows("rounds", ROUND_FIELDS, rounds)
    rows("ports", PORT_FIELDS, ports)
    (directory / "manifest.json").write_text(json.dumps({
        "kind": "incast", "config": {"link": {"rate_mbps": 10}}, "unfinished_flows": unfinished,
        "host_failures": list(host_failures), "expresspass_queue_bound_bytes": 97_320,
        "dctcp_k_bytes": K, "fidelity": {"status": verdict, "reasons": []}}))
    return directory


def failed(bundle: Path) -> list[str]:
    return [what for held, what in smoke.checks(bundle) if not held]


def test_a_good_smoke_bundle_passes_every_check(tmp_path):
    results = smoke.checks(write_bundle(tmp_path))
    assert len(results) == 10 and all(held for held, _ in results)


@pytest.mark.parametrize("figures, finding", [
    ({"unfinished": 1}, "every flow finished"),
    ({"drops": {"expresspass": 3}}, "expresspass dropped no data"),
    ({"drops": {"spraypass": 3}}, "spraypass dropped no data"),
    ({"max_queue": {"expresspass": 100_000}}, "expresspass's largest data queue"),
    ({"max_queue": {"spraypass": 100_000}}, "spraypass's largest data queue"),
    ({"credit_marks": 0}, "SprayPass's ports CE-marked credits"),
    ({"dctcp_marks": 0}, "DCTCP's ports CE-marked packets"),
    ({"dctcp_queue": 2_000}, "DCTCP's bottleneck mean queue"),
    ({"dctcp_queue": 63_000}, "DCTCP's bottleneck mean queue"),
    ({"verdict": "FAIL"}, "the fidelity verdict is not FAIL"),
    ({"host_failures": [{"host": "h3"}]}, "every flow finished"),
    ({"fastest": 0.99}, "no flow finished faster than its own ideal FCT: 1 of 8 did"),
])
def test_each_broken_invariant_fails_its_check_alone(tmp_path, figures, finding):
    found = failed(write_bundle(tmp_path, **figures))
    assert len(found) == 1 and found[0].startswith(finding), found


def test_a_scheme_that_did_not_run_fails_the_smoke(tmp_path):
    ran = smoke.SCHEMES[:-1]
    found = failed(write_bundle(tmp_path, schemes=ran))
    assert found == [f"every scheme ran: {sorted(smoke.SCHEMES)} (ran: {sorted(ran)})"]


def test_a_credit_scheme_of_cchosts_table_that_the_smoke_does_not_run_fails_it(tmp_path, monkeypatch):
    monkeypatch.setattr(smoke, "CREDIT_SCHEMES", (*smoke.CREDIT_SCHEMES, "newcredit"))
    assert failed(write_bundle(tmp_path)) == [
        "newcredit, a credit scheme, ran in the smoke: no port of it in the bundle (add it to smoke.yaml)"]
