"""The dashboards as data, and their upload (against a stand-in for Grafana's HTTP API: Grafana
itself cannot be installed on these machines)."""

import base64
import json
import re
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ccemu.metrics.dashboards import SELECTOR, dashboards, panel_queries, upload
from ccemu.metrics.grafana import KINDS
from ccemu.model.config import WORKLOAD_KINDS

VARIABLES = ["experiment", "scheme", "n", "point"]


def test_dashboards_have_stable_uids_and_every_query_filters_by_the_variables():
    boards = dashboards()
    assert sorted(boards) == ["ccemu-convergence", "ccemu-fabric", "ccemu-fidelity", "ccemu-flows", "ccemu-hosts",
                              "ccemu-lossless", "ccemu-realistic", "ccemu-transport"]
    for uid, board in boards.items():
        assert board["uid"] == uid and board["title"].startswith("ccemu / ")
        variables = board["templating"]["list"]
        assert [v["name"] for v in variables] == VARIABLES
        assert {v["name"]: (v["multi"], v["includeAll"], v.get("allValue")) for v in variables} == {
            "experiment": (False, False, None), "scheme": (True, True, ".*"), "n": (True, True, ".*"),
            "point": (True, True, ".*")}
        assert all(v["query"]["query"] == f"label_values(ccemu_port_queue_bytes, {v['name']})" for v in variables)
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), uid
        for panel in board["panels"]:
            assert panel["datasource"] == {"type": "prometheus", "uid": "ccemu-prometheus"}, panel["title"]
            assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
            assert panel["targets"], panel["title"]
        for title, expression in panel_queries(board):
            assert SELECTOR in expression, title
            for name in VARIABLES:
                assert f'{name}=~"${name}"' in expression, (uid, title, name)


def test_every_dashboard_names_the_experiment_kinds_that_feed_it():
    assert sorted(KINDS) == sorted(dashboards())
    for uid, kinds in KINDS.items():
        assert kinds and set(kinds) <= set(WORKLOAD_KINDS), uid
    for uid in ("ccemu-fabric", "ccemu-flows", "ccemu-transport", "ccemu-fidelity"):
        assert sorted(KINDS[uid]) == sorted(WORKLOAD_KINDS), uid
    assert KINDS["ccemu-realistic"] == ("realistic",)
    assert KINDS["ccemu-convergence"] == ("convergence",)
    assert KINDS["ccemu-lossless"] == ("victim",)
    assert KINDS["ccemu-hosts"] == ("incast",)  # the live test's monitored incast runs in Docker hosts


def panels_of(board: dict) -> dict[str, dict]:
    return {panel["title"]: panel for panel in board["panels"]}


def test_the_realistic_workload_dashboard_shows_fct_slowdown():
    board = dashboards()["ccemu-realistic"]
    assert board["title"] == "ccemu / realistic workload"
    panels = panels_of(board)
    assert sorted(panels) == ["FCT slowdown p50 per size bucket", "FCT slowdown p99 per size bucket",
                              "Mean FCT slowdown per load"]
    for p, q in (("50", "0.5"), ("99", "0.99")):
        panel = panels[f"FCT slowdown p{p} per size bucket"]
        (target,) = panel["targets"]
        assert target["expr"] == (f"histogram_quantile({q}, sum by (le, scheme, point, bucket) "
                                  f"(ccemu_flow_slowdown_bucket{{{SELECTOR}}}))")
        assert target["legendFormat"] == "{{scheme}} {{point}} {{bucket}}"
        assert panel["fieldConfig"]["defaults"]["unit"] == "short"
        assert "dilation-free" in panel["description"]
    (mean,) = panels["Mean FCT slowdown per load"]["targets"]
    assert mean["expr"] == (f"sum by (scheme, point) (ccemu_flow_slowdown_sum{{{SELECTOR}}}) / "
                            f"sum by (scheme, point) (ccemu_flow_slowdown_count{{{SELECTOR}}})")


def test_the_convergence_dashboard_shows_every_flows_throughput():
    board = dashboards()["ccemu-convergence"]
    assert board["title"] == "ccemu / convergence"
    panels = panels_of(board)
    assert sorted(panels) == ["Delivered bytes per flow", "Per-flow throughput"]
    (rate,) = panels["Per-flow throughput"]["targets"]
    assert rate["expr"] == (f"8 * rate(ccemu_flow_received_bytes_total{{{SELECTOR}}}[$__rate_interval]) "
                            f"* on(experiment, scheme, n, point) group_left() ccemu_block_dilation{{{SELECTOR}}} > 0")
    assert rate["legendFormat"] == "{{scheme}} {{point}} {{src}}#{{flow}}"
    assert panels["Per-flow throughput"]["fieldConfig"]["defaults"]["unit"] == "bps"
    assert panels["Per-flow throughput"]["fieldConfig"]["defaults"]["custom"]["axisLabel"] == \
        "bits per datacenter second"
    (delivered,) = panels["Delivered bytes per flow"]["targets"]
    assert delivered["expr"] == f"ccemu_flow_received_bytes_total{{{SELECTOR}}}"
    assert panels["Delivered bytes per flow"]["fieldConfig"]["defaults"]["unit"] == "bytes"


