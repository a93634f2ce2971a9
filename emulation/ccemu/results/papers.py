"""ccemu's figures beside the papers': the claims of workloads/reference.yaml, each computed from a
bundle (figures.py) and judged reproduced, not reproduced, or not comparable (the run lacks
what the figure needs: a scheme, a load, an N)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..model.dilation import CREDITED_PAYLOAD_SHARE
from . import figures
from .figures import Tables

REFERENCE = Path(__file__).resolve().parents[3] / "workloads" / "reference.yaml"
REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable"


class NotComparable(Exception):
    """The bundle lacks what a figure needs; str() says what."""


def _need(value, what: str):
    if value is None:
        raise NotComparable(what)
    return value


def _schemes(tables: Tables, *names: str) -> None:
    missing = [n for n in names if n not in tables.schemes()]
    if missing:
        raise NotComparable(f"the run has no {', '.join(missing)}")


def _at_load(tables: Tables, scheme: str, load: float) -> str:
    """The point of `scheme` at `load` (within 0.05)."""
    points = [p for p in tables.points(scheme) if p.startswith("load=")]
    near = min(points, key=lambda p: abs(figures.load_of(p) - load), default=None)
    if near is None or abs(figures.load_of(near) - load) > 0.05:
        raise NotComparable(f"{scheme} did not run at load {load:g}")
    return near


def max_queue_growth(tables: Tables, scheme: str, low: float = 0.2, high: float = 0.6) -> float:
    """Max switch queue at load `high` / at load `low`."""
    _schemes(tables, scheme)
    before = figures.queues(tables, scheme, _at_load(tables, scheme, low)).max_kb
    return figures.queues(tables, scheme, _at_load(tables, scheme, high)).max_kb / before


def max_queue_growth_over(tables: Tables, a: str, b: str, low: float = 0.2, high: float = 0.6) -> float:
    return max_queue_growth(tables, a, low, high) / max_queue_growth(tables, b, low, high)


def max_queue_kb(tables: Tables, scheme: str) -> float:
    _schemes(tables, scheme)
    return max(figures.queues(tables, scheme, p).max_kb for p in tables.points(scheme))


def max_queue_ratio(tables: Tables, a: str, b: str) -> float:
    return max_queue_kb(tables, a) / max_queue_kb(tables, b)


def mean_fct_ratio(tables: Tables, a: str, b: str, load: float, bucket: str | None = None) -> float:
    """Mean FCT of `a` / of `b` at `load`, over the flows of one size bucket or all."""
    _schemes(tables, a, b)
    point = _at_load(tables, a, load)
    what = f"{bucket} flows" if bucket else "flows"
    fa = _need(figures.mean_fct_s(tables, a, point, bucket), f"no {a} {what} at {point}")
    fb = _need(figures.mean_fct_s(tables, b, point, bucket), f"no {b} {what} at {point}")
    return fa / fb


def credit_waste(tables: Tables, scheme: str) -> float:
    _schemes(tables, scheme)
    return _need(figures.credit_waste(tables, scheme), f"{scheme} sent no credits")


def throughput_ratio(tables: Tables, a: str, b: str) -> float:
    _schemes(tables, a, b)
    ta, tb = figures.flow_throughputs_bps(tables, a), figures.flow_throughputs_bps(tables, b)
    return (sum(ta) / len(ta)) / (sum(tb) / len(tb))


def min_throughput_ratio(tables: Tables, a: str, b: str) -> float:
    _schemes(tables, a, b)
    return min(figures.flow_throughputs_bps(tables, a)) / min(figures.flow_throughputs_bps(tables, b))


def fct_quantile_ratio(tables: Tables, a: str, b: str, q: float) -> float:
    _schemes(tables, a, b)
    return figures.fct_quantile_s(tables, a, q) / figures.fct_quantile_s(tables, b, q)


def convergence_rtts(tables: Tables, scheme: str, alpha: float | None = None) -> float:
    """RTTs the second flow took to reach the fair share with the first (the papers' figures: a
    flow joins a running one); inf when it never did before the next flow joined."""
    _schemes(tables, scheme)
    point = f"alpha={alpha:g}" if alpha is not None else ""
    if point not in tables.points(scheme):
        raise NotComparable(f"{scheme} did not run at {point or 'its own initial rate'}")
    seen = figures.convergence(tables, scheme, point, convergence_payload_bps(tables))
    if seen is None:
        raise NotComparable(f"no throughput timeline for {scheme} {point}")
    first = seen.joins[0]
    return math.inf if first is None else first


def convergence_payload_bps(tables: Tables) -> float:
    return tables.link_bps * CREDITED_PAYLOAD_SHARE


def incast_timeouts(tables: Tables, scheme: str, n_min: int) -> float:
    _schemes(tables, scheme)
    return _need(figures.incast_timeouts(tables, scheme, n_min), f"no {scheme} round with N >= {n_min}")


def incast_goodput_fraction(tables: Tables, scheme: str, n_min: int) -> float:
    _schemes(tables, scheme)
    return _need(figures.incast_goodput_fraction(tables, scheme, n_min), f"no {scheme} round with N >= {n_min}")


def incast_goodput_ratio(tables: Tables, a: str, b: str, n_min: int) -> float:
    return incast_goodput_fraction(tables, a, n_min) / incast_goodput_fraction(tables, b, n_min)


def incast_collapse_n(tables: Tables, scheme: str) -> float:
    _schemes(tables, scheme)
    n = figures.incast_collapse_n(tables, scheme)
    return math.inf if n is None else n


def victim_ce_fraction(tables: Tables, scheme: str) -> float:
    """Of the scheme's victim flows, the fraction taken for congested (a packet CE-marked)."""
    _schemes(tables, scheme)
    return _need(figures.victims(tables, scheme), f"no {scheme} victim flow finished").ce_fraction


