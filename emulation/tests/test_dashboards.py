"""The dashboards as data, and their upload (against a stand-in for Grafana's HTTP API: Grafana
itself cannot be installed on these machines)."""

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from ccemu.dashboards import dashboards, panel_queries, upload


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
