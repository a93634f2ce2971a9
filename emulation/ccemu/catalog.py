"""What a researcher can run, as `ccemu list` says it: the experiment and sweep files that ship with
ccemu, the schemes cchost runs, the reproduction's profiles and the topologies a config accepts.

Every entry is read from where it is defined, never from a list kept here: the files of
workloads/ (each one's heading comment is its description), cchost's scheme table
(model/schemes.py), the config's topology models (model/config/topology.py) and the profiles the
CLI is given. A file that cannot be read is listed with the reason, not skipped: `ccemu validate`
says more.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Callable, get_args

from .model import schemes as scheme_table
from .model.config import EXPERIMENTS_DIR, WORKLOAD_KINDS, ConfigError, TopologyConfig, read_yaml
from .model.excerpt import cut

SWEEPS_DIR = EXPERIMENTS_DIR.parent / "sweeps"
# An entry of a section: its name and the lines that say what it is.
Entry = tuple[str, list[str]]
# A description longer than this is cut: one line of the listing, not the file's whole comment.
MAX_DESCRIPTION = 160


def topology_kinds() -> dict[str, type]:
    """kind -> its config model, in the config's order (the union TopologyConfig)."""
    union = get_args(TopologyConfig)[0]
    return {get_args(model.model_fields["kind"].annotation)[0]: model for model in get_args(union)}


def heading(text: str) -> str:
    """A workloads file's description, from its `text`: the first sentence or title of the comment
    it opens with (up to a colon or a full stop outside parentheses: `Incast at the DCTCP+ paper's
    operating point (seed 002, Fig. 1 and 7; ...)`); empty when it opens with none."""
    comment = []
    for line in text.splitlines():
        said = line.removeprefix("#").strip()
        if not line.startswith("#") or not said:
            break
        comment.append(said)
    first, depth = " ".join(comment), 0
    for i, char in enumerate(first):
        depth += {"(": 1, ")": -1}.get(char, 0)
        ahead = first[i + 1:i + 3]
        title_ends = char == ":" and ahead[:1] in ("", " ")
        sentence_ends = char == "." and ahead[:1] == " " and ahead[1:2].isupper()
        if depth <= 0 and (title_ends or sentence_ends):
            first = first[:i]
            break
    return cut(first.rstrip("."), MAX_DESCRIPTION)


def _values(section: object, skip: str = "kind") -> str:
    """`{kind: fattree, k: 4}` as `fattree, k=4`."""
    if not isinstance(section, dict):
        return str(section)
    return ", ".join([str(section.get(skip, "?"))] + [f"{k}={v}" for k, v in section.items() if k != skip])


def _experiment(data: object) -> str:
    """What an experiment file runs: its workload, topology and schemes."""
    if not isinstance(data, dict):
        return "not an experiment file (no mapping of keys at its top level)"
    workload, schemes = data.get("workload"), data.get("schemes") or []
    kind = workload.get("kind", "?") if isinstance(workload, dict) else "no workload"
    names = list(dict.fromkeys(s.get("scheme") for s in schemes if isinstance(s, dict)))
    return f"{kind} on {_values(data.get('topology'))}; schemes: {', '.join(map(str, names)) or 'none'}"


def _sweep(data: object) -> str:
    """What a sweep file runs: its experiment and grid."""
    grid = data.get("grid") if isinstance(data, dict) else None
    if not isinstance(grid, dict):
        return "not a sweep file (no grid)"
    sizes = [len(values) if isinstance(values, list) else 1 for values in grid.values()]
    return (f"{data.get('experiment', '?')} at {math.prod(sizes)} points: "
            + " x ".join(f"{size} {key}" for key, size in zip(grid, sizes)))


def _files(directory: Path, what: Callable[[object], str]) -> list[Entry]:
    """Each YAML file of `directory`: its description and what it runs (`what` of its data)."""
    entries = []
    for path in sorted(directory.glob("*.yaml"), key=lambda path: path.stem):
        try:
            summary = what(read_yaml(path))
        except ConfigError as exc:
            summary = f"unreadable: {exc}"
        said = (heading(path.read_text(errors="replace")), summary)
        entries.append((path.stem, [line for line in said if line]))
    return entries


