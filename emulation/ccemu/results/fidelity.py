"""Did the emulation keep up? A verdict per fabric (an experiment's block, or any run) from what
the machine, the port programs and the hosts report:

- hypervisor steal and CPU saturation (/proc/stat, over the run);
- every port's lag: how far its real queue was from an ideal port's at every enqueue (the port
  programs measure both: bpf/port.bpf.c), i.e. whether the link drained at its configured rate,
  judged at the bottleneck and at the port that lagged most (with the bpf datapath, a machine that
  falls behind forwards late in the softirqs: no switch holds the packets, every port's queue does);
  and the same for the busiest credit queue, in credits;
- switch residence: how long packets waited inside the switches (in ovs-vswitchd's receive
  sockets and its forwarding thread), between arriving at one port and reaching the next
  port's queue. Time spent there is in no queue: not marked, not dropped, invisible to every
  other figure; and packets the switches lost in there;
- queues that did not drain: a packet lost between a port and its peer stays counted as queued;
- flows that finished faster than their own ideal FCT (the flow alone on the idle path, store-and-
  forward): no real network can; the delay line or the base RTT is off;
- cchost's pacing: how late its timers fired, against the credit gap;
- hosts whose cchost died.

PASS, WARN or FAIL with the reasons; the worst finding decides."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from .records import read_counters
from ..model.config import CREDIT_WIRE_BYTES
from ..ports.stats import PortStats, Residence, switch_packets

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
_RANK = {PASS: 0, WARN: 1, FAIL: 2}

# Steal only hints (it is seen here from 0 to 36 % per run); the lag and the pacing say
# whether it hurt.
STEAL_WARN, STEAL_FAIL = 0.15, 0.35
BUSY_WARN = 0.95
# `ccemu bench capacity`: every pair at least this share of its ideal, the rate is within capacity.
GOOD = 0.95
# A fluid queue drains a frame bit by bit, a real port holds it whole until it is sent: about
# one frame of difference is the model, not lag (measured 0.6-0.8 frames on a quiet machine).
LAG_WARN_FRAMES, LAG_FAIL_FRAMES = 2.0, 4.0
# The same in credits for the credit queue, whose buffer is only ~8 credits deep.
CREDIT_LAG_WARN_CREDITS, CREDIT_LAG_FAIL_CREDITS = 2.0, 4.0
# A packet held inside a switch for x frame times reaches its egress port x frames late: that
# port's queue, marks and drops miss up to x frames of the traffic heading to it, and the
# round trip grows by x frames. Judged on the p99 of the busiest-held switch (one overloaded
# OVS instance must not hide among quiet ones). The WARN level is empirical: on a quiet machine
# this emulator's switches hold packets p99 0.6-2.4 frame times at the incast's 10 Mbit/s
# (ovs-vswitchd wakes up, polls its ports and forwards in one thread), and well beyond 2 they
# are holding traffic up (8 TCP flows at 25 Mbit/s: p99 24-28, goodput down to 0.37 of the
# rate). A WARN at 2-3 says a run is at the edge of what this machine emulates faithfully.
# The FAIL level is about the schemes: 8 frames is ExpressPass's whole credit buffer (8 credits,
# each standing for a frame) or ~40 % of DCTCP's K of 20 frames: a hidden queue that size
# changes what the schemes' own control reacts to.
RESIDENCE_WARN_FRAMES, RESIDENCE_FAIL_FRAMES = 2.0, 8.0
# Packets that arrived at a switch and never reached another port: dropped inside ovs-vswitchd
# (its receive sockets overflowed, or its send failed). A real switch drops only at queues.
SWITCH_LOSS_WARN, SWITCH_LOSS_FAIL = 1e-4, 1e-2
# A switch is judged on its own p99 once it carried this many packets (fewer: its p99 is a
# handful of packets, and they count in the fabric's). A port's mean lag likewise.
MIN_SWITCH_PACKETS = MIN_PORT_PACKETS = 1000
PACING_WARN, PACING_FAIL = 0.25, 1.0  # mean timer lateness / credit gap
# The worst host's 99th percentile of timer lateness, in credit gaps. A pacer that wakes up late
# sends the credits it owes at once, up to 4 (cchost's CATCH_UP_CREDITS: what its port's credit
# queue holds); a wake-up later than that loses the rest, so the credit rate is no longer the
# scheme's: FAIL at 4, WARN at 2, the credit queue's lag levels above. Set on 2026-11-28 after
# seeing realistic-fig19's 4-7.6 gaps at loads 0.6 and 0.8 (k=4's realistic: 1.2-1.8), from
# CATCH_UP_CREDITS, not from those figures.
PACING_P99_WARN, PACING_P99_FAIL = CREDIT_LAG_WARN_CREDITS, 4.0
# Both set on 2026-11-29 before any run that tests them (issue 45). A flow that starts a base RTT
# after the others its schedule starts with it misses their first round trip: an incast's senders
# no longer meet at the aggregator together ("within one base RTT of the schedule", the issue's
# own words). WARN only: the flows' times are still right, their start was not the schedule's.
START_LATE_WARN = 1.0  # a host's latest flow start / the block's least base RTT
# A flow across machines is timed on two clocks: an error a tenth of the base RTT is a tenth of
# the smallest FCT's unloaded part (WARN); a whole base RTT makes the short flows' times noise (FAIL).
CLOCK_ERROR_WARN, CLOCK_ERROR_FAIL = 0.1, 1.0


def worst(a: str, b: str) -> str:
    return a if _RANK[a] >= _RANK[b] else b


@dataclass(frozen=True)
class CpuTimes:
    busy: int
    idle: int
    steal: int

    @classmethod
    def now(cls, stat: Path = Path("/proc/stat")) -> "CpuTimes":
        fields = [int(v) for v in stat.read_text().splitlines()[0].split()[1:]]
        user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
        return cls(busy=user + nice + system + irq + softirq, idle=idle + iowait, steal=steal)

    def since(self, earlier: "CpuTimes") -> tuple[float, float]:
        """(steal share, busy share) of all CPU time in between."""
        busy, idle, steal = self.busy - earlier.busy, self.idle - earlier.idle, self.steal - earlier.steal
        total = max(1, busy + idle + steal)
        return steal / total, busy / total


@dataclass(frozen=True)
class SwitchFigures:
    """What the switches did to the packets crossing them, from the port programs' maps."""

    by_switch: dict[str, Residence]  # each switch's ports merged
    frame_ns: float  # one full frame at the link rate
    arrived_packets: int  # at switch ports
    lost_packets: int  # arrived and never reached another port's egress (read once drained)

    @classmethod
    def of(cls, ports: list[PortStats], frame_ns: float) -> "SwitchFigures":
        by_switch: dict[str, list[Residence]] = {}
        for port in ports:
            if port.switch:
                by_switch.setdefault(port.switch, []).append(port.residence)
        arrived, left = switch_packets(ports)
        return cls({switch: Residence.merged(parts) for switch, parts in sorted(by_switch.items())}, frame_ns,
                   arrived, max(0, arrived - left))

    @cached_property
    def residence(self) -> Residence:
        """Every packet of every switch."""
        return Residence.merged(self.by_switch.values())

    def residence_frames(self, q: float) -> float:
        return self.residence.quantile_ns(q) / self.frame_ns

    def worst_switch(self) -> tuple[str, float]:
        """The switch whose p99 (frame times) is highest among those that carried enough packets
        to have one, or the fabric's ("all") when none did, or when it is higher."""
        worst = ("all", self.residence_frames(0.99))
        for switch, residence in self.by_switch.items():
            if residence.packets + residence.untracked_packets >= MIN_SWITCH_PACKETS:
                worst = max(worst, (switch, residence.quantile_ns(0.99) / self.frame_ns), key=lambda w: w[1])
        return worst


