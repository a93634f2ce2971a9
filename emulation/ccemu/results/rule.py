"""The one rule that judges every claim of the papers beside ccemu's figure (workloads/README.md), written
once:

- a claim with a paper number is **reproduced** when ccemu's figure / the paper's lies in
  [0.8, 1.25], or inside the paper's own range where the paper gives one; **same direction** when
  only the side of the claim's pivot agrees (1 for a ratio of two schemes, 0 for a share);
  **not reproduced** otherwise;
- a claim where the paper gives no number is **direction only**: its direction holds or not;
- a claim may carry a criterion tighter than the rule (never looser: both must hold);
- **not comparable** is decided before the rule, by the figure's reader (papers.py), when the data
  it needs is missing, partial, unfinished or from a FAIL block.

A figure is an interval: a number is [x, x]; a figure the run could only bound is [x, inf) (a flow
that had not converged when the run moved on) or [x, y] (a collapse between two N of the grid). The
rule decides only what holds for every value of the interval; otherwise the figure is not
comparable, and the reason says what would settle it.

The rule compares exactly: a number is the decimal it prints as (Python's shortest repr, which reads
back to the same float), the bounds are 4/5 and 5/4 of the paper's decimal, all as fractions. In
floating point 0.8 * 3 is 2.4000000000000004, and ccemu's 2.4 against the paper's 3 (a ratio
printed as 0.8) would be judged outside [0.8, 1.25].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

LOW, HIGH = Fraction(4, 5), Fraction(5, 4)  # ccemu / paper, exactly


def exact(value: float | Fraction) -> float | Fraction:
    """The number as the rule compares it: a float as the decimal it prints as, exactly; the
    infinities (open ends, unbounded figures) and NaN as they are."""
    if isinstance(value, Fraction) or math.isinf(value) or math.isnan(value):
        return value
    return Fraction(repr(float(value)))

REPRODUCED = "reproduced"
SAME_DIRECTION = "same direction"
NOT_REPRODUCED = "not reproduced"
DIRECTION_HOLDS = "direction holds"
DIRECTION_FAILS = "direction does not hold"
NOT_COMPARABLE = "not comparable"

NUMERIC, DIRECTION_ONLY = "numeric", "direction only"  # a claim's class: does the paper give a number?


@dataclass(frozen=True)
class Figure:
    """ccemu's figure: the interval [low, high] it is known to lie in (low == high: a number)."""

    low: float
    high: float

    @classmethod
    def of(cls, value: float) -> "Figure":
        return cls(float(value), float(value))

    @classmethod
    def at_least(cls, value: float) -> "Figure":
        return cls(float(value), math.inf)

    @property
    def exact(self) -> bool:
        return self.low == self.high

    @property
    def finite(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high) or math.isinf(self.low)
                    or (self.exact and math.isinf(self.high)))

    def __truediv__(self, other: "Figure") -> "Figure":
        """The interval of a / b for every a and b of the two (both positive)."""
        return Figure(self.low / other.high if other.high else math.inf,
                      self.high / other.low if other.low else math.inf)

    def text(self) -> str:
        if self.exact:
            return _number(self.low)
        if math.isinf(self.high):
            return f">= {_number(self.low)}"
        return f"{_number(self.low)} to {_number(self.high)}"


@dataclass(frozen=True)
class Interval:
    """Closed [low, high]; either end may be infinite."""

    low: float = -math.inf
    high: float = math.inf

    def holds(self, figure: Figure) -> bool:
        """Every value of the figure inside."""
        return exact(self.low) <= exact(figure.low) and exact(figure.high) <= exact(self.high)

    def misses(self, figure: Figure) -> bool:
        """No value of the figure inside."""
        return exact(figure.high) < exact(self.low) or exact(figure.low) > exact(self.high)

    def __and__(self, other: "Interval") -> "Interval":
        return Interval(max(self.low, other.low, key=exact), min(self.high, other.high, key=exact))

    def text(self) -> str:
        if self.low == self.high:
            return _number(self.low)
        if math.isinf(self.high):
            return f">= {_number(self.low)}"
        if math.isinf(self.low):
            return f"<= {_number(self.high)}"
        return f"{_number(self.low)} to {_number(self.high)}"


@dataclass(frozen=True)
class Tighter:
    """A criterion tighter than the rule, with the reason it is written beside the claim."""

    interval: Interval
    why: str