RATE = re.compile(r"rate\((\w+)\{[^}]*\}\[\$__rate_interval\]\)")
PER_DATACENTER_SECOND = f" * on(experiment, scheme, n, point) group_left() ccemu_block_dilation{{{SELECTOR}}}"


def test_every_rate_is_per_datacenter_second_unless_it_is_a_share_of_the_time():
    # Prometheus takes rates per wall second; a block's d turns them into the datacenter's. A
    # counter of wall seconds (time paused, CPU time) has a rate that is a share: the same in both.
    rates = 0
    for uid, board in dashboards().items():
        for title, expression in panel_queries(board):
            for found in RATE.finditer(expression):
                rates += 1
                dilated = expression[found.end():].startswith(PER_DATACENTER_SECOND)
                assert dilated != found[1].endswith("_seconds_total"), (uid, title, found[0])
    assert rates >= 10


def test_every_panel_names_its_unit_on_its_axis_and_times_are_datacenter_times():
    for uid, board in dashboards().items():
        for panel in board["panels"]:
            defaults = panel["fieldConfig"]["defaults"]
            axis = panel["options"]["yAxis"]["axisLabel"] if panel["type"] == "heatmap" else \
                defaults.get("custom", {}).get("axisLabel")
            if panel["type"] == "stat":
                continue  # a number, no axis
            assert defaults["unit"] and axis, (uid, panel["title"])
            if defaults["unit"] == "s":
                assert axis == "datacenter time", (uid, panel["title"])
            if defaults["unit"] in ("bps", "pps"):
                assert axis.endswith("per datacenter second"), (uid, panel["title"])


def test_every_dashboard_marks_each_block_and_links_to_the_others_keeping_the_time_range():
    for uid, board in dashboards().items():
        (blocks,) = board["annotations"]["list"]
        assert blocks["expr"] == f"ccemu_block_dilation{{{SELECTOR}}}" and blocks["enable"] is True, uid
        assert blocks["titleFormat"] == "block {{scheme}} N={{n}} {{point}}" and blocks["step"] == "1s"
        (link,) = board["links"]
        assert link["type"] == "dashboards" and link["tags"] == ["ccemu"], uid
        assert link["keepTime"] is True and link["includeVars"] is True
        assert board["time"] == {"from": "now-15m", "to": "now"} and board["refresh"] == "5s"


