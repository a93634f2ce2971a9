//! DCTCP+ ("Slowing Little Quickens More", seed 002, section V): DCTCP, plus a delay
//! `slow_time` before every packet once the window is at its minimum and congestion goes on,
//! randomised so that hundreds of incast senders do not send in lockstep.
//!
//! States, evaluated on every ack (section V-D): NORMAL (plain DCTCP) -> TIME_INC when the
//! window is at its 1-MSS minimum and the ack echoes CE or follows a retransmission on
//! timeout; TIME_INC: each congested ack adds U[0, backoff_time_unit] to slow_time, the first
//! clean one halves it and moves to TIME_DES; TIME_DES: a congested ack goes back to TIME_INC
//! (adding), a clean one halves slow_time, and once it is below threshold_T, NORMAL (no delay).
//! Out of NORMAL the window stays at its minimum: slow_time is the window stretched below it
//! (section V-A), and the rate recovers through slow_time first (the paper's reading of
//! TIME_DES; Linux DCTCP underneath would otherwise grow the window on the clean acks that
//! shrink slow_time, and the bursts DCTCP+ exists to prevent come back at once).
//! Algorithm 1 as printed swaps the labels of its lines 15 and 21 (each would stay in its
//! state); this follows the text and the predicates' names. (The ns-3 attempt,
//! github.com/nseay/ns-3_DCTCP_plus, gets TIME_INC -> TIME_DES wrong.)

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::dctcp::{Dctcp, DctcpConfig};
use super::param::{self, Param, Range, Spec, Table};
use super::{Ack, Driver, Parameters, SchemeFactory, SenderControl};

#[derive(Debug, Clone)]
pub struct DctcpPlusConfig {
    /// The DCTCP underneath (its minimum window: 1 segment, section VI footnote 3).
    pub dctcp: DctcpConfig,
    /// backoff_time_unit: slow_time grows by U[0, this] per congested ack. `None`: the flow's
    /// base RTT (its smallest RTT sample; the paper's guideline, 100 us in its testbed).
    pub backoff_time_unit: Option<Duration>,
    /// Before the first RTT sample, the unit is this (the paper's default, 100 us).
    pub initial_backoff_time_unit: Duration,
    /// threshold_T as a fraction of the unit: below it TIME_DES returns to NORMAL. CHOICE: the
    /// paper gives no value. A hundredth keeps a sender pacing across the short quiet spells
    /// between incast requests: in the simulated incast (tests/sim_dctcp_plus.rs) 0.01 gives
    /// ~870 Mbit/s without timeouts at N = 50 and 100, where 0.1 gives 756 and 606 with 175 and
    /// 969 timeouts, and 0.3 543 and 558, about what DCTCP gets.
    pub threshold_fraction: f64,
    /// slow_time is divided by this per clean ack (divisor_factor, 2).
    pub divisor: f64,
}

impl DctcpPlusConfig {
    pub fn on(dctcp: DctcpConfig) -> Self {
        Self {
            dctcp: DctcpConfig { min_window_segments: 1, ..dctcp },
            backoff_time_unit: None,
            initial_backoff_time_unit: Duration::from_micros(100),
            threshold_fraction: 0.01,
            divisor: 2.0,
        }
    }

    /// Every time `d` times longer (`EndpointConfig::dilate`). threshold_T is a fraction of
    /// the unit, so it follows.
    pub fn dilate(&mut self, d: f64) {
        // Field by field, so that a time added later must be placed here.
        let DctcpPlusConfig { dctcp, backoff_time_unit, initial_backoff_time_unit, threshold_fraction: _, divisor: _ } =
            self;
        if let Some(unit) = backoff_time_unit {
            *unit = unit.mul_f64(d);
        }
        *initial_backoff_time_unit = initial_backoff_time_unit.mul_f64(d);
        dctcp.dilate(d);
    }

    pub fn build(&self, seed: u64) -> DctcpPlus {
        DctcpPlus {
            config: self.clone(),
            dctcp: self.dctcp.build(),
            state: State::Normal,
            slow_time: Duration::ZERO,
            base_rtt: None,
            retransmitted: false,
            gate: None,
            rng: SmallRng::seed_from_u64(seed),
        }
    }
}

/// `--param dctcp+.<name>=<value>` (`--slow-time-unit-us` sets slow_time_unit_us): its own,
/// then those of the DCTCP underneath.
const OWN_PARAMS: &[Spec<DctcpPlusConfig>] = &[
    Spec {
        name: "slow_time_unit_us",
        unit: "us",
        range: Range::Micros,
        doc: "backoff_time_unit: slow_time grows by U[0, this] per congested ack (unset: the flow's base RTT, \
              the paper's guideline)",
        get: |c| c.backoff_time_unit.map(param::micros),
        set: |c, v| c.backoff_time_unit = Some(param::from_micros(v)),
    },
    Spec {
        name: "initial_slow_time_unit_us",
        unit: "us",
        range: Range::Micros,
        doc: "the unit before the flow's first RTT sample",
        get: |c| Some(param::micros(c.initial_backoff_time_unit)),
        set: |c, v| c.initial_backoff_time_unit = param::from_micros(v),
    },
    Spec {
        name: "threshold_fraction",
        unit: "fraction",
        range: Range::Fraction,
        doc: "threshold_T, of the unit: below it TIME_DES returns to NORMAL",
        get: |c| Some(c.threshold_fraction),
        set: |c, v| c.threshold_fraction = v,
    },
    Spec {
        name: "divisor",
        unit: "factor",
        range: Range::Positive,
        doc: "divisor_factor: slow_time is divided by this per clean ack",
        get: |c| Some(c.divisor),
        set: |c, v| c.divisor = v,
    },
];