METRICS = {f.__name__: f for f in (
    max_queue_growth, max_queue_growth_over, max_queue_kb, max_queue_ratio, mean_fct_ratio, credit_waste,
    throughput_ratio, min_throughput_ratio, fct_quantile_ratio, convergence_rtts, incast_timeouts,
    incast_goodput_fraction, incast_goodput_ratio, incast_collapse_n, victim_ce_fraction)}


@dataclass(frozen=True)
class Claim:
    id: str
    experiment: str
    claim: str
    paper: float | None
    unit: str
    source: str
    metric: dict
    reproduced_if: dict
    ours_unit: str | None = None  # what ccemu's figure counts, when not the paper's unit (no ratio then)
    requires: dict | None = None  # workload keys the paper's value is for, e.g. {"cdf": "webserver"}

    def criterion(self) -> str:
        (kind, bound), = self.reproduced_if.items()
        if kind == "within":
            return f"{bound[0]:g} to {bound[1]:g}"
        return f"{'>=' if kind == 'at_least' else '<='} {bound:g}"

    def holds(self, value: float) -> bool:
        (kind, bound), = self.reproduced_if.items()
        if kind == "at_least":
            return value >= bound
        if kind == "at_most":
            return value <= bound
        return bound[0] <= value <= bound[1]


@dataclass(frozen=True)
class Comparison:
    claim: Claim
    ours: float | None
    status: str
    why: str = ""

    @property
    def ratio(self) -> float | None:
        """Ours / the paper's, where both are numbers."""
        p = self.claim.paper
        if self.ours is None or p in (None, 0) or math.isinf(self.ours) or self.claim.ours_unit:
            return None
        return self.ours / p


def load_claims(path: Path = REFERENCE) -> list[Claim]:
    data = yaml.safe_load(path.read_text())
    claims = []
    for c in data["claims"]:
        if c["metric"]["name"] not in METRICS:
            raise ValueError(f"{path}: claim {c['id']}: unknown metric {c['metric']['name']!r}")
        claims.append(Claim(c["id"], c["experiment"], c["claim"], c["paper"]["value"], c["paper"]["unit"],
                            c["source"], c["metric"], c["reproduced_if"], c.get("ours"), c.get("requires")))
    return claims


def settings(path: Path = REFERENCE) -> dict[str, dict]:
    return yaml.safe_load(path.read_text())["settings"]


def compare(tables: Tables, claims: list[Claim] | None = None) -> list[Comparison]:
    """Every claim of the bundle's kind, computed and judged."""
    out = []
    for claim in claims if claims is not None else load_claims():
        if claim.experiment != tables.kind:
            continue
        args = {k: v for k, v in claim.metric.items() if k != "name"}
        workload = tables.manifest["config"].get("workload") or {}
        differs = {k: v for k, v in (claim.requires or {}).items() if workload.get(k) != v}
        if differs:
            out.append(Comparison(claim, None, NOT_COMPARABLE, "the paper's value is for " + ", ".join(
                f"{k} {v} (this run: {workload.get(k)})" for k, v in differs.items())))
            continue
        try:
            ours = float(METRICS[claim.metric["name"]](tables, **args))
        except NotComparable as exc:
            out.append(Comparison(claim, None, NOT_COMPARABLE, str(exc)))
            continue
        except (ArithmeticError, ValueError, TypeError) as exc:
            # A partial bundle (an interrupted run, a scheme without finished flows or port figures).
            out.append(Comparison(claim, None, NOT_COMPARABLE, f"the bundle lacks what it needs ({exc})"))
            continue
        out.append(Comparison(claim, ours, REPRODUCED if claim.holds(ours) else NOT_REPRODUCED))
    return out


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "never"
    return f"{value:.3g}"


def markdown(comparisons: list[Comparison]) -> list[str]:
    """The table of summary.md's and REPORT.md's "beside the papers" section."""
    if not comparisons:
        return []
    lines = ["| claim | paper | ccemu | ccemu / paper | reproduced when | verdict | source |",
             "|---|---|---|---|---|---|---|"]
    for c in comparisons:
        ratio = f"{c.ratio:.2f}" if c.ratio is not None else "-"
        verdict = c.status + (f" ({c.why})" if c.why else "")
        ours = _number(c.ours) + (f" ({c.claim.ours_unit})" if c.claim.ours_unit and c.ours is not None else "")
        lines.append(f"| {c.claim.claim} | {_number(c.claim.paper)} {c.claim.unit} | {ours} | {ratio} | "
                     f"{c.claim.criterion()} | **{verdict}** | {c.claim.source} |")
    return lines
