//! Window schemes (DCTCP), sending side: a reliable window-based transfer over UDP. Sends
//! while the window ([`crate::cc::WindowControl`]) allows, ECN-capable; new cumulative acks
//! grow it, their CE echoes shrink it; three duplicate acks retransmit the first missing
//! packet (NewReno-style recovery: one window cut per loss window); a retransmission timeout
//! (RFC 6298, floored at `rto_min`) resends the first unacked packet, and goes back to it for
//! the rest only if the original was lost: the ack's echoed send time tells whether the
//! original or the retransmission arrived (Eifel detection, RFC 3522). On this emulator a
//! CPU stall can hold packets past `rto_min`; resending the whole window then would double
//! the load that caused it.

use std::time::Instant;

use super::{packets_of, payload_of, Ctx, RttEstimator};
use crate::cc::dctcp::Dctcp;
use crate::cc::WindowControl;
use crate::endpoint::{Ecn, EndpointConfig, FlowRecord, FlowSpec, HostId};
use crate::wire::Packet;

const DUPLICATE_ACKS: u32 = 3;
/// Doubling of the timeout per unanswered retransmission stops here (2^6 x).
const MAX_BACKOFF: u32 = 6;

/// What an ack says (wire.rs `Packet::Ack`).
pub(crate) struct AckInfo {
    pub cumulative: u32,
    pub ece: bool,
    pub duplicate: bool,
    pub hole: bool,
    pub echo_sent_us: u32,
}

pub(crate) struct WindowSender {
    spec: FlowSpec,
    path_id: u8,
    mss: u16,
    packets: u32,
    /// First packet not acknowledged.
    unacked: u32,
    /// Next packet to send (goes back to `unacked` after a timeout).
    next_seq: u32,
    /// One past the highest packet ever sent: below it, a send is a retransmission.
    highest_sent: u32,
    cc: Dctcp,
    rtt: RttEstimator,
    duplicate_acks: u32,
    /// In loss recovery until this packet is acknowledged.
    recover: Option<u32>,
    rto_at: Option<Instant>,
    backoff: u32,
    /// Set by a timeout: the first unacked packet was resent at this time (32-bit us).
    resent_on_timeout_us: Option<u32>,
    start_us: u64,
    retransmits: u64,
    timeouts: u64,
    /// Timeouts found spurious by the echo of the ack that followed.
    spurious_timeouts: u64,
    /// Timeouts since the last new ack (all spurious, or none, once it comes).
    unanswered_timeouts: u64,
}

impl WindowSender {
    pub fn start(ctx: &mut Ctx, spec: FlowSpec, path_id: u8, config: &EndpointConfig) -> Self {
        let mut sender = Self {
            packets: packets_of(spec.size_bytes, config.mss).min(u32::MAX as u64) as u32,
            spec,
            path_id,
            mss: config.mss,
            unacked: 0,
            next_seq: 0,
            highest_sent: 0,
            cc: config.dctcp.build(),
            rtt: RttEstimator::default(),
            duplicate_acks: 0,
            recover: None,
            rto_at: None,
            backoff: 0,
            resent_on_timeout_us: None,
            start_us: ctx.now_us,
            retransmits: 0,
            timeouts: 0,
            spurious_timeouts: 0,
            unanswered_timeouts: 0,
        };
        sender.send_window(ctx, config);
        sender
    }

    fn in_flight_bytes(&self) -> u64 {
        (self.next_seq - self.unacked) as u64 * self.mss as u64
    }

    fn send_window(&mut self, ctx: &mut Ctx, config: &EndpointConfig) {
        while self.next_seq < self.packets && self.in_flight_bytes() < self.cc.window() {
            self.send(ctx, self.next_seq);
            self.next_seq += 1;
        }
        if self.rto_at.is_none() {
            self.arm_rto(ctx, config);
        }
    }

    fn send(&mut self, ctx: &mut Ctx, seq: u32) {
        if seq < self.highest_sent {
            self.retransmits += 1;
        }
        self.highest_sent = self.highest_sent.max(seq + 1);
        ctx.send(
            self.spec.dst,
            self.path_id,
            Ecn::Ect0,
            &Packet::Data {
                flow: self.spec.id,
                seq,
                echo_credit_seq: 0,
                echo_sent_us: ctx.now_us as u32,
                payload_len: payload_of(seq, self.spec.size_bytes, self.mss),
                last: seq + 1 == self.packets,
            },
        );
    }

