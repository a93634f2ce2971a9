//! Receiver-driven schemes, data receiving side: paces credits for one flow at the rate (and
//! over the paths) its credit control ([`crate::cc::CreditControl`]) decides, feeds it every
//! data packet's echo, stops at the sender's credit stop, asks for what is missing, and
//! finishes.

use std::time::{Duration, Instant};

use rand::RngExt;

use super::{Ctx, OutOfRange, ReceivedSet, MAX_AHEAD};
use crate::cc::{CreditControl, Echo};
use crate::config::EndpointConfig;
use crate::record::{ReceiverTrace, Trace};
use crate::types::{Ecn, HostId};
use crate::wire::{Kind, Packet, NACK_MAX_SEQS};

/// Credits a late timer may send back to back (the port's credit buffer is 8).
const CATCH_UP_CREDITS: u32 = 4;

/// What a data packet brought besides its sequence number.
pub(crate) struct DataArrival {
    pub seq: u32,
    pub echo_credit_seq: u32,
    pub echo_sent_us: u32,
    pub credit_ce: bool,
    pub path_id: u8,
    pub wire_bytes: u64,
    pub payload_bytes: u64,
}

pub(crate) struct CreditingReceiver {
    src: HostId,
    flow: u32,
    /// The flow's path-id: its control packets' (and its credits', unless the scheme sprays).
    path_id: u8,
    packets: u32,
    received: ReceivedSet,
    /// Payload bytes of the packets in `received` (each counted once).
    bytes: u64,
    cc: Box<dyn CreditControl>,
    /// When the next credit goes out; `None` while stopped.
    next_credit_at: Option<Instant>,
    next_credit_seq: u32,
    credits_sent: u32,
    /// EWMA (0.8 old / 0.2 new) of credit -> data delays (ns2-xpass `update_rtt`).
    rtt: Option<Duration>,
    /// After a credit stop with data missing: when to ask for it (two RTTs after the last
    /// data packet).
    recovery_at: Option<Instant>,
    /// Tracing (`Ctx::trace`): what the next trace line counts; `None` when off.
    traced: Option<Tally>,
}

/// What a receiver's next trace line counts (`ReceiverTrace`), since its last one.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    /// `next_credit_seq` at the last line.
    from_seq: u32,
    back_to_back: u64,
    behind: u64,
}

impl CreditingReceiver {
    pub fn new(ctx: &mut Ctx, src: HostId, flow: u32, packets: u64, path_id: u8, cc: Box<dyn CreditControl>) -> Self {
        Self {
            src,
            flow,
            path_id,
            packets: packets.min(u32::MAX as u64) as u32,
            received: ReceivedSet::default(),
            bytes: 0,
            cc,
            next_credit_at: Some(ctx.now),
            next_credit_seq: 0,
            credits_sent: 0,
            rtt: None,
            recovery_at: None,
            traced: ctx.trace.is_some().then(Tally::default),
        }
    }

    pub fn path_id(&self) -> u8 {
        self.path_id
    }

    /// Bytes of its arrival bitmap.
    pub fn held_bytes(&self) -> usize {
        self.received.held_bytes()
    }

    pub fn credits_sent(&self) -> u32 {
        self.credits_sent
    }

