//! SprayPass (seed 003: workloads/README.md lists the seeds): ExpressPass's credits sprayed over every
//! equal-cost path, one path-id per credit ([`paths`]: uniform spraying and path probing), and
//! a sequence-free feedback: once per RTT the receiver compares the fraction of data packets
//! whose credit came CE-marked (the switches' credit queues mark with the probability they
//! drop, Pd) with `aim_ratio` (Algorithm 1, section III-B-3). No public code exists; choices
//! the paper leaves open are marked CHOICE.

mod paths;

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;

pub use paths::PathTable;

use super::param::{Range, Spec, Table};
use super::{credit_gap, one_credit_per_rtt, CreditControl, Driver, Echo, Feedback, SchemeFactory};

/// Parameters. The paper gives w_min, w_max, N_b and theta; the others are CHOICEs.
#[derive(Debug, Clone)]
pub struct SprayPassConfig {
    /// Highest credit rate: the credit share of the link, credit bytes per second.
    pub max_rate: f64,
    /// omega_init: the initial rate is omega_init x max_rate, and omega starts there
    /// (Algorithm 1, lines 1-2). CHOICE (no value in the paper): 1/2, ExpressPass's alpha.
    pub w_init: f64,
    /// omega's floor and ceiling (0.01, 0.5).
    pub w_min: f64,
    pub w_max: f64,
    /// The tolerated fraction of marked data: at or below it the rate increases. CHOICE (no
    /// value in the paper): 0.1, about ExpressPass's target loss at half the maximum rate.
    pub aim_ratio: f64,
    /// Average credit size on the wire, bytes (84), and pacing jitter (0.1), as ExpressPass.
    pub credit_bytes: f64,
    pub jitter: f64,
    /// Path probing: per-path speeds compared every this many bits of arriving data
    /// (N_b = 6 x 10^5), a path below theta x the fastest (0.1) is removed.
    pub probe_bits: u64,
    pub theta: f64,
    /// A removed path is sprayed again after this many probe intervals, doubling each time it
    /// is removed again (CHOICE: the paper never re-admits a path; see `PathTable`).
    pub readmit_after_probes: u32,
    /// Path-ids never sprayed: paths known bad before the flow starts (the probing tests use
    /// it as their oracle).
    pub excluded_paths: Vec<u8>,
}

impl SprayPassConfig {
    pub fn for_link(link_bits_per_second: f64) -> Self {
        Self {
            max_rate: link_bits_per_second / 8.0 * 84.0 / (84.0 + 1538.0),
            w_init: 0.5,
            w_min: 0.01,
            w_max: 0.5,
            aim_ratio: 0.1,
            credit_bytes: 84.0,
            jitter: 0.1,
            probe_bits: 600_000,
            theta: 0.1,
            readmit_after_probes: 8,
            excluded_paths: Vec::new(),
        }
    }

    /// The control of one flow over `paths` equal-cost paths (path-ids 0..paths), starting `now`.
    pub fn build(&self, now: Instant, paths: u16) -> SprayPass {
        SprayPass {
            config: self.clone(),
            rate: self.w_init * self.max_rate,
            w: self.w_init,
            increased_last: false,
            rtt: None,
            period: Period { start: now, data: 0, marked: 0 },
            paths: PathTable::new(paths, self.probe_bits, self.theta, self.readmit_after_probes)
                .without(&self.excluded_paths),
        }
    }
}