def worst_port_lag(ports: list[PortStats]) -> tuple[float, str] | None:
    """(mean lag in bytes, node/port) of the data queue that lagged most on average among the ports that
    admitted at least MIN_PORT_PACKETS data packets; None: none did. A port PFC paused is left out: its
    ideal twin drains through the pauses, which are the lossless protocol's, not the machine's."""
    busy = [p for p in ports if p.data.enqueued_packets >= MIN_PORT_PACKETS and not p.pfc.pause_events]
    worst = max(busy, key=lambda p: p.data.mean_lag_bytes, default=None)
    return (worst.data.mean_lag_bytes, f"{worst.node}/{worst.port}") if worst else None


def busiest_credit_lag_bytes(ports: list[PortStats]) -> float | None:
    """Mean lag of the credit queue that admitted the most credits (None without credits)."""
    busiest = max(ports, key=lambda p: p.credit.enqueued_packets, default=None)
    return busiest.credit.mean_lag_bytes if busiest and busiest.credit.enqueued_packets else None


def queue_residues(ports: list[PortStats]) -> list[str]:
    """Packets a port admitted that never arrived at its peer: still queued once the traffic
    has stopped (PortMaps.read_drained), or forgotten earlier by an idle reset."""
    found = [f"{p.node}/{p.port} {cls} {queue} B" for p in ports
             for cls, queue in (("data", p.queue_bytes[0]), ("credit", p.queue_bytes[1])) if queue]
    return found + [f"{p.node}/{p.port} {p.forgotten_bytes} B forgotten at idle resets" for p in ports
                    if p.forgotten_bytes]


