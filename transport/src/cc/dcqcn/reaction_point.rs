//! DCQCN's reaction point (RP): the sender's rate, cut by CNPs and recovered by a timer and a
//! byte counter (the algorithm and the sources of its defaults: [`crate::cc::dcqcn`]'s doc).
//!
//! The core is sans-IO like every controller here: DCQCN's timers are deadlines that every
//! hook first catches up to `now` (see [`Dcqcn::advance`]), so nothing needs waking for them.

use std::time::{Duration, Instant};

use super::DcqcnConfig;
use crate::cc::{Ack, SenderControl};
use crate::wire::{CnpFlag, FRAME_OVERHEAD_BYTES};

/// Which rate increase the stage counts call for (paper, section 3; the QCN RP it builds on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Neither the timer nor the byte counter has counted more than F stages: RC halves its
    /// distance to RT, RT stays.
    FastRecovery,
    /// One of them has: RT += R_AI, then RC = (RT + RC) / 2.
    AdditiveIncrease,
    /// Both have: RT += i R_HAI, i = (the smaller count) - F.
    HyperIncrease,
}

/// The reaction point of one connection (the algorithm: [`crate::cc::dcqcn`]'s doc).
#[derive(Debug, Clone)]
pub struct Dcqcn {
    config: DcqcnConfig,
    /// RC, bit/s on the wire.
    rate: f64,
    /// RT, bit/s on the wire.
    target: f64,
    alpha: f64,
    /// Next alpha decay; `None` before the first CNP (nothing to decay from yet: HPCC starts
    /// its alpha timer on the first CNP).
    alpha_due: Option<Instant>,
    /// Next timer increase event; `None` before the first CNP (the flow is at line rate).
    increase_due: Option<Instant>,
    /// Stages counted by the timer and by the byte counter since the last cut.
    timer_stages: u32,
    byte_stages: u32,
    /// Bytes sent (on the wire) since the byte counter last fired.
    counted_bytes: u64,
    /// When the last packet notionally left and its wire bytes: the next may leave its
    /// serialisation time at RC later.
    paced: Option<(Instant, u64)>,
    cuts: u64,
    holds: u64,
}

/// Whole periods in `elapsed` (a zero period counts as a nanosecond, never a busy loop).
fn periods(elapsed: Duration, period: Duration) -> u32 {
    (elapsed.as_nanos() / period.as_nanos().max(1)).min(u32::MAX as u128 - 1) as u32
}

/// `period` times `n`, exactly in nanoseconds.
fn times(period: Duration, n: u32) -> Duration {
    Duration::from_nanos((period.as_nanos().max(1) * n as u128).min(u64::MAX as u128) as u64)
}

impl Dcqcn {
    /// A new connection at the initial rate ([`DcqcnConfig::build`]): no CNP yet, so no timer runs.
    pub(super) fn new(config: DcqcnConfig) -> Self {
        let rate = config.initial_rate_bps.min(config.line_rate_bps);
        Self {
            rate,
            target: rate,
            alpha: config.initial_alpha,
            alpha_due: None,
            increase_due: None,
            timer_stages: 0,
            byte_stages: 0,
            counted_bytes: 0,
            paced: None,
            cuts: 0,
            holds: 0,
            config,
        }
    }

    /// RC, bit/s on the wire.
    pub fn rate_bps(&self) -> f64 {
        self.rate
    }

