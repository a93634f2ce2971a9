"""The schemes cchost runs, as cchost itself lists them (`cchost --schemes --json`): the one
table of schemes is the transport's (transport/src/cc/mod.rs), and the Python side reads it
here instead of keeping lists of its own: scheme names, which send data only against credits,
the port profile each one's hosts are written for, and each one's parameters (what
`--param <scheme>.<key>=<value>` takes).

The table is read once per cchost build (the binary's path, size and modification time) and
cached.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .cchost import cchost_binary


class SchemesUnreadable(RuntimeError):
    """cchost did not list its schemes (it failed, or printed something that is no table)."""


@dataclass(frozen=True)
class SchemeParam:
    name: str
    # Its value before any --param (for a time, in datacenter microseconds, before --dilation);
    # None: unset (the doc says what holds then).
    default: float | None
    unit: str
    # A time of the datacenter: cchost multiplies it by --dilation.
    dilates: bool
    doc: str


@dataclass(frozen=True)
class Scheme:
    name: str
    # The byte naming the scheme on the wire (transport/wire-format.md).
    wire_id: int
    # "receiver" (the data receiver paces credits) or "sender" (a window, or a rate).
    driver: str
    port_profile: str
    # Sends data only against credits: its ports need a credit class.
    credit: bool
    params: tuple[SchemeParam, ...]


def parse(text: str) -> tuple[Scheme, ...]:
    """The schemes of `cchost --schemes --json`'s output."""
    try:
        return tuple(Scheme(name=s["name"], wire_id=s["wire_id"], driver=s["driver"], port_profile=s["port_profile"],
                            credit=s["credit"], params=tuple(SchemeParam(**p) for p in s["params"]))
                     for s in json.loads(text))
    except (ValueError, TypeError, KeyError) as e:
        raise SchemesUnreadable(f"cchost --schemes --json printed no scheme table ({e!r}): {text[:200]!r}") from e


@lru_cache(maxsize=8)
def _read(binary: Path, size: int, mtime_ns: int) -> tuple[Scheme, ...]:
    # size and mtime_ns are the cache key's: a rebuilt cchost is asked again.
    try:
        done = subprocess.run([str(binary), "--schemes", "--json"], capture_output=True, text=True, timeout=30)
    except OSError as e:
        raise SchemesUnreadable(f"{binary} --schemes --json: {e}") from e
    if done.returncode != 0:
        raise SchemesUnreadable(f"{binary} --schemes --json exited {done.returncode}: {done.stderr.strip()[-500:]} "
                                "(a cchost from before `--schemes`? run `make setup`)")
    return parse(done.stdout)


def schemes(binary: Path | None = None) -> tuple[Scheme, ...]:
    """Every scheme of `binary` (default: build/cchost, `cchost_binary()`), in cchost's order."""
    path = Path(binary or cchost_binary())
    stat = path.stat()
    return _read(path, stat.st_size, stat.st_mtime_ns)


def names(binary: Path | None = None) -> tuple[str, ...]:
    return tuple(s.name for s in schemes(binary))


def credit_schemes(binary: Path | None = None) -> tuple[str, ...]:
    """The schemes whose hosts send data only against credits."""
    return tuple(s.name for s in schemes(binary) if s.credit)


def port_profiles(binary: Path | None = None) -> dict[str, str]:
    """Scheme name -> the port profile its hosts are written for."""
    return {s.name: s.port_profile for s in schemes(binary)}


def scheme(name: str, binary: Path | None = None) -> Scheme:
    """The scheme called `name`; a ValueError lists the known ones."""
    for s in schemes(binary):
        if s.name == name:
            return s
    raise ValueError(f"unknown scheme {name!r} (cchost runs {', '.join(names(binary))})")


def params(name: str, binary: Path | None = None) -> dict[str, SchemeParam]:
    """Scheme `name`'s parameters by name, in cchost's order."""
    return {p.name: p for p in scheme(name, binary).params}