def below_ideal(flows: Iterable[dict]) -> tuple[int, int, float] | None:
    """(how many flows finished faster than their ideal FCT, how many have one, the least FCT / ideal) of
    flows.csv rows (results/rows.py FlowRow); None: none has an ideal."""
    ratios = [float(f["fct"]) / float(f["ideal_fct"]) for f in flows if float(f["ideal_fct"] or 0) > 0]
    return (sum(r < 1 for r in ratios), len(ratios), min(ratios)) if ratios else None


def pacing_lateness_us(counters: Iterable[Path]) -> tuple[float | None, float | None]:
    """The worst mean and the worst 99th-percentile timer lateness (which cchost counts since issue
    42) among the cchosts that paced credits, each counters file read once (those not written are
    skipped, and so is a p99 an older cchost did not write); None: no figure."""
    latenesses = [read_counters(path)["timer_lateness"] for path in counters if path.exists()]

    def worst(figure: str) -> float | None:
        return max((late[figure] for late in latenesses if figure in late), default=None)

    return worst("mean_us"), worst("p99_us")


def start_lateness_us(counters: Iterable[tuple[str, dict]]) -> tuple[float, str] | None:
    """The most any cchost started a flow after its scheduled time (wall us), and which host's, of
    (host, counters) as results/records.py counters_under reads them; None: no counters say (a
    cchost from before they did)."""
    found = [(late["max_us"], host) for host, counters in counters
             if (late := counters.get("start_lateness")) and late["count"]]
    return max(found) if found else None


@dataclass
class Observation:
    """Everything the verdict weighs for one fabric's run; None: not measured."""

    steal: float
    busy: float
    frame_bytes: int  # one full frame on the wire
    switches: SwitchFigures | None = None
    bottleneck_lag_bytes: float | None = None
    worst_port_lag: tuple[float, str] | None = None  # (mean lag bytes, node/port): worst_port_lag
    credit_lag_bytes: float | None = None
    residues: list[str] = field(default_factory=list)
    lateness_us: float | None = None
    credit_gap_us: float | None = None
    lateness_p99_us: float | None = None  # the worst host's 99th percentile, shown beside the judged mean
    host_failures: list[str] = field(default_factory=list)  # each a whole reason: what failed and what it cost
    # Host pairs whose idle RTT through the fabric alone exceeded the RTT the experiment stands
    # for (no delay could be added; their base RTT is the fabric's): each a whole reason.
    delay_shortfalls: list[str] = field(default_factory=list)
    # The emulation itself failed under the block (an OVS daemon, the PFC pause agent, the disk):
    # each a whole reason. Its figures measure a broken fabric: FAIL.
    faults: list[str] = field(default_factory=list)
    # A fabric over several machines: its worst tunnel's one-way delay spread in frame times, and
    # between which machines (machines/fabric.py); None on one machine.
    tunnel_spread: tuple[float, str] | None = None
    # (flows that finished below their ideal FCT, flows with one, the least FCT / ideal): below_ideal
    below_ideal: tuple[int, int, float] | None = None
    # The block's least base RTT (wall us), what flows starting late and clocks apart are judged against.
    base_rtt_us: float | None = None
    # The most a cchost started a flow after its schedule (wall us), and which host: start_lateness_us.
    start_late: tuple[float, str] | None = None
    # A fabric over several machines: how far one machine's time may be from another's for the same
    # instant by the block's end (wall us), and which machine (SplitFabric.clock_error_us).
    clock_error: tuple[float, str] | None = None
    # Frames the network between the machines lost, per cut link: each a whole reason.
    tunnel_losses: list[str] = field(default_factory=list)

    @classmethod
    def of_block(cls, cpu: tuple[float, float], frame_bytes: int, ports: list[PortStats], frame_ns: float,
                 bottleneck_port: str | None, lateness_us: float | None = None, credit_gap_us: float | None = None,
                 host_failures: Iterable[str] = (), delay_shortfalls: Iterable[str] = (),
                 faults: Iterable[str] = (), tunnel_spread_us: tuple[float, str] | None = None,
                 flows: Iterable[dict] = (), lateness_p99_us: float | None = None,
                 base_rtt_us: float | None = None, start_late: tuple[float, str] | None = None,
                 clock_error_us: tuple[float, str] | None = None,
                 tunnel_losses: Iterable[str] = ()) -> "Observation":
        """A block's (an experiment's, or any run's): `cpu` (steal, busy) over it, its ports as read once
        drained, the lag judged at `bottleneck_port` (None: no bottleneck) and at the port that lagged
        most, its credit pacing (both None without a credit class or a figure), its flows (flows.csv rows)."""
        bottleneck_lag = None
        if bottleneck_port:
            (judged,) = [p for p in ports if p.port == bottleneck_port]
            bottleneck_lag = judged.data.mean_lag_bytes
        lateness_us, credit_gap_us = (lateness_us, credit_gap_us) if lateness_us is not None else (None, None)
        return cls(steal=cpu[0], busy=cpu[1], frame_bytes=frame_bytes, switches=SwitchFigures.of(ports, frame_ns),
                   bottleneck_lag_bytes=bottleneck_lag, worst_port_lag=worst_port_lag(ports),
                   credit_lag_bytes=busiest_credit_lag_bytes(ports),
                   residues=queue_residues(ports), lateness_us=lateness_us, credit_gap_us=credit_gap_us,
                   lateness_p99_us=lateness_p99_us if credit_gap_us else None,
                   host_failures=list(host_failures), delay_shortfalls=list(delay_shortfalls), faults=list(faults),
                   tunnel_spread=(tunnel_spread_us[0] * 1e3 / frame_ns, tunnel_spread_us[1]) if tunnel_spread_us
                   else None, below_ideal=below_ideal(flows), base_rtt_us=base_rtt_us, start_late=start_late,
                   clock_error=clock_error_us, tunnel_losses=list(tunnel_losses))


