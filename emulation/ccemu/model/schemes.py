"""The schemes cchost runs, as cchost itself lists them (`cchost --schemes --json`, kept in
schemes.json beside this module): the one table of schemes is the transport's
(transport/src/cc/mod.rs). Python keeps no list of its own: scheme names, which send data only
against credits, the port profile each one's hosts are written for, and each one's parameters
(what `--param <scheme>.<key>=<value>` takes) are read here.

schemes.json is cchost's output checked in, so that configs are judged without a built cchost
(on a controller, in `ccemu report`); `make schemes` rewrites it from build/cchost, and a unit
test fails when the two differ (tests/unit/test_schemes.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

TABLE_FILE = Path(__file__).with_name("schemes.json")


class SchemesUnreadable(RuntimeError):
    """cchost did not list its schemes (it failed, or printed something that is no table)."""


@dataclass(frozen=True)
class ParamRange:
    """What values cchost takes for a parameter, as its table says (transport/src/cc/param.rs
    Bounds): a finite value above `above`, at least `at_least`, at most `at_most`, whole where
    `whole` says; `says` is cchost's own words for it."""

    above: float | None
    at_least: float | None
    at_most: float
    whole: bool
    says: str

    def admits(self, value: float) -> bool:
        return (math.isfinite(value) and (self.above is None or value > self.above)
                and (self.at_least is None or value >= self.at_least) and value <= self.at_most
                and (not self.whole or float(value).is_integer()))


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
    range: ParamRange


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
                            credit=s["credit"], params=tuple(SchemeParam(**p | {"range": ParamRange(**p["range"])})
                                                                    for p in s["params"]))
                     for s in json.loads(text))
    except (ValueError, TypeError, KeyError) as e:
        raise SchemesUnreadable(f"cchost --schemes --json printed no scheme table ({e!r}): {text[:200]!r}") from e


TABLE: tuple[Scheme, ...] = parse(TABLE_FILE.read_text())


def names(table: tuple[Scheme, ...] = TABLE) -> tuple[str, ...]:
    return tuple(s.name for s in table)


def credit_schemes(table: tuple[Scheme, ...] = TABLE) -> tuple[str, ...]:
    """The schemes whose hosts send data only against credits."""
    return tuple(s.name for s in table if s.credit)


def port_profiles(table: tuple[Scheme, ...] = TABLE) -> dict[str, str]:
    """Scheme name -> the port profile its hosts are written for."""
    return {s.name: s.port_profile for s in table}


def scheme(name: str, table: tuple[Scheme, ...] = TABLE) -> Scheme:
    """The scheme called `name`; a ValueError lists the known ones."""
    for s in table:
        if s.name == name:
            return s
    raise ValueError(f"unknown scheme {name!r} (cchost runs {', '.join(names(table))})")


def params(name: str, table: tuple[Scheme, ...] = TABLE) -> dict[str, SchemeParam]:
    """Scheme `name`'s parameters by name, in cchost's order."""
    return {p.name: p for p in scheme(name, table).params}
