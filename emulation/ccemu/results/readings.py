"""How each claim of workloads/reference.yaml reads its figure from a bundle (its `reading:`): which
blocks it needs, each checked before a number is taken, and the figure, from figures.py.

Missing data never passes: a reading raises NotComparable, with the reason, when a block it needs is
absent or did not run to its end (rounds missing, flows unfinished or their rows missing), has a
FAIL fidelity verdict (or none), or has no switch-port rows (where it reads queues). Figures the run
can only bound come back as intervals (rule.Figure), never as infinity.
"""

from __future__ import annotations

import inspect
import statistics
from collections.abc import Callable

from . import convergence_figures, figures
from .figures import NoData, Tables
from .rule import Figure

LOAD_TOLERANCE = 0.05  # a block at load 0.58 stands for the paper's 0.6
Block = tuple[str, int, str]  # (scheme, n, point)


class NotComparable(Exception):
    """The bundle cannot give the figure as the paper defines it; str() says why."""


def checked(tables: Tables, scheme: str, *, points: list[str] | None = None, n: int | None = None,
            n_min: int | None = None, n_max: int | None = None, needs_ports: bool = False) -> list[Block]:
    """The blocks of `scheme` a reading needs (at `points`, or at N in [n_min, n_max], or all), after
    every check: each block ran to its end (every flow finished and has its row, every round of the
    config ran), is not FAIL, has switch-port rows where the reading reads queues; an incast reading
    over a range of N has every N of the config's grid in it. Raises NotComparable with the first
    problems found."""
    if scheme not in tables.schemes():
        raise NotComparable(f"the run has no {scheme}")
    blocks = [(s, bn, p) for s, bn, p in tables.blocks(scheme)
              if (points is None or p in points) and (n is None or bn == n)
              and (n_min is None or bn >= n_min) and (n_max is None or bn <= n_max)]
    if not blocks:
        raise NotComparable(f"{scheme} did not run at {_wanted(points, n, n_min, n_max)}")
    problems = []
    if tables.kind == "incast":
        grid = [g for g in tables.config_value("workload.flows") or []
                if (n is None or g == n) and (n_min is None or g >= n_min) and (n_max is None or g <= n_max)]
        if absent := sorted(set(grid) - {bn for _, bn, _ in blocks}):
            problems.append(f"{scheme} did not run N = {', '.join(map(str, absent))} of the config's grid")
    rounds = tables.config_value("workload.rounds") if tables.kind == "incast" else 1
    for s, bn, p in blocks:
        name = figures.label(s, p, bn)
        verdict = tables.verdict(s, bn, p)
        if verdict is None:
            problems.append(f"{name} has no fidelity verdict")
        elif verdict == "FAIL":
            problems.append(f"{name}'s fidelity verdict is FAIL")
        if rounds and (ran := len(tables.rounds_of(s, p, bn))) < rounds:
            problems.append(f"{name} ran {ran} of its {rounds} rounds")
        if unfinished := tables.unfinished(s, p, bn):
            problems.append(f"{unfinished} flows of {name} did not finish")
        if missing := tables.missing_records(s, p, bn):
            problems.append(f"{missing} finished flows of {name} have no row in flows.csv")
        if needs_ports and not tables.switch_ports(s, p, bn):
            problems.append(f"ports.csv has no switch port of {name}")
    if problems:
        raise NotComparable("; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""))
    return blocks


def _wanted(points, n, n_min, n_max) -> str:
    if points is not None:
        return " or ".join(p or "its one point (no sweep value)" for p in points)
    if n is not None:
        return f"N = {n}"
    return " and ".join(part for part in (f"N >= {n_min}" if n_min is not None else "",
                                          f"N <= {n_max}" if n_max is not None else "") if part) or "any point"


def at_load(tables: Tables, scheme: str, load: float) -> str:
    """The point of `scheme` at `load` (within LOAD_TOLERANCE)."""
    if scheme not in tables.schemes():
        raise NotComparable(f"the run has no {scheme}")
    loads = {p: figures.load_of(p) for p in tables.points(scheme) if p.startswith("load=")}
    near = min(loads, key=lambda p: abs(loads[p] - load), default=None)
    if near is None or abs(loads[near] - load) > LOAD_TOLERANCE:
        raise NotComparable(f"{scheme} did not run at load {load:g}")
    return near


def _loads(tables: Tables, scheme: str, loads: list[float]) -> list[str]:
    return [at_load(tables, scheme, load) for load in loads]


def _positive(value: float, what: str) -> Figure:
    if not value > 0:
        raise NotComparable(f"{what} is {value:g}: no ratio")
    return Figure.of(value)


# Incast (seed 002) ------------------------------------------------------------------------------

def incast_timeout_share(tables: Tables, scheme: str, n: int | None = None, n_min: int | None = None) -> Figure:
    """A flow's timeouts among its data transmissions (first copies and retransmissions), averaged
    over the scheme's flows at N (or N >= n_min): seed 002 Table I's "timeout among all
    transmissions" of "one flow randomly selected" (line 117), in expectation (figures.IncastFigures)."""
    blocks = checked(tables, scheme, n=n, n_min=n_min)
    shares = [share for _, bn, _ in blocks for share in figures.incast(tables, scheme, bn).flow_timeout_shares]
    if not shares:
        raise NotComparable(f"{scheme} sent no data packet")
    return Figure.of(statistics.fmean(shares))


def _incast_goodput_bps(tables: Tables, scheme: str, n_min: int | None, n_max: int | None) -> float:
    """Goodput (figures.goodput_bps) over every settled round with N in [n_min, n_max]."""
    goodput = figures.goodput_bps(_settled_rounds(tables, scheme, checked(tables, scheme, n_min=n_min, n_max=n_max)))
    if not goodput:
        raise NotComparable(f"no round of {scheme} delivered a byte")
    return goodput


def incast_goodput_fraction(tables: Tables, scheme: str, n_min: int | None = None,
                            n_max: int | None = None) -> Figure:
    """Goodput of the rounds with N in [n_min, n_max], of the link rate."""
    return Figure.of(_incast_goodput_bps(tables, scheme, n_min, n_max) / tables.link_bps)


def incast_goodput_ratio(tables: Tables, a: str, b: str, n_min: int | None = None, n_max: int | None = None) -> Figure:
    return Figure.of(_incast_goodput_bps(tables, a, n_min, n_max) / _incast_goodput_bps(tables, b, n_min, n_max))


def incast_round_ms(tables: Tables, scheme: str, n: int | None = None, n_min: int | None = None) -> Figure:
    """A settled round's mean completion time (the query's: its last response in) at N (or over
    N >= n_min), datacenter ms."""
    return Figure.of(1e3 * figures.round_mean_s(tables, _settled_rounds(tables, scheme,
                                                                        checked(tables, scheme, n=n, n_min=n_min))))


def incast_queue_ratio(tables: Tables, a: str, b: str, n: int) -> Figure:
    """a's mean bottleneck queue over time at N / b's (seed 002 Fig. 9 samples the queue every
    100 us: a mean over time, idle spells included), over the block's span, every round of it."""
    def over_time(scheme: str) -> float:
        checked(tables, scheme, n=n)
        mean = figures.queues(tables, scheme, n=n).time_mean_bytes
        if mean is None:
            raise NotComparable(f"{scheme} at N = {n} has no traffic span")
        return mean
    return Figure.of(over_time(a)) / Figure.of(over_time(b))


def _settled_rounds(tables: Tables, scheme: str, blocks: list[tuple[str, int, str]]) -> list[dict]:
    return figures.settled(tables, [r for _, bn, _ in blocks for r in tables.rounds_of(scheme, n=bn)])


def incast_collapse_n(tables: Tables, scheme: str) -> Figure:
    """The N at which goodput first falls below half of the scheme's best N's: between the last N of
    the run above it (exclusive) and the first below; at least the largest N if it never does."""
    checked(tables, scheme)
    between = figures.incast_collapse_n(tables, scheme)
    if between is None:
        return Figure.at_least(max(tables.ns(scheme)) + 1)
    before, n = between
    return Figure(before + 1, n)


# Realistic (seed 000 Table 3, Fig. 19-20; seed 003 Fig. 12, Table III) ---------------------------

def _queues(tables: Tables, scheme: str, point: str) -> figures.QueueFigures:
    checked(tables, scheme, points=[point], needs_ports=True)
    return figures.queues(tables, scheme, point, ports=tables.switch_ports(scheme, point))


def max_queue_kb(tables: Tables, scheme: str, loads: list[float]) -> Figure:
    """The largest data queue any switch port reached, over the loads."""
    return Figure.of(max(_queues(tables, scheme, p).max_kb for p in _loads(tables, scheme, loads)))


def max_queue_growth(tables: Tables, scheme: str, low: float, high: float) -> Figure:
    """Max switch queue at load `high` / at load `low`."""
    before = _queues(tables, scheme, at_load(tables, scheme, low)).max_kb
    after = _queues(tables, scheme, at_load(tables, scheme, high)).max_kb
    return Figure.of(after) / _positive(before, f"{scheme}'s max queue at load {low:g}")


def max_queue_of_buffer(tables: Tables, scheme: str, loads: list[float]) -> Figure:
    """The smallest, over the loads, of the max switch queue / the port buffer: how near the buffer
    the queue gets at every load."""
    buffer_kb = tables.port_buffer_bytes(scheme) / figures.KB
    return Figure.of(min(_queues(tables, scheme, p).max_kb for p in _loads(tables, scheme, loads)) / buffer_kb)


def max_queue_ratio(tables: Tables, a: str, b: str, loads: list[float]) -> Figure:
    return max_queue_kb(tables, a, loads) / _positive(max_queue_kb(tables, b, loads).low, f"{b}'s max queue")


def mean_queue_kb(tables: Tables, scheme: str, load: float) -> Figure:
    """The data queue averaged over time (the block's traffic span) at every switch port, then over the
    ports: ns-2's queue monitors integrate a queue over time, and ExpressPass's Table 3 gives "the average
    ... queue occupancy observed during the simulation" (seed 000 line 164); the authors' public scripts
    (ns2-xpass scripts/large-scale-fattree.tcl) install no queue monitor, so how they averaged over ports is
    not known: here every switch port counts alike."""
    mean = _queues(tables, scheme, at_load(tables, scheme, load)).time_mean_kb
    if mean is None:
        raise NoData(f"{scheme}'s flows at load {load:g} have no times to average its queues over")
    return Figure.of(mean)


def mean_queue_growth(tables: Tables, scheme: str, low: float, high: float) -> Figure:
    """Switch queue averaged over time (mean_queue_kb) at load `high` / at load `low`."""
    return mean_queue_kb(tables, scheme, high) / _positive(mean_queue_kb(tables, scheme, low).low,
                                                           f"{scheme}'s mean queue at load {low:g}")


def mean_queue_ratio(tables: Tables, a: str, b: str, load: float) -> Figure:
    return mean_queue_kb(tables, a, load) / _positive(mean_queue_kb(tables, b, load).low, f"{b}'s mean queue")


def queue_bound_fraction(tables: Tables, scheme: str) -> Figure:
    """The largest data queue of any switch port over every block / ExpressPass's bound, C x (max -
    min credit-path delay), for the run's topology (the manifest's)."""
    bound = tables.manifest.get("expresspass_queue_bound_bytes")
    if not bound:
        raise NotComparable("the manifest has no ExpressPass queue bound (a bundle from before it was recorded)")
    blocks = checked(tables, scheme, needs_ports=True)
    ports = [p for _, bn, pt in blocks for p in tables.switch_ports(scheme, pt, bn)]
    return Figure.of(figures.queues(tables, scheme, ports=ports).max_bytes / bound)


def _fcts(tables: Tables, scheme: str, point: str | None, bucket: str | None = None) -> figures.FctFigures:
    checked(tables, scheme, points=None if point is None else [point])
    return figures.fcts(tables, scheme, point, bucket=bucket)


def mean_fct_ratio(tables: Tables, a: str, b: str, load: float, bucket: str | None = None) -> Figure:
    """Mean FCT of `a` / of `b` at `load`, over the flows of one size bucket or all."""
    fa = _fcts(tables, a, at_load(tables, a, load), bucket).mean_s
    fb = _fcts(tables, b, at_load(tables, b, load), bucket).mean_s
    return Figure.of(fa) / _positive(fb, f"{b}'s mean FCT")


def fct_quantile_ratio(tables: Tables, a: str, b: str, q: float, load: float | None = None) -> Figure:
    """FCT quantile (50, 99, 100 = max) of `a` / of `b` (at `load`, for a realistic run)."""
    pa = None if load is None else at_load(tables, a, load)
    pb = None if load is None else at_load(tables, b, load)
    qa, qb = _fcts(tables, a, pa).quantile_s(q), _fcts(tables, b, pb).quantile_s(q)
    return Figure.of(qa) / _positive(qb, f"{b}'s FCT quantile {q:g}")


def p99_gap_over_mean_gap(tables: Tables, a: str, b: str, load: float, bucket: str) -> Figure:
    """How much larger `a` / `b` is at the 99th percentile of a bucket's FCTs than on their mean:
    (a's p99 / b's p99) / (a's mean / b's mean) at `load` (seed 000 lines 117-118: "the gap is
    larger at 99th percentile")."""
    pa, pb = at_load(tables, a, load), at_load(tables, b, load)
    fa, fb = _fcts(tables, a, pa, bucket), _fcts(tables, b, pb, bucket)
    p99 = Figure.of(fa.quantile_s(99)) / _positive(fb.quantile_s(99), f"{b}'s {bucket} FCT p99")
    mean = Figure.of(fa.mean_s) / _positive(fb.mean_s, f"{b}'s {bucket} mean FCT")
    return p99 / mean


def mean_fct_gain_between_loads(tables: Tables, a: str, b: str, load: float, other: float) -> Figure:
    """(a / b mean FCT at `load`) / (the same at `other`): where a gains more over b, above 1."""
    return mean_fct_ratio(tables, a, b, load) / mean_fct_ratio(tables, a, b, other)


def data_drops(tables: Tables, scheme: str) -> Figure:
    """Data packets the switch ports dropped in every block of the scheme (seed 003 line 326: zero
    data loss)."""
    blocks = checked(tables, scheme, needs_ports=True)
    return Figure.of(sum(int(p["data_dropped"]) for _, bn, pt in blocks for p in tables.switch_ports(scheme, pt, bn)))


def credit_waste(tables: Tables, scheme: str, load: float) -> Figure:
    """Credits wasted / sent at `load` (ExpressPass Fig. 20 is at load 0.6)."""
    point = at_load(tables, scheme, load)
    checked(tables, scheme, points=[point])
    return Figure.of(figures.credit_waste(tables, scheme, point))


# Permutation (seed 003 Fig. 8) ------------------------------------------------------------------

def _throughputs(tables: Tables, scheme: str) -> list[float]:
    checked(tables, scheme)
    return figures.flow_throughputs_bps(tables, scheme)


def throughput_ratio(tables: Tables, a: str, b: str) -> Figure:
    ta, tb = _throughputs(tables, a), _throughputs(tables, b)
    return Figure.of((sum(ta) / len(ta)) / (sum(tb) / len(tb)))


def min_throughput_ratio(tables: Tables, a: str, b: str) -> Figure:
    return Figure.of(min(_throughputs(tables, a))) / _positive(min(_throughputs(tables, b)), f"{b}'s slowest flow")


# Convergence (seed 000's convergence figure; seed 003 Fig. 9) -------------------------------------

def convergence_rtts(tables: Tables, scheme: str, alpha: float | None = None, until: str = "reached") -> Figure:
    """RTTs from the first joining flow's start until it `reached` its fair share, or until every running flow
    `converged` on theirs and kept them (convergence_figures.convergence says which figures each reading stands for); at
    least the room it had if not within it."""
    if until not in ("reached", "converged"):
        raise ValueError(f"until: reached or converged (got {until!r})")
    point = f"alpha={alpha:g}" if alpha is not None else ""
    checked(tables, scheme, points=[point])
    seen = convergence_figures.convergence(tables, scheme, point)
    first = (seen.reached if until == "reached" else seen.converged)[0]
    room = (seen.reached_room if until == "reached" else seen.room)[0]
    return Figure.at_least(room) if first is None else Figure.of(first)


def convergence_ratio(tables: Tables, a: str, b: str, alpha: float | None = None, until: str = "reached") -> Figure:
    of_b = convergence_rtts(tables, b, alpha, until)
    if not of_b.low > 0:
        raise NotComparable(f"{b}'s joining flow had its share at once: no ratio")
    return convergence_rtts(tables, a, alpha, until) / of_b


# Victim flows (seed 004 Table 3, Fig. 15a) -------------------------------------------------------

def _victims(tables: Tables, scheme: str) -> figures.VictimFigures:
    checked(tables, scheme)
    return figures.victims(tables, scheme)


def victim_ce_fraction(tables: Tables, scheme: str) -> Figure:
    """Of the scheme's victim flows, the fraction taken for congested (a packet CE-marked)."""
    return Figure.of(_victims(tables, scheme).ce_fraction)


def victim_fct_ratio(tables: Tables, a: str, b: str) -> Figure:
    """Mean FCT of `a`'s victim flows / of `b`'s."""
    return Figure.of(_victims(tables, a).mean_fct_s) / _positive(_victims(tables, b).mean_fct_s, f"{b}'s victims' FCT")


READINGS: dict[str, Callable[..., Figure]] = {f.__name__: f for f in (
    incast_timeout_share, incast_goodput_fraction, incast_goodput_ratio, incast_round_ms, incast_collapse_n,
    incast_queue_ratio,
    max_queue_kb, max_queue_growth, max_queue_of_buffer, max_queue_ratio, mean_queue_kb, mean_queue_ratio,
    queue_bound_fraction, mean_fct_ratio, fct_quantile_ratio, credit_waste, throughput_ratio, min_throughput_ratio,
    mean_queue_growth, p99_gap_over_mean_gap, mean_fct_gain_between_loads, data_drops,
    convergence_rtts, convergence_ratio, victim_ce_fraction, victim_fct_ratio)}


def check_arguments(name: str, args: dict) -> None:
    """Raises ValueError unless `args` fit the reading `name` (checked when reference.yaml loads)."""
    if name not in READINGS:
        raise ValueError(f"unknown reading {name!r} (known: {', '.join(sorted(READINGS))})")
    try:
        inspect.signature(READINGS[name]).bind(None, **args)
    except TypeError as exc:
        raise ValueError(f"reading {name}: {exc}") from None


def read(tables: Tables, name: str, args: dict) -> Figure:
    """The figure of one reading (a NaN one is the rule's to refuse); raises NotComparable, also where a
    figure of figures.py has no data (NoData)."""
    try:
        return READINGS[name](tables, **args)
    except NoData as exc:
        raise NotComparable(str(exc)) from exc