/// Two tables, its own and its DCTCP's, under its name.
impl Parameters for DctcpPlusConfig {
    fn params(&self) -> Vec<Param> {
        let mut params = param::describe(self, OWN_PARAMS);
        params.extend(param::describe(&self.dctcp, DctcpConfig::PARAMS));
        params
    }

    fn set_param(&mut self, key: &str, value: &str) -> Result<(), String> {
        let name = self.name();
        if DctcpConfig::PARAMS.iter().any(|spec| spec.name == key) {
            param::set(&mut self.dctcp, DctcpConfig::PARAMS, name, key, value)
        } else if OWN_PARAMS.iter().any(|spec| spec.name == key) {
            param::set(self, OWN_PARAMS, name, key, value)
        } else {
            Err(param::unknown(name, key, self.params().iter().map(|p| p.name)))
        }
    }
}

impl SchemeFactory for DctcpPlusConfig {
    fn name(&self) -> &'static str {
        "dctcp+"
    }

    fn wire_id(&self) -> u8 {
        4
    }

    fn driver(&self) -> Driver {
        Driver::Sender
    }

    /// DCTCP's ports: the same K marking.
    fn port_profile(&self) -> &'static str {
        "dctcp"
    }

    fn dilate(&mut self, d: f64) {
        DctcpPlusConfig::dilate(self, d);
    }

    fn sender_control(&self, seed: u64) -> Option<Box<dyn SenderControl>> {
        Some(Box::new(self.build(seed)))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Normal,
    TimeInc,
    TimeDes,
}

#[derive(Debug, Clone)]
pub struct DctcpPlus {
    config: DctcpPlusConfig,
    dctcp: Dctcp,
    state: State,
    /// Delay before each packet, in TIME_INC and TIME_DES.
    slow_time: Duration,
    base_rtt: Option<Duration>,
    /// A retransmission on timeout happened since the last ack (a congestion signal).
    retransmitted: bool,
    /// When the packet waiting to leave may go: slow_time after it became ready.
    gate: Option<Instant>,
    rng: SmallRng,
}

impl DctcpPlus {
    pub fn state(&self) -> State {
        self.state
    }

    pub fn slow_time(&self) -> Duration {
        self.slow_time
    }

    fn unit(&self) -> Duration {
        self.config.backoff_time_unit.or(self.base_rtt).unwrap_or(self.config.initial_backoff_time_unit)
    }

    fn backoff(&mut self) {
        self.slow_time += self.unit().mul_f64(self.rng.random_range(0.0..=1.0));
    }

    fn divide(&mut self) {
        self.slow_time = self.slow_time.div_f64(self.config.divisor);
    }

    /// `ndctcp_status_evolution()`, once per ack.
    /// `at_minimum`: the window was at its minimum when the ack came (before DCTCP's own cut).
    fn evolve(&mut self, congested: bool, at_minimum: bool) {
        match (self.state, congested) {
            (State::Normal, true) if at_minimum => {
                self.state = State::TimeInc;
                self.slow_time = Duration::ZERO;
                self.backoff();
            }
            (State::Normal, _) => {}
            (State::TimeInc, true) => self.backoff(),
            (State::TimeInc, false) => {
                self.state = State::TimeDes;
                self.divide();
            }
            (State::TimeDes, true) => {
                self.state = State::TimeInc;
                self.backoff();
            }
            (State::TimeDes, false) => {
                if self.slow_time > self.unit().mul_f64(self.config.threshold_fraction) {
                    self.divide();
                } else {
                    self.state = State::Normal;
                    self.slow_time = Duration::ZERO;
                }
            }
        }
    }
}

impl SenderControl for DctcpPlus {
    fn on_flow_start(&mut self, now: Instant) {
        self.dctcp.on_flow_start(now);
        (self.retransmitted, self.gate) = (false, None);
    }

    fn on_sent(&mut self, now: Instant, bytes: u64) {
        self.gate = None;
        self.dctcp.on_sent(now, bytes);
    }

    fn on_ack(&mut self, now: Instant, ack: &Ack) {
        self.base_rtt = Some(self.base_rtt.map_or(ack.rtt, |b| b.min(ack.rtt)));
        let at_minimum = self.dctcp.window() <= self.dctcp.min_window();
        self.dctcp.on_ack(now, ack);
        let congested = ack.ece || std::mem::take(&mut self.retransmitted);
        self.evolve(congested, at_minimum);
        if self.state != State::Normal {
            // slow_time stretches the window below its minimum: the window stays there until
            // slow_time has shrunk away (TIME_DES -> NORMAL), "multiplying the rate" only then.
            self.dctcp.hold_at_minimum();
        }
    }