    fn arm_rto(&mut self, ctx: &Ctx, config: &EndpointConfig) {
        let rto = self.rtt.rto(config.rto_min, config.rto_initial) * (1 << self.backoff);
        self.rto_at = Some(ctx.now + rto);
    }

    pub fn on_ack(&mut self, ctx: &mut Ctx, ack: AckInfo, config: &EndpointConfig) {
        let AckInfo { cumulative, ece, duplicate, hole, echo_sent_us } = ack;
        if cumulative > self.highest_sent {
            return; // acks what was never sent: not ours to believe
        }
        if cumulative > self.unacked {
            // Karn: a sample from any new ack is fine here, since echo_sent_us is the send
            // time of the very packet acknowledged, retransmitted or not.
            self.rtt.sample(ctx.since_us(echo_sent_us));
            if let Some(resent_us) = self.resent_on_timeout_us.take() {
                // Echo older than the retransmission: the original arrived, the timeout was
                // spurious and what followed it is still on its way. Otherwise go back.
                let original_arrived = (resent_us.wrapping_sub(echo_sent_us) as i32) > 0;
                if original_arrived {
                    self.spurious_timeouts += self.unanswered_timeouts;
                    self.cc.on_spurious_timeout(ctx.now);
                } else {
                    self.next_seq = cumulative;
                }
            }
            let acked = (cumulative - self.unacked) as u64 * self.mss as u64;
            self.cc.on_ack(ctx.now, acked, ece);
            self.unacked = cumulative;
            self.next_seq = self.next_seq.max(cumulative);
            self.unanswered_timeouts = 0;
            self.duplicate_acks = 0;
            self.backoff = 0;
            match self.recover {
                Some(point) if cumulative >= point => self.recover = None,
                // A partial ack: the next hole, if the receiver has anything beyond it (on this
                // emulator packets do get reordered across CPUs, so the frontier is no hole).
                Some(_) if hole && !duplicate => self.send(ctx, cumulative),
                _ => {}
            }
            self.arm_rto(ctx, config);
        } else if self.next_seq > self.unacked {
            if ece {
                self.cc.on_ack(ctx.now, 0, true);
            }
            if duplicate {
                // Our own needless retransmission came back: not a sign of a hole, and the
                // recovery that sent it was spurious.
                self.recover = None;
                self.send_window(ctx, config);
                return;
            }
            if !hole {
                return self.send_window(ctx, config);
            }
            self.duplicate_acks += 1;
            if self.duplicate_acks == DUPLICATE_ACKS && self.recover.is_none() {
                self.cc.on_loss(ctx.now);
                self.recover = Some(self.next_seq);
                self.send(ctx, self.unacked);
            }
        }
        self.send_window(ctx, config);
    }

    /// The retransmission timer; after the last ack it waits for the Finish (and resends
    /// the last packet if that was lost).
    pub fn deadline(&self) -> Option<Instant> {
        self.rto_at
    }

    pub fn on_timeout(&mut self, ctx: &mut Ctx, config: &EndpointConfig) {
        self.rto_at = None;
        self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
        if self.unacked >= self.packets {
            self.send(ctx, self.packets - 1);
            self.arm_rto(ctx, config);
            return;
        }
        self.timeouts += 1;
        self.unanswered_timeouts += 1;
        self.cc.on_timeout(ctx.now);
        self.recover = None;
        self.duplicate_acks = 0;
        self.send(ctx, self.unacked);
        self.resent_on_timeout_us = Some(ctx.now_us as u32);
        self.arm_rto(ctx, config);
    }

    pub fn record(&self, host: HostId, end_us: u64) -> FlowRecord {
        FlowRecord {
            retransmits: self.retransmits,
            timeouts: self.timeouts,
            spurious_timeouts: self.spurious_timeouts,
            ..FlowRecord::of(&self.spec, host, self.start_us, end_us)
        }
    }
}
