"""A block's work folder on the machines that run its hosts: the controller keeps the folder the
runners read and write (schedules and delay tables in; records, counters, logs, progress out), and
each machine a mirror of it in its run's state folder (removed with the run), so that no path is
assumed to exist, or to be shared, on another machine.

In: a path under the controller's folder in a host's command line is rewritten to the mirror's,
and a file there that exists on the controller is shipped with the command. Out: what the hosts
wrote since the last collection comes back as changes; files cchost only appends to come back as
their new tail, others (counters, rewritten while cchost runs) whole.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path

APPENDED = (".records", ".log", ".progress", ".flows", ".trace")  # files their writers only ever append to


def mapped(argument: str, root: Path, mirror: Path) -> str:
    """`argument` with the controller's `root` replaced by the machine's `mirror`, if under it."""
    prefix = str(root) + os.sep
    return str(mirror) + os.sep + argument[len(prefix):] if argument.startswith(prefix) else argument


def shipped(argv: list[str], root: Path) -> dict[str, str]:
    """The files under `root` that `argv` names and that exist: path -> content (base64)."""
    prefix = str(root) + os.sep
    return {arg: base64.b64encode(Path(arg).read_bytes()).decode() for arg in argv
            if arg.startswith(prefix) and Path(arg).is_file()}


@dataclass
class Outbox:
    """The machine's side: what of its mirror the controller has been sent."""

    mirror: Path
    sent: dict[str, tuple[int, int]] = field(default_factory=dict)  # relative path -> (size, mtime ns) sent

    def changes(self) -> list[list]:
        """[relative path, "tail" | "whole", content (base64)] of every file changed since the
        last call."""
        out = []
        for path in sorted(p for p in self.mirror.rglob("*") if p.is_file()):
            relative = str(path.relative_to(self.mirror))
            before = self.sent.get(relative)
            try:
                stat = path.stat()
                if before == (stat.st_size, stat.st_mtime_ns):
                    continue  # unchanged: not read again (this runs at every poll of a block)
                tail = path.suffix in APPENDED and before is not None and stat.st_size >= before[0]
                with open(path, "rb") as changed:
                    changed.seek(before[0] if tail else 0)
                    data = changed.read()
            except OSError:
                continue  # removed meanwhile
            out.append([relative, "tail" if tail else "whole", base64.b64encode(data).decode()])
            # What was read, which a writer may have grown since the stat: the next call sends the rest.
            self.sent[relative] = ((before[0] if tail else 0) + len(data), stat.st_mtime_ns)
        return out


def apply(changes: list[list], root: Path) -> None:
    """The controller's side: each change written under `root` (a whole file replaced at once, so
    that a reader never sees half of it)."""
    for relative, how, content in changes:
        path = root / relative
        if root.resolve() not in path.resolve().parents:
            raise ValueError(f"a machine sent a path outside the work folder: {relative!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        data = base64.b64decode(content)
        if how == "tail":
            with open(path, "ab") as out:
                out.write(data)
        else:
            temporary = path.with_name(path.name + ".part")
            temporary.write_bytes(data)
            temporary.replace(path)
