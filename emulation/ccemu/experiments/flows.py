"""The traffic of the kinds whose flows are all known before they start (kinds.ScheduledKind:
realistic, permutation, shuffle, convergence, victim). Every host's cchost is a server for the whole
block with a schedule of all the flows it sends (in wall time: the workload's datacenter times x the
dilation); the block ends when every flow is recorded, a cchost fails, or its timeout passes.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict

from rich.progress import Progress

from ..programs.cchost import ScheduledFlow, stop_all, write_schedule
from ..model.names import host_number
from ..results.records import read_records
from ..model.routing import PATH_IDS
from ..results.rows import RoundRow
from .base import AFTER_FAILURE_GRACE_S, ExperimentRunner, HostFailure, LiveBlock

# From the block's epoch to its first flow: 16 cchosts are started one after another meanwhile.
FIRST_FLOW_AFTER_S = 0.5
WATCH_S = 0.25  # how often the block counts finished flows


class FlowsRunner(ExperimentRunner):
    """Runs a ScheduledKind's blocks: the kind says the flows, this sends them."""

    def run_traffic(self, live: LiveBlock, progress: Progress, task) -> list[HostFailure]:
        spec, w = live.spec, live.config.workload
        flows = self.kind.flows(self, live, random.Random(self.kind.seed(self.config, spec)))
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
                if host in receivers and (extra := self.kind.receiver_args(live, host)):
                    kwargs["extra"] = extra
                procs[host] = self.start_cchost(live, host, **kwargs)
            while time.monotonic() < deadline:
                time.sleep(WATCH_S)
                fault = self.check(live)  # first: a full disk or a dead switch daemon also fails cchosts
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
                if done >= len(flows) or fault is not None:
                    break
        finally:
            stop_all(procs.values())
        progress.advance(task, len(flows) - done)  # the bar ends full; unfinished flows are reported

        records = [dict(r, src_host=h) for h in by_src for r in read_records(live.workdir / f"{h}.records")]
        self.bundle.add(*(self.flow_row(live, record) for record in records))
        finished_ids = {(r["src_host"], r["id"]) for r in records}
        unfinished = [f"{src}#{f.id}" for src, fs in by_src.items() for f in fs if (src, f.id) not in finished_ids]
        end = max((r["end"] for r in records), default=first)
        self.bundle.add(RoundRow.of(spec.key, 1, len(flows), records, end - first, unfinished, failures))
        if unfinished:
            self.console.print(f"[red]{spec.label}: {len(unfinished)} of {len(flows)} flows never finished: "
                               f"{' '.join(unfinished[:10])}{' ...' if len(unfinished) > 10 else ''}[/red]")
        self.kind.after_traffic(self, live, receivers)
        return failures
