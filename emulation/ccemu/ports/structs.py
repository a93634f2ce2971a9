"""The structs of the port programs' maps that Python reads, described once (struct port_config is
fields.py's table): each struct's fields in order, with their C type, array length and comment.
Generated from this description:

- bpf/port_structs.h, the C structs, which port.h includes
  (`python -m ccemu.ports.structs > ccemu/ports/bpf/port_structs.h`); its PORT_STRUCTS_LAYOUT is
  the loader's `--layout` table, and static assertions make the compilers check every size and
  offset against the ones Python reads;
- ports/layouts.py's Layout objects (Python's struct formats).

tests/unit/test_port_structs.py regenerates the header and fails on a diff. Python reads the
structs packed ("<"): a description whose C alignment would add padding is refused here (write
the padding as a field, as port_state's `pad`).
"""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass

from .fields import PORT_CLASSES
from .histograms import QUEUE_BUCKETS, RESIDENCE_BUCKETS

PFC_HIST_BUCKETS = 32  # bpf/port.h

# Array lengths: the macros of bpf/port.h the C structs use, with the values Python reads them with
# (the header refuses to compile where port.h says otherwise).
LENGTHS = {
    "PORT_CLASSES": PORT_CLASSES,
    "PORT_QUEUE_BUCKETS": QUEUE_BUCKETS,
    "PORT_RESIDENCE_BUCKETS": RESIDENCE_BUCKETS,
    "PFC_HIST_BUCKETS": PFC_HIST_BUCKETS,
}


@dataclass(frozen=True)
class CType:
    c: str  # its C spelling
    format: str  # its code in Python's struct module
    size: int
    align: int


SCALARS = {
    "u32": CType("__u32", "I", 4, 4),
    "u64": CType("__u64", "Q", 8, 8),
    "s64": CType("__s64", "q", 8, 8),
    "bpf_spin_lock": CType("struct bpf_spin_lock", "I", 4, 4),  # linux/bpf.h: one __u32
}


@dataclass(frozen=True)
class Field:
    """One field: its name, type (a name of SCALARS, or a struct described before), array length
    (None, or a macro of LENGTHS), comment (after it), and `above`: a comment on the fields from
    here on, printed above it."""

    name: str
    type: str
    comment: str = ""
    length: str | None = None
    above: str = ""

    @property
    def count(self) -> int:
        return LENGTHS[self.length] if self.length else 1


@dataclass(frozen=True)
class Struct:
    name: str
    comment: str  # printed above the struct
    fields: tuple[Field, ...]


