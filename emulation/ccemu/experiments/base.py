"""One block lifecycle for every kind of experiment: for each block (a scheme and a point of the
sweep: an incast N, a load, an initial rate), a fresh fabric with the scheme's ports, the
datacenter's missing propagation delay added at the hosts, the kind's traffic, the ports'
figures once the queues drained, a fidelity verdict; then the results bundle.

A kind (kinds/: one module each) says which blocks it has and what traffic a block runs. Live
metrics, progress, Ctrl-C (the current fabric is torn down and the bundle still written, marked
interrupted) and the manifest are the same for all.
"""

from __future__ import annotations

import json
import secrets
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .. import interrupts
from ..bench import capacity as bench_capacity
from ..containers.cgroups import read_figures
from ..containers.engine import engine_session
from ..fabric.kernel import probe_kernel
from ..fabric.latency import plan_delays, write_delay_tables
from ..fabric.net import FabricNet
from ..fabric.protocol import Fabric
from ..programs.cchost import experiment_command
from ..results.records import counters_under
from ..model.names import host_number
from ..logs import ended, last_line
from ..machines.fabric import SplitFabric
from ..metrics import grafana
from ..metrics.monitoring import MonitoringSession
from ..model.config import ExperimentConfig
from ..model.dilation import FaithfulRates, bdp_packets, ideal_fct_s
from ..reports.report import report
from ..results import fidelity, space
from ..results.bundle import BlockKey, Bundle
from .provenance import provenance
from ..results.rows import FlowRow, HostRow, PortRow, RttRow, TransportRow
from ..kinds.blocks import BlockSpec, WorkloadNotRunnable

if TYPE_CHECKING:
    from ..model.partition import Plan
    from ..kinds import Kind

START_DELAY_S = 0.2  # from the schedules' epoch to the flows' start: every host's cchost is up by then
POLL_S = 0.05  # how often a block looks at its cchosts
# Once a cchost died, the others get this long to finish their flows before the block's round ends.
AFTER_FAILURE_GRACE_S = 2.0


@dataclass(frozen=True)
class HostFailure:
    """A cchost that exited abnormally during a block."""

    block: BlockKey
    round: int
    host: str
    role: str  # "sender", "aggregator" or "host"
    returncode: int  # negative: killed by that signal
    last_error: str  # the last line it wrote to stderr, if any

    def as_json(self) -> dict:
        """The manifest's entry (its keys in the order bundles have always had them)."""
        columns = self.block.columns()
        return {"scheme": columns["scheme"], "n": columns["n"], "round": self.round, "host": self.host,
                "role": self.role, "returncode": self.returncode, "last_error": self.last_error,
                "point": columns["point"], "status": self.status}

    @property
    def status(self) -> str:
        return ended(self.returncode)

    def __str__(self) -> str:
        detail = f" ({self.last_error})" if self.last_error else ""
        return f"{self.host}'s cchost ({self.role}) {self.status}{detail}"

    @property
    def reason(self) -> str:
        """What it cost, for the verdict of its block."""
        cost = {"sender": "its flows never finished; the round ended soon after",
                "aggregator": "no flow to it could finish; the round ended, and the block's later rounds were not run",
                "host": "its flows, and flows to it, never finished; the block ended soon after"}[self.role]
        when = f"round {self.round}" if self.round else "the warm-up before round 1"
        return f"{when}: {self}: {cost}"


@dataclass(frozen=True)
class Fault:
    """A part of the emulation itself (not the scheme under test) that failed during a block: an
    OVS daemon, the PFC pause agent, the results folder's disk. The block ends there, its verdict
    is FAIL; after a full disk the run stops too (nothing more could be written)."""

    block: BlockKey
    what: str
    disk_full: bool = False

    @property
    def reason(self) -> str:
        return f"{self.what}: the block ended there, its results are partial"

    def as_json(self) -> dict:
        columns = self.block.columns()
        return {"scheme": columns["scheme"], "n": columns["n"], "point": columns["point"], "what": self.what,
                "disk_full": self.disk_full}


