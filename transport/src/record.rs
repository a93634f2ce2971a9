//! What goes in (a [`FlowSpec`]) and what comes out (a [`FlowRecord`] per finished flow, an
//! [`InboundFinish`] per flow received in full, the endpoint's [`Counters`], and, when asked
//! for, the credit schemes' per-period [`Trace`]).

use std::time::Duration;

use crate::cc::Feedback;
use crate::scheme::Scheme;
use crate::types::HostId;
use crate::wire::KINDS;

/// One flow to send.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSpec {
    /// Unique among this host's flows.
    pub id: u32,
    pub dst: HostId,
    pub size_bytes: u64,
    pub scheme: Scheme,
    /// Path-id of every packet of the flow (both ways); `None`: a hash of the flow id.
    /// Spraying schemes ignore it for credits and data (each credit picks its own).
    pub path_id: Option<u8>,
    /// Equal-cost paths between the two hosts (1..=256): spraying schemes spread credits over
    /// path-ids 0..paths. `None`: all 256 path-ids (uniform over the paths whenever their
    /// number divides 256, as on k=4 fat-trees; wire-format.md "How many paths").
    pub paths: Option<u16>,
}

/// One finished flow, written by its sender when the receiver's Finish arrives. Times are
/// microseconds of the shared clock (`EndpointConfig::epoch`).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowRecord {
    pub id: u32,
    pub src: HostId,
    pub dst: HostId,
    pub size_bytes: u64,
    pub scheme: Scheme,
    pub start_us: u64,
    /// When the receiver had every byte.
    pub end_us: u64,
    /// Data packets sent more than once.
    pub retransmits: u64,
    /// Retransmission timeouts (window schemes), and how many of them proved spurious.
    pub timeouts: u64,
    pub spurious_timeouts: u64,
    pub credits_sent: u64,
    /// Credits that arrived when the sender had nothing left to send.
    pub credits_wasted: u64,
    /// CNPs the sender received (DCQCN), flagged congestion (CE) and undetermined (TCD's UE).
    pub cnps_ce: u64,
    pub cnps_ue: u64,
}

impl FlowRecord {
    /// The record of `spec` sent by `src`, its per-scheme figures zero.
    pub(crate) fn of(spec: &FlowSpec, src: HostId, start_us: u64, end_us: u64) -> Self {
        Self {
            id: spec.id,
            src,
            dst: spec.dst,
            size_bytes: spec.size_bytes,
            scheme: spec.scheme,
            start_us,
            end_us,
            retransmits: 0,
            timeouts: 0,
            spurious_timeouts: 0,
            credits_sent: 0,
            credits_wasted: 0,
            cnps_ce: 0,
            cnps_ue: 0,
        }
    }

    pub fn fct(&self) -> Duration {
        Duration::from_micros(self.end_us.saturating_sub(self.start_us))
    }
}

/// A flow this host received in full (`Endpoint::poll_inbound_finish`): the last point of
/// its throughput timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboundFinish {
    pub src: HostId,
    /// The sender's flow id.
    pub id: u32,
    /// Payload bytes received: the flow's size.
    pub bytes: u64,
    /// When the last byte arrived, microseconds of the shared clock (`EndpointConfig::epoch`).
    pub end_us: u64,
}

/// One line of a credit-scheme flow's trace (`EndpointConfig::trace`, `Endpoint::poll_trace`):
/// per feedback period at the flow's receiver, per window of about an RTT at its sender. What
/// tells a slow convergence from a fast one (issue 39): how many credits a flow sent, how many
/// came back, what the feedback made of them, and what the sender got and spent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trace {
    Receiver(ReceiverTrace),
    Sender(SenderTrace),
}

/// A credit receiver's feedback step, and what the flow sent in the period it closed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReceiverTrace {
    /// When the step ran, microseconds of the shared clock (`EndpointConfig::epoch`).
    pub at_us: u64,
    /// The flow: its sender and the sender's id (the receiver is the host that traced it).
    pub src: HostId,
    pub id: u32,
    /// Credits this receiver sent since its last step (the ones the step accounted were sent
    /// about an RTT earlier).
    pub credits_sent: u64,
    /// Of them, credits after which the next was already due (owed after a late wake-up, see
    /// crediting_receiver.rs `CATCH_UP_CREDITS`): they left back to back into the host's own
    /// credit queue.
    pub back_to_back: u64,
    /// Of them, credits queued behind another flow's credit in the same batch (one event's
    /// output, which the shell sends in one sendmmsg): the other flow's reached this host's
    /// credit queue first. A flow behind others in most batches finds that queue fuller.
    pub behind: u64,
    pub step: Feedback,
}

/// A credit sender's window: the credits it received and what it spent them on, since the
/// last line (a window closes at the first credit at least the sender's RTT after it opened).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SenderTrace {
    /// When the window closed, microseconds of the shared clock.
    pub at_us: u64,
    /// The flow: its receiver and this host's id of it (the sender is the host that traced it).
    pub dst: HostId,
    pub id: u32,
    /// How long the window lasted.
    pub window: Duration,
    /// Credits received; new data packets sent; packets sent again (named missing); credits
    /// wasted (nothing left to send).
    pub credits: u64,
    pub data: u64,
    pub retransmits: u64,
    pub wasted: u64,
}

/// Counters of the whole endpoint, for the collector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// Packets per type, indexed by [`crate::wire::Kind`] as usize.
    pub sent_packets: [u64; KINDS],
    pub received_packets: [u64; KINDS],
    /// Datagrams that did not parse (dropped, never a crash).
    pub malformed: u64,
    /// Parsed, but for no flow this host knows (and not a late packet of a finished one).
    pub unknown_flow: u64,
    pub data_bytes_received: u64,
    /// Data packets that arrived CE-marked, and acks that echoed a mark.
    pub ce_received: u64,
    /// Data packets that arrived UE-marked (ECT(1): TCD's undetermined).
    pub ue_received: u64,
    /// Data packets whose credit was CE-marked on its way (SprayPass's feedback).
    pub credit_ce_received: u64,
    /// Window schemes: data packets that did not arrive in order (holes, reordering, duplicates).
    pub data_out_of_order: u64,
    pub ece_received: u64,
    /// Per-flow figures, added when the flow finishes.
    pub data_retransmits: u64,
    pub timeouts: u64,
    pub spurious_timeouts: u64,
    pub credits_sent: u64,
    pub credits_wasted: u64,
    /// Credits the receivers' feedback control judged lost (ExpressPass: echo sequence gaps
    /// that no late echo filled), added when a receiving flow finishes.
    pub credits_lost: u64,
    pub flows_started: u64,
    pub flows_finished: u64,
    /// Control packets (credit request, credit stop) sent again after a timeout.
    pub control_retransmits: u64,
    /// New flows to receive refused: their peer, or all peers, at the bound of flows received at
    /// once (the sender tries again).
    pub flows_refused: u64,
    /// Flows being received dropped after `EndpointConfig::idle_timeout` without a packet.
    pub flows_dropped_idle: u64,
}
