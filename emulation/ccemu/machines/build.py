"""Which build a machine runs. The controller starts nothing until every machine's part runs its own
ccemu and cchost: a machine provisioned from another tree would compute other flows, judge by other
rules or speak another wire format, and nothing in the results would show it.

A build is named by digests of what runs: ccemu's package files (its Python, the port program's
sources and the tables it reads) and the cchost binary. `make provision` ships the controller's tree
and its build outputs (playbooks/roles/ccemu_build), so a machine brought up to date has both the
same. A file deleted on the controller stays on a machine (the role does not delete): the digest
then differs, and the refusal says to remove the machine's build root before provisioning.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # emulation/ccemu
SOURCE_SUFFIXES = (".py", ".c", ".h", ".json")
SHOWN_DIGITS = 12


def _digest(paths: list[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def ccemu_digest() -> str:
    files = sorted(p for p in PACKAGE.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file()
                   and "__pycache__" not in p.parts)
    return _digest(files, PACKAGE)


def cchost_digest() -> str:
    from ..programs.cchost import cchost_binary

    binary = cchost_binary()
    return _digest([binary], binary.parent)


@functools.cache
def identity() -> dict[str, str]:
    """This machine's build: {"ccemu": digest, "cchost": digest}, read once per process (a
    controller compares it at every block's start)."""
    return {"ccemu": ccemu_digest(), "cchost": cchost_digest()}


def mismatch(machine: str, theirs: dict[str, str], ours: dict[str, str]) -> str | None:
    """One line if `machine`'s build (`theirs`) is not the controller's (`ours`), else None."""
    differ = [part for part in ("ccemu", "cchost") if theirs.get(part) != ours[part]]
    if not differ:
        return None
    shown = ", ".join(f"{part} {str(theirs.get(part))[:SHOWN_DIGITS]} there, {ours[part][:SHOWN_DIGITS]} here"
                      for part in differ)
    return (f"machine {machine} runs another build than this controller ({shown}): bring it up to date with "
            "`make provision INVENTORY=<this inventory>` (if it still differs, remove its ccemu_build_root first: "
            "files deleted here stay there)")
