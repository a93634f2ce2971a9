"""What a one-line message quotes of a value: an excerpt, never a dump of what came in."""

from __future__ import annotations


def shown(value: object, limit: int = 80) -> str:
    """repr(value), cut to `limit` characters: what a message quotes of a value."""
    return cut(repr(value), limit)


def cut(text: str, limit: int) -> str:
    """`text`, its end replaced by '...' if it is longer than `limit` characters."""
    return text if len(text) <= limit else f"{text[:limit - 3]}..."
