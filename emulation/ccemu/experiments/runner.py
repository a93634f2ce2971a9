"""Runs an experiment file: for each scheme and each incast N, a fresh fabric with the
scheme's ports, cchost on the hosts, R rounds, port stats; then the results bundle.

A cchost that exits abnormally is noticed when it happens: it is named with its exit status,
its round ends, and the verdict says so. Ctrl-C ends the current round (its fabric is torn
down as always) and the bundle is still written with what finished, marked interrupted."""

from __future__ import annotations

import json
import random
import secrets
import signal
import subprocess
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..results import fidelity
from ..hosts.cchost import ScheduledFlow, command, host_number, read_counters, read_records, write_schedule
from ..model.config import (CREDIT_WIRE_BYTES, DATA_WIRE_BYTES, DctcpPort, ExperimentConfig, ExpressPassPort,
                     IncastWorkload, SchemeConfig)
from ..metrics.collector import Block as CollectorBlock
from ..metrics.collector import ExperimentCollector, MetricsServer
from ..fabric.net import FabricNet
from ..logs import last_line
from ..metrics.monitoring import SCRAPE_INTERVAL_S, Prometheus
from ..ports.maps import PortMaps, PortStats
from ..results.report import report
from ..results.bundle import Bundle, provenance
from ..model.routing import PATH_IDS, Routing
from ..results.stats import histogram_mean, size_bucket
from ..model.workloads import incast_round

START_DELAY_S = 0.2  # from the schedules' epoch to the flows' start: every sender is up by then
CREDIT_BURST_CREDITS = 2
POLL_S = 0.05  # how often a round looks at its cchosts
# Once a sender died, the others get this long to finish their flows before the round ends.
AFTER_FAILURE_GRACE_S = 2.0


class WorkloadNotRunnable(RuntimeError):
    pass


@dataclass(frozen=True)
class HostFailure:
    """A cchost that exited abnormally during a round."""

    scheme: str
    n: int
    round: int
    host: str
    role: str  # "sender" or "aggregator"
    returncode: int  # negative: killed by that signal
    last_error: str  # the last line it wrote to stderr, if any

    @property
    def status(self) -> str:
        if self.returncode < 0:
            try:
                return f"killed by {signal.Signals(-self.returncode).name}"
            except ValueError:
                return f"killed by signal {-self.returncode}"
        return f"exited with status {self.returncode}"

    def __str__(self) -> str:
        detail = f" ({self.last_error})" if self.last_error else ""
        return f"{self.host}'s cchost ({self.role}) {self.status}{detail}"

    @property
    def reason(self) -> str:
        """What it cost, for the verdict of its (scheme, N) block."""
        cost = ("its flows never finished; the round ended soon after" if self.role == "sender" else
                "no flow to it could finish; the round ended, and the block's later rounds were not run")
        return f"round {self.round}: {self}: {cost}"


@dataclass
class Block:
    """One (scheme, N) fabric and what it showed, for the fidelity verdict."""

    scheme: str
    n: int
    seen: fidelity.Observation


def credit_gap_us(config: ExperimentConfig, port: ExpressPassPort) -> float:
    """Gap between credits at the full credit rate of a link."""
    return CREDIT_WIRE_BYTES * 8 / (config.link.rate_mbps * port.credit_share)


def expresspass_queue_bound(config: ExperimentConfig, port: ExpressPassPort, credit_queues: int) -> int:
    """The reference's bound, C x (max - min credit-path delay): a credit waits at most its
    buffer plus burst at each credit queue of its path, and each credit stands for a full
    data frame, so the spread is at most that many frames per queue."""
    return (port.credit_buffer_credits + CREDIT_BURST_CREDITS) * (CREDIT_WIRE_BYTES + DATA_WIRE_BYTES) * credit_queues


def incast_schedule(routing: Routing, hosts: list[str], workload: IncastWorkload, n: int, rng: random.Random,
                    start: float, first_id: int) -> list[tuple[str, ScheduledFlow]]:
    """One incast round's flows as (sender, scheduled flow), each with the number of
    equal-cost paths between its hosts (what SprayPass receivers spray credits over; at most
    PATH_IDS, all a path-id can name)."""
    return [(flow.src, ScheduledFlow(id=i, dst=host_number(flow.dst), size=flow.size, start=start,
                                     paths=min(routing.n_paths(flow.src, flow.dst), PATH_IDS)))
            for i, flow in enumerate(incast_round(hosts, workload.aggregator, n, workload.total_bytes, rng),
                                     start=first_id)]