impl Table for SprayPassConfig {
    /// `--param spraypass.<name>=<value>` (`--w-init` sets w_init). The credit share is the
    /// link's; excluded paths are a test's oracle, no parameter.
    const PARAMS: &'static [Spec<Self>] = &[
        Spec {
            name: "w_init",
            unit: "fraction",
            range: Range::Fraction,
            doc: "omega_init: the initial rate is this x the maximum, and omega starts there",
            get: |c| Some(c.w_init),
            set: |c, v| c.w_init = v,
        },
        Spec {
            name: "w_min",
            unit: "fraction",
            range: Range::Fraction,
            doc: "floor of omega",
            get: |c| Some(c.w_min),
            set: |c, v| c.w_min = v,
        },
        Spec {
            name: "w_max",
            unit: "fraction",
            range: Range::Fraction,
            doc: "ceiling of omega",
            get: |c| Some(c.w_max),
            set: |c, v| c.w_max = v,
        },
        Spec {
            name: "aim_ratio",
            unit: "fraction",
            range: Range::UnitInterval,
            doc: "tolerated fraction of data whose credit came CE-marked: at or below it the rate increases",
            get: |c| Some(c.aim_ratio),
            set: |c, v| c.aim_ratio = v,
        },
        Spec {
            name: "jitter",
            unit: "fraction",
            range: Range::UnitInterval,
            doc: "credit pacing jitter: each gap is scaled by 1 + U[-1, 1] x this",
            get: |c| Some(c.jitter),
            set: |c, v| c.jitter = v,
        },
        Spec {
            name: "probe_bits",
            unit: "bits",
            range: Range::Count(1),
            doc: "path probing compares per-path speeds every this many bits of arriving data (N_b)",
            get: |c| Some(c.probe_bits as f64),
            set: |c, v| c.probe_bits = v as u64,
        },
        Spec {
            name: "theta",
            unit: "fraction",
            range: Range::UnitInterval,
            doc: "path probing removes a path below this x the fastest (0: never)",
            get: |c| Some(c.theta),
            set: |c, v| c.theta = v,
        },
        Spec {
            name: "readmit_after_probes",
            unit: "probes",
            range: Range::Count(1),
            doc: "a removed path is sprayed again after this many probe intervals, doubling per removal",
            get: |c| Some(c.readmit_after_probes.into()),
            set: |c, v| c.readmit_after_probes = v as u32,
        },
    ];
}

impl SchemeFactory for SprayPassConfig {
    fn name(&self) -> &'static str {
        "spraypass"
    }

    fn wire_id(&self) -> u8 {
        2
    }

    fn driver(&self) -> Driver {
        Driver::Receiver
    }

    fn port_profile(&self) -> &'static str {
        "spraypass"
    }

    fn dilate(&mut self, _d: f64) {
        // No time among them (the probe interval is in bits). Field by field, so that a time
        // added later must be placed here.
        let SprayPassConfig {
            max_rate: _,
            w_init: _,
            w_min: _,
            w_max: _,
            aim_ratio: _,
            credit_bytes: _,
            jitter: _,
            probe_bits: _,
            theta: _,
            readmit_after_probes: _,
            excluded_paths: _,
        } = self;
    }

    fn credit_control(&self, now: Instant, _packets: u64, paths: u16) -> Option<Box<dyn CreditControl>> {
        Some(Box::new(self.build(now, paths)))
    }
}

#[derive(Debug, Clone, Copy)]
struct Period {
    start: Instant,
    /// Data packets that arrived in the period, and those whose credit was CE-marked.
    data: u64,
    marked: u64,
}

#[derive(Debug, Clone)]
pub struct SprayPass {
    config: SprayPassConfig,
    /// Current credit rate, credit bytes per second.
    rate: f64,
    /// omega: aggressiveness of the increase.
    w: f64,
    /// The previous period increased too (then omega moves halfway to its ceiling).
    increased_last: bool,
    rtt: Option<Duration>,
    period: Period,
    paths: PathTable,
}

impl SprayPass {
    pub fn w(&self) -> f64 {
        self.w
    }

    /// Algorithm 1, lines 3-12, over the period that ends `now`.
    fn feedback(&mut self, now: Instant, rtt: Duration) -> Feedback {
        let c = &self.config;
        let (rate_before, w_before, period) = (self.rate, self.w, self.period);
        let ecn_ratio = self.period.marked as f64 / self.period.data as f64;
        let decreased = ecn_ratio > c.aim_ratio;
        if !decreased {
            if self.increased_last {
                self.w = (self.w + c.w_max) / 2.0;
            }
            self.rate = (1.0 - self.w) * self.rate + self.w * c.max_rate * (1.0 + c.aim_ratio);
            self.increased_last = true;
        } else {
            self.rate *= (1.0 - ecn_ratio) * (1.0 + c.aim_ratio);
            self.w = (self.w / 2.0).max(c.w_min);
            self.increased_last = false;
        }
        // CHOICE: the paper clamps nothing. The increase tends to max_rate x (1 + aim_ratio)
        // by itself (the excess is dropped by the receiver's own credit queue, and marked);
        // an all-marked period would leave a rate of 0 (no credit, no feedback, ever), so the
        // floor is ExpressPass's: one credit per RTT.
        let one_credit_per_rtt = one_credit_per_rtt(c.credit_bytes, rtt);
        self.rate = self.rate.clamp(one_credit_per_rtt.min(c.max_rate), c.max_rate * (1.0 + c.aim_ratio));
        self.period = Period { start: now, data: 0, marked: 0 };
        Feedback {
            period: now - period.start,
            rtt,
            credits: period.data,
            lost: period.marked,
            unjudged: 0,
            loss: ecn_ratio,
            target_loss: c.aim_ratio,
            rate_before,
            rate_after: self.rate,
            max_rate: c.max_rate,
            w_before,
            w_after: self.w,
            decreased,
        }
    }
}

