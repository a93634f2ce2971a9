"""The reproduction's report (results/reproduction.py) and its profiles: every claim beside the runs
that read it, repeated runs judged on their median, and a bundle whose data is gone read as not
comparable. test_papers.py holds what each claim reads."""

import copy
import json
import math
import re

import pytest
import yaml

from ccemu.cli import main
from ccemu.kinds.realistic import Realistic
from ccemu.model.config import ConfigError, parse_config
from ccemu.results import figures, papers, rule
from ccemu.results.figures import Tables
from ccemu.results.reproduction import Run, write_report
from ccemu.results.rule import Figure

from test_papers import flow, incast_tables, realistic, round_row, tables, write_bundle

RTT = 0.052  # wall seconds


def claim_line(summary: str, claim: str) -> str:
    (line,) = [line for line in summary.splitlines() if line.startswith(f"| {claim}")]
    return line


def test_a_doctored_bundle_reports_not_comparable_where_its_data_is_gone(tmp_path):
    t = realistic()
    for p in t.ports:
        p.update(port="s1-eth1", histogram="1")
    bundle = write_bundle(tmp_path / "bundle", t)
    xp_small = "ExpressPass's max switch queue stays small"
    l_flows = "On Web Server, ExpressPass's large flows"
    assert main(["report", str(bundle)]) == 0
    whole = (bundle / "summary.md").read_text()
    assert "**not reproduced** (outside [0.8, 1.25] x 46.1 = 36.9 to 57.7)" in claim_line(whole, xp_small)
    assert "**direction does not hold**" in claim_line(whole, l_flows)
    # Beside its claims, where the set-up differs from the paper's (reference.yaml, the kind's by default).
    assert "Where this set-up differs from the paper's:" in whole and "by rate, not by count" in whole

    (bundle / "ports.csv").unlink()
    with open(bundle / "flows.csv") as source:
        rows = source.read().splitlines()
    (bundle / "flows.csv").write_text("\n".join(rows[:-1]) + "\n")  # the last flow's record cut
    assert main(["report", str(bundle)]) == 0
    doctored = (bundle / "summary.md").read_text()
    assert "**not comparable** (ports.csv has no switch port of expresspass load=0.2)" in \
        claim_line(doctored, xp_small)
    assert "**not comparable** (1 finished flows of dctcp load=0.6 have no row in flows.csv)" in \
        claim_line(doctored, l_flows)


def test_every_claim_appears_in_the_reproduction_report_whether_its_experiment_ran_or_not(tmp_path):
    t = realistic()
    bundle = write_bundle(tmp_path / "bundle", t)
    runs = [Run("realistic", bundle, 60.0), Run("shuffle", None, 5.0, "the fabric check failed")]
    report = write_report(tmp_path / "reproduce", runs, "now").read_text()
    claims = papers.load_claims()
    written = json.loads((tmp_path / "reproduce" / "reproduction.json").read_text())["claims"]
    assert [c["id"] for c in written] == [c.id for c in claims]
    for c in claims:
        assert c.claim.split(" (")[0].replace("|", "\\|")[:40] in report, c.id
    by = {c["id"]: c for c in written}
    assert by["shuffle-p99"]["why"] == "shuffle left no bundle (the fabric check failed)"
    assert by["ecn-marks-victims"]["why"] == "victim was not part of this reproduction"
    assert by["xp-maxq-load-indep"]["verdict"] == rule.REPRODUCED
    counts = re.search(r"\*\*(\d+) reproduced, (\d+) same direction only, (\d+) not reproduced, (\d+) direction only "
                       r"\((\d+) hold, (\d+) do not\), (\d+) not comparable\*\* \(of (\d+) claims\)", report)
    reproduced, same, missed, direction, _, _, not_comparable, total = map(int, counts.groups())
    assert total == len(claims) == reproduced + same + missed + direction + not_comparable
    assert "at a third of the host links' rate (link.fabric_share)" in report  # where the set-up differs


def test_ratios_of_bounded_figures_keep_their_bounds():
    assert Figure.at_least(10) / Figure.of(2) == Figure(5, math.inf)
    assert Figure.of(6) / Figure(2, 3) == Figure(2, 3)