def transport_args(config: ExperimentConfig, host: str) -> tuple[str, ...]:
    """cchost's transport parameters for `host`; the optional ones only when the config sets them."""
    transport = config.transport
    args = ("--alpha", str(transport.alpha), "--rto-min-ms", str(transport.rto_min_ms),
            "--control-timeout-ms", str(transport.control_timeout_ms), "--linger", "0.05",
            "--seed", str(config.seed * 1000 + host_number(host)))
    if transport.w_init is not None:
        args += ("--w-init", str(transport.w_init))
    if transport.slow_time_unit_us is not None:
        args += ("--slow-time-unit-us", str(transport.slow_time_unit_us))
    return args


class IncastRunner:
    def __init__(self, config: ExperimentConfig, results_root: Path, console: Console, monitoring: bool = True,
                 keep_monitoring: bool = False):
        if not isinstance(config.workload, IncastWorkload):
            kind = config.workload.kind if config.workload else "none"
            raise WorkloadNotRunnable(f"{config.name}: only incast workloads run end to end so far (workload: {kind})")
        if not config.schemes:
            raise WorkloadNotRunnable(f"{config.name}: no schemes to compare (add a `schemes:` list)")
        self.config = config
        self.workload: IncastWorkload = config.workload
        self.console = console
        self.bundle = Bundle(results_root, config.name)
        self.blocks: list[Block] = []
        self.failures: list[HostFailure] = []
        self.credit_queues = 0
        self.monitoring, self.keep_monitoring = monitoring, keep_monitoring
        self.collector: ExperimentCollector | None = None
        self.prometheus: Prometheus | None = None
        self.metrics_server: MetricsServer | None = None
        self.started_at = time.monotonic()

    def run(self) -> Path:
        """Runs every block, writes the bundle and says where it is. On a failure before any
        round ran, no bundle is left (there is nothing in it)."""
        try:
            return self._run_monitored() if self.monitoring else self._announce(self._run())
        except Exception:
            if not self.bundle.rounds:
                self.bundle.remove()
            raise

    def _run_monitored(self) -> Path:
        self.collector = ExperimentCollector(self.config.name)
        server = MetricsServer(self.collector)
        try:
            prometheus = Prometheus(self.bundle.dir, server.port, self.config.name)
        except BaseException:
            server.close()
            raise
        self.console.print(f"live metrics: Prometheus {prometheus.url} (collector 127.0.0.1:{server.port}/metrics)")
        # Prometheus hands new targets to its scrapers every 5 s: start once it scrapes.
        deadline = time.monotonic() + 15
        while self.collector.scrapes == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        self.prometheus, self.metrics_server = prometheus, server
        try:
            bundle = self._announce(self._run())
            if self.keep_monitoring:
                self.console.print(f"Prometheus stays at {prometheus.url} until Ctrl-C")
                try:
                    while True:
                        time.sleep(3600)
                except KeyboardInterrupt:
                    pass  # the user is done looking: the run itself finished
            return bundle
        finally:
            prometheus.stop()
            server.close()

    @staticmethod
    def _announce(bundle: Path) -> Path:
        # Plain prints: a path wrapped at 80 columns by rich is no use to a script.
        verdict = json.loads((bundle / "manifest.json").read_text())["fidelity"]
        print(f"fidelity: {verdict['status']}" + "".join(f"\n  {r}" for r in verdict["reasons"]))
        print(f"results: {bundle}  (summary.md, plots/)", flush=True)
        return bundle

    def _run(self) -> Path:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.started_at = time.monotonic()
        interrupted = False
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        try:
            with Progress(*columns, console=self.console, transient=False) as progress:
                rounds = len(self.workload.flows) * self.workload.rounds
                tasks = {s.scheme: progress.add_task(f"{s.scheme:12}", total=rounds) for s in self.config.schemes}
                for scheme in self.config.schemes:
                    for n in self.workload.flows:
                        self._run_block(scheme, n, progress, tasks[scheme.scheme])
        except KeyboardInterrupt:
            interrupted = True
            self.console.print("[yellow]interrupted: writing the bundle with what finished[/yellow]")
        except Exception as exc:
            if self.bundle.rounds:
                self.console.print("[red]stopped by an error: writing the bundle with what finished[/red]")
                self._write(started, interrupted, failed=str(exc))
            raise
        self._write(started, interrupted)
        if interrupted:
            raise KeyboardInterrupt
        return self.bundle.dir

    def _run_block(self, scheme: SchemeConfig, n: int, progress: Progress, task) -> None:
        config = self.config.for_scheme(scheme)
        workdir = self.bundle.work / f"{scheme.scheme}-n{n}"
        workdir.mkdir()
        cpu_before = fidelity.CpuTimes.now()
        run_id = f"{config.name}-{scheme.scheme}-n{n}-{secrets.token_hex(3)}"
        with FabricNet(config, run_id=run_id) as net:
            hosts = sorted((h.name for h in net.hosts), key=host_number)
            aggregator = self.workload.aggregator
            bottleneck = net[aggregator].defaultIntf().link
            bottleneck_port = (bottleneck.intf2 if bottleneck.intf1.node.name == aggregator else bottleneck.intf1).name
            self.credit_queues = 1 + max(len(path) for path in self._credit_paths(net, hosts, aggregator))
            epoch = time.monotonic_ns()
            receiver = self._start_cchost(net, aggregator, scheme, epoch, workdir, duration_s=24 * 3600)
            if self.collector:
                self.collector.attach(CollectorBlock(scheme.scheme, n, net.inventory.state_dir, workdir))
            failures: list[HostFailure] = []
            try:
                for round_number in range(1, self.workload.rounds + 1):
                    progress.update(task, description=f"{scheme.scheme:12} N={n:<4} round {round_number}")
                    if self.collector:
                        self.collector.set_round(round_number)
                    failures += self._run_round(net, hosts, scheme, n, round_number, workdir, epoch, receiver)
                    progress.advance(task)
                    if receiver.poll() is not None:  # no aggregator: the block's other rounds cannot run
                        if aggregator not in {f.host for f in failures}:
                            failures.append(self._failed(scheme.scheme, n, round_number, aggregator, "aggregator",
                                                         receiver, workdir / f"{aggregator}.log"))
                        self._not_run(scheme.scheme, n, range(round_number + 1, self.workload.rounds + 1))
                        progress.advance(task, self.workload.rounds - round_number)
                        break
                if self.collector:
                    time.sleep(SCRAPE_INTERVAL_S + 0.5)  # the block's last figures get scraped
            finally:
                if receiver.poll() is None:
                    receiver.terminate()
                receiver.wait(timeout=10)
                if self.collector:
                    self.collector.detach()
            # Read once the traffic has stopped and the queues had time to drain: a queue left
            # over is a packet lost between a port and its peer.
            with PortMaps(net.inventory.state_dir) as maps:
                ports = maps.read_drained()
                frame_ns = maps.frame_ns
        steal, busy = fidelity.CpuTimes.now().since(cpu_before)
        self._record_ports(scheme.scheme, n, ports, bottleneck_port)
        counters = workdir / f"{aggregator}.counters"
        lateness = gap = None
        if isinstance(scheme.port, ExpressPassPort) and counters.exists():
            lateness = read_counters(counters)["timer_lateness"]["mean_us"]
            gap = credit_gap_us(self.config, scheme.port)
        (bottleneck_stats,) = [p for p in ports if p.port == bottleneck_port]
        seen = fidelity.Observation(
            steal=steal, busy=busy, frame_bytes=net.port_shape.frame_wire_bytes,
            switches=fidelity.SwitchFigures.of(ports, frame_ns),
            bottleneck_lag_bytes=bottleneck_stats.data.mean_lag_bytes,
            credit_lag_bytes=fidelity.busiest_credit_lag_bytes(ports),
            residues=fidelity.queue_residues(ports), lateness_us=lateness, credit_gap_us=gap,
            host_failures=[f.reason for f in failures])
        self.blocks.append(Block(scheme.scheme, n, seen))
        self.failures += failures

    def _record_ports(self, scheme: str, n: int, ports: list[PortStats], bottleneck_port: str) -> None:
        for p in ports:
            self.bundle.ports.append({
                "scheme": scheme, "n": n, "node": p.node, "port": p.port,
                "bottleneck": int(p.port == bottleneck_port),
                "data_enqueued": p.data.enqueued_packets, "data_dropped": p.data.dropped_packets,
                "data_marked": p.data.marked_packets, "max_data_queue": p.data.max_queue_bytes,
                "mean_data_queue": round(histogram_mean(p.data.histogram, p.data.bucket_bytes)),
                "mean_lag": round(p.data.mean_lag_bytes), "max_lag": p.data.max_lag_bytes,
                "credit_enqueued": p.credit.enqueued_packets, "credit_dropped": p.credit.dropped_packets,
                "credit_marked": p.credit.marked_packets, "max_credit_queue": p.credit.max_queue_bytes,
                "mean_credit_lag": round(p.credit.mean_lag_bytes), "max_credit_lag": p.credit.max_lag_bytes,
                "residence_packets": p.residence.packets, "residence_untracked": p.residence.untracked_packets,
                "residence_p50_us": round(p.residence.quantile_ns(0.5) / 1e3, 1),
                "residence_p99_us": round(p.residence.quantile_ns(0.99) / 1e3, 1),
                "residence_max_us": round(p.residence.max_ns / 1e3, 1),
                "residue_bytes": sum(p.queue_bytes),
                "bucket_bytes": p.data.bucket_bytes, "histogram": " ".join(map(str, p.data.histogram)),
            })

    def _credit_paths(self, net: FabricNet, hosts: list[str], aggregator: str) -> list[list[str]]:
        """Switches on the aggregator's path to each sender (credits queue at each of their
        egress ports, after the aggregator's own NIC)."""
        return [net.routing.path(aggregator, h, 0) for h in hosts if h != aggregator]

    def _start_cchost(self, net: FabricNet, host: str, scheme: SchemeConfig, epoch: int, workdir: Path,
                      **kwargs) -> subprocess.Popen:
        """cchost on `host`, its output in `workdir`/<host>.log (read when it fails)."""
        argv = command(host, self.config.link.rate_mbps, scheme.scheme, epoch, workdir,
                       extra=transport_args(self.config, host), **kwargs)
        with open(workdir / f"{host}.log", "wb") as log:
            return net[host].popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def _run_round(self, net: FabricNet, hosts: list[str], scheme: SchemeConfig, n: int, round_number: int,
                   workdir: Path, epoch: int, receiver: subprocess.Popen) -> list[HostFailure]:
        """One round; returns the cchosts that failed in it. `epoch`: the aggregator's, which
        every sender shares (finish times are its clock's)."""
        # The same flows for every scheme: the seed, N and the round decide them.
        rng = random.Random(f"{self.config.seed}-{n}-{round_number}")
        start = (time.monotonic_ns() - epoch) / 1e9 + START_DELAY_S
        # Flow ids stay unique for the aggregator's whole life (it answers a repeated id as the
        # finished flow it remembers).
        first_id = (round_number - 1) * n + 1
        flows = incast_schedule(net.routing, hosts, self.workload, n, rng, start, first_id)
        round_dir = workdir / f"round{round_number}"
        round_dir.mkdir()
        by_sender: dict[str, list[ScheduledFlow]] = defaultdict(list)
        for src, flow in flows:
            by_sender[src].append(flow)
        senders = {
            src: self._start_cchost(net, src, scheme, epoch, round_dir, exit_when_done=True,
                                    schedule=write_schedule(round_dir / f"{src}.flows", src_flows))
            for src, src_flows in by_sender.items()
        }
        failures = self._watch_round(senders, receiver, scheme.scheme, n, round_number, round_dir, workdir)
        records = [dict(r, src_host=src) for src in senders for r in read_records(round_dir / f"{src}.records")]
        for record in records:
            self.bundle.flows.append({
                "scheme": scheme.scheme, "n": n, "round": round_number, "id": record["id"],
                "src": record["src_host"], "dst": f"h{record['dst']}", "size": record["size"],
                "bucket": size_bucket(record["size"]), "start": record["start"], "end": record["end"],
                "fct": record["fct"], "retransmits": record["retransmits"], "timeouts": record["timeouts"],
                "spurious_timeouts": record["spurious_timeouts"], "credits_sent": record["credits_sent"],
                "credits_wasted": record["credits_wasted"],
            })
        finished = {(r["src_host"], r["id"]) for r in records}
        unfinished = [f"{src}#{flow.id}" for src, flow in flows if (src, flow.id) not in finished]
        duration = max((r["end"] for r in records), default=0) - start if not unfinished else 0.0
        sent = sum(r["size"] for r in records)
        self.bundle.rounds.append({
            "scheme": scheme.scheme, "n": n, "round": round_number, "flows": len(flows), "finished": len(records),
            "bytes": sent, "duration": round(duration, 6),
            "goodput_bps": round(sent * 8 / duration) if duration > 0 else 0, "unfinished": " ".join(unfinished),
            "failures": "; ".join(str(f) for f in failures),
        })
        if unfinished:
            why = (f"the round ended {AFTER_FAILURE_GRACE_S:g} s after a cchost failed" if failures
                   else f"within {self.workload.round_timeout_s} s")
            self.console.print(f"[red]{scheme.scheme} N={n} round {round_number}: {len(unfinished)} flows never "
                               f"finished ({why}): {' '.join(unfinished[:10])}"
                               f"{' ...' if len(unfinished) > 10 else ''}[/red]")
        return failures

    def _watch_round(self, senders: dict[str, subprocess.Popen], receiver: subprocess.Popen, scheme: str, n: int,
                     round_number: int, round_dir: Path, workdir: Path) -> list[HostFailure]:
        """Wait for the senders to finish, the round to time out, or a cchost to fail; then end
        the round. A failure is reported the moment it is seen."""
        deadline = time.monotonic() + START_DELAY_S + self.workload.round_timeout_s
        failures: list[HostFailure] = []
        aggregator = self.workload.aggregator
        try:
            while time.monotonic() < deadline:
                for host, proc in senders.items():
                    if proc.poll() not in (None, 0) and host not in {f.host for f in failures}:
                        failures.append(self._failed(scheme, n, round_number, host, "sender", proc,
                                                     round_dir / f"{host}.log"))
                if receiver.poll() is not None:
                    failures.append(self._failed(scheme, n, round_number, aggregator, "aggregator", receiver,
                                                 workdir / f"{aggregator}.log"))
                    break  # nothing can finish without it
                if all(proc.poll() is not None for proc in senders.values()):
                    break
                if failures:
                    deadline = min(deadline, time.monotonic() + AFTER_FAILURE_GRACE_S)
                time.sleep(POLL_S)
        finally:
            for proc in senders.values():
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(timeout=10)
        return failures

    def _not_run(self, scheme: str, n: int, rounds: range) -> None:
        """Rounds a failure left no way to run: their flows count as unfinished."""
        for round_number in rounds:
            self.bundle.rounds.append({
                "scheme": scheme, "n": n, "round": round_number, "flows": n, "finished": 0, "bytes": 0,
                "duration": 0.0, "goodput_bps": 0, "unfinished": "not run", "failures": "not run: no aggregator",
            })

    def _failed(self, scheme: str, n: int, round_number: int, host: str, role: str, proc: subprocess.Popen,
                log: Path) -> HostFailure:
        """A cchost that exited abnormally, said on the console the moment it is seen."""
        failure = HostFailure(scheme, n, round_number, host, role, proc.returncode, last_line(log))
        self.console.print(f"[red]{scheme} N={n} round {round_number}: {failure}[/red]")
        return failure

    def _verdict(self) -> dict:
        """The run's verdict (the worst block's) with every block's own."""
        overall, blocks = fidelity.Verdict(), []
        for block in self.blocks:
            verdict = fidelity.judge(block.seen)
            blocks.append({"scheme": block.scheme, "n": block.n, "status": verdict.status, **verdict.figures})
            overall.reasons += [f"{block.scheme} N={block.n}: {reason}" for reason in verdict.reasons]
            overall.status = fidelity.worst(overall.status, verdict.status)
        return {"status": overall.status, "reasons": overall.reasons, "blocks": blocks}

    @property
    def unfinished_flows(self) -> int:
        return sum(int(r["flows"]) - int(r["finished"]) for r in self.bundle.rounds)

    def _write(self, started: str, interrupted: bool, failed: str | None = None) -> None:
        self.bundle.write_tables()
        verdict = self._verdict()
        manifest = {
            "config": self.config.model_dump(mode="json"), "seed": self.config.seed, "started": started,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "interrupted": interrupted,
            "failed": failed,
            "fidelity": verdict, "unfinished_flows": self.unfinished_flows,
            "host_failures": [asdict(f) | {"status": f.status} for f in self.failures], **provenance(),
        }
        if self.collector and self.prometheus and self.metrics_server:
            manifest["monitoring"] = {
                "seconds": round(time.monotonic() - self.started_at, 1), "scrapes": self.collector.scrapes,
                "collector_cpu_seconds": round(self.collector.scrape_cpu_seconds, 3),
                "prometheus_cpu_seconds": round(self.prometheus.cpu_seconds(), 3),
                "prometheus_url": self.prometheus.url, "collector_port": self.metrics_server.port,
            }
        for scheme in self.config.schemes:
            if isinstance(scheme.port, ExpressPassPort) and self.credit_queues:
                manifest["expresspass_queue_bound_bytes"] = expresspass_queue_bound(self.config, scheme.port,
                                                                                    self.credit_queues)
                manifest["expresspass_credit_queues_on_longest_path"] = self.credit_queues
            if isinstance(scheme.port, DctcpPort):
                manifest["dctcp_k_bytes"] = scheme.port.ecn_threshold_bytes
        self.bundle.write_manifest(manifest)
        report(self.bundle.dir)
