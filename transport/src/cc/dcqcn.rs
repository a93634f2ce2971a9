//! DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015,
//! section 3), and DCQCN+TCD (seed 004, section 5.2.1).
//!
//! - **RP** ([`Dcqcn`], the sender): a rate, not a window. Each CNP with CE sets the target
//!   rate RT to the current rate RC, cuts RC by beta * alpha and raises alpha; alpha decays by
//!   (1 - g) every K without a CNP. After a cut, a timer (every T) and a byte counter (every B
//!   bytes sent) each count stages: while neither has passed F, fast recovery
//!   (RC = (RT + RC) / 2); once one has, additive increase (RT += R_AI first); once both have,
//!   hyper increase (RT += i R_HAI, i the stages past F of the slower one). [`Dcqcn::next_send`]
//!   paces packets at RC; the window is a generous cap, never the limiter.
//! - **NP** ([`NotificationPoint`], the data receiver's [`ReceiverControl`], with its
//!   [`CnpGenerator`]): a marked data packet triggers a CNP, at most one per flow per
//!   `cnp_interval`.
//! - **TCD**: ports mark CE (congested) or UE (undetermined: paused by PFC, not congested;
//!   ECT(1) on the wire). The NP's CNP says CE if any CE packet came, else UE; the RP cuts
//!   harder on CE (beta 1.2 instead of 0.5) and holds its rate on UE.
//!
//! The core is sans-IO like every controller here: DCQCN's timers are deadlines that every
//! hook first catches up to `now` (see [`Dcqcn::advance`]), so nothing needs waking for them.
//!
//! Defaults, with their sources. "Paper": the DCQCN paper, section 3 (its algorithm and the
//! default parameters it lists). "HPCC": github.com/alibaba-edu/High-Precision-Congestion-Control,
//! `simulation/run.py` (the `dcqcn` and `dcqcn_paper` configurations) and
//! `simulation/src/point-to-point/model/rdma-hw.cc` (Mellanox's DCQCN as HPCC simulates it).
//! "ns3-rdma": github.com/bobzhuyb/ns3-rdma, `src/point-to-point/model/qbb-net-device.cc`
//! (the DCQCN authors' simulator). Rates are given in the sources for 40 Gbit/s (paper) or
//! 25-100 Gbit/s (HPCC: `ai = 5 * bw / 25` Mb/s); here they are fractions of the link
//! (`--link-mbps`, the emulated rate), so that an emulation of a datacenter d times slower
//! keeps their proportion to the link, and times dilate as every time does
//! ([`DcqcnConfig::dilate`]).
//!
//! DCQCN and DCQCN+TCD are two schemes of one config ([`DcqcnConfig::with_tcd`]): two lines of
//! the scheme table, each with its own parameters (`--param dcqcn.timer_us=...`,
//! `--param dcqcn+tcd.timer_us=...`).

use std::time::{Duration, Instant};

use super::param::{self, Range, Spec, Table};
use super::{Ack, Driver, ReceiverControl, SchemeFactory, SenderControl};
use crate::types::Ecn;
use crate::wire::{CnpFlag, FRAME_OVERHEAD_BYTES};

/// The link the paper's rates are given for: its testbed's 40 Gbit/s.
const PAPER_LINK_BPS: f64 = 40e9;

