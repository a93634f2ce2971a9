"""Several results bundles side by side: a parameter sweep runs `ccemu experiment` once per point, and
each point leaves a bundle (or failed, or never ran). merge() puts every block (scheme, N or point) of
every bundle in one table with its point's parameters, and plots the headline figures against the
swept parameter, from the bundles' CSVs and manifests alone (as report.py does for one bundle).

A merge directory holds:

    points.csv    the points: label, bundle, machine, status, reason, wall time and one column per
                  parameter (write_points: written by whoever ran the sweep)
    blocks.csv    one row per block of every bundle: label, machine, parameters, scheme, n, point, figures
    summary.md    the points, then the blocks side by side, with links to each bundle's own summary.md
    plots/        sweep_goodput_of_link.png, sweep_slowdown_p99.png, sweep_max_queue_packets.png
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..kinds import KINDS
from ..model.dilation import DATA_WIRE_BYTES
from ..results import figures, files, plotting
from ..results.bundle import block_label, point_values, read_manifest
from ..results.figures import Tables
from ..results.markdown import table, text_cell

# points.csv: these, then one column per parameter (an empty cell: the point lacks the parameter).
POINT_FIELDS = ["label", "bundle", "machine", "status", "reason", "wall_seconds"]
BLOCK_FIELDS = ["scheme", "n", "point"]
# blocks.csv's figures, in order, with their titles in summary.md.
METRICS = {
    "flows": "flows", "unfinished": "unfinished", "goodput_mbps": "goodput Mbit/s (wall)",
    "goodput_of_link": "goodput / link", "slowdown_p50": "slowdown p50", "slowdown_p99": "slowdown p99",
    "fct_p99_dc_ms": "FCT p99 ms", "max_queue_bytes": "max queue B", "max_queue_packets": "max queue pkts",
    "data_drops": "data drops", "marks": "CE marks", "timeouts": "timeouts", "verdict": "verdict",
}
PLOTTED = {"goodput_of_link": "goodput / link rate (dilation-free)",
           "slowdown_p99": "FCT slowdown p99 (FCT / ideal FCT, dilation-free)",
           "max_queue_packets": f"max switch queue (packets of {DATA_WIRE_BYTES} B on the wire)"}
DONE, INTERRUPTED, FAILED, NOT_RUN = "done", "interrupted", "failed", "not run"


@dataclass(frozen=True)
class Entry:
    """One bundle to merge (or a sweep point that produced none)."""

    label: str  # e.g. "p01"; unique
    bundle: Path | None  # None: the point did not run / has no bundle
    params: dict[str, str]  # dotted key -> value as text, e.g. {"workload.flows": "[8]", "scheme": "dctcp"}
    machine: str = ""  # where it ran ("" if unknown)
    status: str = ""  # "done", "failed", "not run" ("" for plain bundles: derived from the bundle)
    reason: str = ""  # why it failed / did not run, one line
    wall_seconds: float | None = None


# Parameters ----------------------------------------------------------------------------------

def cell_text(value: object) -> str:
    """A config value as one cell: strings as they are, lists as "[8, 32]", the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + ", ".join(cell_text(v) for v in value) + "]"
    return json.dumps(value, sort_keys=True)


