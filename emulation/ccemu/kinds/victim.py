"""Victim flows (TCD, seed 004 5.1.3): victim senders' flows cross only ports PFC pauses for a hot
receiver that bursters congest. One block per scheme; its bottleneck: the hot receiver's link."""

from __future__ import annotations

import random

from ..model.config import ExperimentConfig, VictimWorkload
from ..model.workloads import Flow, FlowSizeCdf, victim_flows
from ..results import figures
from ..results.figures import Tables
from ..results.markdown import table
from .kind import Headline, ScheduledKind


class Victim(ScheduledKind):
    name = "victim"
    workload = VictimWorkload

    def progress_total(self, config: ExperimentConfig, block) -> int:
        return len(self.victim_flows(config, config.link.rate_mbps * 1e6, random.Random(self.seed(config, block))))

    def bottleneck_host(self, config: ExperimentConfig) -> str:
        return config.workload.hot_receiver

    def manifest_extra(self, config: ExperimentConfig) -> dict:
        return {"mean_flow_bytes": FlowSizeCdf.named(config.workload.cdf).mean()}

    @staticmethod
    def victim_flows(config: ExperimentConfig, link_bps: float, rng: random.Random) -> list[Flow]:
        w = config.workload
        return victim_flows(w.victim_senders, w.victim_receiver, w.congesting_senders, w.hot_receiver, w.bursters,
                            FlowSizeCdf.named(w.cdf), w.load, link_bps, w.flows, w.burst_bytes,
                            config.dilation.wall_s(w.burst_interval_us / 1e6), rng,
                            FlowSizeCdf.named(w.burst_cdf) if w.burst_cdf else None,
                            w.burst_rounds == "exponential").all()

    def flows(self, runner, live, rng: random.Random) -> list[Flow]:
        return self.victim_flows(runner.config, live.config.link.rate_mbps * 1e6, rng)

    def summary_lines(self, tables: Tables) -> list[str]:
        return _victim_lines(tables)

    def headline(self, tables: Tables) -> Headline:
        """TCD's Table 3 and Fig. 15(a): the share of victim flows taken for congested, and what they suffered."""
        by_scheme = {}
        for scheme in tables.schemes():
            v = figures.optional(lambda: figures.victims(tables, scheme))
            by_scheme[scheme] = f"{v.ce_fraction:.0%} ({v.mean_slowdown:.2f})" if v else "-"
        return Headline("Victim flows marked CE, taken for congested (the victims' mean FCT slowdown)", by_scheme)

    def points_text(self, tables: Tables) -> str:
        load = tables.config_value("workload.load")
        bursters = tables.config_value("workload.bursters") or []
        return ", ".join(part for part in (f"load {load:g}" if load is not None else "",
                                           f"{len(bursters)} bursters" if bursters else "") if part)


def _victim_lines(tables: Tables) -> list[str]:
    d = tables.dilation
    cells = []
    for scheme in tables.schemes():
        v = figures.optional(lambda: figures.victims(tables, scheme))
        ports = tables.ports_of(scheme)
        pauses = sum(int(p.get("pause_events") or 0) for p in ports)
        paused = sum(float(p.get("paused_s") or 0) for p in ports)
        drops = sum(int(p["data_dropped"]) for p in ports)
        fabric = [str(pauses), f"{paused / d * 1e3:.3f}", str(drops)]
        if v is None:
            cells.append([scheme, "0", str(tables.unfinished(scheme)), "-", "-", "-", "-", "-", *fabric])
            continue
        low, high = v.ce_interval
        cells.append([scheme, str(v.flows), str(tables.unfinished(scheme)),
                      f"{v.ce_marked} ({v.ce_fraction:.1%}; 95 %: {low:.1%} to {high:.1%})",
                      f"{v.ue_marked} ({v.ue_marked / v.flows:.1%})", f"{1e3 * v.mean_fct_s:.3f}",
                      f"{v.mean_slowdown:.2f}", f"{v.p99_slowdown:.2f}", *fabric])
    # Two tables: the victims, then what PFC did to the whole fabric.
    lines = ["## Victim flows (TCD, seed 004 Table 3): flows that cross only paused ports", "",
             *table(["scheme", "victim flows", "unfinished (all flows)", "marked CE", "marked UE", "mean FCT ms",
                     "slowdown mean", "p99", "pauses", "paused ms", "drops"], cells, breaks=("pauses",))]
    lines += ["", "Marked CE: victim flows a CE-flagged CNP came back for (a packet of theirs was CE-marked on the "
              "way: taken for congested), with the share's 95 % interval (Wilson: how far this many victims pin "
              "it; the claims judge the share itself); UE: TCD's undetermined mark. FCT in datacenter ms; "
              "slowdown = FCT / ideal FCT. Pauses and paused time (datacenter) over every port; drops over every "
              "port (lossless: 0). The paper's shares are in the claims below.", ""]
    lines += _paused_ports_lines(tables)
    lines += _pause_agent_lines(tables)
    return lines


def _paused_ports_lines(tables: Tables) -> list[str]:
    """The ports PFC paused or that marked, per scheme: where congestion spread."""
    rows = [p for p in tables.ports if int(p.get("pause_events") or 0) or int(p["data_marked"])
            or int(p.get("data_ue_marked") or 0)]
    if not rows:
        return []
    d = tables.dilation
    cells = [[str(p["scheme"]), str(p["port"]), str(p.get("pause_events") or 0),
              f"{float(p.get('paused_s') or 0) / d * 1e3:.3f}", str(p["data_marked"]),
              str(p.get("data_ue_marked") or 0), f"{int(p['max_data_queue']) / 1e3:.1f}"] for p in rows]
    lines = ["### Pauses and marks per port", "",
             *table(["scheme", "port", "pauses", "paused ms", "CE marks", "UE marks", "max queue KB"], cells)]
    return lines + ["", "Pauses of each port (by its downstream's PFC); paused ms: datacenter time. ports.csv also has "
                        "the most each port's ingress held (max_held_bytes).", ""]


def _pause_agent_lines(tables: Tables) -> list[str]:
    agents = tables.manifest.get("pause_agent") or {}
    if not agents:
        return []
    cells = []
    for block, a in agents.items():
        frames = a.get("reaction_frames") or {}
        reaction = [f"{frames[q]:.2f}" if frames.get(q) is not None else "-" for q in ("p50", "p99", "max")]
        died = f" (agent died: {a['died']})" if a.get("died") else ""
        cells.append([str(block), str(a["pauses"]), str(a["resumes"]), str(a.get("superseded", 0)),
                      str(a.get("corrections", 0)), *reaction, f"{len(a.get('failures') or [])}{died}"])
    lines = ["### PFC pause reaction", "",
             *table(["block", "gates closed", "opened", "superseded", "corrected", "p50 frame times", "p99", "max",
                     "failures"], cells)]
    return lines + ["", "From the port program's decision to the kernel's acknowledgement of the paused port's gate "
                        "change (ports/pfc.py), in frame times at the link rate (a real PFC pause takes effect after "
                        "the frame on the wire and the link's delay). Superseded: pauses resumed before the agent "
                        "came to them; corrected: gates the agent's periodic check set (before their event was read, "
                        "or after a lost event or a failed change).", ""]