/// Parameters, with their defaults (`for_link`) and sources (module doc).
#[derive(Debug, Clone)]
pub struct DcqcnConfig {
    /// The link's rate, bit/s on the wire: RC never goes above it.
    pub line_rate_bps: f64,
    /// RC of a new flow: the line rate (paper, section 3: a flow starts at line rate, there
    /// is no slow start; HPCC rdma-hw.cc `AddQueuePair`: `m_rate` = the NIC's rate).
    pub initial_rate_bps: f64,
    /// RC never goes below this. 100 Mbit/s per 40 Gbit/s of link, 1/400 (HPCC rdma-hw.cc's
    /// `MinRate` default, 100 Mb/s, as ns3-rdma's, read against the paper's 40 Gbit/s). CHOICE:
    /// HPCC run.py sets `MIN_RATE 1000Mb/s` for its 50-100 Gbit/s runs (1-2 %); the lower floor
    /// keeps a large incast (hundreds of senders at the floor) within the link.
    pub min_rate_bps: f64,
    /// R_AI, additive increase step of RT: 40 Mbit/s at 40 Gbit/s, 1/1000 of the link
    /// (paper). HPCC run.py uses `ai = 5 * bw / 25` Mb/s (1/5000), a fifth of it.
    pub rate_ai_bps: f64,
    /// R_HAI, hyper increase step: 10 R_AI, 1/100 of the link. The paper names R_HAI without
    /// a value that we found; the ratio is HPCC's (run.py `hai = 50 * bw / 25` against
    /// `ai = 5 * bw / 25`; rdma-hw.cc's defaults 50 and 5 Mb/s) and ns3-rdma's (50 and 5).
    pub rate_hai_bps: f64,
    /// g, weight of each alpha update: 1/256 (paper; HPCC run.py `EWMA_GAIN 0.00390625`).
    pub g: f64,
    /// alpha before the first CNP: 1, so that the first CE halves RC (HPCC rdma-hw.cc
    /// `cnp_received_mlx` sets alpha = 1 on the first CNP; ns3-rdma starts at 0.5).
    pub initial_alpha: f64,
    /// beta: a CE CNP sets RC = RC (1 - beta alpha). 0.5, the paper's RC (1 - alpha / 2);
    /// DCQCN+TCD 1.2 (seed 004, section 5.2.1: "the rate reduction factor from default 0.5
    /// to 1.2"); with alpha above 1 / beta the product is negative and RC is held at
    /// `min_rate_bps`.
    pub beta: f64,
    /// K, the alpha timer: alpha = (1 - g) alpha every K without a CNP. 55 us (paper: K must
    /// exceed the CNP interval N; HPCC rdma-hw.cc `AlphaResumInterval` default 55, ns3-rdma
    /// too; HPCC run.py sets 1 us for `dcqcn` and 50 us for `dcqcn_paper`, where alpha is
    /// updated from a CNP bit each period rather than on each CNP).
    pub alpha_timer: Duration,
    /// T, the rate increase timer: 55 us (paper; HPCC run.py `dcqcn_paper` `RP_TIMER 55`).
    /// HPCC run.py's `dcqcn` uses 300 us and rdma-hw.cc / ns3-rdma default to 1500 us: CHOICE,
    /// the paper's, which recovers fastest (`--param dcqcn.timer_us=...` sets another).
    pub increase_timer: Duration,
    /// B, the byte counter: an increase event every B bytes sent (on the wire). 10 MB at
    /// 40 Gbit/s (paper), 2 ms of line rate, scaled with the link like the rates so that it
    /// stays 2 ms of line rate. (ns3-rdma defaults to 150 KB; HPCC's Mellanox model has no
    /// byte counter, only the timer.)
    pub byte_counter_bytes: u64,
    /// F, the stages of fast recovery before additive increase: 5 (paper; ns3-rdma
    /// `FastRecoveryTimes` 5; HPCC run.py sets 1).
    pub fast_recovery_stages: u32,
    /// N, the NP's CNP interval: at most one CNP per flow per 50 us (paper; ns3-rdma
    /// `CNPInterval` 50). HPCC instead marks every ack and rate-limits the cut at the RP
    /// (`RATE_DECREASE_INTERVAL`, 4 us in run.py's `dcqcn`, 50 in `dcqcn_paper`).
    pub cnp_interval: Duration,
    /// Window, bytes: not the limiter (RoCE has none; HPCC run.py's `dcqcn` runs `HAS_WIN 0`).
    /// 64 MiB, 5 ms at 100 Gbit/s, far above any datacenter's bandwidth-delay product; it
    /// only bounds the sender's bookkeeping should acks stop coming.
    pub window_bytes: u64,
    /// TCD: UE CNPs hold the rate ([`Dcqcn`]); without it a UE CNP (which the NP sends only
    /// to TCD flows) is ignored.
    pub tcd: bool,
}

impl DcqcnConfig {
    /// DCQCN on a link of `link_bits_per_second` (the emulated rate, `--link-mbps`).
    pub fn for_link(link_bits_per_second: f64) -> Self {
        let link = link_bits_per_second;
        let rate_ai_bps = link * (40e6 / PAPER_LINK_BPS);
        Self {
            line_rate_bps: link,
            initial_rate_bps: link,
            min_rate_bps: link * (100e6 / PAPER_LINK_BPS),
            rate_ai_bps,
            rate_hai_bps: 10.0 * rate_ai_bps,
            g: 1.0 / 256.0,
            initial_alpha: 1.0,
            beta: 0.5,
            alpha_timer: Duration::from_micros(55),
            increase_timer: Duration::from_micros(55),
            byte_counter_bytes: (10e6 * link / PAPER_LINK_BPS).round().max(1.0) as u64,
            fast_recovery_stages: 5,
            cnp_interval: Duration::from_micros(50),
            window_bytes: 64 << 20,
            tcd: false,
        }
    }

    /// DCQCN+TCD (seed 004, section 5.2.1): beta 1.2, UE CNPs hold the rate.
    pub fn with_tcd(self) -> Self {
        Self { beta: 1.2, tcd: true, ..self }
    }

