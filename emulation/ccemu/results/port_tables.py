"""What `ccemu ports` prints of a live fabric's port programs: every port's queues, drops, marks
and residence; the fabric's switch residence; PFC and TCD at the lossless ports."""

from __future__ import annotations

from rich.table import Table

from ..ports.stats import PortStats, pause_bucket_bounds_s
from .fidelity import SwitchFigures


def port_table(ports: list[PortStats], frame_ns: float, run_id: str) -> Table:
    """Every port of the run: its data and credit queues (bytes on the wire), drops, marks, lags
    and, at switch ports, the residence before leaving by it."""
    table = Table(title=f"ports of {run_id} (bytes on the wire; lags mean |real - ideal queue|; residence: time "
                        f"inside the switch before leaving by the port, in frame times of {frame_ns / 1e3:.0f} us)")
    for column in ("node", "port", "data enq", "data drop", "CE marks", "data queue", "data max", "data lag",
                   "credit enq", "credit drop", "credit queue", "credit lag", "Pd", "residence p50", "p99"):
        table.add_column(column, justify="left" if column in ("node", "port") else "right")
    for p in ports:
        residence = [f"{p.residence.quantile_ns(q) / frame_ns:.2f}" if p.config.switch_port else "-"
                     for q in (0.5, 0.99)]
        table.add_row(p.node, p.port, str(p.data.enqueued_packets), str(p.data.dropped_packets),
                      str(p.data.marked_packets + p.credit.marked_packets), f"{p.queue_bytes[0]:.0f}",
                      str(p.data.max_queue_bytes), f"{p.data.mean_lag_bytes:.0f}",
                      str(p.credit.enqueued_packets), str(p.credit.dropped_packets),
                      f"{p.queue_bytes[1]:.0f}", f"{p.credit.mean_lag_bytes:.0f}", f"{p.mark_probability:.2f}",
                      *residence)
    return table


def residence_line(ports: list[PortStats], frame_ns: float) -> str:
    """The fabric's switch residence and what was lost inside the switches so far."""
    switches = SwitchFigures.of(ports, frame_ns)
    return (f"switch residence over the fabric: p50 {switches.residence_frames(0.5):.2f}, "
            f"p99 {switches.residence_frames(0.99):.2f} frame times; "
            f"{switches.residence.untracked_packets} packets left a switch with no arrival on record; "
            f"{switches.lost_packets} of {switches.arrived_packets} lost inside the switches so far "
            "(packets in flight count until they arrive)")


def lossless_table(ports: list[PortStats]) -> Table:
    """PFC and TCD at each lossless port: its pauses, what its ingress holds, its marks."""
    table = Table(title="lossless ports: PFC pauses (of the port, by its downstream) and TCD marks; held: bytes that "
                        "came in through the port and sit in its switch's egress queues")
    for column in ("node", "port", "paused", "pauses", "paused s (wall)", "pause p50 ms (wall)", "held", "held max",
                   "CE", "UE", "TCD state"):
        table.add_column(column, justify="left" if column in ("node", "port", "TCD state") else "right")
    for p in ports:
        ended = sum(p.pfc.pause_histogram)
        median = "-"
        if ended:
            seen = 0
            for bucket, count in enumerate(p.pfc.pause_histogram):
                seen += count
                if seen * 2 >= ended:
                    median = f"{pause_bucket_bounds_s(bucket)[1] * 1e3:.3g}"  # the bucket's upper bound
                    break
        state = ("non-congestion", "congestion", "undetermined")[p.tcd_state] if p.config.tcd else "-"
        table.add_row(p.node, p.port, "yes" if p.pfc.paused else "", str(p.pfc.pause_events),
                      f"{p.pfc.paused_s:.3f}", median, str(p.pfc.held_bytes), str(p.pfc.max_held_bytes),
                      str(p.data.marked_packets), str(p.data.ue_marked_packets), state)
    return table
