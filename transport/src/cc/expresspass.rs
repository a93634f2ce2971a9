//! ExpressPass credit feedback control (SIGCOMM 2017, Algorithm 1; reference: ns2-xpass
//! `xpass.cc`, summarised in ../shared/reference/README.md).

use std::time::{Duration, Instant};

use super::{CreditFeedback, CreditRateControl};

/// Parameters, with the paper's defaults.
#[derive(Debug, Clone)]
pub struct ExpressPassConfig {
    /// Highest credit rate: the credit share of the link, credit bytes per second
    /// (84 / (84 + 1538) of the link rate).
    pub max_rate: f64,
    /// Initial rate as a fraction of `max_rate` (1/2; the paper uses 1/16 for realistic
    /// workloads, Figure 18).
    pub alpha: f64,
    /// Initial aggressiveness w (= alpha in the paper's runs).
    pub w_init: f64,
    /// Floor of w (0.01).
    pub w_min: f64,
    /// Ceiling of w (0.5).
    pub w_max: f64,
    /// Step by which w grows per increasing period (0.05).
    pub w_step: f64,
    /// target_loss = (1 - rate / max_rate) * target_loss_factor (0.125).
    pub target_loss_factor: f64,
    /// Average credit size on the wire, bytes (84).
    pub credit_bytes: f64,
    /// Pacing jitter: the gap is scaled by 1 + jitter * this (0.1).
    pub jitter: f64,
}

impl ExpressPassConfig {
    pub fn for_link(link_bits_per_second: f64) -> Self {
        Self {
            max_rate: link_bits_per_second / 8.0 * 84.0 / (84.0 + 1538.0),
            alpha: 0.5,
            w_init: 0.5,
            w_min: 0.01,
            w_max: 0.5,
            w_step: 0.05,
            target_loss_factor: 0.125,
            credit_bytes: 84.0,
            jitter: 0.1,
        }
    }

    pub fn build(&self) -> ExpressPass {
        ExpressPass { config: self.clone(), rate: self.alpha * self.max_rate, w: self.w_init, decreased_last: false }
    }
}

#[derive(Debug, Clone)]
pub struct ExpressPass {
    config: ExpressPassConfig,
    /// Current credit rate, credit bytes per second.
    rate: f64,
    /// Aggressiveness of the increase.
    w: f64,
    /// Whether the previous period cut the rate (then w may not grow).
    decreased_last: bool,
}

impl ExpressPass {
    pub fn w(&self) -> f64 {
        self.w
    }

    fn target_loss(&self) -> f64 {
        (1.0 - self.rate / self.config.max_rate) * self.config.target_loss_factor
    }
}

impl CreditRateControl for ExpressPass {
    fn on_feedback(&mut self, _now: Instant, feedback: CreditFeedback) {
        if feedback.credits == 0 {
            return;
        }
        let c = &self.config;
        let loss = feedback.lost as f64 / feedback.credits as f64;
        let target_loss = self.target_loss();
        let one_credit_per_rtt = c.credit_bytes / feedback.rtt.as_secs_f64().max(1e-9);
        if loss > target_loss {
            // Decrease to the rate the credits actually got through at, plus target_loss.
            self.rate = if loss >= 1.0 {
                one_credit_per_rtt
            } else {
                let delivered = (feedback.credits - feedback.lost) as f64 * c.credit_bytes;
                let measured = delivered / feedback.elapsed.as_secs_f64().max(1e-9);
                self.rate.min(measured * (1.0 + target_loss))
            };
            self.w = (self.w / 2.0).max(c.w_min);
            self.decreased_last = true;
        } else {
            if !self.decreased_last {
                self.w = (self.w + c.w_step).min(c.w_max);
            }
            self.rate = self.w * c.max_rate + (1.0 - self.w) * self.rate;
            self.decreased_last = false;
        }
        self.rate = self.rate.clamp(one_credit_per_rtt.min(c.max_rate), c.max_rate);
    }

    fn rate(&self) -> f64 {
        self.rate
    }

    fn credit_gap(&self, jitter: f64) -> Duration {
        let gap = self.config.credit_bytes / self.rate * (1.0 + jitter.clamp(-1.0, 1.0) * self.config.jitter);
        Duration::from_secs_f64(gap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTT: Duration = Duration::from_micros(100);

    fn feedback(credits: u64, lost: u64) -> CreditFeedback {
        CreditFeedback { credits, lost, elapsed: RTT, rtt: RTT }
    }

    fn ten_gig() -> ExpressPass {
        ExpressPassConfig::for_link(10e9).build()
    }

    #[test]
    fn starts_at_alpha_of_the_credit_share_of_the_link() {
        let cc = ten_gig();
        assert!((cc.config.max_rate - 64_734_895.0).abs() < 1.0, "{}", cc.config.max_rate);
        assert_eq!(cc.rate(), cc.config.max_rate / 2.0);
    }

    #[test]
    fn lossless_periods_converge_to_the_maximum_rate() {
        let (mut cc, now) = (ten_gig(), Instant::now());
        for _ in 0..20 {
            cc.on_feedback(now, feedback(100, 0));
        }
        assert!(cc.rate() > 0.999 * cc.config.max_rate && cc.rate() <= cc.config.max_rate);
        assert_eq!(cc.w(), 0.5);
    }

    #[test]
    fn loss_above_target_cuts_to_the_delivered_rate_and_halves_w() {
        let (mut cc, now) = (ten_gig(), Instant::now());
        let before = cc.rate();
        cc.on_feedback(now, feedback(100, 50));
        let target_loss = (1.0 - before / cc.config.max_rate) * 0.125;
        let delivered = 50.0 * 84.0 / RTT.as_secs_f64() * (1.0 + target_loss);
        assert!((cc.rate() - delivered.min(before)).abs() < 1.0);
        assert_eq!(cc.w(), 0.25);
    }

    #[test]
    fn w_does_not_grow_right_after_a_decrease() {
        let (mut cc, now) = (ten_gig(), Instant::now());
        cc.on_feedback(now, feedback(100, 50));
        cc.on_feedback(now, feedback(100, 0));
        assert_eq!(cc.w(), 0.25);
        cc.on_feedback(now, feedback(100, 0));
        assert_eq!(cc.w(), 0.3);
    }

    #[test]
    fn total_loss_falls_back_to_one_credit_per_rtt_and_w_to_its_floor() {
        let (mut cc, now) = (ten_gig(), Instant::now());
        for _ in 0..10 {
            cc.on_feedback(now, feedback(100, 100));
        }
        assert!((cc.rate() - 84.0 / RTT.as_secs_f64()).abs() < 1e-6);
        assert_eq!(cc.w(), 0.01);
    }

    #[test]
    fn credit_gap_is_the_credit_size_over_the_rate_spread_by_ten_percent() {
        let cc = ten_gig();
        let nominal = 84.0 / cc.rate();
        // Durations resolve nanoseconds.
        assert!((cc.credit_gap(0.0).as_secs_f64() - nominal).abs() < 1e-9);
        assert!((cc.credit_gap(1.0).as_secs_f64() - 1.1 * nominal).abs() < 1e-9);
        assert!((cc.credit_gap(-1.0).as_secs_f64() - 0.9 * nominal).abs() < 1e-9);
    }
}
