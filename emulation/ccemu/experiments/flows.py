"""Kinds whose whole traffic is known before it starts: realistic (Poisson arrivals at a load),
permutation, shuffle and convergence. Every host's cchost is a server for the whole block with
a schedule of all the flows it sends (in wall time: the workload's datacenter times x the
dilation); the block ends when every flow is recorded, a cchost fails, or its timeout passes.
"""

from __future__ import annotations

import json
import random
import time
from collections import defaultdict

from rich.progress import Progress

from ..hosts.cchost import ScheduledFlow, host_number, read_records, write_schedule
from ..model.config import (CREDIT_SCHEMES, ConvergenceWorkload, ExperimentConfig, PermutationWorkload,
                            RealisticWorkload, ShuffleWorkload, VictimWorkload)
from ..model.dilation import CREDITED_PAYLOAD_SHARE
from ..model.routing import PATH_IDS
from ..model.workloads import Flow, FlowSizeCdf, convergence, permutation, poisson_flows, shuffle, victim_flows
from .base import (AFTER_FAILURE_GRACE_S, BlockSpec, ExperimentRunner, HostFailure, LiveBlock, WorkloadNotRunnable,
                   stop_all)

FLOWS_KINDS = (RealisticWorkload, PermutationWorkload, ShuffleWorkload, ConvergenceWorkload, VictimWorkload)
# From the block's epoch to its first flow: 16 cchosts are started one after another meanwhile.
FIRST_FLOW_AFTER_S = 0.5
WATCH_S = 0.25  # how often the block counts finished flows
PROGRESS_EVERY_MS = 10  # wall: convergence samples each flow's delivered bytes this often


def _point(value: float, name: str) -> str:
    return f"{name}={value:g}"


