"""Both fabrics, one machine's (FabricNet) and several machines' (SplitFabric), answer the Fabric
protocol (fabric/protocol.py), so that no caller tests which one it holds."""

import ast
import inspect
import re
from pathlib import Path

from ccemu.fabric.net import FabricNet
from ccemu.fabric.protocol import Fabric
from ccemu.machines.fabric import SplitFabric

PACKAGE = Path(__file__).resolve().parents[2] / "ccemu"
FABRICS = (FabricNet, SplitFabric)


def members(protocol) -> tuple[set[str], set[str]]:
    """(methods and properties, data attributes) a protocol declares."""
    own = {name for name in vars(protocol) if not name.startswith("_") or name in ("__enter__", "__exit__")}
    methods = {name for name in own if callable(getattr(protocol, name)) or isinstance(vars(protocol)[name], property)}
    return methods, set(protocol.__annotations__)


def assigned_in_init(cls) -> set[str]:
    return {m for klass in cls.__mro__ if "__init__" in vars(klass) and klass is not object
            for m in re.findall(r"self\.(\w+)(?:: [^=\n]+)? =", inspect.getsource(klass.__init__))}


def test_both_fabrics_have_every_method_and_attribute_the_fabric_protocol_declares():
    methods, attributes = members(Fabric)
    assert {"probes", "port_counters", "idle_rtts", "drained_ports", "machine_of", "cpu_shares_now"} <= methods
    assert {"hosts", "round_trips", "pause_agent_figures"} <= attributes  # the walk sees them
    for fabric in FABRICS:
        assert {m for m in methods if not hasattr(fabric, m)} == set(), fabric.__name__
        assert {a for a in attributes - assigned_in_init(fabric) if not hasattr(fabric, a)} == set(), fabric.__name__


def test_no_module_tests_which_fabric_it_holds():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance"
                    and any(getattr(n, "id", None) in ("FabricNet", "SplitFabric") for n in ast.walk(node.args[1]))):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []


def test_the_block_runner_tells_one_machine_from_several_only_where_it_opens_the_fabric():
    readers = set()
    for path in sorted((PACKAGE / "experiments").glob("*.py")):
        for function in ast.walk(ast.parse(path.read_text())):
            if isinstance(function, ast.FunctionDef) and any(
                    isinstance(node, ast.Attribute) and node.attr == "across" and isinstance(node.ctx, ast.Load)
                    for node in ast.walk(function)):
                readers.add(f"{path.name}:{function.name}")
    assert readers == {"base.py:_fabric"}
