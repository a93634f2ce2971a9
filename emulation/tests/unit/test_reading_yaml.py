"""read_yaml: every file a config or sweep is read from, and every way it may be bad (issue 29's
fuzzing pass), is one line `PATH: ...`, fast and in bounded memory."""

import os
import subprocess
import sys
import time

import pytest
import yaml

from ccemu.model.config import EXPERIMENTS_DIR, ConfigError, load_config, read_yaml
from ccemu.model.config.errors import MAX_YAML_BYTES
from ccemu.model.config.strict_yaml import MAX_DEPTH, CConfigLoader, ConfigLoader
from ccemu.sweeps.plan import load_sweep

BASE = "name: t\ntopology: {kind: fattree, k: 4}\n"
WORKLOADS = EXPERIMENTS_DIR.parent  # the experiments, sweeps and claims ccemu ships


def refused(path, loader=read_yaml) -> str:
    """The one line `loader` refuses `path` with, checked to be one line naming the file, and fast."""
    # Fast: under a second of wall time, the bound this test has always had (restored after the timing
    # pass had widened it to 10 s), and of CPU time (the reader's own cost).
    start, cpu = time.monotonic(), time.process_time()
    with pytest.raises(ConfigError) as error:
        loader(path)
    assert time.process_time() - cpu < 1
    assert time.monotonic() - start < 1
    line = str(error.value)
    assert "\n" not in line and line.startswith(f"{path}: ") and len(line) < 300
    return line.removeprefix(f"{path}: ")


def alias_bomb(levels=9, width=9) -> list[str]:
    """Anchors a0..a8, each a list of `width` of the one before: *a8 stands for 9^9 values."""
    return [f"a0: &a0 [{', '.join(['x'] * width)}]"] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]


def test_a_symlink_to_dev_zero_is_refused_as_a_device_without_reading_it(tmp_path):
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    assert refused(link) == "not a regular file (a character device): a config is a YAML file"


def test_a_fifo_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    assert refused(fifo) == "not a regular file (a FIFO): a config is a YAML file"


def test_a_directory_is_refused_as_not_a_regular_file(tmp_path):
    assert refused(tmp_path) == "not a regular file (a directory): a config is a YAML file"


def test_a_missing_file_says_it_cannot_be_read(tmp_path):
    assert refused(tmp_path / "none.yaml") == "cannot read (No such file or directory)"


def test_a_file_at_the_cap_is_read_and_one_byte_over_is_refused_saying_its_size_and_the_cap(tmp_path):
    at_cap, over = tmp_path / "at-cap.yaml", tmp_path / "over.yaml"
    at_cap.write_text(BASE + "#" * (MAX_YAML_BYTES - len(BASE) - 1) + "\n")  # a comment pads it to the byte
    over.write_text(BASE + "#" * (MAX_YAML_BYTES - len(BASE)) + "\n")
    assert (at_cap.stat().st_size, over.stat().st_size) == (MAX_YAML_BYTES, MAX_YAML_BYTES + 1)
    assert read_yaml(at_cap)["name"] == "t"
    assert refused(over) == (f"{MAX_YAML_BYTES + 1} bytes, over the {MAX_YAML_BYTES} (192 KiB) a config may have: "
                             "is it a config?")


@pytest.mark.parametrize("data, message", [
    (BASE.encode("utf-16"), "not UTF-8: byte 0xff at line 1, column 1 (UTF-16?): save it as UTF-8"),
    (BASE.encode("utf-16-le"), "not UTF-8: a NUL byte at line 1, column 2 (UTF-16?): save it as UTF-8"),
    (b"name: t\n# caf\xe9\n", "not UTF-8: byte 0xe9 at line 2, column 6: save it as UTF-8"),
    (b"name: t\x00\n", "not UTF-8: a NUL byte at line 1, column 8: save it as UTF-8"),
])
def test_a_file_that_is_not_utf8_says_where_in_one_line(tmp_path, data, message):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(data)
    assert refused(bad) == message


def test_a_utf8_file_with_a_byte_order_mark_is_read(tmp_path):
    good = tmp_path / "bom.yaml"
    good.write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert read_yaml(good)["name"] == "t"


