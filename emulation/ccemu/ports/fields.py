"""`struct port_config`, described once: the field table that the C struct (bpf/port_config.h,
generated from it: `python -m ccemu.ports.fields > ccemu/ports/bpf/port_config.h`), the Python
mirror of the map (maps.PORT_CONFIG) and the loader's `key=value` lines (config_line) all come
from. A unit test regenerates the header and fails on a diff; another runs the built loader's
`--check` on the lines Python writes.

A port's line in a namespace's attach config (port_loader.c parse_line):

    port=IFNAME key=value key=value ...

one `key=value` for every field of the table that is not padding, in any order; a per-class
field (`count` 2) takes its values comma-separated in class order (data, credit); `marker`
takes a name of MARKERS. The loader refuses an unknown, repeated or missing key, or a bad value,
with one line naming it.

Adding a port profile, and a marker if none marks as it does: CONTRIBUTING.md's checklist ("A
port discipline").
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

PORT_CLASSES = 2  # bpf/port.h: data, credit

# The port program's markers (enum port_marker): how a port marks the packets it admits. Each
# profile runs one (model/config/ports.py `marker`); the program dispatches on it (port.bpf.c).
MARKERS = {
    "none": "no marking",
    "dctcp": "DCTCP: an ECN-capable data packet that finds more than ecn_threshold_bytes queued gets CE",
    "red": "DCQCN's CP (switch ports only): CE with probability 0 at or below red_kmin_bytes, rising "
           "to red_pmax_ppm at red_kmax_bytes, 1 above",
    "spraypass": "SprayPass: departing credits get CE with Pd = dropped / injected credits of the last "
                 "credit_mark_window credits",
    "tcd": "TCD (switch ports only): congestion -> CE, undetermined -> UE, non-congestion -> no mark",
}

_C_TYPES = {"u32": ("__u32", "I"), "u64": ("__u64", "Q"), "marker": ("__u32", "I")}


@dataclass(frozen=True)
class Field:
    """One field of struct port_config: its C name, type (u32, u64, or marker: a u32 holding
    enum port_marker), how many (PORT_CLASSES for a per-class array, indexed data, credit),
    and what it means (the header's comment)."""

    name: str
    type: str
    meaning: str
    count: int = 1
    written: bool = True  # False: padding, zero, in no line
    of_marker: str | None = None  # a parameter of this marker (MARKERS): 0 where another marker runs

    @property
    def c_type(self) -> str:
        return _C_TYPES[self.type][0]

    @property
    def struct_format(self) -> str:
        """Its format in Python's struct module ("I", "2Q", ...)."""
        code = _C_TYPES[self.type][1]
        return f"{self.count}{code}" if self.count > 1 else code

    @property
    def max_value(self) -> int:
        return (1 << 64) - 1 if self.type == "u64" else (1 << 32) - 1


PORT_CONFIG_FIELDS: tuple[Field, ...] = (
    Field("link_rate_Bps", "u64", "wire bytes per second of the whole port"),
    Field("credit_rate_Bps", "u64", "cap of the credit class (0: no credit class)"),
    Field("buffer_bytes", "u32", "virtual queue limits (tail drop)", PORT_CLASSES),
    Field("ecn_threshold_bytes", "u32", "marker dctcp: K on the data queue", of_marker="dctcp"),
    Field("credit_mark_window", "u32", "marker spraypass: N_cdt credits per Pd refresh", of_marker="spraypass"),
    Field("classid", "u32", "HTB class each class's packets are steered to", PORT_CLASSES),
    Field("wire_overhead_bytes", "u32", "preamble + SFD + FCS + IFG added to skb->len"),
    Field("min_wire_bytes", "u32", "a minimum frame on the wire"),
    Field("burst_bytes", "u32", "the HTB classes' burst: what they send at once after idling", PORT_CLASSES),
    Field("port_id", "u32", "this port in the run's port_departures map"),
    Field("peer_port_id", "u32", "the port at the other end of the link (whose packets arrive here)"),
    Field("switch_port", "u32", "1: a switch's port (residences start at its ingress, end at its egress)"),
    Field("pad", "u32", "", written=False),
    Field("idle_reset_ns", "u64", "idle longer than this, every queue of the port has surely drained"),
    Field("lossless", "u32", "1: PFC: never drop; when the bytes that arrived through one ingress port of a "
                             "switch and still sit in its egress queues exceed xoff, the port upstream of that "
                             "ingress is paused, and resumed once they fall to xon (ports/pfc.py pauses)"),
    Field("xoff_bytes", "u32", "lossless: pause above"),
    Field("xon_bytes", "u32", "lossless: resume at or below"),
    Field("red_kmin_bytes", "u32", "marker red: no mark at or below", of_marker="red"),
    Field("red_kmax_bytes", "u32", "marker red: always mark above", of_marker="red"),
    Field("red_pmax_ppm", "u32", "marker red: marking probability at kmax, in ppm", of_marker="red"),
    Field("marker", "marker", "how the port marks (enum port_marker)"),
    Field("tcd_threshold_bytes", "u32", "marker tcd: the queue above which a port that is ON is congested",
          of_marker="tcd"),
    Field("tcd_max_on_ns", "u64", "marker tcd: max(T_on)", of_marker="tcd"),
    Field("tcd_sample_ns", "u64", "marker tcd: how often the queue's trend (decreasing or not) is sampled",
          of_marker="tcd"),
)
FIELDS_BY_NAME = {f.name: f for f in PORT_CONFIG_FIELDS}
MARKER_PARAMETERS = tuple(f for f in PORT_CONFIG_FIELDS if f.of_marker)
WRITTEN_FIELDS = tuple(f for f in PORT_CONFIG_FIELDS if f.written)
PORT_KEY = "port"  # the interface a line is for


def _format(field: Field, value) -> str:
    if field.type == "marker":
        if value not in MARKERS:
            raise ValueError(f"marker {value!r} is none of {', '.join(MARKERS)}")
        return value
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(values) != field.count:
        raise ValueError(f"{field.name} takes {field.count} values (data, credit), got {value!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= field.max_value:
            raise ValueError(f"{field.name}: {v!r} is not an integer in [0, {field.max_value}]")
    return ",".join(str(v) for v in values)


def config_line(ifname: str, values: Mapping[str, object]) -> str:
    """The attach config line of port `ifname` (see the module docstring): `values` holds every
    written field of the table, no other."""
    missing = [f.name for f in WRITTEN_FIELDS if f.name not in values]
    unknown = [name for name in values if name not in FIELDS_BY_NAME or not FIELDS_BY_NAME[name].written]
    if missing or unknown:
        raise ValueError(f"port {ifname}: port_config values missing {missing}, unknown {unknown}")
    if not ifname or any(c.isspace() or c == "=" for c in ifname):
        raise ValueError(f"interface name {ifname!r} cannot be written in a config line")
    return " ".join([f"{PORT_KEY}={ifname}"] + [f"{f.name}={_format(f, values[f.name])}" for f in WRITTEN_FIELDS])


def render_header() -> str:
    """bpf/port_config.h: the struct, the marker enum, and the loader's table of keys."""
    out = ["/* Generated from ccemu/ports/fields.py (python -m ccemu.ports.fields > port_config.h): edit the table",
           " * there, not this file; tests/unit/test_port_fields.py fails when the two differ. */",
           "#ifndef CCEMU_PORT_CONFIG_H", "#define CCEMU_PORT_CONFIG_H", "",
           "/* How a port marks the packets it admits (port_config.marker). */", "enum port_marker {"]
    for number, (name, meaning) in enumerate(MARKERS.items()):
        out.append(f"\tPORT_MARKER_{name.upper()} = {number}, /* {meaning} */")
    out += ["};", "#define PORT_MARKERS " + str(len(MARKERS)), "",
            "/* Per port (key: its id in the run; the programs find it by ifindex: see port_ids). */",
            "struct port_config {"]
    for f in PORT_CONFIG_FIELDS:
        array = "[PORT_CLASSES]" if f.count > 1 else ""
        comment = f" /* {f.meaning} */" if f.meaning else ""
        out.append(f"\t{f.c_type} {f.name}{array};{comment}")
    out += ["};", "",
            "/* The loader's keys: X(field, type, count) for every field a config line sets; type is u32, u64",
            " * or marker (a name of PORT_MARKER_NAMES). */",
            "#define PORT_CONFIG_KEYS(X) \\"]
    out += [f"\tX({f.name}, {f.type}, {f.count}) \\" for f in WRITTEN_FIELDS]
    out += ["", "/* Every field, padding too: X(field), for the loader's --layout. */",
            "#define PORT_CONFIG_FIELDS(X) \\"]
    out += [f"\tX({f.name}) \\" for f in PORT_CONFIG_FIELDS]
    out += ["", "#define PORT_MARKER_NAMES {" + ", ".join(f'"{name}"' for name in MARKERS) + "}", "", "#endif", ""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render_header())
