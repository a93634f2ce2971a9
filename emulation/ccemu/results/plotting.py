"""How every plot looks (a bundle's plots/: reports/report.py and each kind's, kinds/; a merge's: reports/merge.py),
decided once so that the plots read alike: one colour per scheme in every plot, titles that say what and where,
plain tick labels on log axes, CDFs that show the share at 0, the levels a queue is judged against, legends beside
the data rather than on it. The callers import matplotlib (Agg); this module imports it only inside its functions,
as they do, so that reading a bundle does not load it."""

from __future__ import annotations

import io
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..model import schemes as registry
from . import files

if TYPE_CHECKING:
    from .figures import Tables

# matplotlib's default cycle (tab10) less its grey, the levels' colour: the registry's schemes take it in the
# registry's order, so that expresspass, spraypass, dctcp and dctcp+ keep the colours the plots gave them before.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
SCHEME_COLORS: dict[str, str] = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(registry.names())}
LEVEL_COLOR = "0.35"  # the lines of K, the buffer and XOFF: grey, no scheme's colour
KB = 1000


def scheme_color(scheme: str) -> str:
    """The scheme's one colour. A name the registry lacks (a bundle from a scheme since renamed, a hand-made
    table) takes one of the colours the registry leaves, by a hash of the name: the same in every plot."""
    if scheme in SCHEME_COLORS:
        return SCHEME_COLORS[scheme]
    spare = PALETTE[len(SCHEME_COLORS):] or PALETTE
    return spare[zlib.crc32(scheme.encode()) % len(spare)]


def shades(scheme: str, count: int) -> list[tuple[float, float, float]]:
    """`count` shades of the scheme's colour, dark to light: the flows of one scheme's block told apart
    while the block still reads as its scheme."""
    from matplotlib.colors import to_rgb

    base = to_rgb(scheme_color(scheme))
    out = []
    for i in range(count):
        t = 0.0 if count == 1 else -0.45 + 0.9 * i / (count - 1)  # < 0: toward black, > 0: toward white
        out.append(tuple(c * (1 + t) if t < 0 else c + (1 - c) * t for c in base))
    return out


# Axes ------------------------------------------------------------------------------------------

def plain_number(value: float) -> str:
    """A tick as a reader says it: 0.1, 10, 1k, 2M (matplotlib's log axes print 10^1)."""
    if value == 0:
        return "0"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:.6g}"


def plain_bytes(size: float) -> str:
    """A size as the summaries write it, in SI units: 800 B, 125 KB, 2 MB."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if abs(size) >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"


def plain_log_ticks(ax, axis: str = "x") -> None:
    """Plain tick labels on a log or symlog axis; the minor ticks labelled only where matplotlib's log formatter
    would label them (an axis spanning few decades), so that a wide one is not crowded."""
    from matplotlib.ticker import LogFormatter

    class Plain(LogFormatter):
        def __call__(self, x, pos=None):
            # 0 (on a symlog axis) is a tick of its own: the log formatter has no label for it.
            return "0" if x == 0 else plain_number(x) if super().__call__(x, pos) else ""

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_formatter(Plain(10, labelOnlyBase=False))
    target.set_minor_formatter(Plain(10, labelOnlyBase=False, minor_thresholds=(1.5, 0.5)))


def symlog_from_zero(ax, smallest_positive: float, axis: str = "x") -> None:
    """A log scale that still holds 0: symlog, linear from 0 up to the smallest positive value and logarithmic
    beyond, so that a CDF's share at 0, which a log axis would drop, sits just left of the rest."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    linthresh = smallest_positive if smallest_positive > 0 else 1.0
    (ax.set_xscale if axis == "x" else ax.set_yscale)("symlog", linthresh=linthresh, linscale=0.3)
    target = ax.xaxis if axis == "x" else ax.yaxis
    # Labels at 0 and the decades past linthresh only: the linear stretch is too short for more.
    target.set_major_formatter(FuncFormatter(lambda x, _: plain_number(x) if x == 0 or abs(x) >= linthresh else ""))
    target.set_minor_formatter(NullFormatter())


# CDFs --------------------------------------------------------------------------------------------

