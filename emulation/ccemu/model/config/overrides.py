"""Changes made to an experiment file's data before it is judged: a value at a dotted key, and the
file's schemes cut down to some of them. A sweep's `set:` and `grid:` (sweeps/plan.py) and the
command line's `--set KEY=VALUE` and `--schemes A,B` (experiments/validation.py as_asked) change a
file by these same rules, so that a sweep's point and a command line that say the same thing run the
same config.

Plain YAML data in, a changed copy out (the caller's data is never changed); the config's own rules
judge the result (parse_config). A change that cannot be made is a ConfigError of one line that
starts with `where`, the caller's words for where the change came from.
"""

from __future__ import annotations

import json

import yaml

from ..excerpt import shown
from .errors import ConfigError
from . import strict_yaml

# Not a key of the experiment file: keeps only the named ones of its schemes (with_schemes).
SCHEME_KEY = "scheme"


def changed(config: dict, key: str, value: object, where: str) -> dict:
    """`config` with `value` at the dotted `key` (sections missing from it are created). Where
    `config` holds a list and `value` is not one (`workload.flows: 8` against `flows: [8, 32]`),
    `value` stands for a list of one. Inside `schemes`, a part names one of the file's schemes
    (`schemes.dctcp.params.g`: that scheme's entry, its other settings kept). `scheme`:
    with_schemes."""
    if key == SCHEME_KEY:
        return with_schemes(config, value, where)
    parts = key.split(".")
    if not all(parts):
        raise ConfigError(f"{where}: not a dotted key of the experiment file")
    result = json.loads(json.dumps(config))  # deep copy of plain YAML data
    node = result
    for at, part in enumerate(parts[:-1]):
        if at == 1 and parts[0] == "schemes" and isinstance(node, list):
            node = _scheme_entry(node, part, where)
            continue
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if part == "schemes" and at == 0 and isinstance(child, list):
            node = child
            continue
        if not isinstance(child, dict):
            raise ConfigError(f"{where}: {part} is not a section of the experiment file")
        node = child
    if isinstance(node, list):
        _scheme_entry(node, parts[-1], where)  # names a scheme it has, or says which it has
        raise ConfigError(f"{where}: name a setting of the scheme, e.g. schemes.{parts[-1]}.params.NAME or "
                          f"schemes.{parts[-1]}.port.NAME")
    if isinstance(node.get(parts[-1]), list) and not isinstance(value, list):
        value = [value]
    node[parts[-1]] = value
    return result


def _scheme_entry(schemes: list, name: str, where: str) -> dict:
    """The entry of the file's `schemes` that runs `name` (a scheme runs once per experiment)."""
    for entry in schemes:
        if isinstance(entry, dict) and entry.get("scheme") == name:
            return entry
    known = [str(s.get("scheme")) for s in schemes if isinstance(s, dict)]
    raise ConfigError(f"{where}: the experiment has no scheme {shown(name, 40)} (it has: {', '.join(known) or 'none'})")


def with_schemes(config: dict, value: object, where: str) -> dict:
    """Only the file's schemes named by `value` (a name or a list of names), in the file's order:
    each keeps the port and parameters the file gives it."""
    wanted = value if isinstance(value, list) else [value]
    schemes = [s for s in config.get("schemes") or [] if isinstance(s, dict)] \
        if isinstance(config.get("schemes"), list) else []  # what is no list of schemes: none to keep
    known = [s.get("scheme") for s in schemes]
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ConfigError(f"{where}: the experiment has no scheme {shown(unknown[0], 40)} "
                          f"(it has: {', '.join(map(str, known)) or 'none'})")
    return {**config, "schemes": [s for s in schemes if s.get("scheme") in wanted]}


def setting(text: str, where: str) -> tuple[str, object]:
    """The dotted key and the value of a command line's KEY=VALUE, the value read as a value of
    the config files' YAML (strict_yaml: `2`, `0.5`, `[8, 32]`, `{kind: star}`, `true`; `yes` is
    a string), as a sweep file's values are. A refusal starts with `where` (a bad value's, then
    with its key)."""
    key, equals, raw = text.partition("=")
    key = key.strip()
    if not equals or not key:
        raise ConfigError(f"{where}: expected KEY=VALUE, a dotted key of the experiment file (e.g. "
                          "workload.rounds=2), got " + shown(text, 60))
    try:
        return key, strict_yaml.load(raw)
    except yaml.YAMLError as exc:  # strict_yaml's refusals too: each is a yaml.MarkedYAMLError
        problem = getattr(exc, "problem", None) or "not YAML"
        raise ConfigError(f"{where} {key}: the value {shown(raw, 60)} is not a YAML value ({problem})") from None
