"""ccemu's figures beside the papers': the claims of workloads/reference.yaml, each read from a bundle
(readings.py) and judged by the one rule (rule.py). Every claim of an experiment appears in its
summary.md, and every claim of the table in `make reproduce`'s REPORT.md, whether it could be
compared or not."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
import typing
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..model import schemes
from ..model.config import EXPERIMENTS_DIR, WORKLOAD_KINDS, ExperimentConfig, read_yaml
from ..model.config.schemes import SchemeConfig
from . import readings, rule, stats
from .figures import Tables
from .markdown import table, text_cell
from .readings import NotComparable
from .rule import Figure, Judgement, Paper, Tighter

REFERENCE = Path(__file__).resolve().parents[3] / "workloads" / "reference.yaml"
EXPERIMENTS = WORKLOAD_KINDS  # a claim is about one kind of experiment
NOT_RUN_HERE = "not run here"  # a claim ccemu cannot run: its reason begins so


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PaperEntry(_Strict):
    """`paper:` of a claim: exactly one of value, range, above, below; and the unit it is in."""

    unit: str
    value: float | None = Field(None, ge=0)
    range: tuple[float | None, float | None] | None = None  # the paper's own range; null: open end
    above: float | None = None  # direction only: the paper's figure is above this pivot ...
    below: float | None = None  # ... or below it

    def paper(self, pivot: float | None) -> Paper:
        if self.above is not None or self.below is not None:
            return Paper(side="above" if self.above is not None else "below",
                         pivot=self.above if self.above is not None else self.below)
        low, high = self.range or (None, None)
        return Paper(value=self.value, low=low, high=high, pivot=pivot)


class TighterEntry(_Strict):
    """`tighter:` a criterion on ccemu's figure on top of the rule, and why."""

    at_least: float | None = None
    at_most: float | None = None
    why: str = Field(min_length=1)

    @model_validator(mode="after")
    def _a_bound(self) -> "TighterEntry":
        if self.at_least is None and self.at_most is None:
            raise ValueError("a tighter criterion needs at_least or at_most")
        return self


