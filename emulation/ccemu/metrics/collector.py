"""Live metrics of a running experiment for Prometheus, served on 127.0.0.1 only.

Everything is read at scrape time from where it already is: the port programs' pinned maps
of the fabric up now (queues, drops, marks, exact queue histograms), cchost's counters and
flow records in the bundle's work directory, and /proc/stat for the fidelity gauges. The
runner tells the collector which fabric, scheme, N and round are current.

Names follow Prometheus conventions: `ccemu_` prefix, base units (bytes, seconds), `_total`
for counters. Datacenter time: a duration a packet, flow, pause or timer saw (a gauge or a
histogram's buckets) is in datacenter seconds, divided here by the block's dilation; counters
count over wall time, the only clock Prometheus has, so the rate of one is per wall second and
the dashboards multiply it by `ccemu_block_dilation` (a share, such as paused seconds per second,
needs no scaling). Everything is labelled with the block it belongs to, so each block's own d
applies. Labels: experiment, scheme, n (incast flows; 0 for other kinds), point (the block's
sweep value of the other kinds, e.g. load=0.5), node (namespace), switch, port, class
(data/credit), host, bucket (flow size), src and flow (one flow of a throughput timeline).
Docker hosts add their containers' cgroup figures (CPU used and throttled, memory) per host.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import start_http_server
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from ..containers.cgroups import read_figures
from ..results import fidelity
from ..results.bundle import BlockKey
from ..results.records import counters_under, read_records
from ..ports.histograms import SUB_BUCKETS, queue_bucket_bounds, residence_bucket_bounds
from ..ports.maps import PortMaps
from ..ports.stats import pause_bucket_bounds_s
from ..model.dilation import DATA_WIRE_BYTES
from ..results.stats import size_bucket

# Datacenter seconds: from a 10 us flow to a few of seed 002's 200 ms timeouts.
FCT_BUCKETS_S = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
SLOWDOWN_BUCKETS = (1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0)
# Formatting samples is most of a scrape's cost (~20 us each): the port programs' queue histograms
# (four buckets per doubling) are exported one bucket per doubling, and only for ports whose queue
# ever held more than two full frames (the others say nothing a quantile would use).
HISTOGRAM_MIN_QUEUE_BYTES = 2 * DATA_WIRE_BYTES


@dataclass
class Block:
    """What the collector reads now: the block's fabric (its ports' figures, read() and frame_ns:
    a FabricNet's port maps, or every machine's of a fabric over several: fabric/net.py and
    machines/fabric.py live_ports; its Docker hosts), its cchosts' files (its work directory),
    named by its key as everywhere."""

    key: BlockKey
    ports: object  # read() -> list[PortStats], frame_ns, close()
    workdir: Path
    dilation: float = 1.0  # the block's d: wall time / datacenter time
    # A flow record's ideal FCT in seconds (model/dilation.py ideal_fct_s),
    # for the slowdown histogram; None: no slowdowns.
    ideal_fct: Callable[[dict], float] | None = None
    containers: dict[str, dict] = field(default_factory=dict)  # Docker hosts: host -> Container.as_json()
    # (steal, busy) shares of CPU time since the block began (None when it cannot be read now); unset:
    # this machine's, from cpu_start.
    cpu_shares: Callable[[], tuple[float, float] | None] | None = None
    round: int = 0
    cpu_start: fidelity.CpuTimes = field(default_factory=fidelity.CpuTimes.now)

    def labels(self, experiment: str) -> dict[str, str]:
        """The labels of every metric of the block: the experiment's, and the key's columns as the
        tables have them (n: 0 for a kind without N; point: "" for none)."""
        return {"experiment": experiment, **{name: str(value) for name, value in self.key.columns().items()}}


class ExperimentCollector(Collector):
    def __init__(self, experiment: str):
        self.experiment = experiment
        self._lock = threading.Lock()
        self._block: Block | None = None
        self._containers: dict[str, dict] = {}  # Docker hosts of the block: host -> Container.as_json()
        self._maps: PortMaps | None = None
        self._records: list[dict] = []  # finished flows of earlier blocks (their FCT stays)
        self._read: dict[Path, tuple[float, list[dict]]] = {}  # records file -> (mtime, records)
        # What scrapes cost: CPU seconds of the scraping thread from the first metric to the
        # last (formatting happens in between, as the exposition pulls each family).
        self.scrapes = 0
        self.scrape_cpu_seconds = 0.0

    def attach(self, block: Block) -> None:
        with self._lock:
            self._block = block
            self._maps = block.ports
            self._containers = block.containers

    def set_round(self, round_number: int) -> None:
        with self._lock:
            if self._block:
                self._block.round = round_number

    def detach(self) -> None:
        """Before the fabric goes: its maps close; the block's finished flows are kept."""
        with self._lock:
            if self._block:
                self._records += self._flow_records(self._block)
            if self._maps:
                self._maps.close()
            self._block, self._maps, self._containers = None, None, {}

    def _flow_records(self, block: Block) -> list[dict]:
        """Every finished flow of the block (records are per host, in the block's work directory
        or, for a round's own processes, its round's)."""
        records = []
        for path in sorted([*block.workdir.glob("*.records"), *block.workdir.glob("round*/*.records")]):
            mtime = path.stat().st_mtime
            if self._read.get(path, (None,))[0] != mtime:
                # fct in datacenter seconds, as every figure of the bundle.
                rows = [dict(r, **block.key.columns(), fct_dc=r["fct"] / block.dilation) for r in read_records(path)]
                if block.ideal_fct:
                    for r in rows:
                        ideal = block.ideal_fct(r)
                        r["slowdown"] = r["fct"] / ideal if ideal > 0 else None
                self._read[path] = (mtime, rows)
            records += self._read[path][1]
        return records

    def collect(self):
        started = time.thread_time()
        with self._lock:
            yield from self._collect()
            cost = CounterMetricFamily("ccemu_collector_scrape_cpu_seconds", "CPU time spent serving scrapes",
                                       labels=["experiment"])
            cost.add_metric([self.experiment], self.scrape_cpu_seconds)
            yield cost
            self.scrapes += 1
            self.scrape_cpu_seconds += time.thread_time() - started

    def _collect(self):
        block, maps = self._block, self._maps
        records = self._records + (self._flow_records(block) if block else [])
        yield from self._flows(records)
        if block is None or maps is None:
            return
        base = block.labels(self.experiment)
        yield from self._ports(maps, base, block.dilation)
        yield from self._hosts(block, base)
        yield from self._containers_of(base)
        yield from self._progress(block, base)
        yield from self._fidelity(block, base)

    def _ports(self, maps: PortMaps, base: dict, dilation: float):
        labels = [*base, "switch", "port", "class"]
        queue = GaugeMetricFamily("ccemu_port_queue_bytes", "Bytes queued at the port now (measured: admitted "
                                  "minus arrived at the peer)", labels=labels)
        lag = GaugeMetricFamily("ccemu_port_lag_bytes", "Mean distance of the real queue from an ideal port's, "
                                "over every enqueue so far", labels=labels)
        enqueued = CounterMetricFamily("ccemu_port_enqueued_packets", "Packets admitted to the queue", labels=labels)
        dropped = CounterMetricFamily("ccemu_port_dropped_packets", "Packets tail-dropped", labels=labels)
        marked = CounterMetricFamily("ccemu_port_marked_packets", "Packets CE-marked", labels=labels)
        sent_bytes = CounterMetricFamily("ccemu_port_enqueued_bytes", "Wire bytes admitted", labels=labels)
        area = CounterMetricFamily("ccemu_port_queue_area_byte_seconds", "The queue's integral over (wall) time, "
                                   "exact: its rate over an interval is the time-average queue in bytes", labels=labels)
        histogram = HistogramMetricFamily("ccemu_port_queue_length_bytes", "Queue each admitted frame joined, itself "
                                          "included (the port program's histogram: buckets per doubling; the sum "
                                          "is exact)", labels=labels)
        ports = maps.read()
        for port in ports:
            for cls, stats, now in (("data", port.data, port.queue_bytes[0]), ("credit", port.credit,
                                                                                port.queue_bytes[1])):
                if cls == "credit" and not port.config.credit_rate_Bps:
                    continue
                values = [*base.values(), port.port.split("-")[0], port.port, cls]
                queue.add_metric(values, now)
                lag.add_metric(values, stats.mean_lag_bytes)
                enqueued.add_metric(values, stats.enqueued_packets)
                dropped.add_metric(values, stats.dropped_packets)
                marked.add_metric(values, stats.marked_packets)
                sent_bytes.add_metric(values, stats.enqueued_bytes)
                area.add_metric(values, stats.queue_area_byte_s)
                if stats.max_queue_bytes > HISTOGRAM_MIN_QUEUE_BYTES:
                    histogram.add_metric(values, _per_doubling(stats.histogram, queue_bucket_bounds, 1.0),
                                         stats.queue_sum_bytes)
        yield from (queue, lag, enqueued, dropped, marked, sent_bytes, area, histogram)
        yield from self._switches(ports, maps.frame_ns, base, dilation)
        yield from self._lossless([p for p in ports if p.config.lossless], base, dilation)

    def _lossless(self, ports, base: dict, dilation: float):
        """PFC and TCD (lossless ports only): each port's pauses and UE marks, and what its
        ingress holds."""
        labels = [*base, "switch", "port"]
        ue = CounterMetricFamily("ccemu_port_ue_marked_packets", "Packets TCD marked UE (undetermined) at the port",
                                 labels=labels)
        pauses = CounterMetricFamily("ccemu_port_pause_events", "Times PFC paused the port", labels=labels)
        paused = CounterMetricFamily("ccemu_port_paused_seconds", "Time the port spent paused by PFC", labels=labels)
        held = GaugeMetricFamily("ccemu_port_held_bytes", "Bytes that came in through the port and still sit in its "
                                 "switch's egress queues (PFC pauses the port upstream above Xoff)", labels=labels)
        # Paused seconds stay wall: their rate is the share of the time paused.
        durations = HistogramMetricFamily("ccemu_port_pause_duration_seconds", "How long each of the port's ended "
                                          "pauses lasted (datacenter seconds)", labels=labels)
        for port in ports:
            values = [*base.values(), port.port.split("-")[0], port.port]
            ue.add_metric(values, port.data.ue_marked_packets)
            pauses.add_metric(values, port.pfc.pause_events)
            paused.add_metric(values, port.pfc.paused_s)
            held.add_metric(values, port.pfc.held_bytes)
            durations.add_metric(values, *_pause_buckets(port.pfc.pause_histogram, dilation))
        yield from (ue, pauses, paused, held, durations)

    def _switches(self, ports, frame_ns: float, base: dict, dilation: float):
        """Switch residence: per switch (every packet that crossed it), and the fabric's
        p50/p99 in frame times as the verdict computes them."""
        labels = [*base, "switch"]
        residence = HistogramMetricFamily("ccemu_switch_residence_seconds", "Time packets spent inside the switch "
                                          "between arriving at a port and reaching another port's queue (datacenter "
                                          "seconds)",
                                          labels=labels)
        untracked = CounterMetricFamily("ccemu_switch_residence_untracked_packets", "Packets that left a switch "
                                        "without an arrival on record (held longer than the map follows)",
                                        labels=labels)
        switches = fidelity.SwitchFigures.of(ports, frame_ns)
        for switch, merged in switches.by_switch.items():
            values = [*base.values(), switch]
            residence.add_metric(values, _per_doubling(merged.histogram, residence_bucket_bounds, 1e9 * dilation),
                                 merged.sum_ns / 1e9 / dilation)
            untracked.add_metric(values, merged.untracked_packets)
        # "percentile", not "quantile": Prometheus keeps that label for summaries.
        frames = GaugeMetricFamily("ccemu_fidelity_switch_residence_frames", "Switch residence percentile over the "
                                   "fabric so far, in frame times at the link rate", labels=[*base, "percentile"])
        for percentile in (50, 99):
            frames.add_metric([*base.values(), str(percentile)], switches.residence_frames(percentile / 100))
        yield from (residence, untracked, frames)

    def _hosts(self, block: Block, base: dict):
        labels = [*base, "host"]
        received = CounterMetricFamily("ccemu_host_received_bytes", "Data payload bytes received by the host",
                                       labels=labels)
        credits = CounterMetricFamily("ccemu_host_credits_sent", "Credits the host sent", labels=labels)
        reached = CounterMetricFamily("ccemu_host_credits_received", "Credits that reached the host (as a sender)",
                                      labels=labels)
        wasted = CounterMetricFamily("ccemu_host_credits_wasted", "Credits the host received and could not use",
                                     labels=labels)
        lateness = GaugeMetricFamily("ccemu_host_timer_lateness_seconds", "Mean lateness of cchost's timers "
                                     "(credit pacing error; datacenter seconds)", labels=labels)
        totals: dict[str, dict[str, float]] = {}
        for host, c in counters_under(block.workdir):
            t = totals.setdefault(host, {"received": 0, "credits": 0, "reached": 0, "wasted": 0, "late": 0,
                                         "count": 0})
            t["received"] += c["data_bytes_received"]
            t["credits"] += c["credits_sent"]
            t["reached"] += c["received_packets"]["credit"]
            t["wasted"] += c["credits_wasted"]
            late = c["timer_lateness"]
            t["late"] += late["mean_us"] * late["count"]
            t["count"] += late["count"]
        for host, t in sorted(totals.items()):
            values = [*base.values(), host]
            received.add_metric(values, t["received"])
            credits.add_metric(values, t["credits"])
            reached.add_metric(values, t["reached"])
            wasted.add_metric(values, t["wasted"])
            lateness.add_metric(values, t["late"] / t["count"] / 1e6 / block.dilation if t["count"] else 0.0)
        yield from (received, credits, reached, wasted, lateness)

    def _containers_of(self, base: dict):
        """Docker hosts: what each container's cgroups counted (a host that hit its CPU limit shows
        as throttled periods beside its flows' goodput)."""
        labels = [*base, "host"]
        cpu = CounterMetricFamily("ccemu_host_cpu_seconds", "CPU time of the host's container", labels=labels)
        periods = CounterMetricFamily("ccemu_host_cpu_periods", "CFS periods the host's container ran in (with a CPU "
                                      "limit only)", labels=labels)
        throttled = CounterMetricFamily("ccemu_host_cpu_throttled_periods", "CFS periods in which the host's "
                                        "container used up its CPU quota and waited", labels=labels)
        throttled_time = CounterMetricFamily("ccemu_host_cpu_throttled_seconds", "Time the host's container waited "
                                             "for CPU quota", labels=labels)
        memory = GaugeMetricFamily("ccemu_host_memory_bytes", "Memory charged to the host's container",
                                   labels=labels)
        cpu_limit = GaugeMetricFamily("ccemu_host_cpu_limit_cores", "CPU limit of the host's container",
                                      labels=labels)
        memory_limit = GaugeMetricFamily("ccemu_host_memory_limit_bytes", "Memory limit of the host's container",
                                         labels=labels)
        for host, container in sorted(self._containers.items()):
            figures = read_figures(container["cgroups"])
            if figures is None:
                continue  # removed: the block is ending
            values = [*base.values(), host]
            cpu.add_metric(values, figures.cpu_seconds)
            periods.add_metric(values, figures.periods)
            throttled.add_metric(values, figures.throttled_periods)
            throttled_time.add_metric(values, figures.throttled_seconds)
            memory.add_metric(values, figures.memory_bytes)
            if container["cpus"]:
                cpu_limit.add_metric(values, container["cpus"])
            if container["memory_mb"]:
                memory_limit.add_metric(values, container["memory_mb"] << 20)
        yield from (cpu, periods, throttled, throttled_time, memory, cpu_limit, memory_limit)

    def _flows(self, records: list[dict]):
        labels = ["experiment", "scheme", "n", "point", "bucket"]
        fct = HistogramMetricFamily("ccemu_flow_completion_seconds", "Flow completion times (datacenter seconds)",
                                    labels=labels)
        slowdown = HistogramMetricFamily("ccemu_flow_slowdown", "FCT / ideal FCT (half the pair's base RTT plus the "
                                         "flow's bytes at the link rate): dilation-free", labels=labels)
        completed = CounterMetricFamily("ccemu_flows_completed", "Flows finished", labels=labels)
        retransmits = CounterMetricFamily("ccemu_flow_retransmits", "Data packets sent again", labels=labels)
        grouped: dict[tuple, list[dict]] = {}
        for r in records:
            grouped.setdefault((r["scheme"], str(r["n"]), r.get("point", ""), size_bucket(r["size"])), []).append(r)
        for (scheme, n, point, bucket), rows in sorted(grouped.items()):
            values = [self.experiment, scheme, n, point, bucket]
            fcts = [r["fct_dc"] for r in rows]
            fct.add_metric(values, _cumulative(fcts, FCT_BUCKETS_S), sum_value=sum(fcts))
            slowdowns = [r["slowdown"] for r in rows if r.get("slowdown") is not None]
            if slowdowns:
                slowdown.add_metric(values, _cumulative(slowdowns, SLOWDOWN_BUCKETS), sum_value=sum(slowdowns))
            completed.add_metric(values, len(rows))
            retransmits.add_metric(values, sum(r["retransmits"] for r in rows))
        yield from (fct, slowdown, completed, retransmits)

    def _progress(self, block: Block, base: dict):
        """Bytes each flow of a throughput timeline has delivered (cchost --progress files): the
        last sample per flow."""
        delivered = CounterMetricFamily("ccemu_flow_received_bytes", "Payload bytes a flow has delivered to its "
                                        "receiver (convergence timelines)", labels=[*base, "src", "flow"])
        for path in sorted(block.workdir.glob("*.progress")):
            last: dict[tuple[str, str], int] = {}
            try:
                for line in path.read_text().splitlines():
                    if line.strip():
                        sample = json.loads(line)
                        last[(f"h{sample['src']}", str(sample["id"]))] = sample["bytes"]
            except (OSError, ValueError):
                continue  # a line being written: the next scrape gets it
            for (src, flow), value in sorted(last.items()):
                delivered.add_metric([*base.values(), src, flow], value)
        yield delivered

    def _fidelity(self, block: Block, base: dict):
        shares = block.cpu_shares() if block.cpu_shares else fidelity.CpuTimes.now().since(block.cpu_start)
        steal, busy = shares if shares is not None else (float("nan"), float("nan"))
        labels = list(base)
        for name, doc, value in (("ccemu_fidelity_steal_ratio", "Hypervisor steal share of CPU time", steal),
                                 ("ccemu_fidelity_cpu_busy_ratio", "Busy share of CPU time", busy),
                                 ("ccemu_incast_round", "Incast round running now", block.round),
                                 # What the dashboards multiply a rate by (per wall second -> per
                                 # datacenter second); present while the block runs, so a region of it
                                 # marks the block on the time axis.
                                 ("ccemu_block_dilation", "The block's dilation d: its links run at the "
                                  "datacenter's rate / d, its times are d x the datacenter's", block.dilation)):
            gauge = GaugeMetricFamily(name, doc + " (this block)", labels=labels)
            gauge.add_metric(list(base.values()), value)
            yield gauge


