//! Congestion control behind two small traits: receiver-driven credit-rate control
//! (ExpressPass now, SprayPass later) and sender-driven window control (DCTCP now, DCTCP+
//! and DCQCN later). Every hook takes `now`; one file per algorithm.

use std::time::{Duration, Instant};

pub mod dctcp;
pub mod expresspass;

/// What the credit sender (the data receiver) learned in one feedback period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CreditFeedback {
    /// Credits accounted for in the period (echoed by data, or known lost).
    pub credits: u64,
    /// Of those, credits that never came back as data (gaps in the echoed sequence).
    pub lost: u64,
    /// Length of the period.
    pub elapsed: Duration,
    /// Current RTT estimate.
    pub rtt: Duration,
}

/// Receiver-driven: decides how fast credits are paced out.
pub trait CreditRateControl {
    /// Called at most once per RTT with what the period showed.
    fn on_feedback(&mut self, now: Instant, feedback: CreditFeedback);
    /// Current credit rate, in credit bytes per second on the wire.
    fn rate(&self) -> f64;
    /// Gap before the next credit; `jitter` in [-1, 1] spreads it by the algorithm's
    /// randomisation (the caller draws it, so the core stays deterministic).
    fn credit_gap(&self, jitter: f64) -> Duration;
}

/// Sender-driven: decides how many bytes may be in flight.
pub trait WindowControl {
    /// `acked` new bytes were acknowledged; `ece` says the ack echoed a CE mark.
    fn on_ack(&mut self, now: Instant, acked: u64, ece: bool);
    /// Loss detected by duplicate acks: one window reduction.
    fn on_loss(&mut self, now: Instant);
    /// Retransmission timeout.
    fn on_timeout(&mut self, now: Instant);
    /// The last timeouts were spurious (the originals arrived): undo what they did to the
    /// window (RFC 4015's response).
    fn on_spurious_timeout(&mut self, now: Instant);
    /// Congestion window, bytes.
    fn window(&self) -> u64;
}
