"""Prometheus for an experiment: started by the runner with a generated config, scraping the
collector every second, its TSDB inside the results bundle (so `ccemu monitor DIR` can
serve a finished run again), listening on 127.0.0.1 only. Started processes are recorded in
an inventory under <state root>/monitoring/, so `ccemu clean` removes them if we are killed.

MonitoringSession is a run's live metrics as a whole (the collector, its server, Prometheus):
the runner enters it around its blocks, has it watch each block, and writes its figures into
the manifest."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..fabric.inventory import DEFAULT_STATE_ROOT, Inventory
from ..logs import ended, ended_saying, last_line
from ..results.bundle import BlockKey
from .collector import Block, ExperimentCollector, MetricsServer
from .grafana import grafana_lines

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
SCRAPE_INTERVAL_S = 1
MONITORING_STATE = "monitoring"


class MonitoringError(RuntimeError):
    pass


DEFAULT_PORT = 9090  # where dashboards/provisioning's datasource looks unless told another


def free_loopback_port(preferred: int = DEFAULT_PORT) -> int:
    """`preferred` if free on 127.0.0.1, else any free port."""
    for port in (preferred, 0):
        with socket.socket() as probe:
            # As Prometheus binds (Go sets SO_REUSEADDR): connections of an earlier server
            # lingering in TIME_WAIT do not make the port busy.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return probe.getsockname()[1]
    raise MonitoringError("no free port on 127.0.0.1")


def prometheus_config(metrics_port: int | None, experiment: str) -> str:
    scrape = ""
    if metrics_port is not None:
        scrape = (f"scrape_configs:\n  - job_name: ccemu\n    scrape_interval: {SCRAPE_INTERVAL_S}s\n"
                  f"    scrape_timeout: {SCRAPE_INTERVAL_S}s\n"
                  f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
                  f"        labels: {{run: {json.dumps(experiment)}}}\n")
    return f"global:\n  scrape_interval: {SCRAPE_INTERVAL_S}s\n{scrape}"


def query_range(url: str, expression: str, start: float, end: float, step: float = 1.0) -> list[dict]:
    """The series a range query at the Prometheus at `url` returns."""
    params = {"query": expression, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": str(step)}
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{urllib.parse.urlencode(params)}", timeout=30) as r:
        body = json.loads(r.read())
    if body.get("status") != "success":
        raise MonitoringError(f"query {expression!r} failed: {body}")
    return body["data"]["result"]


def copy_plain_tree(source: Path, target: Path) -> None:
    """Copies the directories and regular files under `source` into `target` (made here), and
    refuses anything else: `source` is a bundle's, which people exchange, and a link in it would
    have whoever writes to the copy (Prometheus, as root) write outside it."""
    def plain(path: Path) -> os.stat_result:
        status = os.lstat(path)
        if not (stat.S_ISDIR(status.st_mode) or stat.S_ISREG(status.st_mode)):
            raise MonitoringError(f"{path}: not a plain file or directory (a bundle's Prometheus data holds only "
                                  "those)")
        return status

    if not stat.S_ISDIR(plain(source).st_mode):
        raise MonitoringError(f"{source}: not a directory")
    target.mkdir(mode=0o700)
    for entry in sorted(source.iterdir()):
        if stat.S_ISDIR(plain(entry).st_mode):
            copy_plain_tree(entry, target / entry.name)
            continue
        reading = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            writing = os.open(target / entry.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                while chunk := os.read(reading, 1 << 20):
                    os.write(writing, chunk)
            finally:
                os.close(writing)
        finally:
            os.close(reading)


class Prometheus:
    """One Prometheus process: a run's, scraping the collector into `bundle`/prometheus/ (config,
    TSDB, log), or (`metrics_port` None) a finished run's, serving a copy of that TSDB from its
    state directory: the bundle stays as it was."""

    def __init__(self, bundle: Path, metrics_port: int | None, experiment: str,
                 state_root: Path = DEFAULT_STATE_ROOT, port: int | None = None):
        self.port = port or free_loopback_port()
        self.inventory = Inventory.create(f"{experiment}-prometheus-{secrets.token_hex(3)}",
                                          state_root / MONITORING_STATE)
        if metrics_port is None:
            self.dir = self.inventory.state_dir
            try:
                copy_plain_tree(bundle / "prometheus" / "data", self.dir / "data")
            except BaseException:
                self.inventory.remove()
                raise
        else:
            self.dir = bundle / "prometheus"
            self.dir.mkdir(exist_ok=True)
        config = self.dir / ("prometheus.yml" if metrics_port is not None else "serve.yml")
        config.write_text(prometheus_config(metrics_port, experiment))
        self.log = open(self.dir / "prometheus.log", "a")
        self.process = self.inventory.spawn(
            "prometheus",
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=100y"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = self.dir / "prometheus.log"
                said = last_line(log)  # before stop(): a replay's log goes with its state directory
                self.stop()
                raise MonitoringError(f"prometheus {ended(self.process.returncode)} at start"
                                      f"{': ' + said if said else ''}" + (f" (log: {log})" if log.exists() else ""))
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise MonitoringError(f"prometheus not ready on {self.url} within {timeout:.0f} s")

    def cpu_seconds(self) -> float | None:
        """CPU time Prometheus has used so far; None once it is gone."""
        if self.process.poll() is not None:
            return None
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def died(self) -> str | None:
        """How Prometheus ended and the last it logged, once it is no longer running; else None."""
        if self.process.poll() is None:
            return None
        return f"prometheus {ended_saying(self.process.returncode, last_line(self.dir / 'prometheus.log'))}"

    def stop(self) -> None:
        """SIGTERM (Prometheus then writes its data out), and what the inventory does."""
        problems = self.inventory.remove()
        if self.process.poll() is None:
            self.process.wait(timeout=5)
        self.log.close()
        try:
            self.inventory.state_dir.parent.rmdir()  # monitoring/, once no run is left in it
        except OSError:
            pass
        if problems:
            raise MonitoringError(f"stopping prometheus: {'; '.join(problems)}")


class MonitoringSession:
    """Live metrics for one experiment run, as a context manager: the collector behind its HTTP
    server on 127.0.0.1 and a Prometheus scraping it into the bundle; on leaving, exactly those
    stop (after Ctrl-C when asked to stay up). Off (`on` False): it starts nothing, and every call
    below does nothing."""

    def __init__(self, bundle: Path, experiment: str, console, on: bool = True, keep: bool = False,
                 dashboard_links: Callable[[str], dict[str, str]] | None = None):
        """`console`: where the run's progress goes (rich's Console); `keep`: once the run
        finished, Prometheus stays up until Ctrl-C; `dashboard_links`: the dashboards that show
        the run, from its start time (ISO 8601 UTC), printed with the command that starts Grafana."""
        self.bundle, self.experiment, self.console = bundle, experiment, console
        self.dashboard_links = dashboard_links
        self.on, self.keep = on, keep
        self.collector: ExperimentCollector | None = None
        self.server: MetricsServer | None = None
        self.prometheus: Prometheus | None = None
        self.started_at = time.monotonic()  # again once Prometheus is up
        # Prometheus died during the run (check()): why, and when. The run goes on without live
        # metrics; the bundle (records and port maps, not Prometheus) is whole.
        self.lost: str | None = None

    def __enter__(self) -> "MonitoringSession":
        if not self.on:
            return self
        collector = ExperimentCollector(self.experiment)
        server = MetricsServer(collector)
        try:
            prometheus = Prometheus(self.bundle, server.port, self.experiment)
        except BaseException:
            server.close()
            raise
        # Held from here on: a Ctrl-C before the run starts stops them too (no __exit__ follows a
        # failed __enter__).
        self.collector, self.server, self.prometheus = collector, server, prometheus
        try:
            self.console.print(f"live metrics: Prometheus {prometheus.url} (collector 127.0.0.1:{server.port}/metrics)")
            if self.dashboard_links:
                started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                for line in grafana_lines(prometheus.port, self.dashboard_links(started)):
                    self.console.print(line, highlight=False, soft_wrap=True)
            # Prometheus hands new targets to its scrapers every 5 s: start once it scrapes.
            deadline = time.monotonic() + 15
            while collector.scrapes == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
        except BaseException:
            self.keep = False
            self.__exit__(*sys.exc_info())
            raise
        self.started_at = time.monotonic()
        return self

    def check(self) -> None:
        """Says, the moment it is first seen, that Prometheus died (the blocks watch this as they
        run). Not a reason to stop a block: what the bundle measures does not come from it."""
        if self.prometheus is None or self.lost is not None or (died := self.prometheus.died()) is None:
            return
        self.lost = (f"{died}, {time.monotonic() - self.started_at:.0f} s into the run: the live metrics (and the "
                     f"bundle's Prometheus data) end there; the bundle's tables are whole")
        self.console.print(f"[red]live metrics: {self.lost}[/red]")

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.prometheus is None or self.server is None:
            return
        try:
            if exc_type is None and self.keep and self.lost is None:
                self.console.print(f"Prometheus stays at {self.prometheus.url} until Ctrl-C")
                try:
                    while True:
                        time.sleep(3600)
                except KeyboardInterrupt:
                    pass  # the user is done looking: the run itself finished
        finally:
            try:
                self.prometheus.stop()
            finally:
                self.server.close()
                self.collector = self.server = self.prometheus = None

    @contextmanager
    def watching(self, key: BlockKey, fabric, workdir: Path, dilation: float,
                 ideal_fct: Callable[[dict], float] | None = None) -> Iterator[None]:
        """The collector reads the block `key` while inside: its fabric's ports (`fabric`: a
        FabricNet, or a SplitFabric over several machines; it must stay up until the end) and its
        cchosts' files (`workdir`), at its dilation, with a flow record's ideal FCT (for slowdowns);
        on a normal exit, long enough for the block's last figures to be scraped."""
        if self.collector is None:
            yield
            return
        self.collector.attach(Block(key, fabric.live_ports(), workdir, dilation, ideal_fct,
                                    {host: c.as_json() for host, c in fabric.containers.items()},
                                    fabric.cpu_shares_now))
        try:
            yield
            time.sleep(SCRAPE_INTERVAL_S + 0.5)
        finally:
            self.collector.detach()

    def set_round(self, round_number: int) -> None:
        """The incast round running now (0: the warm-up)."""
        if self.collector is not None:
            self.collector.set_round(round_number)

    def figures(self, seconds: float) -> dict | None:
        """The manifest's "monitoring" entry: what it cost over `seconds` of run, and where it
        was; None when off."""
        if self.collector is None or self.server is None or self.prometheus is None:
            return None
        return {"seconds": round(seconds, 1), "scrapes": self.collector.scrapes,
                "collector_cpu_seconds": round(self.collector.scrape_cpu_seconds, 3),
                "prometheus_cpu_seconds": None if (cpu := self.prometheus.cpu_seconds()) is None else round(cpu, 3),
                "prometheus_url": self.prometheus.url, "collector_port": self.server.port,
                **({"lost": self.lost} if self.lost else {})}