def _flatten(value: object, prefix: str, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(inner, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        # The schemes section by scheme name: its order is not a parameter, and a scheme's port
        # profile must line up with the same scheme's in the other bundles.
        by_scheme = all("scheme" in v for v in value)
        for i, inner in enumerate(value):
            if by_scheme:
                _flatten({k: v for k, v in inner.items() if k != "scheme"}, f"{prefix}[{inner['scheme']}]", out)
            else:
                _flatten(inner, f"{prefix}[{i}]", out)
    else:
        out[prefix] = cell_text(value)


def varied_parameters(configs: Sequence[dict]) -> dict[str, list[str]]:
    """For the manifests' `config` dicts of several bundles: each dotted key whose value differs between
    bundles -> the value of that key per config (text; "" where a config lacks the key). Lists of dicts
    that carry a "scheme" key (the `schemes` section) are flattened by scheme name:
    `schemes[dctcp].port.ecn_threshold_bytes`; a key counts as varied only if two configs that both have
    it hold different values (a scheme present in one bundle and absent in another is not a parameter:
    the block rows already name their scheme). `name` never counts. Lists of scalars are one value
    (`workload.flows` -> "[8, 32]")."""
    flat = []
    for config in configs:
        values: dict[str, str] = {}
        _flatten({k: v for k, v in config.items() if k != "name"}, "", values)
        flat.append(values)
    varied = {}
    for key in sorted({k for values in flat for k in values}):
        if len({values[key] for values in flat if key in values}) > 1:
            varied[key] = [values.get(key, "") for values in flat]
    return varied


@contextlib.contextmanager
def _written_csv(path: Path) -> Iterator[io.StringIO]:
    """A CSV written as `path` once complete, never through a link (files.py)."""
    out = io.StringIO(newline="")
    yield out
    files.write_text(path, out.getvalue())


def _manifest(bundle: Path) -> dict | None:
    try:
        return read_manifest(bundle)  # an object, or BundleFileError
    except (OSError, ValueError):  # BundleFileError among them
        return None


def _unique(names: Sequence[str]) -> list[str]:
    used: set[str] = set()
    unique = []
    for name in names:
        label, suffix = name, 2
        while label in used:
            label, suffix = f"{name}-{suffix}", suffix + 1
        used.add(label)
        unique.append(label)
    return unique


def entries_of_bundles(bundles: Sequence[Path]) -> list[Entry]:
    """Plain bundles (e.g. `ccemu report B1 B2 --out DIR`): label = the bundle's directory name made unique
    (suffix -2, -3 if needed), params from varied_parameters of their manifests' configs (a config
    lacking a varied key leaves it out of its entry's params)."""
    configs = [(_manifest(Path(b)) or {}).get("config") or {} for b in bundles]
    varied = varied_parameters(configs)
    labels = _unique([Path(b).absolute().name for b in bundles])
    return [Entry(label, Path(bundle), {key: values[i] for key, values in varied.items() if values[i]})
            for i, (label, bundle) in enumerate(zip(labels, bundles))]


# points.csv ----------------------------------------------------------------------------------

def write_points(directory: Path, entries: Sequence[Entry]) -> Path:
    """directory/points.csv: one row per entry, bundles inside `directory` stored relative to it (the
    directory can move with its bundles)."""
    keys = sorted({key for entry in entries for key in entry.params})
    if clash := set(keys) & set(POINT_FIELDS):
        raise ValueError(f"parameter names clash with points.csv's own columns: {', '.join(sorted(clash))}")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "points.csv"
    with _written_csv(path) as out:
        writer = csv.DictWriter(out, fieldnames=POINT_FIELDS + keys)
        writer.writeheader()
        for entry in entries:
            writer.writerow({"label": entry.label, "bundle": _stored(entry.bundle, directory),
                             "machine": entry.machine, "status": entry.status, "reason": entry.reason,
                             "wall_seconds": "" if entry.wall_seconds is None else repr(entry.wall_seconds),
                             **entry.params})
    return path


def _stored(bundle: Path | None, directory: Path) -> str:
    if bundle is None:
        return ""
    absolute, base = Path(os.path.abspath(bundle)), Path(os.path.abspath(directory))
    return str(absolute.relative_to(base)) if absolute.is_relative_to(base) else str(absolute)


# Blocks --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Point:
    """An entry with what its bundle says about it."""

    entry: Entry
    tables: Tables | None  # None: no readable bundle
    status: str
    reason: str
    wall_seconds: float | None
    verdict: str


def _load(entry: Entry) -> _Point:
    if entry.bundle is None:
        return _Point(entry, None, entry.status or NOT_RUN, entry.reason or "no bundle", entry.wall_seconds, "")
    if not (entry.bundle / "manifest.json").is_file():
        why = "no manifest.json: the run did not finish" if entry.bundle.is_dir() else f"no bundle at {entry.bundle}"
        return _Point(entry, None, entry.status or FAILED, entry.reason or why, entry.wall_seconds, "")
    try:
        tables = Tables.read(entry.bundle)
        if not isinstance(tables.manifest, dict):
            raise ValueError("manifest.json is not an object")
    except (OSError, ValueError, csv.Error) as exc:
        return _Point(entry, None, entry.status or FAILED, entry.reason or f"unreadable bundle: {exc}",
                      entry.wall_seconds, "")
    manifest = tables.manifest
    status, reason = entry.status or DONE, entry.reason
    # The sweep saw the command end; the manifest knows whether the experiment got through.
    if manifest.get("failed"):
        status = FAILED if status == DONE else status
        reason = reason or f"stopped by an error: {manifest['failed']}"
    elif manifest.get("interrupted"):
        status = INTERRUPTED if status == DONE else status
        reason = reason or "interrupted: the tables hold what finished before it"
    wall = entry.wall_seconds if entry.wall_seconds is not None else manifest.get("wall_seconds")
    return _Point(entry, tables, status, " ".join(reason.split()), wall,
                  (manifest.get("fidelity") or {}).get("status", ""))


def _int(value: str | None) -> int:
    return int(float(value)) if value not in ("", None) else 0


def _n(row: dict) -> int:
    return _int(row.get("n"))


def _link_bps(tables: Tables) -> float | None:
    try:
        return tables.link_bps or None
    except (KeyError, TypeError, ValueError):
        return None


def _block_rows(point: _Point) -> list[dict]:
    """One row per block of the point's bundle, every figure as figures.py defines it (the bundle's own
    summary.md shows the same numbers)."""
    tables = point.tables
    if tables is None:
        return []
    link = _link_bps(tables)
    blocks = dict.fromkeys((r["scheme"], _n(r), r.get("point") or "")
                           for r in tables.rounds + tables.flows + tables.ports)
    rows = []
    for scheme, n, at in blocks:
        flows = tables.flows_of(scheme, at, n)
        ports = tables.ports_of(scheme, at, n)
        goodput = figures.goodput_bps(figures.settled(tables, tables.rounds_of(scheme, at, n)))
        fct = figures.optional(lambda: figures.fcts(tables, scheme, at, n))
        queue = figures.optional(lambda: figures.queues(tables, scheme, at, n))
        unfinished = tables.unfinished(scheme, at, n)
        rows.append({
            "label": point.entry.label, "machine": point.entry.machine, "params": point.entry.params,
            "bundle": point.entry.bundle, "status": point.status,
            "scheme": scheme, "n": n, "point": at,
            "flows": len(flows) + unfinished, "unfinished": unfinished,
            "goodput_mbps": goodput / 1e6 if goodput is not None else None,
            "goodput_of_link": goodput / link if goodput is not None and link else None,
            "slowdown_p50": fct.slowdown_p50 if fct else None, "slowdown_p99": fct.slowdown_p99 if fct else None,
            "fct_p99_dc_ms": 1e3 * fct.p99_s if fct else None,
            "max_queue_bytes": queue.max_bytes if queue else None,
            "max_queue_packets": queue.max_packets if queue else None,
            "data_drops": sum(_int(p.get("data_dropped")) for p in ports),
            "marks": sum(_int(p.get("data_marked")) + _int(p.get("credit_marked")) for p in ports),
            "timeouts": sum(_int(f.get("timeouts")) for f in flows),
            # Each block's own verdict where the bundle has one: the bundle's is its worst block's.
            "verdict": tables.verdict(scheme, n, at) or point.verdict,
        })
    return rows


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _natural(text: str) -> tuple:
    """Sort key: runs of digits as numbers ("[8]" < "[32]", "load=0.25" < "load=0.5"), numbers before text."""
    parts, at = [], 0
    for match in _NUMBER.finditer(text):
        if match.start() > at:
            parts.append((1, 0.0, text[at:match.start()]))
        parts.append((0, float(match.group()), ""))
        at = match.end()
    if at < len(text):
        parts.append((1, 0.0, text[at:]))
    return tuple(parts)


def _block_text(row: dict, field: str) -> str:
    return (str(row["n"]) if row["n"] else "") if field == "n" else row[field]


def _param_columns(keys: Sequence[str]) -> dict[str, str]:
    """Parameter -> its column in blocks.csv; a sweep's `scheme` parameter must not shadow the block's."""
    fixed = {"label", "machine", *BLOCK_FIELDS, *METRICS}
    return {key: f"param:{key}" if key in fixed else key for key in keys}


def _shown_keys(rows: Sequence[dict], keys: Sequence[str]) -> list[str]:
    """The parameters worth a column beside the blocks: not those that only repeat the block's own
    scheme (a sweep over `scheme` runs one scheme per bundle)."""
    return [key for key in keys if not (key in BLOCK_FIELDS and rows
                                        and all(r["params"].get(key, "") == _block_text(r, key) for r in rows))]


def _write_blocks(path: Path, rows: Sequence[dict], keys: Sequence[str]) -> None:
    columns = _param_columns(keys)
    with _written_csv(path) as out:
        writer = csv.DictWriter(out, fieldnames=["label", "machine", *columns.values(), *BLOCK_FIELDS, *METRICS])
        writer.writeheader()
        for row in rows:
            cells = {"label": row["label"], "machine": row["machine"], "point": row["point"],
                     "scheme": row["scheme"], "n": _block_text(row, "n")}
            cells |= {columns[key]: row["params"].get(key, "") for key in keys}
            cells |= {m: "" if row[m] is None else f"{row[m]:.6g}" if isinstance(row[m], float) else row[m]
                      for m in METRICS}
            writer.writerow(cells)


# summary.md ----------------------------------------------------------------------------------

def _fmt(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def _link(label: str, bundle: Path | None, directory: Path) -> str:
    """The label, linked to the bundle's own summary.md (its directory if it has none)."""
    if bundle is None or not bundle.is_dir():
        return text_cell(label)
    target = bundle / "summary.md" if (bundle / "summary.md").is_file() else bundle
    relative = Path(os.path.relpath(os.path.abspath(target), os.path.abspath(directory))).as_posix()
    return f"[{text_cell(label)}]({f'<{relative}>' if ' ' in relative else relative})"


def _counts_line(points: Sequence[_Point]) -> str:
    counts = Counter(p.status for p in points)
    ran = counts[DONE] + counts[INTERRUPTED]
    parts = [f"{ran} ran" + (f" ({counts[INTERRUPTED]} interrupted)" if counts[INTERRUPTED] else ""),
             f"{counts[FAILED]} failed", f"{counts[NOT_RUN]} did not run"]
    parts += [f"{counts[s]} {s}" for s in sorted(counts) if s not in (DONE, INTERRUPTED, FAILED, NOT_RUN)]
    return f"{len(points)} point{'s' if len(points) != 1 else ''}: " + ", ".join(parts) + "."


def _points_lines(directory: Path, points: Sequence[_Point], keys: Sequence[str]) -> list[str]:
    machines = any(p.entry.machine for p in points)
    header = ["label", *keys, *(["machine"] if machines else []), "status", "wall time", "verdict", "reason"]
    rows = [[_link(p.entry.label, p.entry.bundle if p.tables else None, directory),
             *(text_cell(_fmt(p.entry.params.get(key))) for key in keys),
             *([text_cell(_fmt(p.entry.machine))] if machines else []), p.status,
             f"{p.wall_seconds:.0f} s" if p.wall_seconds is not None else "-", _fmt(p.verdict),
             text_cell(_fmt(p.reason))]
            for p in points]
    return ["## Points", ""] + table(header, rows) + [""]


def _side_by_side_lines(directory: Path, rows: Sequence[dict], keys: Sequence[str]) -> list[str]:
    if not rows:
        return ["## Side by side", "", "No bundle to put side by side.", ""]
    ns, at, machines = any(r["n"] for r in rows), any(r["point"] for r in rows), any(r["machine"] for r in rows)
    named = [*keys, "scheme", *(["N"] if ns else []), *(["point"] if at else [])]  # what every part repeats
    header = [*named, "label", *(["machine"] if machines else []), *METRICS.values()]
    cells = []
    for r in rows:
        label = r["label"] + (" (interrupted)" if r["status"] == INTERRUPTED else "")
        cells.append([*(text_cell(_fmt(r["params"].get(key))) for key in keys), r["scheme"],
                      *([_fmt(r["n"] or None)] if ns else []), *([text_cell(_fmt(r["point"]))] if at else []),
                      _link(label, r["bundle"], directory), *([text_cell(_fmt(r["machine"]))] if machines else []),
                      *(text_cell(_fmt(r[m])) for m in METRICS)])
    # Three tables: the flows and their goodput, their slowdown and FCT, then the queues, losses and verdict.
    return ["## Side by side", ""] + table(header, cells, keys=len(named),
                                           breaks=(METRICS["slowdown_p50"], METRICS["max_queue_bytes"])) + [
        "", "Figures as each bundle's summary.md defines them (results/figures.py). Goodput: the bytes of the "
        "finished rounds over their time, in wall Mbit/s and as a fraction of the emulated link rate (a round with "
        "unfinished flows counts in the unfinished column only). Slowdown: FCT / the flow's ideal FCT "
        "(dilation-free), and FCT p99 in datacenter milliseconds, over the finished flows. Max queue: the largest "
        "data queue of the ports the kind's figures read (the bottleneck port where the kind has one, every switch "
        f"port otherwise), in bytes on the wire and in packets of {DATA_WIRE_BYTES} B. Data drops and CE marks "
        "(data and credit packets) over every port; timeouts over every finished flow; verdict: the block's "
        "fidelity verdict. Each bundle links to its own summary.",
        ""]


def merge(directory: Path, entries: Sequence[Entry], title: str) -> Path:
    """Writes directory/blocks.csv, directory/summary.md and directory/plots/*.png from the entries'
    bundles alone (deterministic: merging twice gives the same summary.md); returns summary.md's path."""
    directory.mkdir(parents=True, exist_ok=True)
    points = [_load(entry) for entry in entries]
    keys = sorted({key for entry in entries for key in entry.params})
    unsorted = []
    for i, point in enumerate(points):
        try:
            unsorted += _block_rows(point)
        except (KeyError, ValueError) as exc:  # a hand-edited or truncated CSV: that point only
            points[i] = replace(point, tables=None, status=FAILED, reason=point.reason or f"unreadable tables: {exc!r}")
    rows = sorted(unsorted,
                  key=lambda r: (_natural(r["scheme"]), tuple(_natural(r["params"].get(k, "")) for k in keys),
                                 r["n"], _natural(r["point"]), _natural(r["label"])))
    _write_blocks(directory / "blocks.csv", rows, keys)
    shown = _shown_keys(rows, keys)
    plots = _plot(directory / "plots", rows, shown, _where(points))
    lines = [f"# {title}", "", _counts_line(points), ""]
    lines += _points_lines(directory, points, keys)
    lines += _side_by_side_lines(directory, rows, shown)
    if plots:
        lines += ["## Plots", ""] + [line for p in plots for line in (f"![{p.stem}](plots/{p.name})", "")]
    summary = directory / "summary.md"
    files.write_text(summary, "\n".join(lines))
    return summary


# plots/ --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Dimension:
    """Something the blocks differ in: a parameter, N, or the point of the bundle's own sweep."""

    name: str
    title: str
    text: Callable[[dict], str]
    number: Callable[[dict], float | None]

    def label(self, row: dict) -> str:
        text = self.text(row)
        return {"n": f"N={text}", "point": text}.get(self.name, f"{self.name}={text or '-'}")


def _number(text: str) -> float | None:
    """A number, or a list of one number ("[8]": an incast sweep's workload.flows)."""
    inner = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        value = float(inner)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _dimensions(rows: Sequence[dict], keys: Sequence[str]) -> list[_Dimension]:
    names = {name for r in rows for name, _ in _point(r["point"])}
    return [*(_Dimension(key, key, lambda r, k=key: r["params"].get(k, ""),
                         lambda r, k=key: _number(r["params"].get(k, ""))) for key in keys),
            _Dimension("n", "incast flows N", lambda r: _block_text(r, "n"), lambda r: float(r["n"]) or None),
            _Dimension("point", names.pop() if len(names) == 1 else "point", lambda r: r["point"],
                       lambda r: _point_number(r["point"]))]


def _point_number(point: str) -> float | None:
    """The value of a one-value point ("load=0.5"); None for none, or for several."""
    values = _point(point)
    return values[0][1] if len(values) == 1 and math.isfinite(values[0][1]) else None


def _point(point: str) -> tuple[tuple[str, float], ...]:
    """A point's named values; none for a point that is not "name=value" (a hand-made table)."""
    try:
        return point_values(point)
    except ValueError:
        return ()


def _x_dimension(rows: Sequence[dict], dimensions: Sequence[_Dimension]) -> _Dimension | None:
    """The first dimension whose values are all numbers, at least two different ones."""
    for dimension in dimensions:
        given = [r for r in rows if dimension.text(r)]
        numbers = [dimension.number(r) for r in given]
        if given and None not in numbers and len(set(numbers)) > 1:
            return dimension
    return None


def _splits(rows: Sequence[dict], given: Sequence[_Dimension], dimension: _Dimension) -> bool:
    """Whether the dimension takes two values where the scheme and the given dimensions (x first) hold
    one each: then it needs lines of its own; otherwise it follows them (an incast sweep's N follows its
    workload.flows) and splits nothing."""
    seen: dict[tuple, set[str]] = defaultdict(set)
    for r in rows:
        seen[(r["scheme"], *(d.text(r) for d in given))].add(dimension.text(r))
    return any(len(values) > 1 for values in seen.values())


def _where(points: Sequence[_Point]) -> str:
    """The experiments the merged bundles ran, for the plots' titles (their points are the plots' x)."""
    seen = dict.fromkeys(KINDS[p.tables.kind].where(p.tables, points=False) for p in points
                         if p.tables is not None and p.tables.kind in KINDS)
    return "; ".join(seen)


def _plot(out: Path, rows: Sequence[dict], keys: Sequence[str], where: str) -> list[Path]:
    """sweep_<metric>.png for each plotted figure that some block has: against the first numeric
    dimension, one line per scheme and combination of the other dimensions; bars per block if none."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in sorted(out.glob("sweep_*.png")):  # an earlier merge's, of a figure this one may lack
        stale.unlink()
    if not rows:
        return []
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dimensions = _dimensions(rows, keys)
    x = _x_dimension(rows, dimensions)
    split: list[_Dimension] = []
    for dimension in dimensions:
        if x is not None and dimension is not x and _splits(rows, [x, *split], dimension):
            split.append(dimension)
    scheme_colors = {s: plotting.scheme_color(s) for s in sorted({r["scheme"] for r in rows}, key=_natural)}
    written = []
    for metric, ylabel in PLOTTED.items():
        have = [r for r in rows if r[metric] is not None and (x is None or x.number(r) is not None)]
        if not have:
            continue
        if x is None:
            fig, ax = _bars(plt, have, metric, scheme_colors)
        else:
            fig, ax = _lines(plt, have, metric, x, split, scheme_colors)
        ax.set(ylabel=ylabel, ylim=(0, None),
               title=plotting.title(f"{ylabel.split(' (')[0]}{f' against {x.title}' if x else ''}", where))
        ax.grid(alpha=0.3, **({} if x else {"axis": "y"}))
        plotting.legend_beside(ax)
        written.append(plotting.save(fig, out / f"sweep_{metric}.png"))
    return written


def _lines(plt, rows: Sequence[dict], metric: str, x: _Dimension, split: Sequence[_Dimension],
           scheme_colors: dict[str, str]):
    series: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for r in rows:
        series[(r["scheme"], *(d.label(r) for d in split))].append((x.number(r), r[metric]))
    fig, ax = plotting.subplots(plt, figsize=(6, 4))
    per_scheme: Counter[str] = Counter()
    for key in sorted(series, key=lambda k: tuple(_natural(part) for part in k)):
        # One colour per scheme; the other dimensions' combinations by marker and line style.
        i = per_scheme[key[0]]
        per_scheme[key[0]] += 1
        points = sorted(series[key])
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="osD^vx"[i % 6],
                linestyle=("-", "--", ":", "-.")[i % 4], color=scheme_colors[key[0]], label=" ".join(key))
    xs = sorted({x.number(r) for r in rows})
    if xs[0] > 0 and xs[-1] / xs[0] >= 16:  # N or sizes swept by doubling
        ax.set_xscale("log")
        plotting.plain_log_ticks(ax)
    if len(xs) <= 12:
        ax.set_xticks(xs, [f"{v:g}" for v in xs])
        ax.minorticks_off()
    ax.set(xlabel=x.title)
    return fig, ax


def _bars(plt, rows: Sequence[dict], metric: str, scheme_colors: dict[str, str]):
    fig, ax = plotting.subplots(plt, figsize=(max(6.0, 0.45 * len(rows) + 2), 4))
    for scheme, color in scheme_colors.items():
        at = [i for i, r in enumerate(rows) if r["scheme"] == scheme]
        if at:
            ax.bar(at, [rows[i][metric] for i in at], color=color, label=scheme)
    ax.set_xticks(range(len(rows)), [f"{r['label']} {block_label(r['scheme'], r['n'], r['point'])}" for r in rows],
                  rotation=45, ha="right", fontsize="small")
    return fig, ax