    /// RT, bit/s on the wire.
    pub fn target_bps(&self) -> f64 {
        self.target
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Cuts (CE CNPs) so far.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// UE CNPs that held the rate so far (TCD).
    pub fn holds(&self) -> u64 {
        self.holds
    }

    /// (timer stages, byte counter stages) since the last cut.
    pub fn stages(&self) -> (u32, u32) {
        (self.timer_stages, self.byte_stages)
    }

    /// The increase the stage counts call for now.
    pub fn phase(&self) -> Phase {
        let f = self.config.fast_recovery_stages;
        let (most, least) = (self.timer_stages.max(self.byte_stages), self.timer_stages.min(self.byte_stages));
        if most <= f {
            Phase::FastRecovery
        } else if least <= f {
            Phase::AdditiveIncrease
        } else {
            Phase::HyperIncrease
        }
    }

    /// Runs DCQCN's timers up to `now`: every hook calls this first, so a timer that expired
    /// between two hooks acts in its place in time (alpha and the rate increase do not read
    /// each other, so only their order against CNPs and sends matters, and that is kept).
    fn advance(&mut self, now: Instant) {
        if let Some(due) = self.alpha_due.filter(|&due| due <= now) {
            // Closed form: an idle connection may have missed millions of periods.
            let k = self.config.alpha_timer;
            let n = periods(now - due, k) + 1;
            self.alpha *= (1.0 - self.config.g).powf(n as f64);
            self.alpha_due = Some(due + times(k, n));
        }
        let t = self.config.increase_timer;
        while let Some(due) = self.increase_due.filter(|&due| due <= now) {
            if self.rate >= self.config.line_rate_bps && self.target >= self.config.line_rate_bps {
                // At line rate, further events only count stages.
                let n = periods(now - due, t) + 1;
                self.timer_stages = self.timer_stages.saturating_add(n);
                self.increase_due = Some(due + times(t, n));
                break;
            }
            self.increase_due = Some(due + times(t, 1));
            self.timer_stages = self.timer_stages.saturating_add(1);
            self.increase();
        }
    }

    /// One increase event, the stage counts already updated.
    fn increase(&mut self) {
        let c = &self.config;
        match self.phase() {
            Phase::FastRecovery => {}
            Phase::AdditiveIncrease => self.target += c.rate_ai_bps,
            Phase::HyperIncrease => {
                let i = self.timer_stages.min(self.byte_stages) - c.fast_recovery_stages;
                self.target += i as f64 * c.rate_hai_bps;
            }
        }
        self.target = self.target.min(c.line_rate_bps);
        self.rate = ((self.rate + self.target) / 2.0).min(c.line_rate_bps);
    }

    /// A CE CNP, in the paper's order: RT = RC, RC = RC (1 - beta alpha) with the alpha in
    /// effect, then alpha = (1 - g) alpha + g (ns3-rdma raises alpha before cutting; HPCC
    /// cuts with the alpha of its last periodic update). RT is always clamped to RC (the
    /// paper; HPCC run.py `CLAMP_TARGET_RATE 0` clamps only after an increase event).
    /// The alpha timer, the increase timer and both stage counts restart.
    fn cut(&mut self, now: Instant) {
        let c = &self.config;
        self.target = self.rate;
        self.rate = (self.rate * (1.0 - c.beta * self.alpha)).max(c.min_rate_bps);
        self.alpha = (1.0 - c.g) * self.alpha + c.g;
        self.alpha_due = Some(now + c.alpha_timer);
        self.increase_due = Some(now + c.increase_timer);
        (self.timer_stages, self.byte_stages, self.counted_bytes) = (0, 0, 0);
        self.cuts += 1;
    }

    /// A UE CNP (TCD). Seed 004 section 5.2.1: "Senders do not update the sending rate when
    /// receiving a CNP marked with UE"; section 5.2: "keep the flow rate until it becomes
    /// uncongested or congested". CHOICE: RC, RT and alpha stay (no cut, and UE is no
    /// evidence of congestion, so alpha's decay goes on); the increase timer and the byte
    /// counter start their period afresh, so that no increase comes within T (or B bytes)
    /// of a UE CNP. UE CNPs come every N = 50 us < T while UE marks do: the rate is held;
    /// once they stop, recovery resumes at the stage it had reached.
    fn hold(&mut self, now: Instant) {
        if let Some(due) = &mut self.increase_due {
            *due = now + self.config.increase_timer;
        }
        self.counted_bytes = 0;
        self.holds += 1;
    }

    /// Serialisation time of `wire_bytes` at RC.
    fn gap(&self, wire_bytes: u64) -> Duration {
        Duration::from_secs_f64(wire_bytes as f64 * 8.0 / self.rate.max(1.0))
    }

    /// When the next packet may leave: the last one's serialisation time at RC after it.
    fn due(&self) -> Option<Instant> {
        self.paced.map(|(at, wire_bytes)| at + self.gap(wire_bytes))
    }
}

impl SenderControl for Dcqcn {
    fn on_flow_start(&mut self, now: Instant) {
        // A persistent connection: rate, alpha and timers carry over (a QP's next message).
        self.advance(now);
    }

