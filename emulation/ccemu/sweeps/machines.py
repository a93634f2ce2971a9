"""The machines of an Ansible inventory, read and judged before a sweep is planned across them:
an inventory Ansible cannot read, or that lists no machine, is refused in one line (before, it
ran no point after writing a plan); every machine's name must be a name (model/names.py: it
becomes the machine's sweep folder, removed as root); and one machine listed under two names
would run two fabrics at once on one box, so that is refused too."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..model.excerpt import shown
from ..model.names import name_problem
from .plan import SweepError

ANSIBLE_INVENTORY = Path(sys.executable).parent / "ansible-inventory"


@dataclass(frozen=True)
class Machine:
    name: str
    address: str  # where Ansible reaches it: "local", or host:port
    # Its variables as Ansible resolved them (connection, key, ccemu_* settings): how ccemu reaches it
    # itself when it runs a fabric across machines (machines/session.py).
    vars: dict = field(default_factory=dict, compare=False, hash=False, repr=False)


def machines_of(inventory: Path) -> list[Machine]:
    """The inventory's machines, in Ansible's order; SweepError (one line) if it cannot be read,
    lists none, names one badly, or lists one machine twice."""
    try:
        done = subprocess.run([str(ANSIBLE_INVENTORY), "-i", str(inventory), "--list"], capture_output=True,
                              text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SweepError(f"{inventory}: ansible-inventory could not read it ({exc})") from None
    warnings = [line.removeprefix("[WARNING]: ").strip() for line in done.stderr.splitlines()
                if line.startswith("[WARNING]: Unable to parse") or line.startswith("ERROR")]
    try:
        listed = json.loads(done.stdout)
    except ValueError:
        listed = None
    if done.returncode != 0 or listed is None:
        why = warnings[0] if warnings else " ".join(done.stderr.split())[:300]
        raise SweepError(f"{inventory}: ansible-inventory could not read it ({why})")
    return _judged(inventory, listed, warnings)


def _judged(inventory: Path, listed: dict, warnings: list[str]) -> list[Machine]:
    hostvars = listed.get("_meta", {}).get("hostvars", {})
    names: list[str] = []
    for group, body in listed.items():
        if group != "_meta":
            names += [name for name in body.get("hosts", []) if name not in names]
    if not names:
        why = f" ({warnings[0]})" if warnings else ""
        raise SweepError(f"{inventory}: lists no machine{why}")
    machines = []
    for name in names:
        problem = name_problem(name)
        if problem:
            raise SweepError(f"{inventory}: machine {shown(name, 40)}: {problem} (give its address as ansible_host)")
        own = hostvars.get(name, {})
        local = own.get("ansible_connection") == "local"
        address = "local" if local else f"{own.get('ansible_host', name)}:{own.get('ansible_port', 22)}"
        machines.append(Machine(name, address, own))
    seen: dict[str, str] = {}
    for machine in machines:
        if machine.address in seen:
            raise SweepError(f"{inventory}: {seen[machine.address]} and {machine.name} are one machine "
                             f"({machine.address}): each runs one fabric at a time, two at once on one box "
                             "would share its CPUs; list it once")
        seen[machine.address] = machine.name
    return machines