@dataclass(frozen=True)
class Paper:
    """What the paper says: a number (`value`), its own range (`low`..`high`, either end open), or
    only a direction: the side (`above` or `below`) of the pivot its figure lies on."""

    value: float | None = None
    low: float | None = None
    high: float | None = None
    side: str | None = None  # direction-only claims: "above" | "below"
    pivot: float | None = None  # the neutral value; numeric claims: for "same direction"

    def __post_init__(self):
        given = [self.value is not None, self.low is not None or self.high is not None, self.side is not None]
        if sum(given) != 1:
            raise ValueError("a paper figure is one of: a value, a range, or a side of its pivot")
        if self.side is not None and (self.side not in ("above", "below") or self.pivot is None):
            raise ValueError("a direction-only claim needs side (above or below) and its pivot")
        if self.value is not None and self.value < 0:
            raise ValueError(f"paper values are not negative (got {self.value})")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"the paper's range is empty ({self.low} to {self.high})")

    @property
    def kind(self) -> str:
        return DIRECTION_ONLY if self.side is not None else NUMERIC

    def accepted(self) -> Interval:
        """What the rule accepts (numeric claims)."""
        if self.value is not None:
            return Interval(LOW * exact(self.value), HIGH * exact(self.value))
        return Interval(-math.inf if self.low is None else self.low, math.inf if self.high is None else self.high)

    def paper_side(self) -> str | None:
        """The side of the pivot the paper's figure (all of its range) lies on; None: no pivot, or on it."""
        if self.side is not None:
            return self.side
        if self.pivot is None:
            return None
        span = self.accepted() if self.value is None else Interval(self.value, self.value)
        if exact(span.low) > exact(self.pivot):
            return "above"
        if exact(span.high) < exact(self.pivot):
            return "below"
        return None

    def text(self) -> str:
        if self.side is not None:
            return f"{'>' if self.side == 'above' else '<'} {_number(self.pivot)}"
        if self.value is not None:
            return _number(self.value)
        return self.accepted().text()


@dataclass(frozen=True)
class Judgement:
    verdict: str
    why: str = ""
    ratio: str = "-"  # ccemu / paper, as text


def judge(paper: Paper, figure: Figure, tighter: Tighter | None = None) -> Judgement:
    """The verdict on one figure (the figure's reader has already decided it is comparable)."""
    if not figure.finite or figure.low > figure.high:
        return Judgement(NOT_COMPARABLE, f"the figure is not a number ({figure.text()})")
    if paper.kind == DIRECTION_ONLY:
        return _judge_direction(paper, figure)
    ratio = _ratio(paper, figure)
    accepted = paper.accepted() & tighter.interval if tighter else paper.accepted()
    rule = _rule_text(paper)
    if accepted.holds(figure):
        return Judgement(REPRODUCED, ratio=ratio)
    if not accepted.misses(figure):
        return Judgement(NOT_COMPARABLE, f"ccemu's figure is only known to be {figure.text()}, partly inside "
                                         f"{rule}: a longer run or a finer grid would decide", ratio)
    if tighter and paper.accepted().holds(figure):
        why = f"inside {rule} but not {tighter.interval.text()} (tighter: {tighter.why})"
    else:
        why = f"outside {rule}"
    side = paper.paper_side()
    if side is not None and _side(figure, paper.pivot) == side:
        return Judgement(SAME_DIRECTION, why, ratio)
    return Judgement(NOT_REPRODUCED, why, ratio)


def _judge_direction(paper: Paper, figure: Figure) -> Judgement:
    if _side(figure, paper.pivot) == paper.side:
        return Judgement(DIRECTION_HOLDS)
    # Fails only where no value of the figure is on the paper's side (a figure at the pivot is on neither).
    pivot = exact(paper.pivot)
    if (exact(figure.high) <= pivot) if paper.side == "above" else (exact(figure.low) >= pivot):
        return Judgement(DIRECTION_FAILS, f"{figure.text()} is not {paper.side} {_number(paper.pivot)}")
    return Judgement(NOT_COMPARABLE, f"ccemu's figure is only known to be {figure.text()}, on both sides of "
                                     f"{_number(paper.pivot)}")


def _side(figure: Figure, pivot: float | None) -> str | None:
    """The side of the pivot every value of the figure lies on."""
    if pivot is None:
        return None
    if exact(figure.low) > exact(pivot):
        return "above"
    if exact(figure.high) < exact(pivot):
        return "below"
    return None


def _rule_text(paper: Paper) -> str:
    if paper.value is None:
        return f"the paper's range {paper.accepted().text()}"
    if paper.value == 0:
        return "0 (the paper's value is 0: only 0 is within [0.8, 1.25] of it)"
    return f"[{float(LOW)}, {float(HIGH)}] x {_number(paper.value)} = {paper.accepted().text()}"


def _ratio(paper: Paper, figure: Figure) -> str:
    if paper.value is not None:
        if paper.value == 0:
            return "-"
        return (figure / Figure.of(paper.value)).text()
    accepted = paper.accepted()
    if accepted.holds(figure):
        return "in range"
    if figure.high < accepted.low:
        return f"{(figure / Figure.of(accepted.low)).text()} of the low end"
    if figure.low > accepted.high:
        return f"{(figure / Figure.of(accepted.high)).text()} of the high end"
    return "-"


def _number(value: float | Fraction) -> str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{float(value):.3g}"