class ClaimEntry(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    experiment: Literal[EXPERIMENTS]
    claim: str
    source: str = Field(min_length=1)
    paper: PaperEntry
    pivot: float | None = None  # numeric claims: the neutral value, for "same direction"
    tighter: TighterEntry | None = None
    # Settings of the run the paper's figure needs (dotted keys of the config): another value makes
    # the claim not comparable. Only settings ccemu can run; what it cannot yet is in `differs`.
    requires: dict[str, str | float | int] = {}
    reading: dict | None = None
    # Why ccemu cannot run the paper's figure (an InfiniBand network, a counter cchost does not
    # keep, an experiment not built yet): the claim is listed "not run here" with it, never read.
    not_run_here: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _a_reading_or_why_not(self) -> "ClaimEntry":
        if (self.reading is None) == (self.not_run_here is None):
            raise ValueError("a claim has a reading or says why it is not run here (not_run_here), one of them")
        return self

    @field_validator("requires")
    @classmethod
    def _config_keys(cls, requires: dict) -> dict:
        for key in requires:
            if not _is_config_key(key):
                raise ValueError(f"requires: {key!r} is not a key of an experiment file")
        return requires

    @field_validator("reading")
    @classmethod
    def _known_reading(cls, reading: dict | None) -> dict | None:
        if reading is None:
            return None
        args = {k: v for k, v in reading.items() if k != "name"}
        readings.check_arguments(str(reading.get("name")), args)
        return reading

    @model_validator(mode="after")
    def _one_paper_figure(self) -> "ClaimEntry":
        self.paper.paper(self.pivot)  # raises ValueError: not one of value / range / side
        if self.paper.above is not None or self.paper.below is not None:
            if self.pivot is not None or self.tighter is not None:
                raise ValueError("a direction-only claim has no pivot or tighter criterion of its own")
        return self


def _is_config_key(dotted: str) -> bool:
    """Whether `dotted` ("transport.rto_min_ms") names a field of the experiment file's schema (any
    member of a union: workload.cdf is the realistic workload's), or a scheme's setting by its name
    ("schemes.dctcp.rto_min_ms", "schemes.dctcp.params.min_window_segments")."""
    parts = dotted.split(".")
    if parts[0] == "schemes" and len(parts) >= 3:
        if parts[1] not in schemes.names():
            return False
        if parts[2] == "params":
            return len(parts) == 4 and parts[3] in schemes.params(parts[1])
        return len(parts) == 3 and parts[2] in SchemeConfig.model_fields
    models: list[type[BaseModel]] = [ExperimentConfig]
    for part in parts:
        fields = [m.model_fields[part] for m in models if part in m.model_fields]
        if not fields:
            return False
        models = [t for f in fields for t in _models_in(f.annotation)]
    return True


def _models_in(annotation) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


class SettingEntry(_Strict):
    source: str
    link_gbps: float
    rtt_us: float
    bdp_packets: float
    hosts: int | None = None  # the paper's (None: it does not say), beside the experiment's in the reports
    differs: list[str] = []  # what ccemu's experiment cannot (yet) run as the paper did


class ReferenceTable(_Strict):
    # By kind (its default experiment file), or by an experiment file's name where that file's set-up
    # differs from its kind's otherwise (realistic-fig19: the paper's own fabric).
    settings: dict[str, SettingEntry]
    claims: list[ClaimEntry]

    @model_validator(mode="after")
    def _settings_of_kinds_and_files(self) -> "ReferenceTable":
        for name in self.settings:
            if name not in EXPERIMENTS and not (EXPERIMENTS_DIR / f"{name}.yaml").is_file():
                raise ValueError(f"settings: {name!r} is neither a kind of experiment nor a file of {EXPERIMENTS_DIR}")
        return self

    @model_validator(mode="after")
    def _unique_ids(self) -> "ReferenceTable":
        ids = [c.id for c in self.claims]
        if twice := sorted({i for i in ids if ids.count(i) > 1}):
            raise ValueError(f"claim ids must be unique (got {', '.join(twice)} twice)")
        return self


@dataclass(frozen=True)
class Claim:
    id: str
    experiment: str
    claim: str
    source: str
    unit: str
    paper: Paper
    reading: dict
    requires: dict
    tighter: Tighter | None = None
    not_run_here: str = ""  # why ccemu cannot run the figure; "": it can

    @property
    def kind(self) -> str:
        return self.paper.kind


@dataclass(frozen=True)
class Repeats:
    """A claim read from every run of an experiment that `ccemu reproduce --repeats N` ran N times."""

    figures: tuple[Figure, ...]  # one per run, in the order they ran
    verdicts: tuple[str, ...]  # the rule's verdict on each run's figure alone
    interval: Figure  # where the median of what the runs sample lies (stats.median_interval) ...
    confidence: float  # ... with this probability

    def text(self) -> str:
        tally = Counter(self.verdicts)
        return (f"median of {len(self.figures)} runs; {self.confidence:.0%} interval of the median "
                f"{self.interval.text()}; each run: " + ", ".join(f.text() for f in self.figures) +
                " (" + ", ".join(f"{n} {v}" for v, n in tally.most_common()) + ")")


@dataclass(frozen=True)
class Comparison:
    claim: Claim
    ours: Figure | None  # None: not comparable before a figure was read
    judgement: Judgement
    run: str = ""  # the experiment file it was read from, where a reproduction ran several of its kind
    repeats: Repeats | None = None  # the runs behind `ours` (their median), where there were several

    @property
    def verdict(self) -> str:
        return self.judgement.verdict

    @property
    def why(self) -> str:
        return self.judgement.why


def _table(path: Path) -> ReferenceTable:
    # The strict reader of the experiment files: a claim written twice (a duplicate key) is an
    # error here too, not the later one silently winning.
    return ReferenceTable.model_validate(read_yaml(path))


def load_claims(path: Path = REFERENCE) -> list[Claim]:
    claims = []
    for c in _table(path).claims:
        tighter = None
        if c.tighter:
            t = c.tighter
            tighter = Tighter(rule.Interval(-math.inf if t.at_least is None else t.at_least,
                                            math.inf if t.at_most is None else t.at_most), t.why)
        claims.append(Claim(c.id, c.experiment, c.claim, c.source, c.paper.unit, c.paper.paper(c.pivot),
                            dict(c.reading or {}), dict(c.requires), tighter, c.not_run_here or ""))
    return claims


def settings(path: Path = REFERENCE) -> dict[str, dict]:
    return {name: s.model_dump() for name, s in _table(path).settings.items()}


def setting_of(tables: Tables, path: Path = REFERENCE) -> dict | None:
    """The paper's setting a bundle stands for: its experiment file's own, else its kind's."""
    known = settings(path)
    return known.get(tables.manifest["config"].get("name", "")) or known.get(tables.kind)


def settings_differ(claim: Claim, tables: Tables) -> str:
    """The settings the claim requires that the run has otherwise, as the reason; "" if none."""
    off = []
    for key, wanted in claim.requires.items():
        have = tables.config_value(key)
        same = (have == wanted if isinstance(wanted, str) or isinstance(have, str) or have is None
                else abs(float(have) - float(wanted)) <= 1e-9 * max(1.0, abs(float(wanted))))
        if not same:
            off.append(f"{key} {wanted} (this run: {have})")
    return "the paper's figure is for " + ", ".join(off) if off else ""


def compare_claim(claim: Claim, tables: Tables) -> Comparison:
    if claim.experiment != tables.kind:
        raise ValueError(f"claim {claim.id} is about {claim.experiment}, the bundle is {tables.kind}")
    if claim.not_run_here:
        return _not_comparable(claim, f"{NOT_RUN_HERE}: {claim.not_run_here}")
    if why := settings_differ(claim, tables):
        return _not_comparable(claim, why)
    args = {k: v for k, v in claim.reading.items() if k != "name"}
    try:
        ours = readings.read(tables, claim.reading["name"], args)
    except NotComparable as exc:
        return _not_comparable(claim, str(exc))
    except (KeyError, ValueError, TypeError, ArithmeticError) as exc:  # a hand-edited or truncated table
        return _not_comparable(claim, f"the bundle's tables are malformed ({exc!r})")
    return Comparison(claim, ours, rule.judge(claim.paper, ours, claim.tighter))


def _not_comparable(claim: Claim, why: str) -> Comparison:
    return Comparison(claim, None, Judgement(rule.NOT_COMPARABLE, why))


def compare(tables: Tables, claims: list[Claim] | None = None) -> list[Comparison]:
    """Every claim of the bundle's kind, read and judged."""
    return [compare_claim(c, tables) for c in (claims if claims is not None else load_claims())
            if c.experiment == tables.kind]


def over_runs(claim: Claim, comparisons: list[Comparison]) -> Comparison:
    """One claim over several runs of one experiment (each already read and judged alone): judged by
    the rule on the median of their figures, with the runs' figures, verdicts and the interval of the
    median beside it. Fixed before any run, like the rule: never the best run, never a majority of
    verdicts. A run that could not be compared makes the claim not comparable (a median of the runs
    that happened to have data would let missing data pass)."""
    if len(comparisons) == 1:
        return comparisons[0]
    missing = [(i, c) for i, c in enumerate(comparisons, start=1) if c.ours is None or c.verdict == rule.NOT_COMPARABLE]
    if missing:
        i, first = missing[0]
        return _not_comparable(claim, f"{len(missing)} of {len(comparisons)} runs not comparable; run {i}: {first.why}")
    figures = tuple(c.ours for c in comparisons)
    median = Figure(statistics.median(f.low for f in figures), statistics.median(f.high for f in figures))
    low, _, confidence = stats.median_interval([f.low for f in figures])
    _, high, _ = stats.median_interval([f.high for f in figures])
    repeats = Repeats(figures, tuple(c.verdict for c in comparisons), Figure(low, high), confidence)
    return Comparison(claim, median, rule.judge(claim.paper, median, claim.tighter), repeats=repeats)


def not_run(claims: list[Claim], why: str) -> list[Comparison]:
    """The claims of an experiment that left no bundle: listed all the same."""
    return [_not_comparable(c, f"{NOT_RUN_HERE}: {c.not_run_here}" if c.not_run_here else why) for c in claims]


def headline(comparisons: list[Comparison]) -> str:
    """The counts of each class, e.g. "5 reproduced, 3 same direction, ... (of 36 claims)", and
    the commonest reason a claim was not comparable (a run at another setting than the paper's
    makes a whole experiment's claims so, which the counts alone leave unexplained)."""
    tally = Counter(c.verdict for c in comparisons)
    direction = tally[rule.DIRECTION_HOLDS] + tally[rule.DIRECTION_FAILS]
    counts = (f"**{tally[rule.REPRODUCED]} reproduced, {tally[rule.SAME_DIRECTION]} same direction only, "
              f"{tally[rule.NOT_REPRODUCED]} not reproduced, {direction} direction only "
              f"({tally[rule.DIRECTION_HOLDS]} hold, {tally[rule.DIRECTION_FAILS]} do not), "
              f"{tally[rule.NOT_COMPARABLE]} not comparable** (of {len(comparisons)} claims)")
    # The claims ccemu cannot run each say why in their own words: one reason together.
    reasons = Counter(NOT_RUN_HERE if c.claim.not_run_here else c.why
                      for c in comparisons if c.verdict == rule.NOT_COMPARABLE and c.why)
    if not reasons:
        return counts
    (why, count), = reasons.most_common(1)
    if why == NOT_RUN_HERE:
        return f"{counts}; {count} of the not comparable are not run here (each says why)"
    return f"{counts}; {count} of the not comparable because {why}"


RULE_TEXT = ("One rule judges every claim: **reproduced** when ccemu's figure / the paper's lies in "
             f"[{float(rule.LOW)}, {float(rule.HIGH)}] (or inside the paper's own range, where it gives one); "
             "**same direction** "
             "when only the side of the claim's pivot agrees (1 for a ratio of two schemes, 0 for a share); "
             "**not reproduced** otherwise; **direction only** where the paper gives no number; **not comparable**, "
             "with the reason, when the data the figure needs is missing, partial, unfinished, from a block whose "
             "fidelity verdict is FAIL, or from another setting than the paper's. A figure the run could only "
             "bound is shown as one (>= x, or x to y) and judged only where every value of it agrees. Where an "
             "experiment ran several times (`--repeats N`, seeds seed .. seed + N - 1), a claim is judged on the "
             "median of the runs' figures, shown with each run's figure and verdict and the interval the median "
             "lies in; one run that cannot be compared makes the claim not comparable.")


def markdown(comparisons: list[Comparison]) -> list[str]:
    """The table of summary.md's and REPORT.md's "beside the papers" section."""
    if not comparisons:
        return []
    cells = []
    for c in comparisons:
        text = c.claim.claim
        if c.claim.tighter:
            text += f" (criterion tighter than the rule: {c.claim.tighter.interval.text()}, {c.claim.tighter.why})"
        ours = (c.ours.text() if c.ours is not None else "-") + (f" ({c.repeats.text()})" if c.repeats else "") + \
            (f" (run: {c.run})" if c.run else "")
        verdict = f"**{c.verdict}**" + (f" ({c.why})" if c.why else "")
        cells.append([text_cell(text), f"{c.claim.paper.text()} {text_cell(c.claim.unit)}", ours, c.judgement.ratio,
                      c.claim.kind, text_cell(verdict), text_cell(c.claim.source)])
    return table(["claim", "paper", "ccemu", "ccemu / paper", "class", "verdict", "source"], cells)