STRUCTS: tuple[Struct, ...] = (
    Struct("port_departures", "Per port of the run (key: port id, shared by every namespace of the run): what has "
           "left the port's queue, counted where it arrives, at the peer's ingress.", (
               Field("bytes", "u64", length="PORT_CLASSES"),
               Field("packets", "u64", length="PORT_CLASSES"),
               Field("unparsed_packets", "u64", "of which not IPv4 (e.g. OVS's one priming frame)"),
           )),
    Struct("port_class_stats", "Per class of a port (port_state.stats).", (
        Field("enqueued_packets", "u64"),
        Field("enqueued_bytes", "u64"),
        Field("dropped_packets", "u64"),
        Field("dropped_bytes", "u64"),
        Field("marked_packets", "u64", "CE set here: a packet that arrives already CE is not counted again"),
        Field("marked_bytes", "u64"),
        Field("ue_marked_packets", "u64", "TCD's UE set here (ECT(0) -> ECT(1))"),
        Field("max_queue_bytes", "u64"),
        Field("lag_sum_bytes", "u64", "sum over enqueues of |real - ideal queue|"),
        Field("max_lag_bytes", "u64"),
        Field("queue_sum_bytes", "u64", above="Exact averages (never a histogram's midpoints). Per arrival: over "
              "the enqueued frames, the queue each joined, itself included (its mean: / enqueued_packets). Over "
              "time: the queue's integral in byte x ns, brought up to date at every enqueue and every departure "
              "(128 bits: a full 4 MB buffer would wrap 64 bits in 76 minutes)."),
        Field("queue_area_lo", "u64"),
        Field("queue_area_hi", "u64"),
        Field("queue_histogram", "u64", "one count per enqueue, by queue length after it",
              length="PORT_QUEUE_BUCKETS"),
    )),
    Struct("port_residence", "Time spent inside the switch by the IPv4 packets that left through this (switch) "
           "port.", (
               Field("packets", "u64", "with an arrival on record"),
               Field("sum_ns", "u64"),
               Field("max_ns", "u64"),
               Field("untracked_packets", "u64", "without one: its record was evicted (the switch held more "
                     "packets than the residence map follows); rarely, two identical datagrams inside at once "
                     "(one key), or one forwarded before its ingress hook ran (OVS's packet socket gets it first)"),
               Field("histogram", "u64", length="PORT_RESIDENCE_BUCKETS"),
           )),
    Struct("port_pfc", "Lossless mode, per port of the run (key: port id, shared by every namespace). A switch "
           "port as an ingress holds bytes; any port as an egress may be paused by its downstream.", (
               Field("held_bytes", "s64", "arrived through this port, still queued in its switch's egress queues"),
               Field("max_held_bytes", "u64"),
               Field("paused", "u64", "1: this port is paused now (its downstream's ingress is over xoff); "
                     "64-bit for BPF's compare-and-swap"),
               Field("paused_since_ns", "u64"),
               Field("resumed_ns", "u64", "the last resume (0: never paused)"),
               Field("pause_events", "u64"),
               Field("paused_ns", "u64", "time paused, over the pauses that ended"),
               Field("pause_histogram", "u64", length="PFC_HIST_BUCKETS"),
           )),
    Struct("pfc_event", "A pause or resume decision, for ports/pfc.py's agent, which carries it out.", (
        Field("ns", "u64", "bpf_ktime_get_ns() of the decision"),
        Field("port_id", "u32", "the port to pause or resume"),
        Field("pause", "u32", "1: pause, 0: resume"),
    )),
    Struct("port_state", "Per port (key: its id in the run): the program's own state and counters.", (
        Field("lock", "bpf_spin_lock", "egress may run on several CPUs at once"),
        Field("pad", "u32"),
        Field("last_ns", "u64", "when the fluid queues were last drained"),
        Field("queue_mbytes", "u64", "ideal (fluid) queue lengths in milli-bytes", length="PORT_CLASSES"),
        Field("tokens_mbytes", "u64", "unused drain saved up while idle, <= burst", length="PORT_CLASSES"),
        Field("admitted_bytes", "u64", "real queue = admitted - departed", length="PORT_CLASSES"),
        Field("window_credits", "u32", "credits seen in the current N_cdt window"),
        Field("window_drops", "u32", "of which dropped"),
        Field("mark_probability_ppm", "u32", "SprayPass Pd, refreshed every window"),
        Field("unparsed_packets", "u32", "counted into data, never marked"),
        Field("reset_residue_bytes", "u64", "still \"queued\" when an idle reset forgot them: lost after admission"),
        Field("tcd_state", "u32", "TCD_*"),
        Field("tcd_decreasing", "u32", "the queue shrank over the last trend sample"),
        Field("tcd_sample_ns", "u64", "when the trend was last sampled"),
        Field("tcd_sample_queue", "u64", "the queue then"),
        Field("integral_ns", "u64", above="The time integrals' own queue (port_class_stats.queue_area_*): what the "
              "real queue held since integral_ns, moved at every enqueue (here) and departure (at the peer's "
              "ingress)."),
        Field("integral_queue_bytes", "u64", length="PORT_CLASSES"),
        Field("stats", "port_class_stats", length="PORT_CLASSES"),
        Field("residence", "port_residence"),
    )),
)
STRUCTS_BY_NAME = {s.name: s for s in STRUCTS}


def _type(field: Field) -> CType:
    """The field's element type; a struct's is (C spelling, size, alignment, "<size>s")."""
    if field.type in SCALARS:
        return SCALARS[field.type]
    struct = STRUCTS_BY_NAME[field.type]
    size = c_size(struct)
    return CType(f"struct {struct.name}", f"{size}s", size, max(_type(f).align for f in struct.fields))