def _schemes() -> list[Entry]:
    entries = []
    for scheme in scheme_table.TABLE:
        how = f"{scheme.driver}-driven"  # model/schemes.py: the receiver paces credits, or the sender
        if scheme.credit:
            how += ": sends data only against credits"
        elif scheme.driver == "sender":
            how += ": a window or a rate"
        params = ", ".join(p.name for p in scheme.params) or "none"
        entries.append((scheme.name, [f"{how}; ports: the {scheme.port_profile} profile",
                                      f"parameters (schemes[].params): {params}"]))
    return entries


def _topologies() -> list[Entry]:
    entries = []
    for kind, model in topology_kinds().items():
        default = model(kind=kind)
        counts = default.counts()
        keys = [name for name in model.model_fields if name != "kind"]
        switches = f"{counts.switches} switch{'es' if counts.switches != 1 else ''}"
        # A default that depends on another key (None) is named by its field's description: "(default k/2)".
        shown = [str(getattr(default, key)) if getattr(default, key) is not None
                 else re.search(r"default ([^;),]+)", model.model_fields[key].description or "").group(1)
                 for key in keys]
        entries.append((kind, [f"{', '.join(keys)} (default {', '.join(shown)}: "
                               f"{default.describe()}: {counts.hosts} hosts, {switches})"]))
    return entries


def sections(profiles: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, Callable[[], list[Entry]]]]:
    """Section name -> (its heading, what reads its entries)."""
    return {
        "experiments": (f"experiments ({EXPERIMENTS_DIR.parent.name}/{EXPERIMENTS_DIR.name}/NAME.yaml: `ccemu "
                        "experiment FILE`, `make experiment NAME=...`)", lambda: _files(EXPERIMENTS_DIR, _experiment)),
        "sweeps": (f"sweeps ({SWEEPS_DIR.parent.name}/{SWEEPS_DIR.name}/NAME.yaml: `ccemu sweep FILE`, "
                   "`make sweep SWEEP=FILE`)", lambda: _files(SWEEPS_DIR, _sweep)),
        "schemes": ("schemes (cchost's; an experiment file's `schemes: [{scheme: NAME}]`, `ccemu experiment "
                    "--schemes A,B`)", _schemes),
        "profiles": ("reproduce profiles (`ccemu reproduce --profile NAME`, `make reproduce PROFILE=NAME`)",
                     lambda: [(name, [" ".join(names)]) for name, names in profiles.items()]),
        "topologies": ("topologies (an experiment file's `topology: {kind: NAME, ...}`, `ccemu check --topo "
                       "NAME`)", _topologies),
    }


SECTIONS = tuple(sections({}))


def listing(profiles: dict[str, tuple[str, ...]], only: str | None = None) -> str:
    """The text of `ccemu list` (`only`: that section)."""
    blocks = []
    for name, (title, read) in sections(profiles).items():
        if only not in (None, name):
            continue
        entries = read()
        width = max((len(entry) for entry, _ in entries), default=0) + 2
        lines = [title + ":"]
        for entry, said in entries:
            lines += [f"  {entry:<{width}}{said[0] if said else ''}"] + [f"  {'':<{width}}{line}" for line in said[1:]]
        blocks.append("\n".join(lines if entries else [title + ": none"]))
    return "\n\n".join(blocks)


# The seeds' experiments; each distinct topology among them is checked once, before any runs.
REPRODUCED = WORKLOAD_KINDS  # workloads/experiments/KIND.yaml: one experiment per kind, named after it
# What `make reproduce PROFILE=...` runs. default: every claim of workloads/reference.yaml at the set-up
# its paper measured it in: the incast at the DCTCP+ paper's other DCTCP set-ups too (Fig. 1 and Table
# I's minimum window, Fig. 8's RTO), SprayPass's convergence at 100 Gbit/s; quick: one experiment per
# kind, those claims not comparable.
# paper: the experiments at the papers' own scale: their fabrics, host counts and workloads (the shuffle
# at the largest that holds here, workloads/README.md).
PROFILES = {"default": REPRODUCED + ("incast-fig1", "incast-fig8", "convergence-100g"), "quick": REPRODUCED,
            "paper": ("realistic-fig19", "realistic-fig19-search", "realistic-fig19-cachefollower",
                      "permutation-fig8", "victim-fig15", "shuffle-fig17")}