@dataclass
class LiveBlock:
    """A block while its fabric is up: what the kind's traffic needs."""

    spec: BlockSpec
    config: ExperimentConfig  # the experiment with the block's ports and transport
    net: Fabric
    workdir: Path
    epoch: int  # CLOCK_MONOTONIC ns every cchost of the block counts from
    hosts: list[str]
    delays: dict[str, Path] = field(default_factory=dict)  # host -> its cchost's --delays table
    base_rtts: dict[tuple[str, str], float] = field(default_factory=dict)  # (src, dst) -> idle RTT, wall s
    fault: Fault | None = None  # what of the emulation failed under the block (ExperimentRunner.check)
    polls: int = 0  # how many times the runner looked at its cchosts (ExperimentRunner.check)

    def base_rtt_s(self, src: str, dst: str) -> float:
        return self.base_rtts.get((src, dst)) or self.base_rtts.get((dst, src)) or 0.0

    def now_s(self) -> float:
        """Seconds since the block's epoch."""
        return (time.monotonic_ns() - self.epoch) / 1e9


class ExperimentRunner:
    """The shared lifecycle; the kind says the blocks, and a traffic runner (incast.py, flows.py)
    overrides run_traffic()."""

    def __init__(self, kind: "Kind", config: ExperimentConfig, results_root: Path, console: Console,
                 monitoring: bool = True, keep_monitoring: bool = False, dilation_from: FaithfulRates | None = None,
                 across: tuple[list, "Plan"] | None = None, asked: str | None = None):
        """`dilation_from`: what the file's `dilation: auto` was resolved from (experiments/validation.py
        load_experiment), said in the summary; None: the file gives its dilation. `across`: (machines, plan) to run
        every block's fabric over several machines (machines/). `asked`: the file and what the
        command line changed in it (`--set`, `--schemes`), for the manifest; None: the file as it is."""
        if not isinstance(config.workload, kind.workload):  # runner_for (runnable_kind) chose it
            raise WorkloadNotRunnable(f"{config.name}: a {kind.name} runner was given a "
                                      f"{type(config.workload).__name__}")
        self.kind = kind
        self.config = config
        self.console = console
        self.bundle = Bundle(results_root, config.name)
        self.capacity = bench_capacity.latest(results_root)  # `ccemu bench capacity`'s, quoted in the summary
        self.dilation_from = dilation_from
        self.blocks_seen: list[tuple[BlockKey, fidelity.Observation]] = []  # for the verdict
        self.failures: list[HostFailure] = []
        self.faults: list[Fault] = []
        self.credit_queues = 0  # on the longest credit path of the last block (the port profiles' manifest entries)
        self.pause_agents: dict[str, dict] = {}  # lossless blocks: the PFC agent's figures (ports/pfc.py)
        self.across = across
        self.asked = asked
        docker_hosts = config.hosts.kind == "docker"
        self.monitoring = MonitoringSession(
            self.bundle.dir, config.name, console, on=monitoring, keep=keep_monitoring,
            dashboard_links=lambda started: grafana.links(self.kind.name, config.name, started, None, docker_hosts))
        self.started_at = time.monotonic()

    # What a kind says -------------------------------------------------------------------------

    def blocks(self) -> list[BlockSpec]:
        """The experiment's blocks, in the order they run (the kind's)."""
        return self.kind.blocks(self.config)

    def run_traffic(self, live: LiveBlock, progress: Progress, task) -> list[HostFailure]:
        raise NotImplementedError

    # The lifecycle ----------------------------------------------------------------------------

    def run(self) -> Path:
        """Runs every block, writes the bundle and says where it is. On a failure before any
        block ran, no bundle is left (there is nothing in it)."""
        try:
            # Docker hosts: one session with Docker's engine for the whole run (each fabric's own
            # session comes and goes inside it); live metrics (if on) for the whole run too.
            with engine_session(self.config.hosts.kind == "docker"), self.monitoring:
                return self._announce(self._run())
        except Exception:
            if not self.bundle.rounds:
                self.bundle.remove()
            raise

    def _announce(self, bundle: Path) -> Path:
        # Plain prints: a path wrapped at 80 columns by rich is no use to a script.
        manifest = json.loads((bundle / "manifest.json").read_text())
        verdict = manifest["fidelity"]
        print(f"fidelity: {verdict['status']}" + "".join(f"\n  {r}" for r in verdict["reasons"]))
        d = self.config.dilation.factor
        wall = manifest.get("wall_seconds", 0.0)
        print(f"wall time {wall:.0f} s; dilation {d:g}" +
              (f" ({self.config.datacenter_rate_bps / 1e9:g} Gbit/s links run at {self.config.link.rate_mbps:g} "
               f"Mbit/s; every time x {d:g})" if d != 1 else " (not dilated)"))
        print(f"results: {bundle}  (summary.md, plots/)", flush=True)
        return bundle

    def _run(self) -> Path:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.started_at = time.monotonic()
        stop: KeyboardInterrupt | None = None
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        blocks = self.blocks()
        try:
            with Progress(*columns, console=self.console, transient=False) as progress:
                tasks = {}
                for spec in blocks:
                    name = spec.scheme.scheme
                    if name not in tasks:
                        total = sum(self.kind.progress_total(self.config, s) for s in blocks if s.scheme.scheme == name)
                        tasks[name] = progress.add_task(f"{name:12}", total=total)
                for spec in blocks:
                    self._run_block(spec, progress, tasks[spec.scheme.scheme])
        except KeyboardInterrupt as interrupt:
            stop = interrupt
            self.console.print(f"[yellow]{interrupts.said(stop)}: writing the bundle with what finished[/yellow]")
        except Exception as exc:
            if self.bundle.rounds:
                self.console.print("[red]stopped by an error: writing the bundle with what finished[/red]")
                self._write(started, False, failed=str(exc))
            raise
        self._write(started, stop is not None)
        if stop is not None:
            raise stop
        return self.bundle.dir

    def block_config(self, spec: BlockSpec) -> ExperimentConfig:
        return self.config.for_scheme(spec.scheme)

    def _run_block(self, spec: BlockSpec, progress: Progress, task) -> None:
        if (full := space.full(self.bundle.dir)) is not None:  # filled up between blocks
            raise space.ResultsDiskFull(f"{full}, before {spec.key.describe()}: the run stopped there; the bundle "
                                        f"keeps what finished: {self.bundle.dir}")
        config = self.block_config(spec)
        # Absolute: Docker hosts see the work directory at the same path, but not our working directory.
        workdir = (self.bundle.work / spec.slug).resolve()
        workdir.mkdir()
        cpu_before = fidelity.CpuTimes.now()
        run_id = f"{f'{config.name}-{spec.slug}'[:53]}-{secrets.token_hex(3)}"  # the random part kept whole
        bottleneck_host = self.kind.bottleneck_host(self.config)
        with self._fabric(config, run_id) as net:
            hosts = sorted((h.name for h in net.hosts), key=host_number)
            live = LiveBlock(spec, config, net, workdir, time.monotonic_ns(), hosts)
            progress.update(task, description=f"{spec.label:24} idle RTTs")
            shortfalls = self._add_missing_delay(live)
            tunnel_spread = net.tunnel_spread_us()  # on the idle fabric
            live.epoch = time.monotonic_ns()
            net.watch_tunnels()
            requests_before = net.round_trips
            with self.monitoring.watching(spec.key, net, workdir, config.dilation.factor,
                                          lambda r: self.ideal_fct_s(live, r)):
                failures = self.run_traffic(live, progress, task)
            # The tunnels judged at their worst, idle or under the block's traffic.
            tunnel_spread = max(filter(None, (tunnel_spread, net.tunnel_spread_under_traffic_us())), default=None)
            if requests := net.round_trips - requests_before:  # what control cost, where machines' parts answer
                self.console.print(f"{spec.label}: {requests} requests to the machines' parts over {live.polls} polls "
                                   f"of the cchosts ({requests / max(live.polls, 1):.1f} per poll)")
            net.collect()  # the cchosts' last records and counters, where they ran on other machines
            if live.fault is not None:
                self.faults.append(live.fault)
            bottleneck_port = None
            if bottleneck_host:  # the switch's port facing it
                switch, port = net.fabric_topo.attachment(bottleneck_host)
                bottleneck_port = f"{switch}-eth{port}"
            # The credit queues of the longest credit path (a credit scheme's queue bound counts them):
            # toward the bottleneck host where there is one, between any two hosts otherwise.
            ends = [bottleneck_host] if bottleneck_host else hosts
            self.credit_queues = 1 + max(len(net.routing.path(a, h, 0)) for a in ends for h in hosts if h != a)
            self._record_hosts(spec, net)
            counters = counters_under(workdir)
            self.bundle.add(*TransportRow.per_host(spec.key, counters))
            # Read once the traffic has stopped and the queues had time to drain: a queue left
            # over is a packet lost between a port and its peer.
            ports, frame_ns = net.drained_ports()
            # Where machines' parts ran the block: their worst CPU, read before the parts go.
            cpu_elsewhere = net.cpu_over_block()
            tunnel_losses, clock_error = net.tunnel_losses(), net.clock_error_us()
        cpu = cpu_elsewhere or fidelity.CpuTimes.now().since(cpu_before)
        if (agent := net.pause_agent_figures) is not None:  # written as the fabric stopped it
            self.pause_agents[spec.label] = agent
        self.bundle.add(*(PortRow.of(spec.key, p, p.port == bottleneck_port, tunnel_losses.get(p.port, (0, 0, ""))[1])
                          for p in ports))
        lateness = lateness_p99 = None
        if (gap := spec.scheme.port.credit_gap_us(config.link.rate_mbps)) is not None:
            # Credit pacing happens at receivers: the bottleneck host's, or every host's.
            pacers = [workdir / f"{bottleneck_host}.counters"] if bottleneck_host else list(workdir.glob("*.counters"))
            lateness, lateness_p99 = fidelity.pacing_lateness_us(pacers)
        seen = fidelity.Observation.of_block(cpu, net.port_shape.frame_wire_bytes, ports, frame_ns, bottleneck_port,
                                             lateness, gap, host_failures=[f.reason for f in failures],
                                             delay_shortfalls=shortfalls,
                                             faults=[live.fault.reason] if live.fault else [],
                                             tunnel_spread_us=tunnel_spread,
                                             flows=[f for f in self.bundle.flows if BlockKey.of_row(f) == spec.key],
                                             lateness_p99_us=lateness_p99,
                                             base_rtt_us=min(live.base_rtts.values(), default=0) * 1e6 or None,
                                             start_late=fidelity.start_lateness_us(counters),
                                             clock_error_us=clock_error,
                                             tunnel_losses=[f"the network between the machines lost {lost} of the "
                                                            f"{sent} frames of cut link {port} -> {far}"
                                                            for port, (sent, lost, far) in sorted(tunnel_losses.items())
                                                            if lost])
        self.blocks_seen.append((spec.key, seen))
        self.failures += failures
        if live.fault is not None and live.fault.disk_full:
            raise space.ResultsDiskFull(f"{live.fault.what}, during {spec.key.describe()}: the run stopped there; "
                                        f"the bundle keeps what finished: {self.bundle.dir}")

    def _fabric(self, config: ExperimentConfig, run_id: str) -> Fabric:
        """The block's fabric: on this machine, or over the machines of `across` (the one place
        that tells them apart; the block asks either the same questions)."""
        if self.across is None:
            return FabricNet(config, run_id=run_id, shared_dirs=(self.bundle.work,))
        return SplitFabric(config, *self.across, run_id=run_id, workroot=self.bundle.work)

    def _add_missing_delay(self, live: LiveBlock) -> list[str]:
        """Measures every host pair's idle RTT; with a datacenter of non-zero delays, writes each
        host's delay table (what its pairs lack of the RTT they stand for). Returns the verdict's
        reasons for pairs the fabric alone makes slower than their target."""
        plan = plan_delays(live.net, live.config, live.hosts)
        live.delays.update(write_delay_tables(plan, live.workdir / "delays"))
        for pair in plan.pairs:
            live.base_rtts[(pair.src, pair.dst)] = max(pair.floor_rtt_s, pair.target_rtt_s)
            self.bundle.add(RttRow.of(live.spec.key, pair, plan.links[(pair.src, pair.dst)]))
        over = plan.too_slow()
        if not over:
            return []
        worst = max(over, key=lambda p: p.floor_rtt_s / p.target_rtt_s)
        return [f"the fabric alone was slower than the datacenter's RTT for {len(over)} of {len(plan.pairs)} host "
                f"pairs (worst {worst.src}-{worst.dst}: idle RTT {worst.floor_rtt_s * 1e3:.2f} ms against "
                f"{worst.target_rtt_s * 1e3:.2f} ms, {live.config.dilation.datacenter_s(worst.floor_rtt_s) * 1e6:.1f} "
                "us in datacenter time): their base RTT is the fabric's, larger than the paper's; a larger dilation "
                "fixes it"]

    def check(self, live: LiveBlock) -> Fault | None:
        """Whether the emulation still stands under the block: None, or what of it failed (an OVS
        daemon, the PFC pause agent, the results folder's disk), said the moment it is first seen.
        The traffic runners call this as they watch their cchosts, and end the block on an answer.
        Prometheus dying is said here too, but ends nothing (monitoring.check)."""
        self.monitoring.check()
        live.polls += 1
        if live.fault is None:
            live.net.collect()  # what the cchosts of other machines wrote, for the runner to read next
            if (full := space.full(self.bundle.dir)) is not None:
                live.fault = Fault(live.spec.key, full, disk_full=True)
            elif (died := live.net.fault()) is not None:
                live.fault = Fault(live.spec.key, died)
            if live.fault is not None:
                self.console.print(f"[red]{live.spec.label}: {live.fault.what}: the block ends here[/red]")
        return live.fault

    def start_cchost(self, live: LiveBlock, host: str, workdir: Path | None = None,
                     stdin=subprocess.DEVNULL, **kwargs) -> subprocess.Popen:
        """cchost on `host` with the block's scheme, transport, dilation and delay table; its
        output in `workdir`/<host>.log (read when it fails)."""
        workdir = workdir or live.workdir
        node = live.net[host]
        argv = experiment_command(live.config, host, live.spec.scheme.scheme, live.epoch, workdir, live.spec.alpha,
                                  live.delays.get(host), binary=node.transport_binary, **kwargs)
        with open(workdir / f"{host}.log", "wb") as log:
            return node.popen_transport(argv, stdin=stdin, stdout=log, stderr=subprocess.STDOUT)

    def failed(self, spec: BlockSpec, round_number: int, host: str, role: str, proc: subprocess.Popen,
               log: Path) -> HostFailure:
        """A cchost that exited abnormally, said on the console the moment it is seen."""
        failure = HostFailure(spec.key, round_number, host, role, proc.returncode, last_line(log))
        self.console.print(f"[red]{spec.label} round {round_number}: {failure}[/red]")
        return failure

    def _record_hosts(self, spec: BlockSpec, net: Fabric) -> None:
        """Docker hosts: what each container's cgroups counted over the block (its container lived
        exactly as long as the block's fabric)."""
        for host, container in sorted(net.containers.items(), key=lambda item: host_number(item[0])):
            figures = read_figures(container.cgroups)
            if figures is not None:
                self.bundle.add(HostRow.of(spec.key, host, net.image, container.cpus, container.memory_mb, figures))

    @staticmethod
    def ideal_fct_s(live: LiveBlock, record: dict) -> float:
        """A flow record's ideal FCT (wall): one way across its pair's base RTT, and its frames
        through the links of its path at their rates, store-and-forward (model/dilation.py)."""
        src, dst = f"h{record['src']}", f"h{record['dst']}"
        rates = live.config.link.path_rates_mbps(src, len(live.net.routing.path(src, dst, 0)) + 1)
        return ideal_fct_s(record["size"], [rate * 1e6 for rate in rates], live.base_rtt_s(src, dst))

    def flow_row(self, live: LiveBlock, record: dict, round_number: int = 1) -> FlowRow:
        """A flow record as a row of flows.csv, with its ideal FCT and slowdown."""
        return FlowRow.of(live.spec.key, round_number, record, self.ideal_fct_s(live, record))

    def _verdict(self) -> dict:
        """The run's verdict (the worst block's) with every block's own."""
        overall, blocks = fidelity.Verdict(), []
        for key, seen in self.blocks_seen:
            verdict = fidelity.judge(seen)
            blocks.append({**key.columns(), "status": verdict.status, **verdict.figures})
            overall.reasons += [f"{key.describe()}: {reason}" for reason in verdict.reasons]
            overall.status = fidelity.worst(overall.status, verdict.status)
        if self.monitoring.lost is not None:  # the run's, not a block's: the bundle's tables are whole
            overall.reasons.append(f"the run: {fidelity.WARN}: live metrics: {self.monitoring.lost}")
            overall.status = fidelity.worst(overall.status, fidelity.WARN)
        return {"status": overall.status, "reasons": overall.reasons, "blocks": blocks}

    @property
    def unfinished_flows(self) -> int:
        return sum(int(r["flows"]) - int(r["finished"]) for r in self.bundle.rounds)

    def _datacenter(self) -> dict:
        """What the run stood for, and its base RTTs and BDP as measured (dilation-free)."""
        config, d = self.config, self.config.dilation
        rtts = [max(r["floor_ms"], r["target_ms"]) / 1e3 for r in self.bundle.rtts]
        longest = max(rtts, default=0.0)
        # The longest round trip of a full frame and its answer: propagation and serialization.
        frame_rtt = max((max(r["floor_ms"], r["target_ms"]) + r["frame_there_ms"] + r["answer_back_ms"]
                         for r in self.bundle.rtts), default=0.0) / 1e3
        rate = config.datacenter_rate_bps
        dc = config.datacenter
        return {
            "dilation": d.factor, "link_rate_bps": rate, "emulated_link_mbps": config.link.rate_mbps,
            "link_delay_us": dc.link_delay_us if dc else None, "host_delay_us": dc.host_delay_us if dc else None,
            "base_rtt_max_us": round(d.datacenter_s(longest) * 1e6, 2),
            "frame_rtt_max_us": round(d.datacenter_s(frame_rtt) * 1e6, 2),
            "base_rtt_median_us": round(d.datacenter_s(statistics.median(rtts)) * 1e6, 2) if rtts else 0.0,
            "idle_fabric_rtt_max_us": round(d.datacenter_s(max((r["floor_ms"] for r in self.bundle.rtts),
                                                               default=0.0) / 1e3) * 1e6, 2),
            "bdp_packets_max_rtt": round(bdp_packets(rate, d.datacenter_s(longest)), 2),
        }

    def _write(self, started: str, interrupted: bool, failed: str | None = None) -> None:
        self.bundle.write_tables()
        verdict = self._verdict()
        manifest = {
            "kind": self.kind.name, "config": self.config.model_dump(mode="json"), "seed": self.config.seed,
            "started": started, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_seconds": round(time.monotonic() - self.started_at, 1), "interrupted": interrupted,
            "failed": failed, "datacenter": self._datacenter(),
            "datapath": self.config.fabric.forwarder(probe_kernel()),  # what `auto` became here
            "fidelity": verdict, "unfinished_flows": self.unfinished_flows,
            "host_failures": [f.as_json() for f in self.failures], "faults": [f.as_json() for f in self.faults],
            **provenance(),
            **self.kind.manifest_extra(self.config),
        }
        if self.pause_agents:
            manifest["pause_agent"] = self.pause_agents
        if self.capacity:
            manifest["machine_capacity"] = {key: self.capacity[key] for key in ("when", "variant", "capacity_mbps")}
        if self.dilation_from is not None:
            manifest["dilation_auto_from"] = asdict(self.dilation_from)
        if self.asked is not None:  # "config" is what ran; this, how it was asked for
            manifest["asked"] = self.asked
        if (monitoring := self.monitoring.figures(time.monotonic() - self.started_at)) is not None:
            manifest["monitoring"] = monitoring
        for scheme in self.config.schemes:
            manifest.update(scheme.port.manifest_entries(self.credit_queues))
        self.bundle.write_manifest(manifest)
        report(self.bundle.dir)
