"""The one rule for every name ccemu turns into a path, a container, a namespace or an Ansible
variable: experiment and sweep names, point ids, the machines of an inventory. A name is a
path component that cannot escape its folder: letters, digits, '_', '-' and '.', starting with
a letter or digit (so never '.' or '..'), no '..' anywhere, at most 64 characters."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from .excerpt import shown

MAX_NAME_CHARS = 64
# The rule as a regular expression (also what pydantic and Ansible check against): ASCII only.
NAME_PATTERN = r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_NAME = re.compile(NAME_PATTERN)


def name_problem(value: object) -> str | None:
    """Why `value` is not a name (one line, quoting at most a short excerpt of it), or None."""
    if isinstance(value, str) and _NAME.fullmatch(value):
        return None
    return (f"must be a name: letters, digits, '_', '-' and '.', starting with a letter or digit, no '..', "
            f"at most {MAX_NAME_CHARS} characters (got {shown(value, 40)})")


# The error type of a Name field (pydantic's): its message already quotes what it got.
NAME_ERROR = "name"


def _validated_name(value: str) -> str:
    problem = name_problem(value)
    if problem:
        raise PydanticCustomError(NAME_ERROR, problem)
    return value


# A pydantic field holding a name (`name: Name`); a bad one's message is name_problem's.
Name = Annotated[str, AfterValidator(_validated_name)]


def host_number(name: str) -> int:
    """h12 -> 12."""
    if not (name.startswith("h") and name[1:].isdigit()):
        raise ValueError(f"not a host name: {name!r}")
    return int(name[1:])