def test_a_claim_reads_the_first_run_of_its_kind_at_the_figures_settings_that_has_its_data_and_the_report_names_it(
        tmp_path):
    # The default incast at 10 ms, then two at 200 ms: the first without N >= 200, the second with it alone.
    at_10 = write_bundle(tmp_path / "incast", incast_tables({8: 0.9, 20: 0.9, 40: 0.5}, rto_min_ms=10))
    at_200 = incast_tables({8: 0.9, 20: 0.9, 40: 0.5, 60: 0.1}, rto_min_ms=200, timeouts=2)
    at_200.manifest["config"]["workload"].update(flows=[8, 20, 40, 60], rounds=1)
    at_200 = write_bundle(tmp_path / "incast-rto200", at_200)
    dense = incast_tables({256: 0.7}, scheme="dctcp+", rto_min_ms=200)
    dense.manifest["config"]["workload"].update(flows=[256], rounds=1)
    dense = write_bundle(tmp_path / "incast-rto200-n256", dense)
    runs = [Run("incast", at_10, 1.0), Run("incast-rto200", at_200, 1.0), Run("incast-rto200-n256", dense, 1.0)]
    report = write_report(tmp_path / "reproduce", runs, "now", profile="default").read_text()
    by = {c["id"]: c for c in json.loads((tmp_path / "reproduce" / "reproduction.json").read_text())["claims"]}
    assert by["dctcp-timeouts-n40"]["run"] == "incast-rto200" and by["dctcp-timeouts-n40"]["ours"] is not None
    assert by["dctcp-collapse-n"]["run"] == "incast-rto200"
    assert by["plus-goodput"]["run"] == "incast-rto200-n256"
    assert by["plus-goodput"]["verdict"] == rule.REPRODUCED  # 0.7 of the link: 700 Mbit/s, inside 600-900
    assert by["shuffle-p99"]["run"] is None  # one run of its kind (none here): no run named
    assert "4 experiments" not in report and "3 experiments (profile default)" in report
    assert "(run: incast-rto200-n256)" in claim_line(report, "DCTCP+ keeps 600-900")
    # Only runs at another setting: the claim is judged against the first, not comparable with why.
    runs = [Run("incast", at_10, 1.0)]
    write_report(tmp_path / "only-default", runs, "now")
    by = {c["id"]: c for c in json.loads((tmp_path / "only-default" / "reproduction.json").read_text())["claims"]}
    assert by["plus-goodput"]["why"] == "the paper's figure is for transport.rto_min_ms 200 (this run: 10)"


def test_a_claim_ccemu_cannot_run_names_no_run_and_the_headline_counts_them_as_one_reason(tmp_path):
    at_10 = write_bundle(tmp_path / "incast", incast_tables({8: 0.9, 20: 0.9, 40: 0.5}, rto_min_ms=10))
    write_report(tmp_path / "reproduce", [Run("incast", at_10, 1.0), Run("incast-fig1", at_10, 1.0)], "now")
    by = {c["id"]: c for c in json.loads((tmp_path / "reproduce" / "reproduction.json").read_text())["claims"]}
    assert by["dctcp-floss-to"]["run"] is None and by["dctcp-floss-to"]["why"].startswith("not run here: cchost ")
    claims = [c for c in papers.load_claims() if c.not_run_here]
    assert len(claims) >= 2
    assert papers.headline(papers.not_run(claims, "")).endswith(
        f"; {len(claims)} of the not comparable are not run here (each says why)")


def test_reproduce_takes_a_profile_or_names_not_both_and_the_default_profile_runs_every_claims_set_up(capsys):
    from ccemu.catalog import PROFILES, REPRODUCED
    from ccemu.model.config import EXPERIMENTS_DIR, load_config
    assert main(["reproduce", "--profile", "quick", "incast"]) == 2
    assert capsys.readouterr().err.strip() == "ccemu reproduce: give experiment names or --profile, not both"
    assert PROFILES["default"] == REPRODUCED + ("incast-fig1", "incast-fig8", "convergence-100g")
    assert PROFILES["quick"] == REPRODUCED
    for name in {name for names in PROFILES.values() for name in names}:  # every profile's files are valid
        assert load_config(EXPERIMENTS_DIR / f"{name}.yaml").name == name


def test_every_paper_scale_experiment_has_its_own_setting_with_the_papers_host_count():
    from ccemu.catalog import PROFILES
    settings = papers.settings()
    for name in PROFILES["paper"]:
        assert name in settings and settings[name]["hosts"], name


def test_every_claim_ccemu_can_run_has_a_shipped_experiment_file_at_the_settings_it_requires():
    """A claim whose `requires` no profile's file meets would be "not comparable" in every report."""
    from ccemu.catalog import PROFILES
    from ccemu.model.config import EXPERIMENTS_DIR, load_config
    runs = [Tables(manifest={"kind": config.workload.kind, "config": config.model_dump(mode="json")},
                   flows=[], rounds=[], ports=[], rtts=[], timeline=[])
            for config in (load_config(EXPERIMENTS_DIR / f"{name}.yaml")
                           for name in {name for names in PROFILES.values() for name in names})]
    for claim in papers.load_claims():
        if not claim.not_run_here:
            assert any(t.manifest["kind"] == claim.experiment and not papers.settings_differ(claim, t)
                       for t in runs), claim.id


