"""The package's shape: modules import one another without a circle (a circle is two modules
that cannot be understood, tested or replaced apart; issue 28 broke config -> footprint -> tc ->
config and fabric.inventory <-> containers.engine)."""

import ast
import re
import tomllib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ccemu"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The package's modules `path` imports, at its top or inside a function (a lazy import is
    still a dependency: it only hides the circle from the interpreter); not those under `if
    TYPE_CHECKING:`, which name types for annotations and run nothing."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target, *(f"{target}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found |= {c for c in candidates if c in modules and c != name}
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_circle_finder_finds_a_circle_of_three_and_none_in_a_chain():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_two_modules_of_ccemu_import_each_other_even_through_others():
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    graph = {module_name(p): imports_of(p, modules) for p in paths}
    assert "ccemu.fabric.footprint" in graph["ccemu.fabric.admission"]  # the walk sees imports
    assert circles(graph) == []


PYPROJECT = PACKAGE.parent / "pyproject.toml"


def test_every_top_level_module_of_ccemu_sits_in_a_layer_of_the_contracts():
    """A package left out of the layers would be free to import anything: each is placed."""
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    placed = {name for layer in layers for name in re.split(r"\s*[|:]\s*", layer)}
    top = {f"ccemu.{p.stem if p.is_file() else p.name}" for p in PACKAGE.iterdir()
           if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert top == placed


def test_the_layers_and_the_pure_layers_contracts_hold():
    """import-linter's contracts (pyproject.toml [tool.importlinter]): layers by package, which the
    module-circle test above cannot see (importing ccemu.a.b runs ccemu/a/__init__.py), and no
    machine library imported by the model, results, kinds or reports, even through others."""
    import subprocess
    import sys

    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache", "--config",
                           str(PYPROJECT)], cwd=PACKAGE.parent, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "0 broken" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]


MACHINE_LIBRARIES = ("mininet", "pyroute2", "docker")
LOADED_AFTER = """
import sys
from ccemu.cli import main
status = main(sys.argv[1:])
print(sorted({m.split(".")[0] for m in sys.modules} & set(%r)), status)
""" % (MACHINE_LIBRARIES,)


def loaded_by(*argv: str) -> str:
    """The machine libraries `ccemu ARGV` loaded, and its status, from a fresh interpreter."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LOADED_AFTER, *argv], cwd=PACKAGE.parents[1], capture_output=True,
                          text=True, timeout=120)
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-2000:]


def test_ccemu_report_and_validate_load_no_emulator_netlink_or_container_engine(tmp_path):
    from test_report import bundle

    assert loaded_by("report", str(bundle(tmp_path))) == "[] 0"
    assert loaded_by("validate", "workloads/experiments/incast.yaml") == "[] 0"
    assert loaded_by("list") == "[] 0"


MAX_MODULE_LINES, MAX_CLI_LINES = 600, 300  # issue 46: a module does one job; the CLI parses and dispatches


def test_no_python_file_is_over_600_lines_and_the_cli_under_300():
    roots = [PACKAGE, PACKAGE.parent / "tests", PACKAGE.parent / "benchmarks", PACKAGE.parents[1] / "ci"]
    long = {str(p.relative_to(PACKAGE.parents[1])): n for root in roots for p in sorted(root.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}
    assert len((PACKAGE / "cli.py").read_text().splitlines()) < MAX_CLI_LINES


TRANSPORT = PACKAGE.parents[1] / "transport"


def test_every_transport_test_that_uses_the_simulator_or_the_binary_needs_its_cargo_feature():
    # `cargo build --no-default-features` compiles neither; a test without the entry fails to build then.
    manifest = tomllib.loads((TRANSPORT / "Cargo.toml").read_text())
    entries = {test["name"]: set(test.get("required-features", [])) for test in manifest.get("test", [])}
    missing = []
    for path in sorted((TRANSPORT / "tests").glob("*.rs")):
        source = path.read_text()
        needs = ({"sim"} if re.search(r"\bcchost::sim\b", source) else set()) | (
            {"cli"} if "CARGO_BIN_EXE_cchost" in source else set())
        if not needs <= entries.get(path.stem, set()):
            missing.append(f"{path.stem} needs {sorted(needs)}")
    assert missing == []
