"""Reading cchost's trace of the credit schemes' flows (`cchost --trace`, transport/README.md "Trace";
an experiment turns it on with `transport.trace: true`: each host's cchost writes <host>.trace into the
block's work folder, which the bundle keeps under work/).

Two kinds of lines, JSON each, times in wall seconds after the block's epoch (as flows.csv and
timeline.csv) and durations in wall microseconds (divide by the dilation for datacenter time):

- a flow's receiver, at every feedback step (about once per RTT): the credits it sent since its last
  step, of them those sent right behind the one before (a late wake-up's catch-up) and those queued
  behind another flow's credit in the same batch, the credits the step accounted and judged lost,
  those skipped but not judged yet, the loss and the target loss it was held against, the rate (as a
  fraction of the maximum) and w before and after, whether it cut the rate, the RTT it used and how
  long the period lasted;
- a flow's sender, at every window of about an RTT: the credits it received, and the new data, the
  data sent again and the credits wasted they paid for.

`per_rtt` puts both on one grid of base RTTs from a moment (a join, say), per flow: the table to lay
a slow run beside a fast one (issue 39)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

TRACE_SUFFIX = ".trace"


class TraceError(ValueError):
    """A trace line cchost cannot have written: says the file, the line and what was wrong."""


@dataclass(frozen=True)
class FeedbackStep:
    """A receiver's line: one feedback step of the flow (src, id) received by dst."""

    t: float
    src: int
    dst: int
    id: int
    credits_sent: int
    back_to_back: int
    behind: int
    credits: int
    lost: int
    unjudged: int
    loss: float
    target_loss: float
    rate_before: float
    rate_after: float
    w_before: float
    w_after: float
    decreased: bool
    rtt_us: float
    period_us: float

    @property
    def flow(self) -> tuple[int, int]:
        return self.src, self.id


@dataclass(frozen=True)
class SenderWindow:
    """A sender's line: one window (about an RTT) of the flow (src, id) sent to dst."""

    t: float
    src: int
    dst: int
    id: int
    window_us: float
    credits: int
    data: int
    retransmits: int
    wasted: int

    @property
    def flow(self) -> tuple[int, int]:
        return self.src, self.id


Line = FeedbackStep | SenderWindow
ROLES: dict[str, type[FeedbackStep] | type[SenderWindow]] = {"receiver": FeedbackStep, "sender": SenderWindow}


WORDS = {"int": "an integer", "float": "a finite number", "bool": "true or false"}


def parse_line(text: str, where: str) -> Line:
    """One line of a trace; TraceError naming `where` (file:line) and the problem otherwise."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise TraceError(f"{where}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise TraceError(f"{where}: expected an object, got {type(value).__name__}")
    role = value.get("role")
    if role not in ROLES:
        raise TraceError(f"{where}: role must be one of {', '.join(ROLES)} (got {role!r})")
    kind = ROLES[role]
    names = [f.name for f in fields(kind)]
    missing = [n for n in names if n not in value]
    if missing:
        raise TraceError(f"{where}: a {role} line without {', '.join(missing)}")
    kwargs = {}
    for f in fields(kind):
        raw = value[f.name]
        # bool is an int in Python: keep the two apart, as cchost writes them.
        if f.type == "bool":
            ok = isinstance(raw, bool)
        elif f.type == "int":
            ok = isinstance(raw, int) and not isinstance(raw, bool)
        else:
            ok = isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw)
        if not ok:
            raise TraceError(f"{where}: {f.name} must be {WORDS[f.type]} (got {raw!r})")
        kwargs[f.name] = float(raw) if f.type == "float" else raw
    return kind(**kwargs)


def read_trace(path: Path) -> list[Line]:
    """Every complete line of a trace file cchost may still be writing (a last line without its
    newline is being written: left for the next read). A missing file is no lines."""
    if not path.exists():
        return []
    text = path.read_text()
    complete = text[:text.rfind("\n") + 1].splitlines()
    return [parse_line(line, f"{path}:{n}") for n, line in enumerate(complete, start=1) if line.strip()]


def traces_under(workdir: Path) -> list[Line]:
    """The lines of every trace under a block's work folder (every host's, every cchost's), by time."""
    lines = [line for path in sorted(workdir.glob(f"**/*{TRACE_SUFFIX}")) for line in read_trace(path)]
    return sorted(lines, key=lambda line: line.t)