@pytest.mark.parametrize("text, message", [
    ("x: &a 1\ny: *a\n", "x (line 1, column 4): aliases (&/*) are not allowed: write the values out"),
    ("\n".join(alias_bomb()) + "\nname: *a8\n",
     "a0 (line 1, column 5): aliases (&/*) are not allowed: write the values out"),
    (BASE + "seed: 1\nseed: 2\n", "seed (line 4, column 1): key 'seed' is given twice (on lines 3 and 4): keep one"),
    ("topology: {kind: star, kind: fattree}\n",
     "topology.kind (line 1, column 24): key 'kind' is given twice (on line 1): keep one"),
    (BASE + "seed: 010\n", "seed (line 3, column 7): '010' has a leading zero, which YAML 1.1 reads as octal: "
                           "write 10, or 0o10 if octal is meant"),
    (BASE + "seed: 09\n", "seed (line 3, column 7): '09' has a leading zero, which YAML 1.1 reads as octal: write 9"),
    (BASE + "seed: " + "9" * 5000 + "\n", "seed (line 3, column 7): an integer of 5000 digits: at most 30"),
    (BASE + "seed: " + "9" * 31 + "\n", "seed (line 3, column 7): an integer of 31 digits: at most 30"),
    ("x: " + "[" * 20000 + "]" * 20000 + "\n",
     f"x (line 1, column {MAX_DEPTH + 3}): nested deeper than {MAX_DEPTH} levels: a config is a few levels deep"),
    ("x: " + "{a: " * 20000 + "1" + "}" * 20000 + "\n",
     f"x (line 1, column {4 * MAX_DEPTH}): nested deeper than {MAX_DEPTH} levels: a config is a few levels deep"),
    (BASE + "seed: !!int 3\n", "seed (line 3, column 7): tags ('!!int') are not allowed: write the value plainly"),
    ("name: t\x01\n", "line 1: not valid YAML: character #x0001 is not allowed (a control character)"),
    ("name: [t\n", "line 2, column 1: not valid YAML: expected ',' or ']', but got '<stream end>'"),
    ("a: {[x]: 1}\n", "a (line 1, column 5): not valid YAML: found unhashable key"),
])
def test_yaml_that_could_blow_up_or_mislead_is_refused_in_one_line_naming_where(tmp_path, text, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert refused(bad) == message


def test_deep_nesting_never_escapes_as_a_recursion_error_even_below_the_recursion_limit(tmp_path):
    deep = tmp_path / "deep.yaml"
    depth = (MAX_YAML_BYTES - 4) // 2  # as deep as a file under the cap nests: far past the recursion limit
    deep.write_text("x: " + "[" * depth + "]" * depth + "\n")
    assert "nested deeper than" in refused(deep)


def test_only_true_and_false_are_booleans_and_yes_no_on_off_dates_and_sexagesimals_stay_strings(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("a: [true, false, True, FALSE, yes, no, on, off, y, n]\nb: 2024-01-01\nc: 1:30\nd: '010'\n"
                    "e: [0o10, 0x1f, 1e3, .5, -.inf, 0, -0, +7, ~, null]\n'<<': {x: 1}\n")
    data = read_yaml(good)
    assert data["a"] == [True, False, True, False, "yes", "no", "on", "off", "y", "n"]
    assert (data["b"], data["c"], data["d"]) == ("2024-01-01", "1:30", "010")
    assert data["e"][:6] == [8, 31, 1000.0, 0.5, float("-inf"), 0] and data["e"][6:] == [0, 7, None, None]
    assert data["<<"] == {"x": 1}


@pytest.mark.parametrize("loader", [CConfigLoader, ConfigLoader])
def test_the_loader_reads_what_yaml_safe_dump_writes_as_it_was(loader):
    # Sweep points and manifests are written with yaml.safe_dump and read back through read_yaml.
    value = {"name": "p-01", "s": ["yes", "010", "1:30", "2024-01-01", "on", "null", ""], "n": [1, -2, 0.5, 1e-05,
             1e20, float("inf")], "b": [True, False, None], "nested": {"k": [{"x": 1}]}}
    assert yaml.load(yaml.safe_dump(value), Loader=loader) == value


@pytest.mark.parametrize("path", sorted(WORKLOADS.rglob("*.yaml")), ids=lambda p: str(p.relative_to(WORKLOADS)))
def test_libyaml_reads_every_shipped_file_as_pyyamls_parser_does(path):
    # read_yaml parses with libyaml; PyYAML's parser (what said why a file was refused) must read the same.
    text = path.read_text()
    assert repr(yaml.load(text, Loader=CConfigLoader)) == repr(yaml.load(text, Loader=ConfigLoader))


@pytest.mark.parametrize("section, message", [
    # (a dotted key is quoted in a key path: set.'x.a0' is the key x.a0 of set:)
    ("set:\n" + "\n".join(f"  x.{line}" for line in alias_bomb()) + "\n  name: *a8\ngrid: {workload.rounds: [1]}\n",
     "set.'x.a0' (line 3, column 9): aliases (&/*) are not allowed: write the values out"),
    ("grid:\n" + "\n".join(f"  x.{line}" for line in alias_bomb()) + "\n  workload.flows: *a8\n",
     "grid.'x.a0' (line 3, column 9): aliases (&/*) are not allowed: write the values out"),
    ("grid: {workload.flows: [8, 8]}\ngrid: {workload.flows: [16]}\n",
     "grid (line 3, column 1): key 'grid' is given twice (on lines 2 and 3): keep one"),
])
def test_a_sweep_file_is_read_the_same_safe_way(tmp_path, section, message):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("experiment: incast\n" + section)
    assert refused(sweep, load_sweep) == message


def test_a_config_in_an_alias_bomb_is_one_short_line_from_load_config(tmp_path):
    bad = tmp_path / "bomb.yaml"
    bad.write_text(BASE + "defs:\n" + "\n".join(f"  {line}" for line in alias_bomb()) + "\nworkload: {kind: incast, "
                   "flows: *a8}\n")
    assert refused(bad, load_config) == ("defs.a0 (line 4, column 7): aliases (&/*) are not allowed: write the values "
                                         "out")


def test_a_python_without_asserts_reads_and_refuses_the_same(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BASE + "datacenter: {link_gbps: 10, dilation: true}\n")
    result = subprocess.run([sys.executable, "-O", "-m", "ccemu.cli", "check", "--config", str(bad)],
                            capture_output=True, text=True, env={**os.environ, "CCEMU_STATE_ROOT": str(tmp_path / "s")})
    assert result.returncode == 2
    assert result.stderr.strip() == f"ccemu: {bad}: datacenter.dilation: must be a number (got true)"