    /// Every time `d` times longer (`EndpointConfig::dilate`). Rates and B are fractions of
    /// the link, which is the emulated one already.
    pub fn dilate(&mut self, d: f64) {
        // Field by field, so that a time added later must be placed here.
        let DcqcnConfig {
            line_rate_bps: _,
            initial_rate_bps: _,
            min_rate_bps: _,
            rate_ai_bps: _,
            rate_hai_bps: _,
            g: _,
            initial_alpha: _,
            beta: _,
            alpha_timer,
            increase_timer,
            byte_counter_bytes: _,
            fast_recovery_stages: _,
            cnp_interval,
            window_bytes: _,
            tcd: _,
        } = self;
        for time in [alpha_timer, increase_timer, cnp_interval] {
            *time = time.mul_f64(d);
        }
    }

    pub fn build(&self) -> Dcqcn {
        Dcqcn {
            rate: self.initial_rate_bps.min(self.line_rate_bps),
            target: self.initial_rate_bps.min(self.line_rate_bps),
            alpha: self.initial_alpha,
            alpha_due: None,
            increase_due: None,
            timer_stages: 0,
            byte_stages: 0,
            counted_bytes: 0,
            paced: None,
            cuts: 0,
            holds: 0,
            config: self.clone(),
        }
    }
}

impl Table for DcqcnConfig {
    /// `--param dcqcn.<name>=<value>` and `--param dcqcn+tcd.<name>=<value>`. Rates and the byte
    /// counter are fractions of the link (module doc), no parameters.
    const PARAMS: &'static [Spec<Self>] = &[
        Spec {
            name: "timer_us",
            unit: "us",
            range: Range::Micros,
            doc: "T, the rate increase timer (the DCQCN paper's 55; HPCC's ns-3 runs use 300)",
            get: |c| Some(param::micros(c.increase_timer)),
            set: |c, v| c.increase_timer = param::from_micros(v),
        },
        Spec {
            name: "cnp_interval_us",
            unit: "us",
            range: Range::Micros,
            doc: "N: the data receiver sends at most one CNP per flow this often (the paper's 50)",
            get: |c| Some(param::micros(c.cnp_interval)),
            set: |c, v| c.cnp_interval = param::from_micros(v),
        },
        Spec {
            name: "alpha_timer_us",
            unit: "us",
            range: Range::Micros,
            doc: "K, the alpha timer: alpha decays by (1 - g) every K without a CNP",
            get: |c| Some(param::micros(c.alpha_timer)),
            set: |c, v| c.alpha_timer = param::from_micros(v),
        },
        Spec {
            name: "g",
            unit: "fraction",
            range: Range::Fraction,
            doc: "weight of each alpha update",
            get: |c| Some(c.g),
            set: |c, v| c.g = v,
        },
        Spec {
            name: "initial_alpha",
            unit: "fraction",
            range: Range::UnitInterval,
            doc: "alpha before the first CNP",
            get: |c| Some(c.initial_alpha),
            set: |c, v| c.initial_alpha = v,
        },
        Spec {
            name: "beta",
            unit: "factor",
            range: Range::Positive,
            doc: "a CE CNP sets RC = RC (1 - beta alpha), at least the minimum rate (DCQCN 0.5, DCQCN+TCD 1.2)",
            get: |c| Some(c.beta),
            set: |c, v| c.beta = v,
        },
        Spec {
            name: "fast_recovery_stages",
            unit: "stages",
            range: Range::Count(0),
            doc: "F: stages of fast recovery before additive increase",
            get: |c| Some(c.fast_recovery_stages.into()),
            set: |c, v| c.fast_recovery_stages = v as u32,
        },
    ];
}

/// Two schemes of one config: `tcd` tells them apart.
impl SchemeFactory for DcqcnConfig {
    fn name(&self) -> &'static str {
        if self.tcd {
            "dcqcn+tcd"
        } else {
            "dcqcn"
        }
    }

    fn wire_id(&self) -> u8 {
        if self.tcd {
            6
        } else {
            5
        }
    }

    fn driver(&self) -> Driver {
        Driver::Sender
    }

    /// RED-marking ports; TCD's also mark UE.
    fn port_profile(&self) -> &'static str {
        if self.tcd {
            "tcd"
        } else {
            "dcqcn"
        }
    }

    fn dilate(&mut self, d: f64) {
        DcqcnConfig::dilate(self, d);
    }

    fn sender_control(&self, _seed: u64) -> Option<Box<dyn SenderControl>> {
        Some(Box::new(self.build()))
    }

    /// The NP, at the receiver's own CNP interval.
    fn receiver_control(&self) -> Option<Box<dyn ReceiverControl>> {
        Some(Box::new(NotificationPoint { tcd: self.tcd, cnps: CnpGenerator::new(self.cnp_interval) }))
    }
}

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