@dataclass
class RttRow:
    """One flow over one base RTT: what its receiver's steps and its sender's windows that ended in that
    RTT say (a step or window ends in the RTT its line's time falls in; an RTT without one has zeros
    and the rate and w of the last step before it)."""

    flow: tuple[int, int]
    rtt: int  # index from the grid's start
    steps: int = 0
    credits_sent: int = 0
    back_to_back: int = 0
    behind: int = 0
    credits: int = 0  # accounted by the steps
    lost: int = 0
    decreased: int = 0  # steps that cut the rate
    rate: float = math.nan  # after the RTT's last step (fraction of the maximum)
    w: float = math.nan
    loss: float = math.nan  # of the RTT's last step, and its target
    target_loss: float = math.nan
    credits_received: int = 0  # at the sender
    data: int = 0
    retransmits: int = 0
    wasted: int = 0


def per_rtt(lines: Iterable[Line], start_s: float, rtt_s: float, rtts: int) -> dict[tuple[int, int], list[RttRow]]:
    """Each flow's rows over `rtts` base RTTs of `rtt_s` wall seconds from `start_s` (wall seconds after
    the epoch): for a join, its flow's start and the block's base RTT (results.convergence_figures.base_rtt_s)."""
    if not (rtt_s > 0 and math.isfinite(rtt_s)):
        raise ValueError(f"rtt_s must be a positive number of seconds (got {rtt_s})")
    ordered = sorted(lines, key=lambda line: line.t)
    rows: dict[tuple[int, int], list[RttRow]] = {}
    last: dict[tuple[int, int], FeedbackStep] = {}
    for line in ordered:
        flow = line.flow
        if flow not in rows:
            rows[flow] = [RttRow(flow, i) for i in range(rtts)]
        if isinstance(line, FeedbackStep) and line.t < start_s:
            last[flow] = line
        index = math.floor((line.t - start_s) / rtt_s)
        if not 0 <= index < rtts:
            continue
        row = rows[flow][index]
        if isinstance(line, FeedbackStep):
            row.steps += 1
            row.credits_sent += line.credits_sent
            row.back_to_back += line.back_to_back
            row.behind += line.behind
            row.credits += line.credits
            row.lost += line.lost
            row.decreased += line.decreased
            row.rate, row.w, row.loss, row.target_loss = line.rate_after, line.w_after, line.loss, line.target_loss
        else:
            row.credits_received += line.credits
            row.data += line.data
            row.retransmits += line.retransmits
            row.wasted += line.wasted
    for flow, flow_rows in rows.items():
        before = last.get(flow)
        rate, w = (before.rate_after, before.w_after) if before else (math.nan, math.nan)
        for row in flow_rows:
            if row.steps:
                rate, w = row.rate, row.w
            else:
                row.rate, row.w = rate, w
    return rows


def table(rows: dict[tuple[int, int], list[RttRow]]) -> str:
    """The rows as text, one line per RTT and flow (flows side by side in time): for a terminal or a
    report's appendix."""
    head = "rtt flow      sent b2b behind acct lost cuts  rate     w    loss  target   got data resent wasted"
    out = [head]
    for i in range(max((len(r) for r in rows.values()), default=0)):
        for flow in sorted(rows):
            r = rows[flow][i]
            out.append(f"{i:3d} h{flow[0]}#{flow[1]:<5d} {r.credits_sent:5d} {r.back_to_back:3d} {r.behind:6d} "
                       f"{r.credits:4d} {r.lost:4d} {r.decreased:4d} {r.rate:5.3f} {r.w:5.3f} {r.loss:7.3f} "
                       f"{r.target_loss:7.3f} {r.credits_received:5d} {r.data:4d} {r.retransmits:6d} {r.wasted:6d}")
    return "\n".join(out)