@dataclass
class Verdict:
    status: str = PASS
    reasons: list[str] = field(default_factory=list)
    figures: dict[str, float] = field(default_factory=dict)

    def judge(self, name: str, value: float, warn: float, fail: float | None, what: str) -> None:
        self.figures[name] = round(value, 4)
        status = FAIL if fail is not None and value >= fail else WARN if value >= warn else PASS
        if status != PASS:
            self.reasons.append(f"{status}: {what}")
        self.status = worst(self.status, status)

    def flag(self, status: str, what: str) -> None:
        self.reasons.append(f"{status}: {what}")
        self.status = worst(self.status, status)

    def as_dict(self) -> dict:
        return {"status": self.status, "reasons": self.reasons, "figures": self.figures}


def judge(seen: Observation) -> Verdict:
    verdict = Verdict()
    verdict.judge("steal", seen.steal, STEAL_WARN, STEAL_FAIL,
                  f"hypervisor steal took {seen.steal:.0%} of the CPU time")
    verdict.judge("cpu_busy", seen.busy, BUSY_WARN, None,
                  f"CPUs {seen.busy:.0%} busy: the emulation may have fallen behind")
    if seen.bottleneck_lag_bytes is not None:
        lag = seen.bottleneck_lag_bytes
        verdict.judge("bottleneck_lag_frames", lag / seen.frame_bytes, LAG_WARN_FRAMES, LAG_FAIL_FRAMES,
                      f"bottleneck queues were {lag:.0f} B on average away from an ideal port's "
                      f"({lag / seen.frame_bytes:.1f} frames): links drained slower than configured")
    if seen.worst_port_lag is not None:
        lag, port = seen.worst_port_lag
        verdict.judge("worst_port_lag_frames", lag / seen.frame_bytes, LAG_WARN_FRAMES, LAG_FAIL_FRAMES,
                      f"port {port}'s queue was {lag:.0f} B on average away from an ideal port's "
                      f"({lag / seen.frame_bytes:.1f} frames), the most of any port: it drained slower than "
                      "configured (the machine fell behind)")
    if seen.credit_lag_bytes is not None:
        credits = seen.credit_lag_bytes / CREDIT_WIRE_BYTES
        verdict.judge("credit_lag_credits", credits, CREDIT_LAG_WARN_CREDITS, CREDIT_LAG_FAIL_CREDITS,
                      f"the busiest credit queue was {credits:.1f} credits on average away from an ideal "
                      "port's: credits drained slower than configured")
    if seen.switches is not None:
        # The reasons name no datapath: the verdict does not know which forwarded, the summary says it.
        s = seen.switches
        verdict.figures["switch_residence_p50_frames"] = round(s.residence_frames(0.5), 4)
        verdict.figures["switch_residence_p99_frames"] = round(s.residence_frames(0.99), 4)
        switch, worst = s.worst_switch()
        where = "the switches" if switch == "all" else f"switch {switch}"
        verdict.judge("worst_switch_residence_p99_frames", worst, RESIDENCE_WARN_FRAMES, RESIDENCE_FAIL_FRAMES,
                      f"packets waited inside {where} {worst:.1f} frame times (p99; all switches: p50 "
                      f"{s.residence_frames(0.5):.2f}, p99 {s.residence_frames(0.99):.2f}) between ports, in no "
                      "queue: the switches' forwarding fell behind")
        lost = s.lost_packets / s.arrived_packets if s.arrived_packets else 0.0
        verdict.judge("switch_lost_ratio", lost, SWITCH_LOSS_WARN, SWITCH_LOSS_FAIL,
                      f"{s.lost_packets} of {s.arrived_packets} packets were lost inside the switches' "
                      "forwarding, not at a queue")
    if seen.tunnel_spread is not None:
        # A tunnel is part of its wire: its delay beyond its least is delay no wire has, judged as a
        # switch's residence is.
        spread, between = seen.tunnel_spread
        verdict.judge("tunnel_spread_p99_frames", spread, RESIDENCE_WARN_FRAMES, RESIDENCE_FAIL_FRAMES,
                      f"the tunnels between machines ({between}, the worst) varied their one-way delay by "
                      f"{spread:.1f} frame times (p99 over their least): cut links were slower than wires")
    for lost in seen.tunnel_losses:
        verdict.flag(FAIL, lost)
    if seen.base_rtt_us:
        if seen.clock_error is not None:
            error, machine = seen.clock_error
            verdict.judge("clock_error_of_base_rtt", error / seen.base_rtt_us, CLOCK_ERROR_WARN, CLOCK_ERROR_FAIL,
                          f"machine {machine}'s clock may be {error:.0f} us off the controller's by the block's end "
                          f"(offset bounds and drift), base RTT {seen.base_rtt_us:.0f} us: flow times across "
                          "machines are off by as much")
        if seen.start_late is not None:
            late, host = seen.start_late
            verdict.judge("start_lateness_of_base_rtt", late / seen.base_rtt_us, START_LATE_WARN, None,
                          f"{host} started a flow {late:.0f} us after its scheduled time (the latest of any host), "
                          f"base RTT {seen.base_rtt_us:.0f} us: flows meant to start together did not (the "
                          "controller or the host fell behind)")
    if seen.below_ideal is not None:
        below, flows, least = seen.below_ideal
        verdict.figures["least_fct_of_ideal"] = round(least, 4)
        if below:
            verdict.flag(WARN, f"{below} of {flows} flows finished faster than their own ideal FCT (the least in "
                               f"{least:.3f} of it): no store-and-forward network can; the delay line or the base "
                               "RTT is off")
    if seen.residues:
        verdict.flag(WARN, f"queues did not drain after the traffic stopped (packets lost between a port and its "
                           f"peer stay counted as queued): {', '.join(seen.residues[:5])}"
                           f"{' ...' if len(seen.residues) > 5 else ''}")
    if seen.lateness_us is not None and seen.credit_gap_us:
        verdict.judge("pacing_lateness_of_gap", seen.lateness_us / seen.credit_gap_us, PACING_WARN, PACING_FAIL,
                      f"cchost timers fired {seen.lateness_us:.0f} us late on average, credit gap "
                      f"{seen.credit_gap_us:.0f} us")
        if seen.lateness_p99_us is not None:
            verdict.judge("pacing_p99_of_gap", seen.lateness_p99_us / seen.credit_gap_us, PACING_P99_WARN,
                          PACING_P99_FAIL, f"1 % of cchost's timers fired more than {seen.lateness_p99_us:.0f} us "
                                           f"late, credit gap {seen.credit_gap_us:.0f} us: a pacer later than 4 "
                                           "gaps loses the credits it owed")
    for failure in seen.host_failures:
        verdict.flag(WARN, failure)
    for shortfall in seen.delay_shortfalls:
        verdict.flag(WARN, shortfall)
    for fault in seen.faults:
        verdict.flag(FAIL, fault)
    return verdict