impl CreditControl for SprayPass {
    fn on_echo(&mut self, _now: Instant, echo: &Echo) {
        self.rtt = Some(echo.srtt);
        self.period.data += 1;
        self.period.marked += echo.credit_ce as u64;
        self.paths.on_arrival(echo.path_id, echo.wire_bytes * 8);
    }

    fn on_credit(&mut self, now: Instant) -> Option<Feedback> {
        // "The update period is set to an RTT by default"; run, like ExpressPass's, before a
        // credit once an RTT has passed and data arrived.
        let rtt = self.rtt?;
        (now - self.period.start >= rtt && self.period.data > 0).then(|| self.feedback(now, rtt))
    }

    fn on_restart(&mut self, now: Instant, _next_credit_seq: u32) {
        self.period = Period { start: now, data: 0, marked: 0 };
        self.paths.on_restart();
    }

    fn credit_gap(&self, jitter: f64) -> Duration {
        credit_gap(self.config.credit_bytes, self.rate, self.config.jitter, jitter)
    }

    fn rate(&self) -> f64 {
        self.rate
    }

    fn next_path(&mut self, rng: &mut SmallRng, _flow_path: u8) -> u8 {
        self.paths.next(rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTT: Duration = Duration::from_micros(100);

    fn ten_gig() -> (SprayPass, Instant) {
        let now = Instant::now();
        (SprayPassConfig::for_link(10e9).build(now, 4), now)
    }

    /// One RTT of `data` packets, `marked` of them CE-marked, then the next credit.
    fn period(cc: &mut SprayPass, now: &mut Instant, data: u32, marked: u32) {
        for i in 0..data {
            let echo =
                Echo { credit_seq: i, path_id: (i % 4) as u8, credit_ce: i < marked, wire_bytes: 1538, srtt: RTT };
            cc.on_echo(*now, &echo);
        }
        *now += RTT;
        cc.on_credit(*now);
    }

    #[test]
    fn it_starts_at_omega_init_of_the_maximum_rate() {
        let (cc, _) = ten_gig();
        assert_eq!((cc.rate(), cc.w()), (cc.config.max_rate / 2.0, 0.5));
    }

    #[test]
    fn a_period_marked_above_aim_ratio_cuts_by_the_marked_fraction_and_halves_omega() {
        let (mut cc, mut now) = ten_gig();
        let before = cc.rate();
        period(&mut cc, &mut now, 100, 30);
        assert!((cc.rate() - before * 0.7 * 1.1).abs() < 1e-6);
        assert_eq!(cc.w(), 0.25);
    }

    #[test]
    fn clean_periods_raise_the_rate_and_move_omega_halfway_to_its_ceiling_from_the_second_on() {
        let (mut cc, mut now) = ten_gig();
        period(&mut cc, &mut now, 100, 30);
        let (rate, max) = (cc.rate(), cc.config.max_rate);
        period(&mut cc, &mut now, 100, 10); // exactly aim_ratio: still increasing
        assert_eq!(cc.w(), 0.25, "the first increasing period keeps omega");
        assert!((cc.rate() - (0.75 * rate + 0.25 * max * 1.1)).abs() < 1e-6);
        period(&mut cc, &mut now, 100, 0);
        assert_eq!(cc.w(), 0.375);
        for _ in 0..50 {
            period(&mut cc, &mut now, 100, 0);
        }
        assert!(cc.rate() > max && cc.rate() <= 1.1 * max + 1e-6, "{}", cc.rate() / max);
    }

    #[test]
    fn an_all_marked_period_leaves_one_credit_per_rtt() {
        let (mut cc, mut now) = ten_gig();
        period(&mut cc, &mut now, 10, 10);
        assert!((cc.rate() - 84.0 / RTT.as_secs_f64()).abs() < 1e-6);
    }
}
