"""Reading cchost's trace of the credit schemes' flows (programs/trace.py), and asking for it: the lines
as cchost writes them (transport/src/bin/cchost/main.rs, write_trace), per RTT from a join, and the flag
an experiment's cchosts get when its config sets transport.trace."""

import json
import math
import re
from pathlib import Path

import pytest

from ccemu.model.kernel import KernelFeatures
from ccemu.model.config import ConfigError, parse_config
from ccemu.programs.cchost import experiment_command
from ccemu.programs.trace import (FeedbackStep, SenderWindow, TraceError, per_rtt, read_trace, table,
                                  traces_under)

MAIN_RS = Path(__file__).resolve().parents[3] / "transport" / "src" / "bin" / "cchost" / "main.rs"
NO_MODULES = KernelFeatures(openvswitch=False)
RTT = 0.05  # wall seconds (52 us at dilation 1000, as the convergence experiment's)


def step(t, src=5, rate=0.5, w=0.5, lost=0, credits=20, decreased=False, sent=20, behind=0):
    return {"t": t, "role": "receiver", "src": src, "dst": 1, "id": 1 if src == 5 else 2, "credits_sent": sent,
            "back_to_back": 0, "behind": behind, "credits": credits, "lost": lost, "unjudged": 0,
            "loss": lost / credits, "target_loss": 0.0625, "rate_before": 0.5, "rate_after": rate, "w_before": 0.5,
            "w_after": w, "decreased": decreased, "rtt_us": 52000.0, "period_us": 52500.0}


def window(t, src=5, credits=18, data=18):
    return {"t": t, "role": "sender", "src": src, "dst": 1, "id": 1 if src == 5 else 2, "window_us": 53000.0,
            "credits": credits, "data": data, "retransmits": 0, "wasted": 0}


def written(path, lines, partial=""):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + partial)
    return path


def test_the_reader_takes_every_key_cchost_writes_and_no_other():
    # The json! objects of main.rs's write_trace: the one place cchost says what a line holds.
    source = MAIN_RS.read_text()
    body = source[source.index("fn write_trace"):]
    body = body[:body.index("\n    }\n")]
    objects = re.findall(r"json!\(\{(.*?)\}\)", body, re.S)
    written_keys = {re.search(r'"role": "(\w+)"', o).group(1): set(re.findall(r'"(\w+)":', o)) for o in objects}
    assert written_keys["receiver"] == {f for f in FeedbackStep.__dataclass_fields__} | {"role"}
    assert written_keys["sender"] == {f for f in SenderWindow.__dataclass_fields__} | {"role"}


def test_a_trace_is_read_to_its_last_complete_line(tmp_path):
    path = written(tmp_path / "h1.trace", [step(1.0), window(1.01, src=5)], partial='{"t": 1.02, "ro')
    lines = read_trace(path)
    assert [type(line) for line in lines] == [FeedbackStep, SenderWindow]
    assert lines[0].flow == (5, 1) and lines[0].decreased is False and lines[1].credits == 18
    assert read_trace(tmp_path / "h9.trace") == []


@pytest.mark.parametrize("line, problem", [
    ("[1, 2]", "expected an object, got list"),
    (json.dumps({**step(1.0), "role": "switch"}), "role must be one of receiver, sender (got 'switch')"),
    (json.dumps({k: v for k, v in step(1.0).items() if k not in ("w_after", "lost")}),
     "a receiver line without lost, w_after"),
    (json.dumps({**step(1.0), "lost": 1.5}), "lost must be an integer (got 1.5)"),
    (json.dumps({**step(1.0), "decreased": 1}), "decreased must be true or false (got 1)"),
    ("{not json", "not JSON"),
])
def test_a_line_cchost_cannot_have_written_is_named_by_file_and_line(tmp_path, line, problem):
    path = tmp_path / "h1.trace"
    path.write_text(json.dumps(step(1.0)) + "\n" + line + "\n")
    with pytest.raises(TraceError, match=re.escape(f"{path}:2: {problem}")):
        read_trace(path)


def test_per_rtt_puts_each_flows_steps_and_windows_on_one_grid_from_the_join(tmp_path):
    join = 2.0
    lines = [
        step(join - 0.01, src=5, rate=1.0, w=0.5),  # before the join: the rate the grid starts from
        step(join + 0.01, src=8, rate=0.75, sent=21),
        window(join + 0.02, src=8, credits=16, data=16),
        step(join + 0.06, src=5, rate=0.7, w=0.25, lost=11, credits=44, decreased=True, behind=0),
        step(join + 0.07, src=8, rate=0.22, w=0.25, lost=6, credits=16, decreased=True, behind=7),
        step(join + 0.08, src=8, rate=0.22, w=0.125, lost=12, credits=29, decreased=True),
        step(join + 0.30, src=5, rate=0.9),  # beyond the grid
    ]
    (tmp_path / "b").mkdir()
    written(tmp_path / "b" / "h1.trace", lines[::2])
    written(tmp_path / "b" / "h8.trace", lines[1::2])
    rows = per_rtt(traces_under(tmp_path), join, RTT, 3)
    first, joiner = rows[(5, 1)], rows[(8, 2)]
    assert [r.rate for r in first] == [1.0, 0.7, 0.7]  # carried over RTTs without a step
    assert (joiner[0].steps, joiner[0].credits_sent, joiner[0].credits_received, joiner[0].data) == (1, 21, 16, 16)
    assert (joiner[1].steps, joiner[1].decreased, joiner[1].lost, joiner[1].credits, joiner[1].behind) == \
        (2, 2, 18, 45, 7)
    assert (joiner[1].rate, joiner[1].w) == (0.22, 0.125)
    assert math.isnan(joiner[2].loss) and joiner[2].rate == 0.22
    text = table(rows)
    assert text.splitlines()[0].startswith("rtt flow") and len(text.splitlines()) == 1 + 2 * 3
    with pytest.raises(ValueError, match="rtt_s must be a positive number"):
        per_rtt([], join, 0.0, 3)


def test_an_experiment_that_asks_for_the_trace_gives_each_cchost_its_work_folders_trace_file(tmp_path):
    base = {"name": "t", "topology": {"kind": "fattree", "k": 4}, "seed": 2}
    plain = experiment_command(parse_config(base, kernel=NO_MODULES), "h3", "expresspass", 5, tmp_path,
                               binary=tmp_path / "cchost")
    assert "--trace" not in plain
    traced = experiment_command(parse_config({**base, "transport": {"trace": True}}, kernel=NO_MODULES), "h3",
                                "expresspass", 5, tmp_path, binary=tmp_path / "cchost")
    assert traced[traced.index("--trace") + 1] == str(tmp_path / "h3.trace")
    with pytest.raises(ConfigError, match="transport.trace"):
        parse_config({**base, "transport": {"trace": "sometimes"}}, kernel=NO_MODULES)