def _cumulative(values: list[float], bounds: tuple[float, ...]) -> list[tuple[str, int]]:
    return [(str(b), sum(1 for v in values if v <= b)) for b in bounds] + [("+Inf", len(values))]


def _per_doubling(counts, bounds, per_unit: float) -> list[tuple[str, int]]:
    """Cumulative Prometheus buckets of a log-linear histogram of the port programs, one per doubling
    (its SUB_BUCKETS per doubling merged), upper bounds by `bounds(bucket)` / `per_unit`."""
    cumulative, buckets = 0, []
    for i, count in enumerate(counts):
        cumulative += count
        if i % SUB_BUCKETS == 0:  # bucket 0, then the last of every doubling
            buckets.append((repr(bounds(i)[1] / per_unit), cumulative))
    buckets[-1] = ("+Inf", cumulative)
    return buckets


def _pause_buckets(histogram: tuple[int, ...], dilation: float) -> tuple[list[tuple[str, int]], float]:
    """Cumulative Prometheus buckets in datacenter seconds (the program's, one per doubling, / d)
    and the sum (bucket midpoints: the program keeps no sum)."""
    cumulative, buckets, total = 0, [], 0.0
    for i, count in enumerate(histogram):
        cumulative += count
        low, high = (bound / dilation for bound in pause_bucket_bounds_s(i))
        total += (low + high) / 2 * count
        buckets.append((repr(high), cumulative))
    buckets[-1] = ("+Inf", cumulative)
    return buckets, total


class MetricsServer:
    """The collector behind an HTTP endpoint on 127.0.0.1 (port 0: any free one)."""

    def __init__(self, collector: ExperimentCollector, port: int = 0):
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.server, self.thread = start_http_server(port, addr="127.0.0.1", registry=self.registry)

    @property
    def port(self) -> int:
        return self.server.server_port

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
