"""The experiment kinds' registry (kinds/): every list of kinds derives from it, an
unknown kind is an error naming the known ones, and a block is named by its typed key."""

import json
import typing

import pytest

from ccemu import catalog
from ccemu.experiments.runners import runner_for
from ccemu.kinds import WorkloadNotRunnable, kind
from ccemu.experiments.base import HostFailure
from ccemu.kinds import KINDS, UnknownKind
from ccemu.model.kernel import KernelFeatures
from ccemu.metrics import grafana
from ccemu.model.config import WORKLOAD_KINDS, ConfigError, WorkloadConfig, load_config, parse_config
from ccemu.model.config.experiment import EXPERIMENTS_DIR
from ccemu.results import papers
from ccemu.results.bundle import BlockKey, point_values
from ccemu.reports.report import summary_markdown

NO_MODULES = KernelFeatures(openvswitch=False)


def test_the_configs_kinds_are_the_registrys_and_each_kind_runs_the_model_of_its_name():
    assert WORKLOAD_KINDS == tuple(KINDS)
    models = typing.get_args(typing.get_args(WorkloadConfig)[0])
    assert {m.model_fields["kind"].annotation.__args__[0]: m for m in models} == {
        name: k.workload for name, k in KINDS.items()}
    assert all(k.name == name for name, k in KINDS.items())


def test_the_cli_the_dashboards_and_the_papers_list_the_registrys_kinds():
    assert catalog.REPRODUCED == tuple(KINDS)
    assert grafana.ALL_KINDS == tuple(KINDS)
    assert papers.EXPERIMENTS == tuple(KINDS)


def test_every_kind_has_its_experiment_file():
    assert all((EXPERIMENTS_DIR / f"{name}.yaml").exists() for name in KINDS)


def test_an_unknown_kind_is_an_error_naming_the_known_ones_never_another_kinds_code():
    with pytest.raises(UnknownKind) as unknown:
        kind("incst")
    assert str(unknown.value) == f"no experiment kind 'incst' (known: {', '.join(KINDS)})"
    assert isinstance(UnknownKind("x"), KeyError)


def test_the_summary_of_a_bundle_of_an_unknown_kind_is_an_error_not_incasts_summary(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "mystery", "config": {"name": "t", "seed": 1,
                                                                                       "link": {"rate_mbps": 10}}}))
    with pytest.raises(UnknownKind, match="mystery"):
        summary_markdown(tmp_path)


@pytest.mark.parametrize("key, described", [
    (BlockKey("dctcp", (("N", 64),)), "dctcp N=64"),
    (BlockKey("expresspass", (("load", 0.5),)), "expresspass load=0.5"),
    (BlockKey("expresspass", (("alpha", 0.0625),)), "expresspass alpha=0.0625"),
    (BlockKey("dctcp"), "dctcp"),
])
def test_a_block_key_is_named_as_blocks_always_were_and_reads_back_from_its_columns(key, described):
    assert key.describe() == described
    assert BlockKey.of_row(key.columns()) == key
    assert BlockKey.of_row({k: str(v) for k, v in key.columns().items()}) == key  # as a CSV gives it back


def test_a_block_keys_columns_keep_incasts_n_apart_from_the_other_kinds_point():
    assert BlockKey("dctcp", (("N", 8),)).columns() == {"scheme": "dctcp", "n": 8, "point": ""}
    assert BlockKey("dcqcn", (("load", 0.8),)).columns() == {"scheme": "dcqcn", "n": 0, "point": "load=0.8"}
    assert point_values("load=0.5") == (("load", 0.5),)
    with pytest.raises(ValueError, match="'load' is not name=value"):
        point_values("load")


def _config(name: str):
    return load_config(EXPERIMENTS_DIR / f"{name}.yaml", kernel=NO_MODULES)


def test_each_kind_says_its_blocks_incast_per_n_realistic_per_load_convergence_per_alpha_for_credit_schemes():
    incast = _config("incast")
    assert [b.key for b in KINDS["incast"].blocks(incast)] == [
        BlockKey(s.scheme, (("N", n),)) for s in incast.schemes for n in incast.workload.flows]
    realistic = _config("realistic")
    assert [b.label for b in KINDS["realistic"].blocks(realistic)] == [
        f"{s.scheme} load={load:g}" for s in realistic.schemes for load in realistic.workload.loads]
    convergence = _config("convergence")
    blocks = KINDS["convergence"].blocks(convergence)
    assert {b.alpha for b in blocks if b.scheme.scheme == "dctcp"} <= {None}
    credit = [b for b in blocks if b.alpha is not None]
    assert credit and all(b.label.endswith(f"alpha={b.alpha:g}") for b in credit)
    assert [b.key for b in KINDS["shuffle"].blocks(_config("shuffle"))] == [
        BlockKey(s.scheme) for s in _config("shuffle").schemes]


def test_each_kind_names_its_bottleneck_host_or_none():
    assert KINDS["incast"].bottleneck_host(_config("incast")) == _config("incast").workload.aggregator
    assert KINDS["victim"].bottleneck_host(_config("victim")) == _config("victim").workload.hot_receiver
    assert KINDS["realistic"].bottleneck_host(_config("realistic")) is None


def test_a_config_without_a_workload_is_a_config_error_not_a_missing_feature(tmp_path):
    config = parse_config({"name": "t", "topology": {"kind": "fattree", "k": 4}, "schemes": [{"scheme": "dctcp"}]},
                          kernel=NO_MODULES)
    with pytest.raises(WorkloadNotRunnable, match="t: no workload to run") as raised:
        runner_for(config, tmp_path, None)
    assert isinstance(raised.value, ConfigError)


def test_a_host_failure_keeps_the_manifests_fields_in_their_order():
    failure = HostFailure(BlockKey("dctcp", (("N", 8),)), 2, "h3", "sender", -9, "boom")
    assert list(failure.as_json().items()) == [
        ("scheme", "dctcp"), ("n", 8), ("round", 2), ("host", "h3"), ("role", "sender"), ("returncode", -9),
        ("last_error", "boom"), ("point", ""), ("status", "killed by SIGKILL")]


def test_permutation_fig8s_flows_each_leave_their_senders_leaf_and_the_victims_bursts_draw_from_their_cdf():
    import random
    from types import SimpleNamespace

    config = load_config(EXPERIMENTS_DIR / "permutation-fig8.yaml")
    topo = config.topology.build()
    live = SimpleNamespace(config=config, hosts=topo.host_names)
    flows = KINDS["permutation"].flows(None, live, random.Random(1))
    assert len(flows) == 240 and all(topo.attachment(f.src)[0] != topo.attachment(f.dst)[0] for f in flows)
    victim = load_config(EXPERIMENTS_DIR / "victim-fig15.yaml")
    bursts = [f for f in KINDS["victim"].victim_flows(victim, victim.link.rate_mbps * 1e6, random.Random(1)) if f.src in
              victim.workload.bursters]
    assert len({f.size for f in bursts}) > len(victim.workload.bursters)  # not one fixed burst_bytes
    assert len({f.start for f in bursts}) * len(victim.workload.bursters) == len(bursts)  # rounds: all at once
