//! Receiver-driven schemes, data sending side: asks for credits, spends each credit on one
//! data packet on the credit's path (copying the credit's CE mark into the data header, for
//! SprayPass), stops the credits when it has nothing left (early: when the credits of an RTT
//! cover what remains), and counts the credits it could not use.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use super::{packets_of, payload_of, Ctx};
use crate::config::EndpointConfig;
use crate::record::{FlowRecord, FlowSpec, SenderTrace, Trace};
use crate::types::{Ecn, HostId};
use crate::wire::{Packet, MAX_PATHS};

pub(crate) struct CreditedSender {
    spec: FlowSpec,
    path_id: u8,
    mss: u16,
    packets: u32,
    /// Next never-sent packet.
    next_seq: u32,
    /// Packets the receiver reported missing, to spend the next credits on.
    resend: VecDeque<u32>,
    /// The packets in `resend` (a nack naming one again costs a lookup, not a scan).
    queued: HashSet<u32>,
    start_us: u64,
    request_sent_at: Instant,
    first_credit_at: Option<Instant>,
    /// Request -> first credit: the sender's only RTT sample (paces its credit stops).
    rtt: Option<Duration>,
    /// Set while a credit stop is out and unanswered by a Finish.
    stop_sent_at: Option<Instant>,
    /// Early credit stop: credits counted since `window_start` (the first credit, then each
    /// time a window of at least an RTT closed).
    window_start: Option<Instant>,
    window_credits: u64,
    /// Cleared once a nack proved an early stop wrong: from then on the flow stops only when
    /// nothing is left (stopping early again would repeat the stop, wait, nack cycle).
    early_stop: bool,
    credits_wasted: u64,
    retransmits: u64,
    /// Tracing (`Ctx::trace`): the window being counted (its start: the first credit, then
    /// each line's); `None` when off.
    traced: Option<Tally>,
}

/// A sender's trace window so far (`SenderTrace`).
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    start: Option<Instant>,
    credits: u64,
    data: u64,
    retransmits: u64,
    wasted: u64,
}

impl CreditedSender {
    /// The flow's receiver: the only host whose credits, nacks and Finish it takes.
    pub fn dst(&self) -> HostId {
        self.spec.dst
    }

    pub fn start(ctx: &mut Ctx, spec: FlowSpec, path_id: u8, config: &EndpointConfig) -> Self {
        let packets = packets_of(spec.size_bytes, config.mss).min(u32::MAX as u64) as u32;
        let mut sender = Self {
            spec,
            path_id,
            mss: config.mss,
            packets,
            next_seq: 0,
            resend: VecDeque::new(),
            queued: HashSet::new(),
            start_us: ctx.now_us,
            request_sent_at: ctx.now,
            first_credit_at: None,
            rtt: None,
            stop_sent_at: None,
            window_start: None,
            window_credits: 0,
            early_stop: true,
            credits_wasted: 0,
            retransmits: 0,
            traced: ctx.trace.is_some().then(Tally::default),
        };
        sender.send_request(ctx);
        sender
    }

    fn send_request(&mut self, ctx: &mut Ctx) {
        let request = Packet::CreditRequest {
            flow: self.spec.id,
            size_bytes: self.spec.size_bytes,
            scheme: self.spec.scheme.wire_id(),
            paths: self.spec.paths.unwrap_or(MAX_PATHS).clamp(1, MAX_PATHS),
        };
        ctx.send(self.spec.dst, self.path_id, Ecn::NotEct, &request);
        self.request_sent_at = ctx.now;
    }

    fn remaining(&self) -> u64 {
        (self.packets - self.next_seq) as u64 + self.resend.len() as u64
    }