def realistic_with_xp_queue(kb: float) -> Tables:
    """realistic(), ExpressPass's switch queue at `kb` KB at every load."""
    t = realistic()
    for p in t.ports:
        if p["scheme"] == "expresspass" and p["node"] == "s1":
            p["max_data_queue"] = int(kb * 1000)
    return t


def test_a_claim_over_repeated_runs_is_judged_on_the_median_of_its_runs_with_each_run_beside_it():
    (claim,) = [c for c in papers.load_claims() if c.id == "xp-maxq-kb"]  # the paper: 46.1 KB
    runs = [papers.compare_claim(claim, realistic_with_xp_queue(kb)) for kb in (12, 44, 47, 50, 90)]
    assert [r.verdict for r in runs] == [rule.NOT_REPRODUCED] + [rule.REPRODUCED] * 3 + [rule.NOT_REPRODUCED]
    seen = papers.over_runs(claim, runs)
    assert seen.ours == Figure.of(47) and seen.verdict == rule.REPRODUCED
    assert seen.repeats.interval == Figure(12, 90) and seen.repeats.confidence == pytest.approx(0.9375)
    assert seen.repeats.text() == ("median of 5 runs; 94% interval of the median 12 to 90; each run: 12, 44, 47, "
                                   "50, 90 (3 reproduced, 2 not reproduced)")
    # The median, not the best run nor most runs: three runs at 12-13 KB are not reproduced whatever the others.
    runs = [papers.compare_claim(claim, realistic_with_xp_queue(kb)) for kb in (12, 13, 12.5, 46, 46)]
    assert papers.over_runs(claim, runs).verdict == rule.NOT_REPRODUCED
    assert papers.over_runs(claim, runs[:1]) == runs[0]  # one run: judged as it is, no spread invented


def test_one_run_that_cannot_be_compared_makes_a_repeated_claim_not_comparable():
    (claim,) = [c for c in papers.load_claims() if c.id == "xp-maxq-kb"]
    runs = [papers.compare_claim(claim, realistic_with_xp_queue(46)),
            papers.compare_claim(claim, realistic(with_ports=False)),
            papers.compare_claim(claim, realistic_with_xp_queue(46))]
    seen = papers.over_runs(claim, runs)
    assert seen.verdict == rule.NOT_COMPARABLE and seen.ours is None
    assert seen.why == "1 of 3 runs not comparable; run 2: ports.csv has no switch port of expresspass load=0.2"


def test_the_report_of_repeated_runs_lists_every_run_and_judges_each_claim_on_their_median(tmp_path):
    bundles = [write_bundle(tmp_path / f"realistic-{kb}", realistic_with_xp_queue(kb)) for kb in (12, 47, 50)]
    for bundle in bundles:
        (bundle / "plots").mkdir()
        (bundle / "plots" / "fct_cdf.png").write_bytes(b"png")
    runs = [Run("realistic", b, 60.0, repeat=i) for i, b in enumerate(bundles, start=1)]
    report = write_report(tmp_path / "reproduce", runs, "now").read_text()
    assert "1 experiments, 3 runs (each run 3 times, with seeds seed .. seed + 2" in report
    assert [line.split(" | ")[0] for line in report.splitlines() if line.startswith("| realistic (")] == \
        ["| realistic (1/3)", "| realistic (2/3)", "| realistic (3/3)"]
    assert "median of 3 runs; 75% interval of the median 12 to 50; each run: 12, 47, 50" in \
        claim_line(report, "ExpressPass's max switch queue stays small")
    by = {c["id"]: c for c in json.loads((tmp_path / "reproduce" / "reproduction.json").read_text())["claims"]}
    assert by["xp-maxq-kb"]["ours"] == "47" and by["xp-maxq-kb"]["verdict"] == rule.REPRODUCED
    assert by["xp-maxq-kb"]["runs_figures"] == ["12", "47", "50"]
    assert sorted(p.name for p in (tmp_path / "reproduce" / "plots").iterdir()) == \
        ["realistic-1-fct_cdf.png", "realistic-2-fct_cdf.png", "realistic-3-fct_cdf.png"]  # none overwritten
    # A repeat that left no bundle: every claim of the experiment says which run and why.
    runs[1] = Run("realistic", None, 5.0, "the fabric check failed", repeat=2)
    write_report(tmp_path / "again", runs, "now")
    by = {c["id"]: c for c in json.loads((tmp_path / "again" / "reproduction.json").read_text())["claims"]}
    assert by["xp-maxq-kb"]["verdict"] == rule.NOT_COMPARABLE
    assert by["xp-maxq-kb"]["why"] == ("1 of 3 runs not comparable; run 2: realistic left no bundle "
                                       "(the fabric check failed)")


