"""Incast (the DCTCP+ paper's setup): for each scheme and N, rounds in which N senders answer one
aggregator with total_bytes / N each, the next round as soon as the last response is in.

Every host's cchost lives for the whole block; each round's flows reach the senders on their
standard input. A cchost that exits abnormally is noticed when it happens: it is named with its
exit status, its round ends soon after (the block's later rounds run without it), and the verdict
says so.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable

from rich.progress import Progress

from ..programs.cchost import ScheduledFlow, stop_all, write_schedule
from ..model.names import host_number
from ..results.records import read_records
from ..model.config import IncastWorkload
from ..model.dilation import DATA_WIRE_BYTES, PAYLOAD_BYTES
from ..model.routing import PATH_IDS, Routing
from ..model.workloads import Flow, incast_connections, incast_round
from ..results.rows import RoundRow
from .base import AFTER_FAILURE_GRACE_S, POLL_S, START_DELAY_S, BlockSpec, ExperimentRunner, HostFailure, LiveBlock


def incast_schedule(routing: Routing, hosts: list[str], workload: IncastWorkload, n: int, rng: random.Random,
                    start: float, first_id: int) -> list[tuple[str, ScheduledFlow]]:
    """One incast round's flows as (sender, scheduled flow), each with the number of
    equal-cost paths between its hosts (what SprayPass receivers spray credits over; at most
    PATH_IDS, all a path-id can name)."""
    return [scheduled(routing, flow, i, start)
            for i, flow in enumerate(incast_round(hosts, workload.aggregator, n, workload.total_bytes, rng),
                                     start=first_id)]


def scheduled(routing: Routing, flow: Flow, flow_id: int, start: float) -> tuple[str, ScheduledFlow]:
    return flow.src, ScheduledFlow(id=flow_id, dst=host_number(flow.dst), size=flow.size, start=start,
                                   paths=min(routing.n_paths(flow.src, flow.dst), PATH_IDS))


def warm_up_schedule(routing: Routing, hosts: list[str], aggregator: str, n: int, link_bps: float,
                     rtt_s: Callable[[str], float], start: float, first_id: int) -> list[tuple[str, ScheduledFlow]]:
    """The connections a block of N keeps, opened before its first round: every sender sends as
    many one-packet responses as it carries in a round, all at once, and the next sender starts
    once those have crossed the aggregator's link and been acknowledged (`rtt_s(sender)`, wall
    seconds), so that the warm-up is no incast itself."""
    per_sender = incast_connections(hosts, aggregator, n)
    flows: list[tuple[str, ScheduledFlow]] = []
    for sender in (h for h in hosts if h != aggregator):
        flows += [scheduled(routing, Flow(sender, aggregator, PAYLOAD_BYTES), first_id + len(flows) + i, start)
                  for i in range(per_sender)]
        start += per_sender * DATA_WIRE_BYTES * 8 / link_bps + 2 * rtt_s(sender)
    return flows


class IncastRunner(ExperimentRunner):
    """Runs incast's blocks (kinds/incast.py says which): rounds of flows to one aggregator."""

    @property
    def workload(self) -> IncastWorkload:
        return self.config.workload

    def run_traffic(self, live: LiveBlock, progress: Progress, task) -> list[HostFailure]:
        """Every host's cchost lives for the whole block: the aggregator receives, the senders
        get each round's flows on their standard input (--schedule-stdin), so that successive
        responses to one aggregator go over persistent connections (their congestion state
        carries over, as the DCTCP+ paper's incast application keeps its connections)."""
        spec, aggregator, rounds = live.spec, self.workload.aggregator, self.workload.rounds
        procs: dict[str, subprocess.Popen] = {}
        failures: list[HostFailure] = []
        try:
            procs[aggregator] = self.start_cchost(live, aggregator, duration_s=24 * 3600)
            for host in live.hosts:
                if host != aggregator:
                    procs[host] = self.start_cchost(live, host, stdin=subprocess.PIPE, duration_s=24 * 3600,
                                                    extra=("--schedule-stdin",))
            if self.workload.warm_up and self.config.transport.persistent_connections:
                progress.update(task, description=f"{spec.label:24} warm-up")
                failures += self._warm_up(live, procs)
            for round_number in range(1, rounds + 1):
                if live.fault is not None:  # the emulation failed under the block: no round can run on it
                    self._not_run(spec, range(round_number, rounds + 1), live.fault.what)
                    progress.advance(task, rounds - round_number + 1)
                    break
                progress.update(task, description=f"{spec.label:24} round {round_number}")
                self.monitoring.set_round(round_number)
                failures += self._run_round(live, round_number, procs, failures)
                progress.advance(task)
                receiver = procs[aggregator]
                if receiver.poll() is not None:  # no aggregator: the block's other rounds cannot run
                    if aggregator not in {f.host for f in failures}:
                        failures.append(self.failed(spec, round_number, aggregator, "aggregator", receiver,
                                                    live.workdir / f"{aggregator}.log"))
                    self._not_run(spec, range(round_number + 1, rounds + 1), "no aggregator")
                    progress.advance(task, rounds - round_number)
                    break
        finally:
            stop_all(procs.values())
        return failures

    def _warm_up(self, live: LiveBlock, procs: dict[str, subprocess.Popen]) -> list[HostFailure]:
        """Opens the block's connections (warm_up_schedule) and waits for them; their flows stay
        out of the bundle's flows and rounds (round 0 in the collector's and the failures' terms)."""
        spec, aggregator = live.spec, self.workload.aggregator
        self.monitoring.set_round(0)
        began = time.monotonic()
        flows = warm_up_schedule(live.net.routing, live.hosts, aggregator, spec.key.n, self.config.link.rate_mbps * 1e6,
                                 lambda sender: live.base_rtt_s(sender, aggregator), live.now_s() + START_DELAY_S,
                                 first_id=self.workload.rounds * spec.key.n + 1)
        self._send(live, procs, flows, "warm-up", dead=set())
        failures, records = self._watch_round(live, procs, 0, {src for src, _ in flows},
                                              {(src, flow.id) for src, flow in flows}, dead=set())
        missing = len(flows) - len(records)
        if missing:
            self.console.print(f"[red]{spec.label} warm-up: {missing} of {len(flows)} one-packet responses not done "
                               f"within {self.workload.round_timeout_s} s; round 1 opens those connections[/red]")
        else:  # (credit schemes keep no state between flows: for them it is only an exchange)
            self.console.print(f"{spec.label} warm-up: {len(flows)} one-packet responses, the connections a round "
                               f"uses, in {time.monotonic() - began:.1f} s")
        return failures

    def _send(self, live: LiveBlock, procs: dict[str, subprocess.Popen], flows: list[tuple[str, ScheduledFlow]],
              name: str, dead: set[str]) -> None:
        """Each sender's flows down its cchost's standard input (and into the bundle's NAME-SENDER.flows)."""
        by_sender: dict[str, list[ScheduledFlow]] = defaultdict(list)
        for src, flow in flows:
            by_sender[src].append(flow)
        for src, src_flows in by_sender.items():
            write_schedule(live.workdir / f"{name}-{src}.flows", src_flows)  # kept for the bundle
            if src in dead:
                continue
            try:
                procs[src].stdin.write("".join(flow.line() + "\n" for flow in src_flows).encode())
                procs[src].stdin.flush()
            except BrokenPipeError:
                pass  # it died: _watch_round names it

    def _run_round(self, live: LiveBlock, round_number: int, procs: dict[str, subprocess.Popen],
                   failed_before: list[HostFailure]) -> list[HostFailure]:
        """One round; returns the cchosts that failed in it. Every cchost counts from the block's
        epoch (a sender's record ends when the aggregator acknowledged its last byte)."""
        spec, n = live.spec, live.spec.key.n
        # The same flows for every scheme: the seed, N and the round decide them.
        rng = random.Random(f"{self.config.seed}-{n}-{round_number}")
        start = live.now_s() + START_DELAY_S
        # Flow ids stay unique for the block (a cchost refuses an id it was given before).
        first_id = (round_number - 1) * n + 1
        flows = incast_schedule(live.net.routing, live.hosts, self.workload, n, rng, start, first_id)
        dead = {f.host for f in failed_before}
        self._send(live, procs, flows, f"round{round_number}", dead)
        ids = {(src, flow.id) for src, flow in flows}
        failures, records = self._watch_round(live, procs, round_number, {src for src, _ in flows}, ids, dead)
        self.bundle.add(*(self.flow_row(live, record, round_number) for record in records))
        finished = {(r["src_host"], r["id"]) for r in records}
        unfinished = [f"{src}#{flow.id}" for src, flow in flows if (src, flow.id) not in finished]
        duration = max((r["end"] for r in records), default=0) - start if not unfinished else 0.0
        self.bundle.add(RoundRow.of(spec.key, round_number, len(flows), records, duration, unfinished, failures))
        if unfinished:
            why = ("the block ended" if live.fault is not None
                   else f"the round ended {AFTER_FAILURE_GRACE_S:g} s after a cchost failed" if failures or dead
                   else f"within {self.workload.round_timeout_s} s")
            self.console.print(f"[red]{spec.label} round {round_number}: {len(unfinished)} flows never "
                               f"finished ({why}): {' '.join(unfinished[:10])}"
                               f"{' ...' if len(unfinished) > 10 else ''}[/red]")
        return failures

    def _watch_round(self, live: LiveBlock, procs: dict[str, subprocess.Popen], round_number: int,
                     senders: set[str], ids: set[tuple[str, int]], dead: set[str]) -> tuple[list[HostFailure], list]:
        """Wait for the round's flows to be recorded, the round to time out, or a cchost to fail
        (reported the moment it is seen). Returns the new failures and the round's records."""
        deadline = time.monotonic() + START_DELAY_S + self.workload.round_timeout_s
        if dead & senders:
            deadline = min(deadline, time.monotonic() + AFTER_FAILURE_GRACE_S)
        failures: list[HostFailure] = []
        aggregator, spec = self.workload.aggregator, live.spec
        records: list[dict] = []
        while True:
            records = [dict(r, src_host=src) for src in senders
                       for r in read_records(live.workdir / f"{src}.records") if (src, r["id"]) in ids]
            if len(records) >= len(ids) or time.monotonic() >= deadline:
                break
            # The emulation first: a full disk or a dead switch daemon also fails cchosts, and is the
            # cause to name.
            fault = self.check(live)
            for host, proc in procs.items():
                if proc.poll() is not None and host not in dead | {f.host for f in failures}:
                    role = "aggregator" if host == aggregator else "sender"
                    failures.append(self.failed(spec, round_number, host, role, proc, live.workdir / f"{host}.log"))
                    deadline = min(deadline, time.monotonic() + AFTER_FAILURE_GRACE_S)
            if procs[aggregator].poll() is not None or fault is not None:
                break  # nothing can finish without it, or without the fabric
            time.sleep(POLL_S)
        return failures, records

    def _not_run(self, spec: BlockSpec, rounds: range, why: str) -> None:
        """Rounds a failure left no way to run: their flows count as unfinished."""
        for round_number in rounds:
            self.bundle.add(RoundRow.not_run(spec.key, round_number, spec.key.n, why))