    /// Payload bytes received so far, in order or not, each packet counted once.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn credits_lost(&self) -> u64 {
        self.cc.credits_lost()
    }

    /// Ok(true) once every packet of the flow has arrived.
    pub fn on_data(&mut self, ctx: &mut Ctx, data: DataArrival, config: &EndpointConfig) -> Result<bool, OutOfRange> {
        // A sequence number the flow cannot have, too far ahead for the bitmap, or an echo of
        // a credit never sent: not data of this flow. Nor a packet numbered beyond the credits
        // sent: each new packet spends one (so a sender cannot grow the bitmap past them).
        let too_far = data.seq.saturating_sub(self.received.cumulative()) > MAX_AHEAD;
        let unpaid = data.seq >= self.next_credit_seq;
        if data.seq >= self.packets || too_far || unpaid || data.echo_credit_seq >= self.next_credit_seq {
            return Err(OutOfRange);
        }
        if self.received.insert(data.seq) {
            self.bytes += data.payload_bytes;
        }
        let sample = ctx.since_us(data.echo_sent_us);
        let srtt = match self.rtt {
            None => sample,
            Some(rtt) => rtt.mul_f64(0.8) + sample.mul_f64(0.2),
        };
        self.rtt = Some(srtt);
        let echo = Echo {
            credit_seq: data.echo_credit_seq,
            path_id: data.path_id,
            credit_ce: data.credit_ce,
            wire_bytes: data.wire_bytes,
            srtt,
        };
        self.cc.on_echo(ctx.now, &echo);
        if self.recovery_at.is_some() {
            // Stopped, and the data bought by the last credits is still coming in.
            self.recovery_at = Some(ctx.now + self.recovery_wait(self.rtt.unwrap_or(config.initial_rtt)));
        }
        if self.received.count() == self.packets as u64 {
            self.next_credit_at = None;
            self.recovery_at = None;
            return Ok(true);
        }
        Ok(false)
    }

    pub fn on_credit_stop(&mut self, ctx: &mut Ctx, config: &EndpointConfig) {
        self.next_credit_at = None;
        // Data bought by the last credits may still be on its way: ask for what is missing
        // only once none has arrived for a while (`recovery_wait`; data pushes the wait back,
        // a repeated stop must not, or stops repeated faster would hold it off forever).
        if self.recovery_at.is_none() {
            let rtt = self.rtt.unwrap_or(config.initial_rtt);
            self.recovery_at = Some(ctx.now + self.recovery_wait(rtt));
        }
    }

    /// How long no data must arrive before packets count as missing: two RTTs, plus two of
    /// the flow's own credit gaps (a flow among many gets its packets that far apart).
    fn recovery_wait(&self, rtt: Duration) -> Duration {
        2 * (rtt + self.cc.credit_gap(0.0))
    }

    pub fn deadline(&self) -> Option<Instant> {
        [self.next_credit_at, self.recovery_at].into_iter().flatten().min()
    }

    pub fn on_timeout(&mut self, ctx: &mut Ctx) {
        if self.recovery_at.is_some_and(|at| at <= ctx.now) {
            // Stopped with packets missing: name them, and pay for them with fresh credits.
            // (DIFFERENCE: the reference is go-back-N: a NACK for the first gap, out-of-order
            // data discarded, the sender re-requesting credits; a lost last packet is never
            // found there. Here data is kept and every missing packet named at once.)
            self.recovery_at = None;
            let missing = self.received.missing(self.packets, NACK_MAX_SEQS);
            ctx.send(self.src, self.path_id, Ecn::NotEct, &Packet::Nack { flow: self.flow, missing });
            self.cc.on_restart(ctx.now, self.next_credit_seq);
            self.next_credit_at = Some(ctx.now);
        }
        let Some(due) = self.next_credit_at else { return };
        if due > ctx.now {
            return;
        }
        // The reference runs its feedback before each credit and paces the next one at the
        // rate it set.
        let feedback = self.cc.on_credit(ctx.now);
        if let Some(tally) = self.traced.as_mut() {
            if let (Some(step), Some(trace)) = (feedback, ctx.trace.as_deref_mut()) {
                let line = ReceiverTrace {
                    at_us: ctx.now_us,
                    src: self.src,
                    id: self.flow,
                    credits_sent: self.next_credit_seq.wrapping_sub(tally.from_seq) as u64,
                    back_to_back: tally.back_to_back,
                    behind: tally.behind,
                    step,
                };
                trace.push_back(Trace::Receiver(line));
                *tally = Tally { from_seq: self.next_credit_seq, ..Tally::default() };
            }
            // The shell sends what this event queued in one batch: another flow's credit
            // already queued reaches this host's credit queue first.
            let src = self.src;
            tally.behind += ctx.out.iter().any(|t| t.kind == Kind::Credit && t.dst != src) as u64;
        }
        let path_id = self.cc.next_path(ctx.rng, self.path_id);
        ctx.send(
            self.src,
            path_id,
            Ecn::NotEct,
            &Packet::Credit { flow: self.flow, credit_seq: self.next_credit_seq, sent_us: ctx.now_us as u32 },
        );
        self.next_credit_seq += 1;
        self.credits_sent += 1;
        let gap = self.cc.credit_gap(ctx.rng.random_range(-1.0..=1.0));
        // Keep the average rate after a late wake-up by sending the credits owed at once, up
        // to CATCH_UP_CREDITS: this host's own port paces them out at the credit share and
        // its credit queue holds that many; more would be dropped there.
        let owed_limit = gap * CATCH_UP_CREDITS;
        let next = (due + gap).max(ctx.now.checked_sub(owed_limit).unwrap_or(ctx.now));
        self.next_credit_at = Some(next);
        if let Some(tally) = self.traced.as_mut() {
            tally.back_to_back += (next <= ctx.now) as u64;
        }
    }
}
