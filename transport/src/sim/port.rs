//! One port of the simulated network, host NIC and switch port alike: the emulator's port model
//! (emulation/ccemu/ports/: the HTB tree of tc.py, the port program bpf/port.bpf.c). A credit
//! class served first, through a token bucket at the credit share with a burst of two credits
//! and a buffer of a few credits, that can mark credits CE with the probability it drops them
//! (SprayPass's Pd); and a data FIFO that tail-drops at its buffer and CE-marks ECN-capable
//! packets that find more than K bytes queued (or, for DCQCN, with RED's probability between
//! Kmin and Kmax). TCD's UE mark (a port paused by PFC, ports/pfc.py, which is not modelled) is
//! set on demand over a time window.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::stats::PortStats;
use super::topology::Node;
use super::SimConfig;
use crate::types::{Ecn, HostId, Transmit};
use crate::wire::{Kind, MIN_FRAME_WIRE_BYTES};

pub const CREDIT_WIRE_BYTES: u64 = MIN_FRAME_WIRE_BYTES;

/// RED marking as DCQCN's congestion point does it (paper, section 3): an ECN-capable packet
/// that finds q bytes queued (itself not counted, as K) is CE-marked with probability 0 up to
/// Kmin, rising linearly to Pmax at Kmax, and 1 above Kmax.
#[derive(Debug, Clone, Copy)]
pub struct Red {
    pub kmin_bytes: u64,
    pub kmax_bytes: u64,
    pub pmax: f64,
}

impl Red {
    pub fn probability(&self, queued_bytes: u64) -> f64 {
        if queued_bytes <= self.kmin_bytes {
            0.0
        } else if queued_bytes > self.kmax_bytes {
            1.0
        } else {
            let span = (self.kmax_bytes - self.kmin_bytes).max(1) as f64;
            self.pmax * (queued_bytes - self.kmin_bytes) as f64 / span
        }
    }
}

/// A packet inside the network.
#[derive(Debug, Clone)]
pub(super) struct InFlight {
    pub(super) src: HostId,
    pub(super) transmit: Transmit,
    /// Its ECN codepoint now (ports mark it on the way).
    pub(super) ecn: Ecn,
    pub(super) wire_bytes: u64,
}

pub(super) struct Port {
    /// Where the port's link leads.
    pub(super) to: Node,
    pub(super) rate_bps: f64,
    pub(super) busy_until: Instant,
    credits: VecDeque<InFlight>,
    data: VecDeque<InFlight>,
    data_bytes: u64,
    tokens: f64,
    tokens_at: Instant,
    /// SprayPass's Pd: credits injected and dropped in the current window, and the
    /// probability of marking that the last full window set.
    window_credits: u32,
    window_drops: u32,
    mark_probability: f64,
    /// Every ECN-capable data packet enqueued in [from, to) is marked so (`Network::mark_switch_port`).
    pub(super) forced_mark: Option<(Ecn, Instant, Instant)>,
    pub(super) stats: PortStats,
}

/// What a port does when it may send ([`Port::dequeue`]).
pub(super) enum Departure {
    /// Nothing: it is busy, or nothing is queued.
    Nothing,
    /// Only credits wait, for tokens that will be there at this time; the port stays free
    /// meanwhile.
    TokensAt(Instant),
    /// The packet is on the wire until `done`.
    Sends { done: Instant, packet: InFlight },
}

/// The credit class's token bucket holds at most this many bytes.
fn credit_burst_bytes(config: &SimConfig) -> f64 {
    (config.credit_burst_credits * CREDIT_WIRE_BYTES) as f64
}

impl Port {
    /// An idle port toward `to`, its credit bucket full.
    pub(super) fn new(to: Node, config: &SimConfig, start: Instant) -> Self {
        Port {
            to,
            rate_bps: config.link_bps,
            busy_until: start,
            credits: VecDeque::new(),
            data: VecDeque::new(),
            data_bytes: 0,
            tokens: credit_burst_bytes(config),
            tokens_at: start,
            window_credits: 0,
            window_drops: 0,
            mark_probability: 0.0,
            forced_mark: None,
            stats: PortStats::default(),
        }
    }