def test_a_goodput_panel_shows_the_wall_rate_times_the_blocks_dilation(tmp_path):
    # 1250 bytes per wall second at d = 200 is 2 Mbit/s of the datacenter's; a series of another
    # block (its own d) is scaled by its own.
    (goodput,) = [p["targets"][0]["expr"] for p in dashboards()["ccemu-transport"]["panels"]
                  if p["title"] == "Goodput per receiving host"]
    variables = dashboards()["ccemu-transport"]["templating"]["list"]
    expression = grafana_interpolates(goodput, variables, {"experiment": ["incast"], "scheme": ["$__all"],
                                                           "n": ["$__all"], "point": ["$__all"]})
    block = 'experiment="incast", scheme="dctcp", n="{n}"'
    series = [{"series": f'ccemu_host_received_bytes_total{{{block.format(n=8)}, host="h1"}}', "values": "0+1250x10"},
              {"series": f'ccemu_block_dilation{{{block.format(n=8)}}}', "values": "200x10"},
              {"series": f'ccemu_host_received_bytes_total{{{block.format(n=16)}, host="h1"}}', "values": "0+100x10"},
              {"series": f'ccemu_block_dilation{{{block.format(n=16)}}}', "values": "50x10"}]
    tests = [{"interval": "1s", "input_series": series,
              "promql_expr_test": [{"expr": expression.replace("$__rate_interval", "4s"), "eval_time": "8s",
                                    "exp_samples": [{"labels": f'{{{block.format(n=8)}, host="h1"}}',
                                                     "value": 2e6},
                                                    {"labels": f'{{{block.format(n=16)}, host="h1"}}',
                                                     "value": 4e4}]}]}]
    # promtool evaluates at the file's evaluation_interval (1m unless given), whatever the series' interval.
    (tmp_path / "goodput.json").write_text(json.dumps({"evaluation_interval": "1s", "tests": tests}))
    check = subprocess.run(["promtool", "test", "rules", str(tmp_path / "goodput.json")],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def test_panels_do_not_overlap():
    for uid, board in dashboards().items():
        cells = set()
        for panel in board["panels"]:
            g = panel["gridPos"]
            assert g["x"] + g["w"] <= 24, (uid, panel["title"])
            mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
            assert not cells & mine, (uid, panel["title"])
            cells |= mine


def test_upload_posts_each_dashboard_with_overwrite_and_the_urls_credentials(monkeypatch):
    received = []

    class Grafana(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append((self.path, self.headers["Authorization"], body))
            reply = json.dumps({"status": "success", "uid": body["dashboard"]["uid"]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Grafana)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.delenv("GRAFANA_TOKEN", raising=False)
    try:
        upload(f"http://admin:s3cret@127.0.0.1:{server.server_port}/grafana/")
    finally:
        server.shutdown()
        server.server_close()
    assert [path for path, _, _ in received] == ["/grafana/api/dashboards/db"] * len(dashboards())
    assert {auth for _, auth, _ in received} == {"Basic " + base64.b64encode(b"admin:s3cret").decode()}
    assert all(body["overwrite"] is True for _, _, body in received)
    assert sorted(body["dashboard"]["uid"] for _, _, body in received) == sorted(dashboards())


def grafana_interpolates(expression: str, variables: list[dict], chosen: dict[str, list[str]]) -> str:
    """What Grafana's Prometheus data source puts in place of each $variable (interpolateQueryExpr):
    the values of a multi-value or include-All variable regex-escaped (prometheusSpecialRegexEscape,
    a backslash that PromQL's string unquotes to one), several joined as (a|b); others as they are.
    ["$__all"] chooses All: the variable's allValue, as it is."""
    for variable in sorted(variables, key=lambda v: -len(v["name"])):
        values = chosen[variable["name"]]
        if values == ["$__all"]:
            values = [variable["allValue"]]
        elif variable["multi"] or variable["includeAll"]:
            values = [re.sub(r"[$^*{}\[\]'+?.()|]", lambda m: "\\\\" + m.group(), v) for v in values]
        text = values[0] if len(values) == 1 else "(" + "|".join(values) + ")"
        expression = expression.replace(f"${variable['name']}", text)
    return expression


def promtool_selections(tmp_path, series: dict[str, str], cases: list[tuple[dict[str, list[str]], list[str]]]):
    """For each (chosen variables, keys of `series` expected) case: the selection SELECTOR makes of
    `series` (key -> series in Prometheus notation, each with its own value), as Prometheus
    (promtool's evaluator) evaluates it. Returns the expressions."""
    variables = dashboards()["ccemu-fabric"]["templating"]["list"]  # every board's (the first test)
    value = {key: i + 1 for i, key in enumerate(series)}
    expressions = [grafana_interpolates(f"ccemu_port_queue_bytes{{{SELECTOR}}}", variables, chosen)
                   for chosen, _ in cases]
    tests = [{"interval": "1m", "input_series": [{"series": s, "values": str(value[k])} for k, s in series.items()],
              "promql_expr_test": [{"expr": expression, "eval_time": "0m",
                                    "exp_samples": [{"labels": series[k], "value": value[k]} for k in expected]}
                                   for expression, (_, expected) in zip(expressions, cases)]}]
    (tmp_path / "selection.json").write_text(json.dumps({"tests": tests}))
    check = subprocess.run(["promtool", "test", "rules", str(tmp_path / "selection.json")],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    return expressions


needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                    reason="promtool (Debian package prometheus) not installed")


@needs_promtool
def test_choosing_dctcp_plus_in_the_scheme_variable_matches_dctcp_plus_and_not_dctcp(tmp_path):
    # A "+" in a label value is a regex metacharacter inside =~"$scheme": Grafana escapes the values
    # of the multi-value scheme variable, and Prometheus matches them literally.
    series = {scheme: f'ccemu_port_queue_bytes{{experiment="incast", scheme="{scheme}", n="4"}}'
              for scheme in ("dctcp", "dctcp+", "expresspass")}
    cases = [({"experiment": ["incast"], "scheme": schemes, "n": ["4"], "point": ["$__all"]}, schemes)
             for schemes in (["dctcp+"], ["dctcp"], ["dctcp", "dctcp+"])]
    expressions = promtool_selections(tmp_path, series, cases)
    assert expressions[0].count('scheme=~"dctcp\\\\+"') == 1


@needs_promtool
def test_the_point_variable_matches_its_values_literally_and_all_takes_incast_without_one(tmp_path):
    # An incast block's series have an empty point (no label): only All (.*) selects them. A point's
    # "." is escaped like the scheme's "+": "load=0.5" does not match "load=0x5".
    series = {point: f'ccemu_port_queue_bytes{{experiment="e", scheme="dctcp", n="0", point="{point}"}}'
              for point in ("load=0.5", "load=0x5", "load=0.7")}
    series["incast"] = 'ccemu_port_queue_bytes{experiment="e", scheme="dctcp", n="4"}'
    base = {"experiment": ["e"], "scheme": ["$__all"], "n": ["$__all"]}
    cases = [({**base, "point": ["load=0.5"]}, ["load=0.5"]),
             ({**base, "point": ["load=0.5", "load=0.7"]}, ["load=0.5", "load=0.7"]),
             ({**base, "point": ["$__all"]}, ["load=0.5", "load=0x5", "load=0.7", "incast"])]
    expressions = promtool_selections(tmp_path, series, cases)
    assert expressions[0].count('point=~"load=0\\\\.5"') == 1
