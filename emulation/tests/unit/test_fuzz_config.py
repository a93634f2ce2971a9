"""Fuzzing the experiment schema and the sweep planner (hypothesis): shipped files with one value
replaced, one key removed or one key added, and random grids. Whatever comes in, validation gives
a config or ONE line naming a key (ConfigError: exit 2), never another exception, and in bounded
time; and what validation accepts, the built cchost accepts too (--check-args). Failures found
are kept below as regression cases (REGRESSIONS)."""

import copy
import math
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccemu.model.config import ConfigError, ExperimentConfig, parse_config
from ccemu.programs.cchost import CCHOST, check_args
from ccemu.sweeps.plan import load_sweep

REPO = Path(__file__).resolve().parents[3]
SHIPPED = [yaml.safe_load(p.read_text()) for p in sorted((REPO / "workloads" / "experiments").glob("*.yaml"))]
MAX_LINE = 600  # characters: a line, not a dump of the input
# Per config, in CPU time (~2 ms is usual): wall time would count what else the machine runs (a
# hypothesis run is hundreds of examples: one wait for a CPU on a shared machine would fail it).
MAX_SECONDS = 2.0

# Values a mistyped or hostile file could hold where any value is expected.
JUNK = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(10 ** 30), max_value=10 ** 30), st.sampled_from([0, -1, 2 ** 63, 2 ** 64, 10 ** 400]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e200, -1e308, 5e-324, float("nan")]),
    st.text(max_size=30), st.sampled_from(["..", "h3\n", "h\uff13", "auto", "x" * 5000, "1e400", "010"]),
    st.lists(st.integers(min_value=-5, max_value=10 ** 9), max_size=5),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
)


def paths_of(data, prefix=()):
    """Every key path of nested mappings and lists."""
    found = []
    if isinstance(data, dict):
        for key, value in data.items():
            found.append((*prefix, key))
            found += paths_of(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found.append((*prefix, i))
            found += paths_of(value, (*prefix, i))
    return found


@st.composite
def mutated_configs(draw):
    data = copy.deepcopy(draw(st.sampled_from(SHIPPED)))
    path = draw(st.sampled_from(paths_of(data)))
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    how = draw(st.sampled_from(["replace", "remove", "add"]))
    if how == "replace":
        parent[path[-1]] = draw(JUNK)
    elif how == "remove":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[draw(st.text(min_size=1, max_size=12))] = draw(JUNK)
    return data


def judged(data) -> ExperimentConfig | None:
    """The config, or None after checking that the refusal is one short line; in bounded time."""
    started = time.process_time()
    try:
        return parse_config(data)
    except ConfigError as exc:
        line = str(exc)
        assert "\n" not in line and len(line) <= MAX_LINE, line[:2000]
        assert line.startswith("config: ")
        return None
    finally:
        assert time.process_time() - started < MAX_SECONDS


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs())
def test_a_mutated_experiment_file_is_a_config_or_one_line_naming_a_key(data):
    judged(data)


@pytest.mark.skipif(not CCHOST.exists(), reason=f"no {CCHOST}: `make setup` builds it")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs())
def test_what_validation_accepts_cchost_accepts(data):
    config = judged(data)
    if config is not None and config.schemes:
        check_args(config, [None])  # raises ConfigError naming the scheme if cchost refuses


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["seed", "workload.rounds", "link.mtu", "transport.alpha", "scheme",
                                        "name", "topology.k", "workload.flows", "x.y"]),
                       st.lists(JUNK, min_size=0, max_size=4), min_size=0, max_size=3))
def test_a_random_sweep_grid_plans_or_is_one_line(tmp_path_factory, grid):
    directory = tmp_path_factory.mktemp("sweep")
    (directory / "base.yaml").write_text(yaml.safe_dump(SHIPPED[0]))
    path = directory / "sweep.yaml"
    path.write_text(yaml.safe_dump({"experiment": "base.yaml", "grid": grid}))
    started = time.process_time()  # CPU time, as MAX_SECONDS
    try:
        sweep = load_sweep(path)
        assert len(sweep.points) == math.prod(len(v) for v in grid.values())
    except ConfigError as exc:
        assert "\n" not in str(exc) and len(str(exc)) <= MAX_LINE, str(exc)[:2000]
    assert time.process_time() - started < 10


# Inputs the fuzzing (and issue 29's hand-made list) found, each once a traceback or a misleading line.
REGRESSIONS = {
    "a float too large for the footprint's arithmetic": {"topology": {"kind": "fattree", "k": 1e200}},
    "a dilation of true": {"datacenter": {"link_gbps": 10, "dilation": True}},
    "a link rate of yes": {"datacenter": {"link_gbps": "yes"}},
    "a 5000-character name": {"name": "x" * 5000},
    "a name that climbs out of results/": {"name": ".."},
}


@pytest.mark.parametrize("change", REGRESSIONS.values(), ids=REGRESSIONS.keys())
def test_a_regression_case_is_one_line(change):
    judged({**SHIPPED[0], **change})
