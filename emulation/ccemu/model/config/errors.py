"""How a bad config is told: one line naming the key path and the rule, e.g.
``incast.yaml: topology.k: must be even (got 5)``; the CLI prints it and exits with status 2
(ConfigError) or 8 (DoesNotFit)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import yaml

from ..names import NAME_ERROR
from ..excerpt import cut, shown
from .strict_yaml import Refused, load

# What a config, sweep or claims file may weigh: about 4x the largest shipped one, workloads/reference.yaml
# (44,784 bytes), rounded up to 192 KiB: fixed from the largest file at the time, not from a run. A file far
# above is not a config (or is a YAML bomb). One at the cap took 0.13 s of CPU to read when the cap was set
# (0.7 s with PyYAML's own parser, which now only words the refusals: strict_yaml.load).
MAX_YAML_BYTES = 192 << 10
_CAP = f"{MAX_YAML_BYTES >> 10} KiB"


class ConfigError(ValueError):
    """An invalid experiment config; str() is the one line to show the user."""


class DoesNotFit(ConfigError):
    """A valid config whose fabric this machine cannot hold (memory, processes, open files)
    or the port program cannot number (port ids, ports per namespace): fabric/admission.py."""


class KeyedError(ValueError):
    """A cross-field rule that still names one key path, relative to the model that raised
    it; HERE in the message becomes that model's own path (e.g. "schemes.0.")."""

    HERE = "{here}"

    def __init__(self, loc: tuple[str, ...], message: str):
        super().__init__(message)
        self.loc = loc