    /// A credit arrived on `path_id`; `credit_ce`: a switch marked it (SprayPass's signal).
    pub fn on_credit(&mut self, ctx: &mut Ctx, credit_seq: u32, sent_us: u32, path_id: u8, credit_ce: bool) {
        if self.first_credit_at.is_none() {
            self.first_credit_at = Some(ctx.now);
            self.rtt = Some(ctx.now - self.request_sent_at);
            self.window_start = Some(ctx.now);
        }
        let rtt = self.rtt.unwrap_or_default();
        self.window_credits += 1;
        let resend = self.resend.pop_front();
        if let Some(seq) = resend {
            self.queued.remove(&seq);
        }
        if self.traced.is_some() {
            self.trace(ctx, rtt, resend.is_some());
        }
        let seq = if let Some(seq) = resend {
            self.retransmits += 1;
            seq
        } else if self.next_seq < self.packets {
            self.next_seq += 1;
            self.next_seq - 1
        } else {
            // Nothing to send: the credit is wasted. Repeat the stop at most once per RTT
            // in case the first one was lost. (DIFFERENCE: the reference's stop retransmission
            // is dead code, `handle_sender_retransmit`; a lost stop there costs credits until
            // the receiver's timer ends the flow.)
            self.credits_wasted += 1;
            if self.stop_sent_at.is_none_or(|at| ctx.now - at >= rtt) {
                self.send_stop(ctx);
            }
            return;
        };
        let payload_len = payload_of(seq, self.spec.size_bytes, self.mss);
        ctx.send(
            self.spec.dst,
            path_id,
            Ecn::NotEct,
            &Packet::Data {
                flow: self.spec.id,
                seq,
                echo_credit_seq: credit_seq,
                echo_sent_us: sent_us,
                payload_len,
                last: seq + 1 == self.packets,
                credit_ce,
                scheme: self.spec.scheme.wire_id(),
            },
        );
        // Early credit stop: the credits of the window that just closed (at least an RTT long)
        // stand for those already on their way; when they cover what is left, stop now. As the
        // reference's paper-era commit does (`recv_credit`, `credit_recved_rtt_`; its newest
        // compiles early stop out, `#define ECS 0`), never at the first credit, whose window
        // has just opened: a short flow starts at alpha x packets / 40 of the maximum rate, so
        // its first credits may come many RTTs apart, and a 2-packet flow judged on its first
        // credit stopped the credits before the second was sent, then waited for the
        // receiver's loss recovery (929 us against 469 on an idle simulated 10 Gbit/s link at
        // alpha 1/16). DIFFERENCE: the reference compares the window's count itself; here it
        // is scaled to one RTT, so that a window stretched by those slow first gaps does not
        // count for more than an RTT's worth of credits (counted as the reference does, a
        // 4-packet flow at alpha 1/16 stops one credit short and waits for recovery: 375 us
        // against 290). In a window of about an RTT the two agree.
        if self.stop_sent_at.is_some() {
            return;
        }
        let window = self.window_start.map(|start| ctx.now - start).unwrap_or_default();
        let window_closed = window >= rtt && !window.is_zero();
        let per_rtt = self.window_credits as f64 * rtt.as_secs_f64() / window.as_secs_f64().max(1e-12);
        if self.remaining() == 0 || (window_closed && self.early_stop && per_rtt >= self.remaining() as f64) {
            self.send_stop(ctx);
        }
        if window_closed {
            self.window_start = Some(ctx.now);
            self.window_credits = 0;
        }
    }

    /// Counts one credit into the trace window (closing the window first when it has lasted an
    /// RTT): spent on a packet named missing (`resend`), on a new one, or wasted.
    fn trace(&mut self, ctx: &mut Ctx, rtt: Duration, resend: bool) {
        let (Some(tally), Some(trace)) = (self.traced.as_mut(), ctx.trace.as_deref_mut()) else { return };
        let start = *tally.start.get_or_insert(ctx.now);
        if ctx.now - start >= rtt && tally.credits > 0 {
            let line = SenderTrace {
                at_us: ctx.now_us,
                dst: self.spec.dst,
                id: self.spec.id,
                window: ctx.now - start,
                credits: tally.credits,
                data: tally.data,
                retransmits: tally.retransmits,
                wasted: tally.wasted,
            };
            trace.push_back(Trace::Sender(line));
            *tally = Tally { start: Some(ctx.now), ..Tally::default() };
        }
        tally.credits += 1;
        if resend {
            tally.retransmits += 1;
        } else if self.next_seq < self.packets {
            tally.data += 1;
        } else {
            tally.wasted += 1;
        }
    }

    fn send_stop(&mut self, ctx: &mut Ctx) {
        ctx.send(self.spec.dst, self.path_id, Ecn::NotEct, &Packet::CreditStop { flow: self.spec.id });
        self.stop_sent_at = Some(ctx.now);
    }

    /// The receiver misses these packets: spend the next credits on them (it restarts the
    /// credits after the stop that made it look).
    pub fn on_nack(&mut self, missing: &[u32]) {
        for &seq in missing {
            if seq < self.next_seq && self.queued.insert(seq) {
                self.resend.push_back(seq);
            }
        }
        // Something is left to send (named again, or never sent because credits an early
        // stop counted on were dropped): the stop no longer holds, and must not be repeated.
        if self.remaining() > 0 {
            self.stop_sent_at = None;
            self.early_stop = false;
        }
    }

    /// Unanswered credit request, or a stop without a Finish: ask again.
    pub fn deadline(&self, config: &EndpointConfig) -> Option<Instant> {
        if self.first_credit_at.is_none() {
            Some(self.request_sent_at + config.control_timeout)
        } else {
            self.stop_sent_at.map(|at| at + config.control_timeout)
        }
    }

    /// Sends one control packet again.
    pub fn on_timeout(&mut self, ctx: &mut Ctx) {
        if self.first_credit_at.is_none() {
            self.send_request(ctx);
        } else {
            self.send_stop(ctx);
        }
    }

    pub fn record(&self, host: HostId, end_us: u64, credits_sent: u32) -> FlowRecord {
        FlowRecord {
            retransmits: self.retransmits,
            credits_sent: credits_sent as u64,
            credits_wasted: self.credits_wasted,
            ..FlowRecord::of(&self.spec, host, self.start_us, end_us)
        }
    }
}
