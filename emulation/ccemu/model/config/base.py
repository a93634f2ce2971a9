"""What every section of an experiment config shares."""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, model_validator

from .errors import KeyedError

# A host's name as configs write it: h1, h2, ... (no leading zero).
HOST_NAME = r"^h[1-9][0-9]*$"


class Section(BaseModel):
    """A config section: unknown keys are an error (a typo never passes silently), a bool is
    never a number (pydantic reads `true` as 1 where a number is meant), and a validated
    section never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        for name, field in cls.model_fields.items():
            key = field.alias or name
            if key in data:
                where = bool_for_a_number(field.annotation, data[key])
                if where is not None:
                    raise KeyedError((key, *where[0]), f"must be a number (got {str(where[1]).lower()})")
        return data


def bool_for_a_number(annotation: object, value: object) -> tuple[tuple[str, ...], bool] | None:
    """Where in `value` (the path below it, and the bool) a bool stands where `annotation` wants a
    number and no bool (int, float, float | 'auto', list[int], dict[str, float], ...); None if nowhere."""
    if isinstance(value, bool):
        kinds = _kinds(annotation)
        return ((), value) if kinds & {int, float} and not kinds & {bool, Any, object} else None
    items = (enumerate(value) if isinstance(value, list) else value.items() if isinstance(value, dict) else ())
    for index, item in items:
        for inner in _members(annotation, type(value)):
            where = bool_for_a_number(inner, item)
            if where is not None:
                return (str(index), *where[0]), where[1]
    return None


def _flat(annotation: object) -> list[object]:
    """The members of a union (and of Optional, Annotated), as plain annotations."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _flat(typing.get_args(annotation)[0])
    if origin is Union or type(annotation).__name__ == "UnionType":  # Union[...] and X | Y
        return [flat for member in typing.get_args(annotation) for flat in _flat(member)]
    return [annotation]


def _kinds(annotation: object) -> set[object]:
    """The scalar types a value of `annotation` may be (a Literal's values count by their type)."""
    kinds: set[object] = set()
    for member in _flat(annotation):
        if typing.get_origin(member) is Literal:
            kinds |= {type(v) for v in typing.get_args(member)}
        elif member in (Any, object) or isinstance(member, type):
            kinds.add(member)
    return kinds


def _members(annotation: object, container: type) -> list[object]:
    """What `annotation` holds in a container of `container`'s kind: list[X] -> X, dict[K, V] -> V."""
    inner = []
    for member in _flat(annotation):
        origin, args = typing.get_origin(member), typing.get_args(member)
        if container is list and origin in (list, tuple, set, frozenset) and args:
            inner += [arg for arg in args if arg is not Ellipsis]
        elif container is dict and origin is dict and len(args) == 2:
            inner.append(args[1])
    return inner