def read_yaml(path: Path | str) -> object:
    """The YAML file's data, read in strict_yaml's dialect; ConfigError (one line `PATH: ...`)
    if it is not a regular file (after symlinks: never a device or FIFO, which are not even
    opened), weighs more than MAX_YAML_BYTES, is not UTF-8, or is not YAML that dialect reads."""
    path = Path(path)
    text = _utf8(path, _read_bytes(path))
    try:
        return load(text)
    except Refused as exc:  # under the key it is at, where it is in one
        where = f"{'.'.join(map(_key, exc.path))} ({_at(exc.problem_mark)})" if exc.path else _at(exc.problem_mark)
        raise ConfigError(f"{path}: {where}: {exc.problem}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "not YAML"
        raise ConfigError(f"{path}: {_at(mark)}: not valid YAML: {cut(what, 200)}") from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise ConfigError(f"{path}: line {line}: not valid YAML: character #x{exc.character:04x} is not allowed "
                          "(a control character)") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({cut(str(exc).splitlines()[0], 200)})") from None
    except RecursionError:  # strict_yaml's MAX_DEPTH stops nesting long before; never a traceback
        raise ConfigError(f"{path}: nested too deep") from None


def _at(mark: yaml.Mark | None) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(somewhere)"


def _read_bytes(path: Path) -> bytes:
    """The file's bytes; refused before opening unless it is a regular file of at most MAX_YAML_BYTES."""
    try:
        _regular_and_small(path, os.stat(path))  # follows symlinks: /dev/zero behind a link is a device
        # O_NONBLOCK: a FIFO swapped in after the stat does not block the open; fstat refuses it then.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as file:
            _regular_and_small(path, os.fstat(file.fileno()))
            data = file.read(MAX_YAML_BYTES + 1)  # never more, whatever it grew to
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    if len(data) > MAX_YAML_BYTES:
        raise ConfigError(f"{path}: more than {MAX_YAML_BYTES} bytes ({_CAP}), the most a config may have: "
                          "is it a config?")
    return data


_KINDS = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")]


def _regular_and_small(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
        raise ConfigError(f"{path}: not a regular file ({kind}): a config is a YAML file")
    if info.st_size > MAX_YAML_BYTES:
        raise ConfigError(f"{path}: {info.st_size} bytes, over the {MAX_YAML_BYTES} ({_CAP}) a config may have: "
                          "is it a config?")


def _utf8(path: Path, data: bytes) -> str:
    """The bytes as UTF-8 text; ConfigError saying where they are not (a NUL too: BOM-less UTF-16
    of ASCII text is valid UTF-8 with a NUL every other byte)."""
    try:
        text = data.decode("utf-8")
        bad = text.find("\0")
        if bad < 0:
            return text
        start, what = len(text[:bad].encode()), "a NUL byte"
    except UnicodeDecodeError as exc:
        start, what = exc.start, f"byte 0x{data[exc.start]:02x}"
    line_start = data.rfind(b"\n", 0, start) + 1
    line, column = data.count(b"\n", 0, start) + 1, len(data[line_start:start].decode("utf-8", "replace")) + 1
    utf16 = " (UTF-16?)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") or data.count(0) > len(data) // 4 else ""
    raise ConfigError(f"{path}: not UTF-8: {what} at line {line}, column {column}{utf16}: save it as UTF-8")


def as_number(value: object) -> float | None:
    """A YAML number, also one YAML reads as a string (`1e3`: YAML 1.1 wants `1.0e+3`), as pydantic
    will read it; None for anything else (an integer beyond a float's range too: the section's own
    rule then says what is wrong with it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except (ValueError, OverflowError):
        return None


# The longest line describe() gives (a rule quoting a whole value is cut here).
MAX_LINE_CHARS = 400


def _key(part: object) -> str:
    """A part of a key path as a line shows it: a long one (a mapping's key is the file's) as an
    excerpt, and one that is not a plain word (a newline, a space, a dot) quoted, so that the path
    stays one readable line."""
    text = str(part)
    return cut(text, 40) if re.fullmatch(r"[\w+\-]+", text, re.ASCII) else shown(part, 40)


_UNION_FIELDS = {"topology", "workload", "port"}  # the tagged unions: the tag follows their name in a location
# The member of a plain union (`float | Literal['auto']`) pydantic adds to a location:
# datacenter.dilation.float is the file's datacenter.dilation.
_UNION_MEMBER = re.compile(r"float|int|str|bool|none|(?:literal|function-\w+|constrained-\w+)\[.*\]")


def describe(error: dict, union_tags: set[str]) -> str:
    """One pydantic error as its line (without the source); `union_tags`: the tags of the
    tagged unions' members (topology kinds, workload kinds, port profiles). A value is quoted
    by an excerpt (shown()), and the line is cut at MAX_LINE_CHARS whatever a rule wrote."""
    return cut(_line(error, union_tags), MAX_LINE_CHARS)


def _line(error: dict, union_tags: set[str]) -> str:
    # Drop the tag pydantic adds for the chosen member of a tagged union (topology.fattree.k), and
    # only there: a key elsewhere may be named like a tag (workload.per_scheme.dctcp); and the
    # "[key]" it adds where a mapping's key, not its value, is wrong.
    parts = [str(part) for part in error["loc"]]
    loc = [_key(part) for i, part in enumerate(parts)
           if part != "[key]" and not (part in union_tags and i > 0 and parts[i - 1] in _UNION_FIELDS)
           and not (i > 0 and _UNION_MEMBER.fullmatch(part))]
    original = (error.get("ctx") or {}).get("error")
    if isinstance(original, KeyedError):  # its key path is relative to the model that raised it
        here = "".join(f"{part}." for part in loc)
        return f"{'.'.join([*loc, *map(_key, original.loc)])}: {str(original).replace(KeyedError.HERE, here)}"
    key = ".".join(loc) or "(top level)"
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{key}: unknown key"
    if kind == "missing":
        return f"{key}: required key is missing"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tag = error["ctx"]["discriminator"].strip("'")
        if kind == "union_tag_not_found":
            return f"{key}.{tag}: required key is missing"
        return f"{key}.{tag}: must be one of {error['ctx']['expected_tags']} (got {shown(error['ctx']['tag'])})"
    message = error["msg"].removeprefix("Value error, ")
    if kind not in ("value_error", NAME_ERROR):  # those rules' messages say what they got
        message = f"{message[0].lower()}{message[1:]} (got {shown(error.get('input'))})"
    return f"{key}: {message}"