def struct_format(field: Field) -> str:
    """The field's format in Python's struct module ("Q", "2Q", or "<bytes>s" for nested structs,
    which Python reads as bytes)."""
    element = _type(field)
    if element.format.endswith("s"):
        return f"{element.size * field.count}s"
    return f"{field.count}{element.format}" if field.length else element.format


def c_offsets(struct: Struct) -> dict[str, int]:
    """Field -> offset, as C lays the struct out (each field at a multiple of its alignment)."""
    offsets, end = {}, 0
    for field in struct.fields:
        element = _type(field)
        offsets[field.name] = -(-end // element.align) * element.align
        end = offsets[field.name] + element.size * field.count
    return offsets


def c_size(struct: Struct) -> int:
    last = struct.fields[-1]
    end = c_offsets(struct)[last.name] + _type(last).size * last.count
    align = max(_type(f).align for f in struct.fields)
    return -(-end // align) * align


def check_packed(struct: Struct) -> None:
    """Refuses a struct C would pad: Python reads it packed."""
    packed, offsets = 0, c_offsets(struct)
    for field in struct.fields:
        if offsets[field.name] != packed:
            raise ValueError(f"struct {struct.name}: C would pad before {field.name}; describe the padding")
        packed += _type(field).size * field.count
    if c_size(struct) != packed:
        raise ValueError(f"struct {struct.name}: C would pad its end; describe the padding")


for _struct in STRUCTS:
    check_packed(_struct)


def _comment(text: str, indent: str) -> list[str]:
    """A C block comment of `text`, wrapped at 100 columns (a tab counted as 8)."""
    width = 100 - 8 * indent.count("\t") - 3
    lines = textwrap.wrap(text, width)
    if len(lines) == 1 and len(lines[0]) <= width - 3:
        return [f"{indent}/* {lines[0]} */"]
    return [f"{indent}/* {lines[0]}"] + [f"{indent} * {line}" for line in lines[1:-1]] + \
        [f"{indent} * {lines[-1]} */"]


def _declaration(field: Field) -> str:
    array = f"[{field.length}]" if field.length else ""
    return f"\t{_type(field).c} {field.name}{array};"


def render_header() -> str:
    """bpf/port_structs.h: the structs, their layout table for the loader, and the assertions."""
    out = ["/* Generated from ccemu/ports/structs.py (python -m ccemu.ports.structs > port_structs.h): edit the",
           " * description there, not this file; tests/unit/test_port_structs.py fails when the two differ.",
           " * port.h includes it after the macros below. */",
           "#ifndef CCEMU_PORT_STRUCTS_H", "#define CCEMU_PORT_STRUCTS_H", "",
           "/* The array lengths Python reads the structs with. */"]
    for macro, value in LENGTHS.items():
        out += [f"#if {macro} != {value}", f'#error "{macro} is not {value}, the length ccemu/ports/structs.py reads"',
                "#endif"]
    for struct in STRUCTS:
        out += [""] + _comment(struct.comment, "") + [f"struct {struct.name} {{"]
        for field in struct.fields:
            if field.above:
                out += _comment(field.above, "\t")
            declaration = _declaration(field)
            if not field.comment:
                out.append(declaration)
            elif len(declaration.expandtabs(8)) + len(field.comment) + 7 <= 100:
                out.append(f"{declaration} /* {field.comment} */")
            else:
                out += _comment(field.comment, "\t") + [declaration]
        out.append("};")
    out += ["", "/* Every struct and field, for the loader's --layout: SIZE(struct) FIELD(struct, field). */",
            "#define PORT_STRUCTS_LAYOUT(SIZE, FIELD) \\"]
    for struct in STRUCTS:
        out.append(f"\tSIZE({struct.name}) \\")
        out += [f"\tFIELD({struct.name}, {field.name}) \\" for field in struct.fields]
    out += ["", "/* The layouts Python reads (ports/layouts.py), checked by every compiler that includes this. */"]
    for struct in STRUCTS:
        out.append(f'_Static_assert(sizeof(struct {struct.name}) == {c_size(struct)}, "struct {struct.name}");')
        out += [f"_Static_assert(__builtin_offsetof(struct {struct.name}, {name}) == {offset}, "
                f'"{struct.name}.{name}");' for name, offset in c_offsets(struct).items()]
    out += ["", "#endif", ""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render_header())
