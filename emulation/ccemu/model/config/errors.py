"""How a bad config is told: one line naming the key path and the rule, e.g.
``incast.yaml: topology.k: must be even (got 5)``; the CLI prints it and exits with status 2
(ConfigError) or 8 (DoesNotFit)."""

from __future__ import annotations

from pathlib import Path

import yaml


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


def read_yaml(path: Path) -> object:
    """The YAML file's data; ConfigError (one line) if it cannot be read or parsed."""
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None


def as_number(value: object) -> float | None:
    """A YAML number, also one YAML reads as a string (`1e3`: YAML 1.1 wants `1.0e+3`), as pydantic
    will read it; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


_UNION_FIELDS = {"topology", "workload", "port"}  # the tagged unions: the tag follows their name in a location


def describe(error: dict, union_tags: set[str]) -> str:
    """One pydantic error as its line (without the source); `union_tags`: the tags of the
    tagged unions' members (topology kinds, workload kinds, port profiles)."""
    # Drop the tag pydantic adds for the chosen member of a tagged union (topology.fattree.k), and
    # only there: a key elsewhere may be named like a tag (workload.per_scheme.dctcp); and the
    # "[key]" it adds where a mapping's key, not its value, is wrong.
    parts = [str(part) for part in error["loc"]]
    loc = [part for i, part in enumerate(parts)
           if part != "[key]" and not (part in union_tags and i > 0 and parts[i - 1] in _UNION_FIELDS)]
    original = (error.get("ctx") or {}).get("error")
    if isinstance(original, KeyedError):  # its key path is relative to the model that raised it
        here = "".join(f"{part}." for part in loc)
        return f"{'.'.join([*loc, *original.loc])}: {str(original).replace(KeyedError.HERE, here)}"
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
        return f"{key}.{tag}: must be one of {error['ctx']['expected_tags']} (got {error['ctx']['tag']!r})"
    message = error["msg"].removeprefix("Value error, ")
    if kind != "value_error":
        message = f"{message[0].lower()}{message[1:]} (got {error.get('input')!r})"
    return f"{key}: {message}"