    /// `packet` comes to the port at `now`, and is marked, dropped or queued; `draw`, U[0, 1)
    /// of the network's randomness, decides a marking by probability. Returns whether it was
    /// queued (then the port may send).
    pub(super) fn enqueue(&mut self, config: &SimConfig, now: Instant, mut packet: InFlight, draw: f64) -> bool {
        let credit = packet.transmit.kind == Kind::Credit && config.credit_share > 0.0;
        if credit {
            let drop = self.credits.len() >= config.credit_buffer_credits;
            if let Some(window) = config.credit_mark_window {
                // As the port program does: Pd of the last full window of N_cdt credits.
                self.window_credits += 1;
                self.window_drops += drop as u32;
                if self.window_credits >= window {
                    self.mark_probability = self.window_drops as f64 / self.window_credits as f64;
                    (self.window_credits, self.window_drops) = (0, 0);
                }
                if !drop && packet.ecn != Ecn::Ce && draw < self.mark_probability {
                    packet.ecn = Ecn::Ce;
                    self.stats.credit_marks += 1;
                }
            }
            if config.log_credits {
                self.stats.credit_log.push((now, packet.transmit.dst, drop));
            }
            if drop {
                self.stats.credit_drops += 1;
                return false;
            }
            self.credits.push_back(packet);
        } else {
            if self.data_bytes + packet.wire_bytes > config.data_buffer_bytes {
                self.stats.data_drops += 1;
                return false;
            }
            // K counts what the packet finds queued, itself not included (as the port program).
            let congested = config.ecn_threshold_bytes.is_some_and(|k| self.data_bytes > k)
                || config.red.is_some_and(|red| draw < red.probability(self.data_bytes));
            let forced = self.forced_mark.filter(|&(_, from, to)| (from..to).contains(&now)).map(|(mark, ..)| mark);
            let capable = matches!(packet.ecn, Ecn::Ect0 | Ecn::Ect1);
            if capable && (congested || forced == Some(Ecn::Ce)) {
                packet.ecn = Ecn::Ce;
                self.stats.marks += 1;
            } else if capable && forced == Some(Ecn::Ect1) && packet.ecn == Ecn::Ect0 {
                packet.ecn = Ecn::Ect1;
                self.stats.ue_marks += 1;
            }
            self.data_bytes += packet.wire_bytes;
            self.stats.max_data_queue_bytes = self.stats.max_data_queue_bytes.max(self.data_bytes);
            self.stats.data_queue.push((now, self.data_bytes));
            self.data.push_back(packet);
        }
        true
    }

    /// The port may send at `now`: a credit if the bucket holds one, else data.
    pub(super) fn dequeue(&mut self, config: &SimConfig, now: Instant) -> Departure {
        let credit_rate = self.rate_bps / 8.0 * config.credit_share;
        if self.busy_until > now {
            return Departure::Nothing;
        }
        self.tokens =
            (self.tokens + (now - self.tokens_at).as_secs_f64() * credit_rate).min(credit_burst_bytes(config));
        self.tokens_at = now;
        let packet = if !self.credits.is_empty() && self.tokens >= CREDIT_WIRE_BYTES as f64 - 1e-6 {
            self.tokens = (self.tokens - CREDIT_WIRE_BYTES as f64).max(0.0);
            self.stats.sent_credits += 1;
            self.credits.pop_front()
        } else if let Some(packet) = self.data.pop_front() {
            self.data_bytes -= packet.wire_bytes;
            self.stats.sent_data_bytes += packet.wire_bytes;
            self.stats.data_queue.push((now, self.data_bytes));
            Some(packet)
        } else {
            None
        };
        let Some(packet) = packet else {
            if self.credits.is_empty() {
                return Departure::Nothing;
            }
            // Rounded up to whole nanoseconds: rounding down would wake to find a hair
            // too few tokens, forever.
            let wait_ns = ((CREDIT_WIRE_BYTES as f64 - self.tokens) / credit_rate * 1e9).ceil().max(1.0);
            return Departure::TokensAt(now + Duration::from_nanos(wait_ns as u64));
        };
        let done = now + Duration::from_secs_f64(packet.wire_bytes as f64 * 8.0 / self.rate_bps);
        self.busy_until = done;
        Departure::Sends { done, packet }
    }
}