    fn on_loss(&mut self, now: Instant, lost_sent: Instant) {
        self.dctcp.on_loss(now, lost_sent);
    }

    fn on_timeout(&mut self, now: Instant, flight_bytes: u64) {
        self.dctcp.on_timeout(now, flight_bytes);
        self.retransmitted = true;
    }

    fn on_spurious_timeout(&mut self, now: Instant) {
        self.dctcp.on_spurious_timeout(now);
        self.retransmitted = false;
    }

    fn window(&self) -> u64 {
        self.dctcp.window()
    }

    fn next_send(&mut self, now: Instant) -> Option<Instant> {
        // Section V-D: a packet ready to go is held slow_time (an hrtimer before
        // tcp_transmit_skb), so that senders woken together leave at random times apart.
        if self.state == State::Normal {
            return None;
        }
        Some(*self.gate.get_or_insert(now + self.slow_time))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1450;
    const UNIT: Duration = Duration::from_micros(100);

    fn at_minimum() -> (DctcpPlus, Instant) {
        let mut config = DctcpPlusConfig::on(DctcpConfig { mss: MSS, ..DctcpConfig::default() });
        config.backoff_time_unit = Some(UNIT);
        let mut cc = config.build(7);
        let now = Instant::now();
        cc.on_timeout(now, MSS); // window: one segment
        cc.retransmitted = false;
        (cc, now)
    }

    fn ack(cc: &mut DctcpPlus, now: Instant, ece: bool) {
        let ack = Ack { acked_bytes: MSS, ece, sent: now, rtt: UNIT, delivered_bytes: 0, sent_bytes: 0 };
        cc.on_ack(now, &ack);
    }

    #[test]
    fn a_mark_at_the_minimum_window_starts_the_delay_and_more_marks_grow_it() {
        let (mut cc, now) = at_minimum();
        ack(&mut cc, now, true);
        assert_eq!(cc.state(), State::TimeInc);
        let first = cc.slow_time();
        assert!(first <= UNIT);
        for _ in 0..20 {
            ack(&mut cc, now, true);
        }
        assert!(cc.slow_time() > first + 5 * UNIT, "{:?}", cc.slow_time());
        let held = cc.slow_time();
        assert_eq!(cc.next_send(now), Some(now + held), "a ready packet waits slow_time");
        assert_eq!(cc.next_send(now + held / 2), Some(now + held), "asked again: the same time");
        cc.on_sent(now + held, MSS);
        assert_eq!(cc.next_send(now + 2 * held), Some(now + 3 * held), "the next packet waits again");
    }

    #[test]
    fn clean_acks_halve_the_delay_until_it_is_below_the_threshold_then_dctcp_runs_alone() {
        let (mut cc, now) = at_minimum();
        for _ in 0..10 {
            ack(&mut cc, now, true);
        }
        let grown = cc.slow_time();
        ack(&mut cc, now, false);
        assert_eq!((cc.state(), cc.slow_time()), (State::TimeDes, grown / 2));
        let mut acks = 1;
        while cc.state() != State::Normal {
            ack(&mut cc, now, false);
            acks += 1;
            assert!(acks < 30);
        }
        assert_eq!(cc.slow_time(), Duration::ZERO);
        assert_eq!(cc.next_send(now), None);
    }

    #[test]
    fn a_mark_while_the_delay_shrinks_grows_it_again() {
        let (mut cc, now) = at_minimum();
        for _ in 0..10 {
            ack(&mut cc, now, true);
        }
        ack(&mut cc, now, false);
        let halved = cc.slow_time();
        ack(&mut cc, now, true);
        assert_eq!(cc.state(), State::TimeInc);
        assert!(cc.slow_time() >= halved);
    }

    #[test]
    fn while_it_paces_the_window_stays_at_its_minimum_and_grows_again_once_normal() {
        let (mut cc, now) = at_minimum();
        ack(&mut cc, now, true);
        for _ in 0..3 {
            ack(&mut cc, now, false);
            if cc.state() != State::Normal {
                assert_eq!(cc.window(), MSS, "{:?}", cc.state());
            }
        }
        while cc.state() != State::Normal {
            ack(&mut cc, now, false);
        }
        ack(&mut cc, now, false);
        assert!(cc.window() > MSS);
    }

    #[test]
    fn a_retransmission_on_timeout_counts_as_congestion() {
        let (mut cc, now) = at_minimum();
        cc.on_timeout(now, MSS);
        ack(&mut cc, now, false);
        assert_eq!(cc.state(), State::TimeInc);
    }

    #[test]
    fn above_the_minimum_window_a_mark_is_plain_dctcp() {
        let config = DctcpPlusConfig::on(DctcpConfig { mss: MSS, ..DctcpConfig::default() });
        let mut cc = config.build(7);
        ack(&mut cc, Instant::now(), true);
        assert_eq!((cc.state(), cc.next_send(Instant::now())), (State::Normal, None));
    }
}