/// The reaction point of one connection (module doc).
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

/// DCQCN's notification point for one flow, at its data receiver. Paper, section 3: a marked
/// packet triggers a CNP unless one went out in the last N. CHOICE: a mark within N of the
/// last CNP is not forgotten but held, and one CNP goes when N has passed (its flag CE if any
/// held mark was CE, else UE: CE wins), as ns3-rdma's NP (`CheckandSendQCN`) ORs the ECN
/// bits of each interval into the CNP it sends at the interval's end. A continuously marked
/// flow gets one CNP every N either way; the first mark after a quiet spell goes at once.
#[derive(Debug, Clone)]
pub struct CnpGenerator {
    interval: Duration,
    last: Option<Instant>,
    held: Option<CnpFlag>,
}

impl CnpGenerator {
    pub fn new(interval: Duration) -> Self {
        Self { interval, last: None, held: None }
    }

    /// A data packet arrived marked `mark`: the CNP to send now, if one may go.
    pub fn on_mark(&mut self, now: Instant, mark: CnpFlag) -> Option<CnpFlag> {
        self.held = Some(self.held.map_or(mark, |held| held.or(mark)));
        self.poll(now)
    }

    /// When a held mark may go.
    pub fn deadline(&self) -> Option<Instant> {
        self.held.and(self.last).map(|last| last + self.interval)
    }

    /// The deadline passed: the CNP to send, if a mark is held.
    pub fn on_timeout(&mut self, now: Instant) -> Option<CnpFlag> {
        self.poll(now)
    }

    fn poll(&mut self, now: Instant) -> Option<CnpFlag> {
        if self.last.is_some_and(|last| now < last + self.interval) {
            return None;
        }
        let flag = self.held.take()?;
        self.last = Some(now);
        Some(flag)
    }
}

/// DCQCN's notification point at one flow's data receiver: which marks call for a CNP (CE;
/// with TCD, UE too: plain DCQCN reads UE, which its ports never set, as unmarked), sent as
/// its [`CnpGenerator`] lets them go.
#[derive(Debug, Clone)]
pub struct NotificationPoint {
    tcd: bool,
    cnps: CnpGenerator,
}

impl ReceiverControl for NotificationPoint {
    fn on_data(&mut self, now: Instant, ecn: Ecn) -> Option<CnpFlag> {
        let mark = match ecn {
            Ecn::Ce => CnpFlag::Congestion,
            Ecn::Ect1 if self.tcd => CnpFlag::Undetermined,
            _ => return None,
        };
        self.cnps.on_mark(now, mark)
    }

    fn deadline(&self) -> Option<Instant> {
        self.cnps.deadline()
    }

    fn on_timeout(&mut self, now: Instant) -> Option<CnpFlag> {
        self.cnps.on_timeout(now)
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
    fn the_defaults_scale_the_papers_40_gbit_rates_to_the_link() {
        let at_40 = DcqcnConfig::for_link(40e9);
        assert_eq!((at_40.rate_ai_bps, at_40.rate_hai_bps, at_40.min_rate_bps), (40e6, 400e6, 100e6));
        assert_eq!(at_40.byte_counter_bytes, 10_000_000);
        let at_10m = DcqcnConfig::for_link(10e6);
        assert!((at_10m.rate_ai_bps - 10e3).abs() < 1e-6 && at_10m.byte_counter_bytes == 2500);
        let tcd = at_40.with_tcd();
        assert_eq!((tcd.beta, tcd.tcd), (1.2, true));
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

    #[test]
    fn the_np_holds_marks_within_the_interval_and_ce_wins() {
        let mut np = CnpGenerator::new(50 * US);
        let now = Instant::now();
        assert_eq!(np.on_mark(now, CnpFlag::Undetermined), Some(CnpFlag::Undetermined));
        assert_eq!(np.deadline(), None);
        assert_eq!(np.on_mark(now + 10 * US, CnpFlag::Undetermined), None);
        assert_eq!(np.on_mark(now + 20 * US, CnpFlag::Congestion), None);
        assert_eq!(np.on_mark(now + 30 * US, CnpFlag::Undetermined), None);
        assert_eq!(np.deadline(), Some(now + 50 * US));
        assert_eq!(np.on_timeout(now + 49 * US), None);
        assert_eq!(np.on_timeout(now + 50 * US), Some(CnpFlag::Congestion));
        assert_eq!((np.deadline(), np.on_timeout(now + 200 * US)), (None, None));
        assert_eq!(np.on_mark(now + 200 * US, CnpFlag::Congestion), Some(CnpFlag::Congestion));
    }
}
