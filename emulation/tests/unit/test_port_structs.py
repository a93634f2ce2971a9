"""The structs of the port programs' maps besides port_config are described once
(ccemu/ports/structs.py): bpf/port_structs.h and the loader's `--layout` table are generated from
the description, Python's layouts are built from it, and the C compilers lay the structs out at the
offsets Python reads them at."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ccemu.ports import structs
from ccemu.ports.layouts import LAYOUTS, PORT_CONFIG

BPF = Path(structs.__file__).parent / "bpf"
LAYOUT_PROBE = """#include <stddef.h>
#include <stdio.h>
#include <linux/types.h>
#include <linux/bpf.h>
#include "port.h"
#define SIZE(s) printf(#s " %zu\\n", sizeof(struct s));
#define FIELD(s, f) printf(#s "." #f " %zu\\n", offsetof(struct s, f));
#define CONFIG_FIELD(f) FIELD(port_config, f)
int main(void)
{
	SIZE(port_config)
	PORT_CONFIG_FIELDS(CONFIG_FIELD)
	PORT_STRUCTS_LAYOUT(SIZE, FIELD)
	return 0;
}
"""


def python_layouts() -> dict[str, int]:
    python = {}
    for layout in LAYOUTS:
        python[layout.name] = layout.size
        python.update({f"{layout.name}.{field}": offset for field, offset in layout.offsets().items()})
    return python


def test_the_checked_in_header_is_what_the_description_generates():
    assert (BPF / "port_structs.h").read_text() == structs.render_header(), (
        "regenerate it: python -m ccemu.ports.structs > ccemu/ports/bpf/port_structs.h")


def test_the_c_sources_take_the_described_structs_from_the_generated_header_only():
    port_h = (BPF / "port.h").read_text()
    assert '#include "port_structs.h"' in port_h
    loader = (BPF / "port_loader.c").read_text()
    assert "PORT_STRUCTS_LAYOUT(" in loader
    for struct in structs.STRUCTS:
        assert f"struct {struct.name} {{" not in port_h, struct.name
        assert not re.search(rf"FIELD\({struct.name},", loader), struct.name  # --layout's table is generated


def test_the_python_layouts_are_the_descriptions():
    described = {layout.name: layout for layout in LAYOUTS if layout is not PORT_CONFIG}
    assert list(described) == [s.name for s in structs.STRUCTS]
    for struct in structs.STRUCTS:
        assert [name for name, _ in described[struct.name].fields] == [f.name for f in struct.fields]
        assert described[struct.name].offsets() == structs.c_offsets(struct)
        assert described[struct.name].size == structs.c_size(struct)
    assert {name: layout.size for name, layout in described.items()} == {
        "port_departures": 40, "port_class_stats": 744, "port_residence": 800, "port_pfc": 312, "pfc_event": 16,
        "port_state": 2424}
    assert dict(described["port_state"].fields)["stats"] == f"{2 * 744}s"


def test_a_description_that_c_would_pad_is_refused():
    padded = structs.Struct("padded", "", (structs.Field("a", "u32"), structs.Field("b", "u64")))
    with pytest.raises(ValueError, match="C would pad before b"):
        structs.check_packed(padded)
    tail = structs.Struct("tail", "", (structs.Field("a", "u64"), structs.Field("b", "u32")))
    with pytest.raises(ValueError, match="C would pad its end"):
        structs.check_packed(tail)


def test_the_host_compiler_lays_the_structs_out_as_python_reads_them(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("no gcc (make setup installs it)")
    (tmp_path / "probe.c").write_text(LAYOUT_PROBE)
    built = subprocess.run(["gcc", "-Wall", "-Werror", f"-I{BPF}", "-o", str(tmp_path / "probe"),
                            str(tmp_path / "probe.c")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    printed = subprocess.run([str(tmp_path / "probe")], check=True, capture_output=True, text=True).stdout
    assert {name: int(value) for name, value in (line.split() for line in printed.splitlines())} == python_layouts()


def test_the_bpf_compiler_accepts_the_headers_layout_assertions(tmp_path):
    if shutil.which("clang") is None or shutil.which("gcc") is None:
        pytest.skip("no clang (make setup installs it)")
    machine = subprocess.run(["gcc", "-dumpmachine"], check=True, capture_output=True, text=True).stdout.strip()
    (tmp_path / "probe.c").write_text('#include <linux/types.h>\n#include <linux/bpf.h>\n#include "port.h"\n')
    done = subprocess.run(["clang", "-Wall", "-Werror", "-target", "bpf", "-fsyntax-only", f"-I{BPF}",
                           f"-I/usr/include/{machine}", str(tmp_path / "probe.c")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
