//! Sender-driven schemes (DCTCP, DCTCP+, DCQCN), data sending side: a reliable window-based
//! transfer over UDP. Sends while the window ([`crate::cc::SenderControl`]) allows and its
//! send gate (`next_send`: DCTCP+'s slow_time, DCQCN's rate pacer) has opened, ECN-capable;
//! new cumulative acks grow it, their CE echoes shrink it (DCQCN: CNPs set its rate); three duplicate acks retransmit the first missing
//! packet (NewReno-style recovery: one window cut per loss window); a retransmission timeout
//! (RFC 6298, floored at `rto_min`) resends the first unacked packet, and goes back to it for
//! the rest only if the original was lost: the ack's echoed send time tells whether the
//! original or the retransmission arrived (Eifel detection, RFC 3522). On this emulator a
//! CPU stall can hold packets past `rto_min`; resending the whole window then would double
//! the load that caused it.

use std::collections::VecDeque;
use std::time::Instant;

use super::{packets_of, payload_of, Ctx, RttEstimator};
use crate::cc::{Ack, SenderControl};
use crate::config::EndpointConfig;
use crate::record::{FlowRecord, FlowSpec};
use crate::types::{Ecn, HostId};
use crate::wire::{CnpFlag, Packet, DATA_HEADER_BYTES};

const DUPLICATE_ACKS: u32 = 3;

/// What a sender-driven flow keeps of its path to one host beyond its own end: its congestion
/// control and RTT estimate, which the next flow to that host takes over, as successive
/// responses on one persistent connection do (the DCTCP+ paper's incast).
pub(crate) struct Connection {
    pub cc: Box<dyn SenderControl>,
    pub rtt: RttEstimator,
}
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
    cc: Box<dyn SenderControl>,
    rtt: RttEstimator,
    /// When each packet from `unacked` up to `highest_sent` was last sent (a loss's send
    /// time tells the control which window it belongs to).
    send_times: VecDeque<Instant>,
    /// The send gate is closed until then.
    gate_at: Option<Instant>,
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
    /// CNPs received, by flag (DCQCN): a flow with a CE one had packets marked CE on its way.
    cnps_ce: u64,
    cnps_ue: u64,
}

impl WindowSender {
    /// The flow's receiver: the only host whose acks, CNPs and Finish it takes.
    pub fn dst(&self) -> HostId {
        self.spec.dst
    }

    pub fn start(ctx: &mut Ctx, spec: FlowSpec, path_id: u8, connection: Connection, config: &EndpointConfig) -> Self {
        let Connection { mut cc, rtt } = connection;
        cc.on_flow_start(ctx.now);
        let mut sender = Self {
            packets: packets_of(spec.size_bytes, config.mss).min(u32::MAX as u64) as u32,
            spec,
            path_id,
            mss: config.mss,
            unacked: 0,
            next_seq: 0,
            highest_sent: 0,
            cc,
            rtt,
            send_times: VecDeque::new(),
            gate_at: None,
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
            cnps_ce: 0,
            cnps_ue: 0,
        };
        sender.send_window(ctx, config);
        sender
    }

    fn in_flight_bytes(&self) -> u64 {
        (self.next_seq - self.unacked) as u64 * self.mss as u64
    }

    fn send_window(&mut self, ctx: &mut Ctx, config: &EndpointConfig) {
        self.gate_at = None;
        while self.next_seq < self.packets && self.in_flight_bytes() < self.cc.window() {
            if let Some(at) = self.cc.next_send(ctx.now).filter(|&at| at > ctx.now) {
                self.gate_at = Some(at);
                break;
            }
            self.send(ctx, self.next_seq);
            self.next_seq += 1;
        }
        if self.rto_at.is_none() && self.expects_an_ack() {
            self.arm_rto(ctx, config);
        }
    }

    fn send(&mut self, ctx: &mut Ctx, seq: u32) {
        if seq < self.highest_sent {
            self.retransmits += 1;
        }
        self.highest_sent = self.highest_sent.max(seq + 1);
        // (The last packet resent while waiting for the Finish is acked already: no entry.)
        if let Some(index) = seq.checked_sub(self.unacked).map(|i| i as usize) {
            if index >= self.send_times.len() {
                self.send_times.resize(index + 1, ctx.now);
            }
            self.send_times[index] = ctx.now;
        }
        let payload_len = payload_of(seq, self.spec.size_bytes, self.mss);
        self.cc.on_sent(ctx.now, (DATA_HEADER_BYTES + payload_len as usize) as u64);
        ctx.send(
            self.spec.dst,
            self.path_id,
            Ecn::Ect0,
            &Packet::Data {
                flow: self.spec.id,
                seq,
                echo_credit_seq: 0,
                echo_sent_us: ctx.now_us as u32,
                payload_len,
                last: seq + 1 == self.packets,
                credit_ce: false,
                scheme: self.spec.scheme.wire_id(),
            },
        );
    }