def ecdf(values: Sequence[float]) -> tuple[float, list[tuple[float, float]]]:
    """(the share of values at or below 0, [(each positive value, the share at or below it)])."""
    ordered = sorted(values)
    n = len(ordered)
    zero = sum(v <= 0 for v in ordered)
    return (zero / n if n else 0.0), [(v, (i + 1) / n) for i, v in enumerate(ordered) if v > 0]


def draw_cdf(ax, at_zero: float, points: Sequence[tuple[float, float]], color: str, label: str) -> None:
    """A CDF as steps from its value at 0, marked with a dot there, through `points` (value, share at or below
    it): the share at 0 (empty queues, say) stands out, not a line rising from the axis's corner."""
    if not points and not at_zero:
        return
    ax.step([0.0, *(x for x, _ in points)], [at_zero, *(y for _, y in points)], where="post", color=color,
            label=label)
    ax.plot([0.0], [at_zero], marker="o", markersize=4, color=color, linestyle="none", clip_on=False)


# Levels ------------------------------------------------------------------------------------------

# Each level its own line style, so that the legend tells them apart in grey.
LEVEL_STYLES = {"K": ":", "buffer": "--", "PFC XOFF": "-."}


def queue_levels(tables: "Tables") -> list[tuple[float, str, str]]:
    """(bytes, what, legend text) of what a queue is judged against in the run: DCTCP's marking threshold K, each
    port buffer (the schemes that have it named where they differ), PFC's XOFF where the ports are lossless."""
    manifest = tables.manifest
    levels: list[tuple[float, str, str]] = []
    if k := manifest.get("dctcp_k_bytes"):
        levels.append((float(k), "K", f"K = {k / KB:g} KB: DCTCP's ECN marking threshold"))
    by_buffer: dict[int, list[str]] = {}
    by_xoff: dict[int, list[str]] = {}
    for s in manifest.get("config", {}).get("schemes", []):
        port = s.get("port") or {}
        if port.get("buffer_bytes"):
            by_buffer.setdefault(int(port["buffer_bytes"]), []).append(s["scheme"])
        if xoff := (port.get("lossless") or {}).get("xoff_bytes"):
            by_xoff.setdefault(int(xoff), []).append(s["scheme"])
    for found, what in ((by_buffer, "buffer"), (by_xoff, "PFC XOFF")):
        for size, names in sorted(found.items()):
            whose = f" ({', '.join(names)})" if len(found) > 1 else ""
            levels.append((float(size), what, f"{what} {size / KB:g} KB{whose}"))
    return levels


def mark_levels(ax, levels: Sequence[tuple[float, str, str]], axis: str = "x", scale: float = KB) -> None:
    """A grey line at each level (in bytes, drawn in `scale`: KB by default), named in the legend: vertical on a
    queue CDF (the queue on x), horizontal where the queue is on y."""
    draw = ax.axvline if axis == "x" else ax.axhline
    for value, what, text in levels:
        draw(value / scale, color=LEVEL_COLOR, linestyle=LEVEL_STYLES.get(what, ":"), linewidth=1.2, label=text)


# Legends, titles, files ----------------------------------------------------------------------------

def legend_beside(ax) -> None:
    """The legend to the right of the axes, outside them: never over a line (the figure's constrained layout
    makes room for it)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize="small", frameon=False)


def legend_below(fig, axes: Sequence) -> None:
    """One legend for the figure, under its panels (constrained layout makes room): each label once, in the
    order drawn."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        longest = max(len(label) for label in seen)
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", fontsize="small", frameon=False,
                   ncol=max(1, min(len(seen), 4, 120 // max(1, longest))))


def subplots(plt, *args, **kwargs):
    """plt.subplots in the layout every plot has: constrained, which makes room for legends outside the axes."""
    return plt.subplots(*args, layout="constrained", **kwargs)


def title(what: str, where: str) -> str:
    """A plot's title: what it shows, then where (the experiment, its topology, links and points)."""
    return f"{what}\n{where}" if where else what


def save(fig, path: Path) -> Path:
    """The figure as a PNG, cut to what it draws (legends outside the axes included), then closed."""
    if fig.get_layout_engine() is None:  # the plots made with layout="constrained" have theirs
        fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return files.write_bytes(path, png.getvalue(), create_folder=True)  # never through a link
