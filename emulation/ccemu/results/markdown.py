"""Small helpers every Markdown table of ccemu uses (the summaries: reports/report.py, each kind's own in
kinds/, reports/merge.py, papers.py; the reproduction's REPORT.md; the benchmarks' tables): table cells,
tables, grouping. Nothing here knows a kind."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")

# The most columns one table has: a wider one runs off a page and wraps in a terminal, and a reader loses the
# row. It is split into tables that each repeat the row's name (table()).
WIDEST = 10


def by(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    grouped: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        grouped[tuple(row[k] for k in keys)].append(row)
    return grouped


def schemes(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(row["scheme"] for row in rows))


def or_(value: T | None, default: T) -> T:
    return default if value is None else value


def cell(value: float | None, fmt: str = "{:.2f}", missing: str = "-") -> str:
    return missing if value is None else fmt.format(value)


def text_cell(text: object) -> str:
    """Text as one table cell: on one line, its pipes escaped (a pipe would end the cell)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: Sequence[str], rows: Sequence[Sequence[str]], keys: int = 1, breaks: Sequence[str] = ()) -> list[str]:
    """A markdown table, split where it is wider than WIDEST columns: the first `keys` columns name a row and
    start every part; a new part starts at each column named in `breaks` (where the figures change subject),
    and a part still too wide is cut into even parts. The parts follow one another, a blank line apart."""
    rest = list(range(keys, len(header)))
    parts: list[list[int]] = [[]]
    for i in rest:
        if header[i] in breaks and parts[-1]:
            parts.append([])
        parts[-1].append(i)
    room = max(1, WIDEST - keys)
    even = []
    for part in parts:
        pieces = -(-len(part) // room)  # ceiling
        size = -(-len(part) // pieces) if part else 0
        even += [part[j:j + size] for j in range(0, len(part), size)] if part else [part]
    lines: list[str] = []
    for part in even:
        columns = [*range(keys), *part]
        lines += ([""] if lines else []) + [_row(header[i] for i in columns), "|" + "---|" * len(columns)]
        lines += [_row(row[i] for i in columns) for row in rows]
    return lines


def _row(cells: Iterable[str]) -> str:
    # An empty cell is "| |", one space wide: the blank cells summaries have always had (a diff of two
    # summaries shows what changed in the figures, not in the spacing).
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"
