"""CONTRIBUTING.md's recipes, followed in a copy of the tree: a throwaway scheme, experiment kind or
port profile added exactly as the checklist says (its required steps, numbered as there), then the
checks that `make test` would run on it. Nothing touches the working tree: the copy is made in a
directory of the caller's (a pytest tmp_path), without the virtualenv, results and cargo's target
(with .git: `ccemu --version` names the commit). The copy's Python runs with PYTHONPATH on the
copy, so it imports the copy's ccemu.

Each step edits at an anchor that must be in the file exactly once; where the code has moved from
under the recipe, the step fails naming itself and the file, so the checklist and the code cannot
drift apart silently. tests/unit/test_recipes.py proves each recipe this way in `make test`, with the
checks that read the extension's registry; by hand, --full runs every check of `make test` but the
live ones (ruff and the whole unit suite; for a scheme also cargo fmt, clippy and all of cargo test,
about 7 minutes on 2 CPUs):

    .venv/bin/python emulation/tests/recipes/recipes.py scheme|kind|port [--full] [--keep DIR]

cargo builds a copy's transport into $CCEMU_RECIPES_TARGET, by default the tree's own transport/target,
whose dependencies `make test`'s cargo test has just built (the proof then compiles the crate alone,
about 20 s; an empty target folder compiles the dependencies too, about 4 minutes on 2 CPUs). The
copy's build leaves its cchost where the tree's debug one goes; the tree's next cargo build puts its
own back (a fresh unit's binary is linked again), and its crate is rebuilt where the copy's replaced it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
CARGO_TARGET_DIR = Path(os.environ.get("CCEMU_RECIPES_TARGET", REPO / "transport" / "target"))
# What the copy leaves out: the environment and outputs (the copy's own build/ keeps cchost and the
# port program, which the checks run).
LEFT_OUT = {".venv", "results", "build/actionlint", "build/ansible"}


class RecipeDrift(AssertionError):
    """A step's anchor is not in its file exactly once: the recipe no longer matches the code."""


class CheckFailed(AssertionError):
    """A check of `make test` failed on the copy with the throwaway extension."""


def cargo() -> str | None:
    """cargo as the Makefile finds it: on PATH, else rustup's."""
    found = shutil.which("cargo")
    home = Path.home() / ".cargo" / "bin" / "cargo"
    return found or (str(home) if home.is_file() else None)