    /// Data is in flight, or every packet is acked and the Finish is awaited: the
    /// retransmission timer runs. (Not while the send gate alone holds the next packet: a
    /// slow_time longer than the timeout must not read as a loss.)
    fn expects_an_ack(&self) -> bool {
        self.next_seq > self.unacked || self.unacked >= self.packets
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
        let sample = ctx.since_us(echo_sent_us);
        let signal = |acked_bytes, sender: &Self| Ack {
            acked_bytes,
            ece,
            sent: ctx.instant_of(echo_sent_us),
            rtt: sample,
            delivered_bytes: cumulative.min(sender.packets) as u64 * sender.mss as u64,
            sent_bytes: sender.highest_sent as u64 * sender.mss as u64,
        };
        if cumulative > self.unacked {
            // Karn: a sample from any new ack is fine here, since echo_sent_us is the send
            // time of the very packet acknowledged, retransmitted or not.
            self.rtt.sample(sample);
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
            self.cc.on_ack(ctx.now, &signal(acked, self));
            let done = (cumulative - self.unacked) as usize;
            self.send_times.drain(..done.min(self.send_times.len()));
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
            self.rto_at = None;
            if self.expects_an_ack() {
                self.arm_rto(ctx, config);
            }
        } else if self.next_seq > self.unacked {
            if ece {
                self.cc.on_ack(ctx.now, &signal(0, self));
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
                let lost_sent = self.send_times.front().copied().unwrap_or(ctx.now);
                self.cc.on_loss(ctx.now, lost_sent);
                self.recover = Some(self.next_seq);
                self.send(ctx, self.unacked);
            }
        }
        self.send_window(ctx, config);
    }

    /// A CNP from the receiver (DCQCN): the rate changes, so the send gate is asked again.
    pub fn on_congestion_notification(&mut self, ctx: &mut Ctx, flag: CnpFlag, config: &EndpointConfig) {
        match flag {
            CnpFlag::Congestion => self.cnps_ce += 1,
            CnpFlag::Undetermined => self.cnps_ue += 1,
        }
        self.cc.on_congestion_notification(ctx.now, flag);
        self.send_window(ctx, config);
    }

    /// The send gate, and the retransmission timer (after the last ack it waits for the
    /// Finish, and resends the last packet if that was lost).
    pub fn deadline(&self) -> Option<Instant> {
        [self.gate_at, self.rto_at].into_iter().flatten().min()
    }

    pub fn on_timeout(&mut self, ctx: &mut Ctx, config: &EndpointConfig) {
        if self.gate_at.is_some_and(|at| at <= ctx.now) {
            self.send_window(ctx, config);
        }
        if self.rto_at.is_none_or(|at| at > ctx.now) {
            return;
        }
        self.rto_at = None;
        self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
        if self.unacked >= self.packets {
            self.send(ctx, self.packets - 1);
            self.arm_rto(ctx, config);
            return;
        }
        self.timeouts += 1;
        self.unanswered_timeouts += 1;
        self.cc.on_timeout(ctx.now, self.in_flight_bytes());
        self.recover = None;
        self.duplicate_acks = 0;
        self.send(ctx, self.unacked);
        self.resent_on_timeout_us = Some(ctx.now_us as u32);
        self.arm_rto(ctx, config);
    }

    /// What the next flow to the same host takes over.
    pub fn into_connection(self) -> Connection {
        Connection { cc: self.cc, rtt: self.rtt }
    }

    pub fn record(&self, host: HostId, end_us: u64) -> FlowRecord {
        FlowRecord {
            retransmits: self.retransmits,
            timeouts: self.timeouts,
            spurious_timeouts: self.spurious_timeouts,
            cnps_ce: self.cnps_ce,
            cnps_ue: self.cnps_ue,
            ..FlowRecord::of(&self.spec, host, self.start_us, end_us)
        }
    }
}
