"""The structs of bpf/port.h as Python reads them from the port programs' maps, built from their
descriptions (port_config: ports/fields.py's table; the others: ports/structs.py), which the C
headers are generated from too; a test checks each against the loader's `--layout`."""

from __future__ import annotations

import struct

from .fields import PORT_CONFIG_FIELDS
from .structs import PFC_HIST_BUCKETS as PFC_HIST_BUCKETS  # stats.py reads it here
from .structs import STRUCTS_BY_NAME, struct_format


class Layout:
    """A struct of bpf/port.h as Python reads it: its fields in order, each with its struct
    format ("Q", "2I", or "<n>s" for a nested struct). `port_loader --layout` prints the C
    offsets; a test compares them with offsets() field by field."""

    def __init__(self, name: str, fields: list[tuple[str, str]]):
        self.name = name
        self.fields = fields
        self.struct = struct.Struct("<" + "".join(fmt for _, fmt in fields))
        self.size = self.struct.size
        # Where each field's values start in the flat tuple struct.unpack gives, and how many.
        self._slices, start = [], 0
        for name, fmt in fields:
            count = int(fmt[:-1]) if fmt[:-1] and fmt[-1] != "s" else 1
            self._slices.append((name, start, count))
            start += count

    def offsets(self) -> dict[str, int]:
        offsets, fmt = {}, "<"
        for name, field_fmt in self.fields:
            offsets[name] = struct.calcsize(fmt)
            fmt += field_fmt
        return offsets

    def unpack(self, raw: bytes) -> dict:
        """Field name -> value (a tuple for arrays, bytes for nested structs)."""
        values = self.struct.unpack_from(raw)
        return {name: values[start] if count == 1 else values[start:start + count]
                for name, start, count in self._slices}


# Per-class arrays are indexed [data, credit] (PORT_CLASS_DATA = 0).
PORT_CONFIG = Layout("port_config", [(f.name, f.struct_format) for f in PORT_CONFIG_FIELDS])


def _described(name: str) -> Layout:
    return Layout(name, [(f.name, struct_format(f)) for f in STRUCTS_BY_NAME[name].fields])


PORT_DEPARTURES = _described("port_departures")
CLASS_STATS = _described("port_class_stats")
RESIDENCE = _described("port_residence")
PORT_STATE = _described("port_state")
PORT_PFC = _described("port_pfc")
PFC_EVENT = _described("pfc_event")
LAYOUTS = (PORT_CONFIG, PORT_DEPARTURES, CLASS_STATS, RESIDENCE, PORT_PFC, PFC_EVENT, PORT_STATE)
