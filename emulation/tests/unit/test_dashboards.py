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


def test_dashboards_have_stable_uids_and_every_query_filters_by_the_variables():
    boards = dashboards()
    assert sorted(boards) == ["ccemu-fabric", "ccemu-fidelity", "ccemu-flows", "ccemu-transport"]
    for uid, board in boards.items():
        assert [v["name"] for v in board["templating"]["list"]] == ["experiment", "scheme", "n"]
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), uid
        for title, expression in panel_queries(board):
            assert '$experiment' in expression and '$scheme' in expression and '$n' in expression, title


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
    assert [path for path, _, _ in received] == ["/grafana/api/dashboards/db"] * 4
    assert {auth for _, auth, _ in received} == {"Basic " + base64.b64encode(b"admin:s3cret").decode()}
    assert all(body["overwrite"] is True for _, _, body in received)
    assert sorted(body["dashboard"]["uid"] for _, _, body in received) == sorted(dashboards())


def grafana_interpolates(expression: str, variables: list[dict], chosen: dict[str, list[str]]) -> str:
    """What Grafana's Prometheus data source puts in place of each $variable (interpolateQueryExpr):
    the values of a multi-value or include-All variable regex-escaped (prometheusSpecialRegexEscape,
    a backslash that PromQL's string unquotes to one), several joined as (a|b); others as they are."""
    for variable in sorted(variables, key=lambda v: -len(v["name"])):
        values = chosen[variable["name"]]
        if variable["multi"] or variable["includeAll"]:
            values = [re.sub(r"[$^*{}\[\]'+?.()|]", lambda m: "\\\\" + m.group(), v) for v in values]
        text = values[0] if len(values) == 1 else "(" + "|".join(values) + ")"
        expression = expression.replace(f"${variable['name']}", text)
    return expression


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian package prometheus) not installed")
def test_choosing_dctcp_plus_in_the_scheme_variable_matches_dctcp_plus_and_not_dctcp(tmp_path):
    # A "+" in a label value is a regex metacharacter inside =~"$scheme": Grafana escapes the values
    # of the multi-value scheme variable, and Prometheus (promtool's evaluator) matches them literally.
    variables = dashboards()["ccemu-fabric"]["templating"]["list"]  # every board's (the first test)
    series = {scheme: f'ccemu_port_queue_bytes{{experiment="incast", scheme="{scheme}", n="4"}}'
              for scheme in ("dctcp", "dctcp+", "expresspass")}
    value = {"dctcp": 1, "dctcp+": 2, "expresspass": 3}
    cases = [["dctcp+"], ["dctcp"], ["dctcp", "dctcp+"]]
    tests = [{"interval": "1m", "input_series": [{"series": s, "values": str(value[k])} for k, s in series.items()],
              "promql_expr_test": [{
                  "expr": grafana_interpolates(f"ccemu_port_queue_bytes{{{SELECTOR}}}", variables,
                                               {"experiment": ["incast"], "scheme": schemes, "n": ["4"]}),
                  "eval_time": "0m",
                  "exp_samples": [{"labels": series[k], "value": value[k]} for k in schemes]} for schemes in cases]}]
    (tmp_path / "selection.json").write_text(json.dumps({"tests": tests}))
    check = subprocess.run(["promtool", "test", "rules", str(tmp_path / "selection.json")],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert tests[0]["promql_expr_test"][0]["expr"].count('scheme=~"dctcp\\\\+"') == 1