@dataclass
class Copy:
    """A copy of the tree at `root`, and the steps taken in it."""

    root: Path

    @classmethod
    def of_tree(cls, into: Path) -> "Copy":
        def left_out(directory: str, names: list[str]) -> set[str]:
            relative = Path(directory).relative_to(REPO)
            return {n for n in names if n == "__pycache__" or (relative / n).as_posix() in LEFT_OUT
                    or (relative.as_posix() == "transport" and n.startswith("target"))}

        shutil.copytree(REPO, into, ignore=left_out, symlinks=True)
        return cls(into)

    def path(self, relative: str) -> Path:
        return self.root / relative

    def edit(self, step: str, relative: str, anchor: str, new: str) -> None:
        """Step `step`: `anchor` of `relative` (exactly once there) becomes `new`."""
        text = self.path(relative).read_text()
        if text.count(anchor) != 1:
            raise RecipeDrift(f"step {step}: {relative} has {text.count(anchor)} of {anchor!r}, not one: the "
                              "recipe (CONTRIBUTING.md) or this proof no longer matches the code")
        self.path(relative).write_text(text.replace(anchor, new))

    def insert_above(self, step: str, relative: str, anchor: str, text: str) -> None:
        """Step `step`: `text` above the line that starts with `anchor` (exactly one) and the comment
        over it: a class above the list that names it."""
        lines = self.path(relative).read_text().splitlines(keepends=True)
        found = [i for i, line in enumerate(lines) if line.startswith(anchor)]
        if len(found) != 1:
            raise RecipeDrift(f"step {step}: {relative} has {len(found)} lines starting {anchor!r}, not one: the "
                              "recipe (CONTRIBUTING.md) or this proof no longer matches the code")
        at = found[0]
        while at and lines[at - 1].startswith("#"):
            at -= 1
        lines.insert(at, text)
        self.path(relative).write_text("".join(lines))

    def insert_sorted(self, step: str, relative: str, prefix: str, line: str) -> None:
        """Step `step`: `line` among the lines of `relative` that start with `prefix` (a block of
        imports or `pub mod`s), where sorting puts it, as rustfmt and isort keep them."""
        lines = self.path(relative).read_text().splitlines(keepends=True)
        block = [i for i, old in enumerate(lines) if old.startswith(prefix)]
        if not block or block != list(range(block[0], block[-1] + 1)):
            raise RecipeDrift(f"step {step}: {relative} has no single block of lines starting {prefix!r}")
        at = next((i for i in block if lines[i] > line), block[-1] + 1)
        lines.insert(at, line)
        self.path(relative).write_text("".join(lines))

    def add(self, step: str, relative: str, text: str) -> None:
        """Step `step`: a new file."""
        if self.path(relative).exists():
            raise RecipeDrift(f"step {step}: {relative} exists already: the throwaway's name is taken")
        self.path(relative).write_text(text)

    def run(self, what: str, argv: list[str], cwd: str, env: dict | None = None, timeout: float = 1800) -> str:
        """Runs a check in the copy; CheckFailed with its output's end if it fails."""
        started = time.monotonic()
        done = subprocess.run(argv, cwd=self.path(cwd), env=env, capture_output=True, text=True, timeout=timeout)
        print(f"  {what}: {'ok' if done.returncode == 0 else 'FAILED'} ({time.monotonic() - started:.0f} s)",
              flush=True)
        if done.returncode != 0:
            raise CheckFailed(f"{what} failed on the copy ({self.root}):\n{(done.stdout + done.stderr)[-6000:]}")
        return done.stdout

    def python_env(self) -> dict:
        """The environment of the copy's Python: its ccemu first, none of this tree's overrides."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("CCEMU_")}
        return env | {"PYTHONPATH": str(self.path("emulation")), "PYTHONDONTWRITEBYTECODE": "1"}

    def pytest(self, *args: str) -> str:
        # ccemu is a namespace package: this tree's editable install adds its own folder to it. A
        # module the copy lacks would be taken from there, so make sure the copy's are the ones seen.
        seen = self.run("the copy imports its own ccemu", [
            sys.executable, "-c", "import ccemu.kinds, ccemu.model.config, ccemu.ports; print(ccemu.kinds.__file__, "
                                  "ccemu.model.config.__file__, ccemu.ports.__file__)"], "emulation", self.python_env())
        if not all(Path(f).is_relative_to(self.root) for f in seen.split()):
            raise CheckFailed(f"the copy's Python imports ccemu from elsewhere: {seen}")
        return self.run(f"pytest {' '.join(args)}", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                                      "-m", "not root", *args], "emulation", self.python_env())

    def cargo(self, *args: str) -> str:
        env = os.environ | {"CARGO_TARGET_DIR": str(CARGO_TARGET_DIR)}
        return self.run(f"cargo {' '.join(args)}", [cargo(), *args], "transport", env)


# A scheme -----------------------------------------------------------------------------------------

SCHEME = "throwaway"


def add_scheme(copy: Copy) -> None:
    """CONTRIBUTING.md, "A scheme", its required steps."""
    copy.add("1", "transport/src/cc/throwaway.rs", (HERE / "throwaway.rs").read_text())
    copy.insert_sorted("2", "transport/src/cc/mod.rs", "pub mod ", "pub mod throwaway;\n")
    table = "pub fn schemes(link_bits_per_second: f64, mss: u16) -> Vec<Box<dyn SchemeFactory>> {"
    text = copy.path("transport/src/cc/mod.rs").read_text()
    end = text.find("\n    ]\n", text.find(table))
    if table not in text or end < 0:
        raise RecipeDrift("step 2: transport/src/cc/mod.rs has no `schemes()` table ending in `    ]`")
    line = "\n        Box::new(throwaway::ThrowawayConfig::with_mss(mss)),"
    copy.path("transport/src/cc/mod.rs").write_text(text[:end] + line + text[end:])


def build_schemes(copy: Copy) -> None:
    """Step 3, `make schemes` in the copy: cchost built (a debug build: what it lists is the same),
    installed as build/cchost, and its table written to model/schemes.json as the Makefile writes it."""
    copy.cargo("build", "--quiet", "--locked", "--bin", "cchost")
    built = CARGO_TARGET_DIR / "debug" / "cchost"
    shutil.copy2(built, copy.path("build/cchost"))
    listed = copy.run("cchost --schemes --json", [str(copy.path("build/cchost")), "--schemes", "--json"], ".")
    copy.path("emulation/ccemu/model/schemes.json").write_text(json.dumps(json.loads(listed), indent=1) + "\n")


def check_scheme(copy: Copy, full: bool) -> None:
    if full:
        copy.cargo("fmt", "--check")
        copy.cargo("clippy", "--quiet", "--all-targets", "--", "-D", "warnings")
        copy.cargo("test", "--quiet")
        check_python(copy, full)
        return
    # The Rust tests that read the table (the registry's, cchost's listing and flags, the endpoint's
    # config) and the one that registers a scheme beside it; the simulations run every scheme's
    # flows as before, and take minutes.
    copy.cargo("test", "--quiet", "--lib", "--bins", "--", "scheme::", "config::", "args::")
    copy.cargo("test", "--quiet", "--test", "toy_scheme")
    copy.pytest("tests/unit/test_schemes.py", "tests/unit/test_config.py", "tests/unit/test_smoke_checks.py",
                "tests/unit/test_summaries_and_plots.py::"
                "test_every_registered_scheme_has_a_colour_of_its_own_and_an_unknown_one_the_same_every_time")
    if SCHEME not in copy.path("emulation/ccemu/model/schemes.json").read_text():
        raise CheckFailed("model/schemes.json of the copy does not list the throwaway scheme")


# An experiment kind -------------------------------------------------------------------------------

KIND = "throwaway"
WORKLOAD_MODEL = '''class ThrowawayWorkload(Workload):
    """Every host sends size_bytes to the next host (tests/recipes/: the kind recipe's proof)."""

    kind: Literal["throwaway"]
    size_bytes: int = Field(100_000, ge=1, le=MAX_FLOW_BYTES)
    timeout_s: float = Field(60.0, gt=0, le=MAX_WAIT_S, description="wall seconds the flows get to finish")

    def busy_links(self, counts: TopologyCounts, fabric_share: float) -> float:
        return counts.hosts


'''
EXPERIMENT_FILE = """\
# Throwaway: every host sends 100 KB to the next (tests/recipes/recipes.py, the kind recipe's proof).
name: throwaway
seed: 1
topology: {kind: star, hosts: 4}
link: {rate_mbps: 10}
schemes:
  - scheme: expresspass
  - scheme: dctcp
workload: {kind: throwaway, size_bytes: 100000}
"""
SETTING = """\
  throwaway:
    source: "seed 000 line 1: none, the kind recipe's proof (tests/recipes/recipes.py)"
    link_gbps: 10
    rtt_us: 10
    bdp_packets: 8.1
"""
CLAIM = """\
  - id: throwaway-is-no-paper
    experiment: throwaway
    claim: "A throwaway kind has a claim, as every kind has"
    source: "seed 000 line 1"
    paper: {value: 1, unit: "none"}
    not_run_here: "no paper measured the throwaway kind"
"""
# A block that never ran (4 flows), as the throwaway's table shows it.
NOT_RUN_ROW = '    "throwaway": (BlockKey("dctcp"), "## Throwaway: flows", "| dctcp | 0 | 4 |"),\n'


def add_kind(copy: Copy) -> None:
    """CONTRIBUTING.md, "An experiment kind", its required steps."""
    workloads = "emulation/ccemu/model/config/workloads.py"
    copy.insert_above("1", workloads, "WorkloadConfig = Annotated[", WORKLOAD_MODEL)
    copy.edit("1", workloads, "VictimWorkload],\n    Field(discriminator=\"kind\")",
              "VictimWorkload, ThrowawayWorkload],\n    Field(discriminator=\"kind\")")
    copy.add("2", "emulation/ccemu/kinds/throwaway.py", (HERE / "throwaway_kind.py").read_text())
    registry = "emulation/ccemu/kinds/__init__.py"
    copy.insert_sorted("3", registry, "from .", "from .throwaway import Throwaway\n")
    copy.edit("3", registry, "Victim())}", "Victim(), Throwaway())}")
    copy.add("4", "workloads/experiments/throwaway.yaml", EXPERIMENT_FILE)
    copy.edit("5", "workloads/reference.yaml", "\nclaims:\n", SETTING + "\nclaims:\n")
    with copy.path("workloads/reference.yaml").open("a") as reference:
        reference.write(CLAIM)
    copy.edit("6", "emulation/tests/unit/test_kind_summaries.py",
              "}\n\n\ndef test_every_kind_of_the_registry_is_held_by_the_block_that_never_ran",
              NOT_RUN_ROW + "}\n\n\ndef test_every_kind_of_the_registry_is_held_by_the_block_that_never_ran")


def check_kind(copy: Copy, full: bool) -> None:
    if full:
        return check_python(copy, full)
    copy.pytest("tests/unit/test_kinds.py", "tests/unit/test_kind_summaries.py", "tests/unit/test_papers.py",
                "tests/unit/test_dashboards.py",
                "tests/unit/test_config.py::test_bad_config_names_the_key_and_the_rule_in_one_line")
    # Of the plots' tests, the ones every kind runs (parametrized by it): the others draw incast's.
    copy.pytest("tests/unit/test_summaries_and_plots.py", "-k", KIND)
    # test_validate.py's check of its experiment file, without its CPU-time bound (a loaded machine's).
    copy.run("ccemu validate", [sys.executable, "-m", "ccemu.cli", "validate",
                                "../workloads/experiments/throwaway.yaml"], "emulation", copy.python_env())


# A port profile -----------------------------------------------------------------------------------

PROFILE = "throwaway"
PORT_CLASS = '''class ThrowawayPort(DropTailPort):
    """DCTCP's marker at a quarter of the buffer (tests/recipes/: the port profile recipe's proof)."""

    profile: Literal["throwaway"] = "throwaway"

    def marker(self, link_bps: int, frame_wire_bytes: int) -> Marker:
        return Marker("dctcp", (("ecn_threshold_bytes", self.buffer_bytes // 4),))


'''


def add_port_profile(copy: Copy) -> None:
    """CONTRIBUTING.md, "A port discipline", its required step (a profile that runs a marker the port
    program has: no step 2)."""
    ports = "emulation/ccemu/model/config/ports.py"
    copy.insert_above("1", ports, "PORT_PROFILE_CLASSES = (", PORT_CLASS)
    copy.edit("1", ports, "TcdPort)\nPortConfig = ", "TcdPort, ThrowawayPort)\nPortConfig = ")


def check_port_profile(copy: Copy, full: bool) -> None:
    if full:
        return check_python(copy, full)
    copy.pytest("tests/unit/test_port_fields.py", "tests/unit/test_schemes.py", "tests/unit/test_shaping.py",
                "tests/unit/test_config.py")


def check_python(copy: Copy, full: bool) -> None:
    copy.run("ruff", [str(REPO / ".venv" / "bin" / "ruff"), "check", "--quiet", ".", "../ci"], "emulation")
    copy.pytest("tests/unit", "--ignore=tests/unit/test_recipes.py")  # not the proofs again, in the copy


@dataclass(frozen=True)
class Recipe:
    section: str  # CONTRIBUTING.md's
    add: object
    check: object
    needs_cargo: bool = False


RECIPES = {
    "scheme": Recipe("A scheme", lambda copy: (add_scheme(copy), build_schemes(copy)), check_scheme, True),
    "kind": Recipe("An experiment kind", add_kind, check_kind),
    "port": Recipe("A port discipline", add_port_profile, check_port_profile),
}


def follow(name: str, into: Path, full: bool = False) -> Copy:
    """Recipe `name` followed in a copy of the tree at `into` (which must not exist), then checked;
    RecipeDrift or CheckFailed otherwise."""
    recipe = RECIPES[name]
    print(f"{recipe.section} (CONTRIBUTING.md), followed in {into}:", flush=True)
    copy = Copy.of_tree(into)
    recipe.add(copy)
    recipe.check(copy, full)
    return copy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", choices=sorted(RECIPES))
    parser.add_argument("--full", action="store_true", help="every check of `make test` (the whole unit suite; "
                                                            "for a scheme cargo fmt, clippy and all of cargo test)")
    parser.add_argument("--keep", metavar="DIR", type=Path, help="make the copy at DIR (must not exist) and keep it")
    args = parser.parse_args()
    if RECIPES[args.recipe].needs_cargo and not cargo():
        print("recipes.py: cargo not found: install Rust (https://rustup.rs)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="ccemu-recipe-") as scratch:
        try:
            follow(args.recipe, args.keep or Path(scratch) / "tree", args.full)
        except (RecipeDrift, CheckFailed) as e:
            print(e, file=sys.stderr)
            return 1
    print("every check held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