    fn on_sent(&mut self, now: Instant, bytes: u64) {
        self.advance(now);
        let wire_bytes = bytes + FRAME_OVERHEAD_BYTES;
        // A packet sent less than one packet time after it was due (a late timer) keeps the
        // schedule, so that timer lateness does not lower the rate; later than that the
        // sender was idle, and pacing starts again from now (no burst to catch up).
        let start = match self.due() {
            Some(due) if due <= now && now - due < self.gap(wire_bytes) => due,
            _ => now,
        };
        self.paced = Some((start, wire_bytes));
        // The byte counter runs, as the timer, from the first cut on.
        let b = self.config.byte_counter_bytes;
        if self.increase_due.is_some() && b > 0 {
            self.counted_bytes += wire_bytes;
            while self.counted_bytes >= b {
                self.counted_bytes -= b;
                self.byte_stages = self.byte_stages.saturating_add(1);
                self.increase();
            }
        }
    }

    fn on_ack(&mut self, now: Instant, _ack: &Ack) {
        // Acks only clock the window (and its loss recovery); DCQCN's signal is the CNP.
        self.advance(now);
    }

    /// RoCE answers a loss by go-back-N retransmission (HPCC rdma-hw.cc `RecoverQueue` on a
    /// NACK) and DCQCN leaves the rate alone: in a lossless fabric a loss is no congestion
    /// signal. The window sender retransmits; the rate stays.
    fn on_loss(&mut self, now: Instant, _lost_sent: Instant) {
        self.advance(now);
    }

    /// Likewise a timeout (RoCE's retransmission timer goes back N): the rate stays.
    fn on_timeout(&mut self, now: Instant, _flight_bytes: u64) {
        self.advance(now);
    }

    fn on_spurious_timeout(&mut self, _now: Instant) {}

    fn on_congestion_notification(&mut self, now: Instant, flag: CnpFlag) {
        self.advance(now);
        match flag {
            CnpFlag::Congestion => self.cut(now),
            CnpFlag::Undetermined if self.config.tcd => self.hold(now),
            // Plain DCQCN treats UE as unmarked (its NP sends no UE CNP anyway).
            CnpFlag::Undetermined => {}
        }
    }

    fn window(&self) -> u64 {
        self.config.window_bytes
    }

    fn next_send(&mut self, now: Instant) -> Option<Instant> {
        self.advance(now);
        self.due().filter(|&due| due > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINK: f64 = 40e9;
    const US: Duration = Duration::from_micros(1);

    fn dcqcn() -> (Dcqcn, Instant) {
        (DcqcnConfig::for_link(LINK).build(), Instant::now())
    }

    #[test]
    fn a_new_flow_is_paced_at_line_rate_with_nothing_to_wait_for_first() {
        let (mut cc, now) = dcqcn();
        assert_eq!(cc.next_send(now), None);
        cc.on_sent(now, 1472);
        let wire = 1472 + FRAME_OVERHEAD_BYTES;
        let gap = Duration::from_secs_f64(wire as f64 * 8.0 / LINK);
        assert_eq!(cc.next_send(now), Some(now + gap));
        assert_eq!(cc.next_send(now + gap), None);
    }

    #[test]
    fn a_send_a_little_late_keeps_the_pacing_schedule_and_one_after_idling_restarts_it() {
        let (mut cc, now) = dcqcn();
        cc.on_sent(now, 1472);
        let due = cc.next_send(now).unwrap();
        let gap = due - now;
        cc.on_sent(due + gap / 2, 1472);
        assert_eq!(cc.next_send(due + gap / 2), Some(due + gap), "the half-gap lateness is made up");
        let idle = due + 10 * gap;
        cc.on_sent(idle, 1472);
        assert_eq!(cc.next_send(idle), Some(idle + gap));
    }

    #[test]
    fn alpha_decays_once_per_period_without_cnps_even_over_a_long_idle_spell() {
        let (mut cc, now) = dcqcn();
        cc.on_congestion_notification(now, CnpFlag::Congestion);
        let after_cnp = cc.alpha();
        cc.next_send(now + 55 * US * 3 + US);
        let expected = after_cnp * (1.0 - 1.0 / 256.0_f64).powi(3);
        assert!((cc.alpha() - expected).abs() < 1e-12, "{} vs {expected}", cc.alpha());
        cc.next_send(now + Duration::from_secs(3600));
        assert!(cc.alpha() < 1e-9);
    }

    #[test]
    fn the_tcd_cut_never_takes_the_rate_below_the_minimum() {
        let mut cc = DcqcnConfig::for_link(LINK).with_tcd().build();
        let now = Instant::now();
        // alpha 1: 1 - 1.2 alpha is negative.
        cc.on_congestion_notification(now, CnpFlag::Congestion);
        assert_eq!(cc.rate_bps(), 100e6);
    }
}
