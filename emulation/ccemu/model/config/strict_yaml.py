"""The YAML every config and sweep file is read in: YAML 1.2's core schema, minus what lets a
small file stand for a huge value or mean something else than it reads.

- `true`/`false` are the only booleans: `yes`, `no`, `on`, `off` stay strings (YAML 1.1 reads
  `link_gbps: yes` as 1), and a number's rule then names the key.
- Integers are decimal, 0o octal or 0x hex; a leading zero (`010`, octal 8 in YAML 1.1) and more
  than MAX_INT_DIGITS digits (Python's own limit, 4300, raises ValueError) are refused.
- No timestamps, sexagesimal numbers (`1:30` is 90 in YAML 1.1) or merge keys (`<<`).
- No anchors or aliases: an alias bomb (`b: &b [*a, *a, ...]`) is a few lines that stand for
  billions of values; nothing a config says needs them. No tags (`!!float x`) either: a value
  is what it reads as.
- A key twice in one mapping is refused (YAML keeps the last one silently).
- Nesting deeper than MAX_DEPTH is refused while composing, before Python's recursion limit.

Each refusal is a Refused (a yaml.MarkedYAMLError) with its line and the key path it is under;
errors.read_yaml says it in one line with the file.

load() parses with libyaml (CConfigLoader: PyYAML's own parser takes seconds per MiB) and applies
the rules above to its events in Python; a text that is refused there is read again by PyYAML's
parser (ConfigLoader), so that a refusal's words, line and column are PyYAML's, as they always were.
"""

from __future__ import annotations

import re

import yaml
from yaml.cyaml import CParser
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from ..excerpt import shown

# No config comes near: the deepest shipped key is 4 levels down.
MAX_DEPTH = 50
# No config value has more digits (port buffers are u32, 10 digits; seeds fit 64 bits, 20).
MAX_INT_DIGITS = 30
NO_ALIASES = "aliases (&/*) are not allowed: write the values out"


class Refused(yaml.MarkedYAMLError):
    """YAML this dialect does not read, at `problem_mark`, under the keys `path` (top level: ())."""

    def __init__(self, problem: str, mark: yaml.Mark, path: tuple[str, ...] = ()):
        super().__init__(problem=problem, problem_mark=mark)
        self.path = path


def _label(index: object) -> str | None:
    """What composing a node under `index` adds to its key path: a mapping value's key, a list
    item's position; None for a mapping's key itself."""
    if isinstance(index, yaml.ScalarNode):
        return str(index.value)
    return str(index) if isinstance(index, int) else None


class _Dialect(Composer, SafeConstructor, Resolver):
    """The dialect above, composed and constructed from the events of whichever parser a loader
    adds (yaml.SafeLoader's classes, but for the parser)."""

    yaml_implicit_resolvers: dict = {}  # our own table (YAML 1.2 core), not SafeLoader's YAML 1.1 one

    def __init__(self):
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0
        self._keys: list[str] = []  # the key path of the node being composed
        self._paths: dict[int, tuple[str, ...]] = {}  # id(node) -> its key path, for refusals while constructing

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        event = self.peek_event()
        label = _label(index)
        path = (*self._keys, label) if label is not None else tuple(self._keys)
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise Refused(NO_ALIASES, event.start_mark, path)
        if getattr(event, "tag", None) is not None:
            tag = event.tag.replace("tag:yaml.org,2002:", "!!")
            raise Refused(f"tags ({shown(tag)}) are not allowed: write the value plainly", event.start_mark, path)
        collection = isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent))
        if collection:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise Refused(f"nested deeper than {MAX_DEPTH} levels: a config is a few levels deep",
                              event.start_mark, path[:1])  # the key it went deep under
        if label is not None:
            self._keys.append(label)
        try:
            node = super().compose_node(parent, index)
            self._paths[id(node)] = path
            return node
        finally:
            if label is not None:
                self._keys.pop()
            if collection:
                self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first: dict[object, int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in first:
                    lines = f"on line {line}" if first[key] == line else f"on lines {first[key]} and {line}"
                    raise Refused(f"key {shown(key)} is given twice ({lines}): keep one", key_node.start_mark,
                                  (*self._paths.get(id(node), ()), str(key)))
                first[key] = line
        try:
            return super().construct_mapping(node, deep)
        except yaml.constructor.ConstructorError as exc:  # e.g. a list as a key: said under its mapping's key
            raise Refused(f"not valid YAML: {exc.problem}", exc.problem_mark, self._paths.get(id(node), ())) from None

    def construct_int(self, node: yaml.ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        body = text.lstrip("+-")
        base, digits = {"0o": (8, body[2:]), "0x": (16, body[2:])}.get(body[:2], (10, body))
        path = self._paths.get(id(node), ())
        if len(digits) > MAX_INT_DIGITS:
            raise Refused(f"an integer of {len(digits)} digits: at most {MAX_INT_DIGITS}", node.start_mark, path)
        if base == 10 and len(digits) > 1 and digits.startswith("0"):
            decimal = f"{text[:len(text) - len(body)]}{digits.lstrip('0') or '0'}"
            octal = f", or 0o{digits.lstrip('0')} if octal is meant" if set(digits) <= set("01234567") else ""
            raise Refused(f"{shown(text)} has a leading zero, which YAML 1.1 reads as octal: write {decimal}{octal}",
                          node.start_mark, path)
        return int(text, base) if base == 10 else int(digits, base)


class ConfigLoader(_Dialect, Reader, Scanner, Parser):
    """The dialect parsed by PyYAML in Python (yaml.load(text, Loader=ConfigLoader)): what says why
    a text is refused."""

    def __init__(self, stream: str):
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _Dialect.__init__(self)


class CConfigLoader(_Dialect, CParser):
    """The dialect parsed by libyaml (as yaml.CSafeLoader), its events composed here by the rules."""

    def __init__(self, stream: str):
        CParser.__init__(self, stream)
        _Dialect.__init__(self)


# Where libyaml is more lenient than PyYAML's parser (found by fuzzing the two against each other):
# a tab after `:` or in a plain value, a byte-order mark past the start, `?` inside a flow
# collection. A text holding any of these is read by PyYAML's parser alone, so that what it
# refused stays refused.
_LIBYAML_LENIENT = re.compile("[\t\ufeff?]")


def load(text: str) -> object:
    """`text`'s data in this dialect; a Refused or another yaml.YAMLError, PyYAML's own, if it is not."""
    if _LIBYAML_LENIENT.search(text):
        return yaml.load(text, Loader=ConfigLoader)
    try:
        return yaml.load(text, Loader=CConfigLoader)
    except Exception:  # any refusal at all (libyaml's words differ): PyYAML's parser says it, as it always has
        return yaml.load(text, Loader=ConfigLoader)


_Dialect.add_constructor("tag:yaml.org,2002:int", _Dialect.construct_int)
# YAML 1.2 core schema; the int resolver comes before the float one, whose pattern also matches
# plain digits (a resolver list is tried in order).
for _tag, _pattern, _first in [
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    ("tag:yaml.org,2002:float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", "-+.0123456789"),
]:
    _Dialect.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))
