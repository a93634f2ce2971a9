"""Small helpers every summary section uses (report.py and each kind's own, experiments/kinds/):
table cells, grouping, saving a plot. Nothing here knows a kind."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def by(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    grouped: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        grouped[tuple(row[k] for k in keys)].append(row)
    return grouped


def schemes(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(row["scheme"] for row in rows))


def or_(value: T | None, default: T) -> T:
    return default if value is None else value


def cell(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path