def test_reproduce_repeats_each_experiment_1_to_100_times(capsys):
    for bad, said in (("0", "0 is not between 1 and 100"), ("101", "101 is not between 1 and 100"),
                      ("two", "'two' is not a whole number")):
        with pytest.raises(SystemExit) as exit_:
            main(["reproduce", "--repeats", bad, "convergence"])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == f"ccemu reproduce: error: argument --repeats: {said}"


def test_the_headline_counts_each_class_and_says_why_most_claims_were_not_comparable():
    claims = papers.load_claims()[:4]
    verdicts = [rule.Judgement(rule.NOT_COMPARABLE, "the run's RTO differs"), rule.Judgement(rule.REPRODUCED),
                rule.Judgement(rule.NOT_COMPARABLE, "the run's RTO differs"),
                rule.Judgement(rule.NOT_COMPARABLE, "N = 20 is missing")]
    said = papers.headline([papers.Comparison(c, None, j) for c, j in zip(claims, verdicts)])
    assert said == ("**1 reproduced, 0 same direction only, 0 not reproduced, 0 direction only (0 hold, 0 do not), "
                    "3 not comparable** (of 4 claims); 2 of the not comparable because the run's RTO differs")
    assert papers.headline([papers.Comparison(claims[0], None, rule.Judgement(rule.REPRODUCED))]).endswith(
        "0 not comparable** (of 1 claims)")


def test_a_realistic_blocks_warmup_flows_are_in_no_fct_figure_and_not_counted_missing():
    slow_first = [flow("expresspass", 9.0 if i <= 2 else 1.0, point="load=0.6", id=i) for i in range(1, 5)]
    t = tables("realistic", slow_first, [round_row("expresspass", "load=0.6", flows=4)],
               workload={"kind": "realistic", "warmup_flows": 2})
    assert [f["id"] for f in t.flows_of("expresspass", "load=0.6")] == [3, 4]
    assert figures.fcts(t, "expresspass", "load=0.6").max_s == pytest.approx(1.0 / t.dilation)
    assert t.missing_records("expresspass", "load=0.6") == 0
    assert any("Warm-up: the first 2 flows of each load" in line for line in Realistic().summary_lines(t))


def test_a_warmup_that_leaves_no_flow_to_measure_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"workload.warmup_flows: 300 of 300 flows leaves none to measure"):
        parse_config({"name": "t", "topology": {"kind": "fattree", "k": 4},
                      "workload": {"kind": "realistic", "flows": 300, "warmup_flows": 300}})


def test_a_reproduction_gives_each_runs_hosts_beside_the_papers_and_what_differs_for_each_file_of_a_kind(tmp_path):
    runs = []
    for name, topology in (("realistic", {"kind": "fattree", "k": 4}),
                           ("realistic-fig19", {"kind": "fattree", "k": 8, "hosts_per_edge": 6, "uplinks": 2})):
        t = realistic()
        t.manifest["config"].update(name=name, topology=topology)
        runs.append(Run(name, write_bundle(tmp_path / name, t), 60.0))
    report = write_report(tmp_path / "reproduce", runs, "now", profile="paper").read_text()
    assert re.search(r"^\| realistic \| 16 \(192\) \|", report, re.M)
    assert re.search(r"^\| realistic-fig19 \| 192 \(192\) \|", report, re.M)
    assert "differs from the paper's (realistic.yaml):" in report and "by rate, not by count" in report
    assert "differs from the paper's (realistic-fig19.yaml):" in report and "3:1 by count" in report
    t = realistic()
    t.manifest["config"].update(name="realistic-fig19")
    assert papers.setting_of(t)["differs"][0].startswith("the paper's fat-tree")


def test_the_reference_tables_settings_name_a_kind_or_an_experiment_file(tmp_path):
    data = yaml.safe_load(papers.REFERENCE.read_text())
    data["settings"]["realistic-fig99"] = copy.deepcopy(data["settings"]["realistic"])
    path = tmp_path / "reference.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="'realistic-fig99' is neither a kind of experiment nor a file of"):
        papers.load_claims(path)
