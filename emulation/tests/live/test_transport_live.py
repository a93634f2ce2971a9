"""cchost on a live 2-host fabric (root; CI runs these). Goodput figures are printed here and
by `ccemu bench transport`; what is asserted is the transfer itself."""

import time

import pytest

from ccemu.programs.cchost import ScheduledFlow, command, write_schedule
from ccemu.results.records import read_counters, read_records
from ccemu.model.config import parse_config
from ccemu.fabric.net import FabricNet

RATE_MBPS = 100
FLOW_BYTES = 20_000_000
PAYLOAD_EFFICIENCY = 1450 / 1538  # cchost data: 1450 payload bytes per 1538 on the wire
CREDIT_SHARE = 84 / 1622
PROFILES = {
    "expresspass": {"profile": "expresspass"},
    "dctcp": {"profile": "dctcp", "ecn_threshold_bytes": 30_000, "buffer_bytes": 150_000},
}


def transfer(tmp_path, scheme):
    """One FLOW_BYTES flow h1 -> h2; returns (record, sender counters, receiver counters)."""
    config = parse_config({"name": f"transport-{scheme}", "topology": {"kind": "star", "hosts": 2},
                           "link": {"rate_mbps": RATE_MBPS}, "port": PROFILES[scheme]})
    workdir = tmp_path / scheme
    workdir.mkdir()
    schedule = write_schedule(workdir / "h1.flows", [ScheduledFlow(id=1, dst=2, size=FLOW_BYTES, start=0.2)])
    with FabricNet(config, state_root=tmp_path / "state") as net:
        epoch = time.monotonic_ns()
        receiver = net["h2"].popen(command("h2", RATE_MBPS, scheme, epoch, workdir, duration_s=60))
        sender = net["h1"].popen(command("h1", RATE_MBPS, scheme, epoch, workdir, schedule=schedule,
                                         exit_when_done=True, extra=("--linger", "0.2")))
        try:
            assert sender.wait(timeout=60) == 0, sender.stderr.read() if sender.stderr else ""
        finally:
            receiver.terminate()
            assert receiver.wait(timeout=10) == 0
    (record,) = read_records(workdir / "h1.records")
    return record, read_counters(workdir / "h1.counters"), read_counters(workdir / "h2.counters")


@pytest.mark.root
@pytest.mark.parametrize("scheme", ["expresspass", "dctcp"])
def test_a_20_mb_flow_crosses_the_fabric_whole_and_is_recorded(tmp_path, scheme):
    record, sent, received = transfer(tmp_path, scheme)
    ideal = RATE_MBPS * 1e6 / 8 * PAYLOAD_EFFICIENCY * (1 - CREDIT_SHARE if scheme == "expresspass" else 1)
    ratio = FLOW_BYTES / record["fct"] / ideal
    print(f"{scheme}: {FLOW_BYTES / record['fct'] * 8 / 1e6:.1f} Mbit/s, {ratio:.3f} of ideal, "
          f"{record['retransmits']} retransmits, {record['timeouts']} timeouts, "
          f"credits sent/wasted {record['credits_sent']}/{record['credits_wasted']}")

    identity = (record["id"], record["src"], record["dst"], record["size"], record["scheme"])
    assert identity == (1, 1, 2, FLOW_BYTES, scheme)
    assert record["end"] > record["start"] >= 0.2 and record["fct"] == pytest.approx(record["end"] - record["start"])
    assert received["data_bytes_received"] >= FLOW_BYTES
    assert (sent["malformed"], received["malformed"], sent["send_errors"], received["send_errors"]) == (0, 0, 0, 0)
    # Goodput is printed, not asserted (a performance figure on a shared machine whose fabric
    # carries 0.7-0.95 of 100 Mbit/s even for kernel TCP: `ccemu bench transport` prints both).
    # A transport that resends windows or wastes credits shows here instead:
    assert record["retransmits"] <= 0.01 * FLOW_BYTES / 1450
    if scheme == "expresspass":
        assert received["credits_sent"] == record["credits_sent"] >= FLOW_BYTES / 1450
        assert record["credits_wasted"] <= 0.05 * record["credits_sent"]
        assert received["timer_lateness"]["count"] > 0
    else:
        assert received["ce_received"] > 0 and sent["ece_received"] == received["ce_received"]
