//! DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015,
//! section 3), and DCQCN+TCD (seed 004, section 5.2.1).
//!
//! - **RP** ([`Dcqcn`], the sender; `reaction_point.rs`): a rate, not a window. Each CNP with
//!   CE sets the target rate RT to the current rate RC, cuts RC by beta * alpha and raises
//!   alpha; alpha decays by (1 - g) every K without a CNP. After a cut, a timer (every T) and a
//!   byte counter (every B bytes sent) each count stages: while neither has passed F, fast
//!   recovery (RC = (RT + RC) / 2); once one has, additive increase (RT += R_AI first); once
//!   both have, hyper increase (RT += i R_HAI, i the stages past F of the slower one).
//!   [`Dcqcn::next_send`] paces packets at RC; the window is a generous cap, never the limiter.
//! - **NP** ([`NotificationPoint`], the data receiver's [`ReceiverControl`], with its
//!   [`CnpGenerator`]; `notification_point.rs`): a marked data packet triggers a CNP, at most
//!   one per flow per `cnp_interval`.
//! - **TCD**: ports mark CE (congested) or UE (undetermined: paused by PFC, not congested;
//!   ECT(1) on the wire). The NP's CNP says CE if any CE packet came, else UE; the RP cuts
//!   harder on CE (beta 1.2 instead of 0.5) and holds its rate on UE.
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
//! `--param dcqcn+tcd.timer_us=...`). The config (this file) is the one both endpoints read;
//! each endpoint has its file, as they run on different hosts and share no state.

mod notification_point;
mod reaction_point;

use std::time::Duration;

pub use notification_point::{CnpGenerator, NotificationPoint};
pub use reaction_point::{Dcqcn, Phase};

use super::param::{self, Range, Spec, Table};
use super::{Driver, ReceiverControl, SchemeFactory, SenderControl};

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

    /// The RP of one connection.
    pub fn build(&self) -> Dcqcn {
        Dcqcn::new(self.clone())
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
        Some(Box::new(NotificationPoint::new(self.tcd, self.cnp_interval)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