class FlowsRunner(ExperimentRunner):
    def __init__(self, config: ExperimentConfig, *args, **kwargs):
        if not isinstance(config.workload, FLOWS_KINDS):
            raise WorkloadNotRunnable(f"{config.name}: not a realistic, permutation, shuffle or convergence workload")
        super().__init__(config, *args, **kwargs)
        self.workload = config.workload
        self.kind = self.workload.kind
        self.host_count = config.topology.counts().hosts

    def blocks(self) -> list[BlockSpec]:
        w = self.workload
        if isinstance(w, RealisticWorkload):
            return [BlockSpec(s, point=_point(load, "load")) for s in self.config.schemes for load in w.loads]
        if isinstance(w, ConvergenceWorkload):
            return [BlockSpec(s, point=_point(a, "alpha"), alpha=a) if s.scheme in CREDIT_SCHEMES else BlockSpec(s)
                    for s in self.config.schemes for a in (w.alphas if s.scheme in CREDIT_SCHEMES else [None])]
        return [BlockSpec(s) for s in self.config.schemes]

    def progress_total(self, spec: BlockSpec) -> int:
        w, hosts = self.workload, self.host_count
        if isinstance(w, RealisticWorkload):
            return w.flows
        if isinstance(w, ShuffleWorkload):
            return hosts * w.tasks_per_host * (hosts - 1)
        if isinstance(w, ConvergenceWorkload):
            return w.senders_of(spec.scheme.scheme)
        if isinstance(w, VictimWorkload):
            return len(self.victim_flows(self.config.link.rate_mbps * 1e6, random.Random(self._seed(spec))))
        return hosts

    def bottleneck_host(self, spec: BlockSpec) -> str | None:
        if isinstance(self.workload, VictimWorkload):
            return self.workload.hot_receiver
        return self.workload.receiver if isinstance(self.workload, ConvergenceWorkload) else None

    def manifest_extra(self) -> dict:
        if isinstance(self.workload, (RealisticWorkload, VictimWorkload)):
            return {"mean_flow_bytes": FlowSizeCdf.named(self.workload.cdf).mean()}
        return {}

    def _seed(self, spec: BlockSpec) -> str:
        return f"{self.config.seed}-{self.workload.kind}-{spec.point}"

    def victim_flows(self, link_bps: float, rng: random.Random) -> list[Flow]:
        w = self.workload
        return victim_flows(w.victim_senders, w.victim_receiver, w.congesting_senders, w.hot_receiver, w.bursters,
                            FlowSizeCdf.named(w.cdf), w.load, link_bps, w.flows, w.burst_bytes,
                            self.config.dilation.wall_s(w.burst_interval_us / 1e6), rng).all()

    def flows_of(self, live: LiveBlock) -> list[Flow]:
        """The block's flows, starts in wall seconds from the first; the same for every scheme (the
        seed and the block's point decide them)."""
        w, hosts = self.workload, live.hosts
        rng = random.Random(self._seed(live.spec))
        link_bps = live.config.link.rate_mbps * 1e6  # wall: inter-arrivals come out dilated
        if isinstance(w, RealisticWorkload):
            load = w.host_link_load(float(live.spec.point.split("=")[1]), self.config.topology.counts(),
                                    self.config.link.fabric_share)
            return poisson_flows(hosts, FlowSizeCdf.named(w.cdf), load, link_bps, w.flows, rng)
        if isinstance(w, PermutationWorkload):
            return permutation(hosts, w.size_bytes, rng)
        if isinstance(w, ShuffleWorkload):
            return shuffle(hosts, w.tasks_per_host, w.size_bytes)
        if isinstance(w, VictimWorkload):
            return self.victim_flows(link_bps, rng)
        senders = self.convergence_senders(live)
        rtt = max(live.base_rtt_s(src, w.receiver) for src in senders)
        interval = w.interval_rtts_of(live.spec.scheme.scheme) * rtt
        return convergence(w.receiver, senders, interval, link_bps / 8 * CREDITED_PAYLOAD_SHARE)

    def convergence_senders(self, live: LiveBlock) -> list[str]:
        """Senders as far from the receiver as any host (on a fat-tree: other pods), spread over
        them: every flow has the same base RTT (a flow with a shorter one updates its rate more
        often and takes more than its share, which is not what the figure shows), and the flows
        share only the receiver's link."""
        w = self.workload
        others = [h for h in live.hosts if h != w.receiver]
        farthest = max(len(live.net.routing.path(h, w.receiver, 0)) for h in others)
        far = [h for h in others if len(live.net.routing.path(h, w.receiver, 0)) == farthest]
        scheme = live.spec.scheme.scheme
        wanted = w.senders_of(scheme)
        if wanted > len(far):
            key = f"per_scheme.{scheme}.senders" if scheme in w.per_scheme else "senders"
            raise WorkloadNotRunnable(f"{self.config.name}: workload.{key}: {wanted} senders at the same distance "
                                      f"from {w.receiver} need that many hosts (the topology has {len(far)})")
        step = len(far) / wanted
        return [far[int(i * step)] for i in range(wanted)]

    def run_traffic(self, live: LiveBlock, progress: Progress, task) -> list[HostFailure]:
        spec, w = live.spec, self.workload
        flows = self.flows_of(live)
        first = live.now_s() + FIRST_FLOW_AFTER_S
        by_src: dict[str, list[ScheduledFlow]] = defaultdict(list)
        for i, flow in enumerate(flows, start=1):
            by_src[flow.src].append(ScheduledFlow(
                id=i, dst=host_number(flow.dst), size=flow.size, start=round(first + flow.start, 6),
                paths=min(live.net.routing.n_paths(flow.src, flow.dst), PATH_IDS)))
        last_start = first + max(f.start for f in flows)
        duration = last_start + w.timeout_s + 5
        receivers = {f.dst for f in flows}
        procs = {}
        failures: list[HostFailure] = []
        deadline = time.monotonic() + (last_start - live.now_s()) + w.timeout_s
        done = 0
        try:
            for host in live.hosts:
                kwargs: dict = {"duration_s": duration}
                if host in by_src:
                    kwargs["schedule"] = write_schedule(live.workdir / f"{host}.flows", by_src[host])
                if isinstance(w, ConvergenceWorkload) and host in receivers:
                    kwargs["extra"] = ("--progress", str(live.workdir / f"{host}.progress"),
                                       "--progress-every-ms", str(PROGRESS_EVERY_MS))
                procs[host] = self.start_cchost(live, host, **kwargs)
            while time.monotonic() < deadline:
                time.sleep(WATCH_S)
                for host, proc in procs.items():
                    if proc.poll() is not None and host not in {f.host for f in failures}:
                        failures.append(self.failed(spec, 1, host, "host", proc, live.workdir / f"{host}.log"))
                        deadline = min(deadline, time.monotonic() + AFTER_FAILURE_GRACE_S)
                finished = sum(len(read_records(live.workdir / f"{h}.records")) for h in by_src)
                progress.advance(task, finished - done)
                done = finished
                wall = live.now_s() - first
                progress.update(task, description=f"{spec.label:24} {wall:5.1f} s wall, "
                                                  f"{live.config.dilation.datacenter_s(wall) * 1e3:.2f} ms dc")
                if done >= len(flows):
                    break
        finally:
            stop_all(procs.values())
        progress.advance(task, len(flows) - done)  # the bar ends full; unfinished flows are reported

        records = [dict(r, src_host=h) for h in by_src for r in read_records(live.workdir / f"{h}.records")]
        self.bundle.flows += [self.flow_row(live, record) for record in records]
        finished_ids = {(r["src_host"], r["id"]) for r in records}
        unfinished = [f"{src}#{f.id}" for src, fs in by_src.items() for f in fs if (src, f.id) not in finished_ids]
        end = max((r["end"] for r in records), default=first)
        sent = sum(r["size"] for r in records)
        self.bundle.rounds.append({
            "scheme": spec.scheme.scheme, "n": spec.n, "point": spec.point, "round": 1, "flows": len(flows),
            "finished": len(records), "bytes": sent, "duration": round(end - first, 6),
            "goodput_bps": round(sent * 8 / (end - first)) if end > first else 0, "unfinished": " ".join(unfinished),
            "failures": "; ".join(str(f) for f in failures),
        })
        if unfinished:
            self.console.print(f"[red]{spec.label}: {len(unfinished)} of {len(flows)} flows never finished: "
                               f"{' '.join(unfinished[:10])}{' ...' if len(unfinished) > 10 else ''}[/red]")
        if isinstance(w, ConvergenceWorkload):
            self._record_timeline(live, receivers)
        return failures

    def _record_timeline(self, live: LiveBlock, receivers: set[str]) -> None:
        """Each received flow's delivered bytes over time (t: seconds after the epoch, as flows.csv)."""
        for host in sorted(receivers):
            path = live.workdir / f"{host}.progress"
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                if line.strip():
                    sample = json.loads(line)
                    self.bundle.timeline.append({"scheme": live.spec.scheme.scheme, "point": live.spec.point,
                                                 "t": sample["t"], "src": f"h{sample['src']}",
                                                 "id": sample["id"], "bytes": sample["bytes"]})
