//! ExpressPass, receiving side: paces credits for one flow at the rate its feedback control
//! ([`crate::cc::expresspass`]) sets, once per RTT, from the credit sequence numbers the
//! data echoes; stops at the sender's credit stop, asks for what is missing, and finishes.

use std::time::{Duration, Instant};

use rand::RngExt;

use super::{packets_of, Ctx, ReceivedSet};
use crate::cc::expresspass::ExpressPass;
use crate::cc::{CreditFeedback, CreditRateControl};
use crate::endpoint::{Ecn, EndpointConfig, HostId};
use crate::wire::{Packet, NACK_MAX_SEQS};

/// Credits a late timer may send back to back (the port's credit buffer is 8).
const CATCH_UP_CREDITS: u32 = 4;

/// A data packet whose sequence number the flow cannot have.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct OutOfRange;

/// Credits echoed by data since the period began: the feedback control's input.
#[derive(Debug, Clone, Copy)]
struct Period {
    start: Instant,
    credits: u64,
    lost: u64,
}

pub(crate) struct CreditReceiver {
    src: HostId,
    flow: u32,
    path_id: u8,
    packets: u32,
    received: ReceivedSet,
    cc: ExpressPass,
    /// When the next credit goes out; `None` while stopped.
    next_credit_at: Option<Instant>,
    next_credit_seq: u32,
    credits_sent: u32,
    /// EWMA (0.8 old / 0.2 new) of credit -> data delays.
    rtt: Option<Duration>,
    /// Highest credit sequence number echoed so far.
    last_echo: Option<u32>,
    period: Period,
    /// After a credit stop with data missing: when to ask for it (two RTTs after the last
    /// data packet).
    recovery_at: Option<Instant>,
}

impl CreditReceiver {
    pub fn new(ctx: &mut Ctx, src: HostId, flow: u32, size_bytes: u64, path_id: u8, config: &EndpointConfig) -> Self {
        Self {
            src,
            flow,
            path_id,
            packets: packets_of(size_bytes, config.mss).min(u32::MAX as u64) as u32,
            received: ReceivedSet::default(),
            cc: config.expresspass.build(),
            next_credit_at: Some(ctx.now),
            next_credit_seq: 0,
            credits_sent: 0,
            rtt: None,
            last_echo: None,
            period: Period { start: ctx.now, credits: 0, lost: 0 },
            recovery_at: None,
        }
    }

    pub fn path_id(&self) -> u8 {
        self.path_id
    }

    pub fn credits_sent(&self) -> u32 {
        self.credits_sent
    }

    /// Ok(true) once every packet of the flow has arrived.
    pub fn on_data(
        &mut self,
        ctx: &mut Ctx,
        seq: u32,
        echo_credit_seq: u32,
        echo_sent_us: u32,
        config: &EndpointConfig,
    ) -> Result<bool, OutOfRange> {
        if seq >= self.packets {
            return Err(OutOfRange);
        }
        self.received.insert(seq);
        let sample = ctx.since_us(echo_sent_us);
        self.rtt = Some(match self.rtt {
            None => sample,
            Some(rtt) => rtt.mul_f64(0.8) + sample.mul_f64(0.2),
        });
        // Credits between the last echo and this one never came back: lost on the way
        // (credits are dropped by the ports' credit queues, or the data they bought was).
        match self.last_echo {
            Some(last) if echo_credit_seq > last => {
                self.period.credits += (echo_credit_seq - last) as u64;
                self.period.lost += (echo_credit_seq - last - 1) as u64;
                self.last_echo = Some(echo_credit_seq);
            }
            Some(_) => {} // a retransmission's or reordered echo: already accounted
            None => {
                self.period.credits += echo_credit_seq as u64 + 1;
                self.period.lost += echo_credit_seq as u64;
                self.last_echo = Some(echo_credit_seq);
            }
        }
        let rtt = self.rtt.unwrap_or(config.initial_rtt);
        if self.recovery_at.is_some() {
            // Stopped, and the data bought by the last credits is still coming in.
            self.recovery_at = Some(ctx.now + self.recovery_wait(rtt));
        }
        if ctx.now - self.period.start >= rtt {
            self.cc.on_feedback(
                ctx.now,
                CreditFeedback {
                    credits: self.period.credits,
                    lost: self.period.lost,
                    elapsed: ctx.now - self.period.start,
                    rtt,
                },
            );
            self.period = Period { start: ctx.now, credits: 0, lost: 0 };
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
        match (self.next_credit_at, self.recovery_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn on_timeout(&mut self, ctx: &mut Ctx) {
        if self.recovery_at.is_some_and(|at| at <= ctx.now) {
            // Stopped with packets missing: name them, and pay for them with fresh credits.
            self.recovery_at = None;
            let missing = self.received.missing(self.packets, NACK_MAX_SEQS);
            ctx.send(self.src, self.path_id, Ecn::NotEct, &Packet::Nack { flow: self.flow, missing });
            self.next_credit_at = Some(ctx.now);
        }
        let Some(due) = self.next_credit_at else { return };
        if due > ctx.now {
            return;
        }
        ctx.send(
            self.src,
            self.path_id,
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
        self.next_credit_at = Some((due + gap).max(ctx.now.checked_sub(owed_limit).unwrap_or(ctx.now)));
    }
}
