//! One host's transport parameters. Every time here is a parameter: experiments that
//! emulate a datacenter d times slower read them as datacenter time and stretch them all by
//! [`EndpointConfig::dilate`].

use std::time::{Duration, Instant};

use crate::scheme::Registry;
use crate::types::HostId;
use crate::wire::DEFAULT_MSS;

#[derive(Debug, Clone)]
pub struct EndpointConfig {
    pub host: HostId,
    /// Clock origin shared by every host of the emulation, on every machine the same instant
    /// (flow records' times, and the receiver's Finish, count from it).
    pub epoch: Instant,
    /// Data payload per packet, bytes ([`DEFAULT_MSS`]).
    pub mss: u16,
    /// The schemes this host runs, each with its parameters, configured for this host's link
    /// (credit shares and DCQCN's rates are fractions of it): [`Registry::standard`], the
    /// schemes of the one table, unless a test adds its own ([`Registry::with`]). A flow's data
    /// receiver builds its controls from its own registry, by the wire id the sender's packets
    /// carry.
    pub schemes: Registry,
    /// Credit request / credit stop resent when unanswered this long (ExpressPass: 100 ms).
    pub control_timeout: Duration,
    /// Window schemes' retransmission timeout floor (10 ms, as in DCTCP+'s comparison).
    pub rto_min: Duration,
    /// Window schemes' retransmission timeout before the first RTT sample.
    pub rto_initial: Duration,
    /// RTT assumed by a credit receiver before its first sample (for its loss recovery).
    pub initial_rtt: Duration,
    /// A flow being received is dropped once no packet came for it this long (10 s: longer
    /// than any live sender's silence: a window sender's timeout backs off to at most 64 x its
    /// RTO, 6.4 s from `rto_initial`; a credited one repeats its request every
    /// `control_timeout`). What a sender that went away, or a forged request, leaves.
    pub idle_timeout: Duration,
    /// Sender-driven flows to a host take over the congestion state (window, alpha, DCTCP+'s
    /// slow_time, RTT estimate) the last finished flow to that host left, as successive
    /// responses on a persistent connection do (the DCTCP+ paper's incast keeps its
    /// connections); false: every flow starts afresh (initial window, `rto_initial`).
    pub reuse_connections: bool,
    /// Seed of the pacing jitter and of the schemes' randomness (deterministic per host).
    pub seed: u64,
    /// Keep a trace of the credit schemes' flows: every feedback step at their receivers, every
    /// window of about an RTT at their senders ([`crate::Endpoint::poll_trace`]). Off, nothing
    /// is built or kept.
    pub trace: bool,
}

impl EndpointConfig {
    pub fn new(host: HostId, link_bits_per_second: f64, epoch: Instant) -> Self {
        Self {
            host,
            epoch,
            mss: DEFAULT_MSS,
            schemes: Registry::standard(link_bits_per_second, DEFAULT_MSS),
            control_timeout: Duration::from_millis(100),
            rto_min: Duration::from_millis(10),
            rto_initial: Duration::from_millis(100),
            initial_rtt: Duration::from_millis(1),
            idle_timeout: Duration::from_secs(10),
            reuse_connections: true,
            seed: host as u64,
            trace: false,
        }
    }

    /// Time dilation: reads every time of this configuration as datacenter time and makes
    /// it `d` times longer (d >= 1: an emulation running its links d times slower than the
    /// datacenter it stands for). Rates and sizes stay: the link rate this was built for is
    /// already the emulated one; each scheme dilates its own times (`SchemeFactory::dilate`:
    /// DCTCP+'s backoff units, DCQCN's alpha timer, rate increase timer and CNP interval;
    /// ExpressPass's, SprayPass's and DCTCP's parameters are rates, sizes, fractions and
    /// counts). Times the flows measure (RTTs, credit gaps) dilate with the network itself.
    pub fn dilate(&mut self, d: f64) {
        // Taken apart field by field so that a field added later does not compile until it
        // is placed here: a time left out would run d times too fast.
        let EndpointConfig {
            host: _,
            epoch: _,
            mss: _,
            schemes,
            control_timeout,
            rto_min,
            rto_initial,
            initial_rtt,
            idle_timeout,
            reuse_connections: _,
            seed: _,
            trace: _,
        } = self;
        for time in [control_timeout, rto_min, rto_initial, initial_rtt, idle_timeout] {
            *time = time.mul_f64(d);
        }
        schemes.dilate(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::dcqcn::DcqcnConfig;
    use crate::cc::dctcp::DctcpConfig;
    use crate::cc::dctcp_plus::DctcpPlusConfig;
    use crate::cc::expresspass::ExpressPassConfig;

    /// A Debug token that prints a Duration ("100ms", "1.25µs", "2s"), in seconds.
    fn seconds(token: &str) -> Option<f64> {
        let units = [("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)];
        let (number, scale) = units.iter().find_map(|(unit, scale)| Some((token.strip_suffix(unit)?, scale)))?;
        number.parse::<f64>().ok().map(|n| n * scale)
    }

    fn tokens(config: &EndpointConfig) -> Vec<String> {
        let text = format!("{config:?}");
        text.split(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_')).map(String::from).collect()
    }

    #[test]
    fn dilation_multiplies_every_time_and_leaves_rates_and_sizes() {
        let mut config = EndpointConfig::new(3, 10e6, Instant::now());
        config.schemes.config_mut::<DctcpPlusConfig>("dctcp+").expect("DCTCP+").backoff_time_unit =
            Some(Duration::from_micros(125));
        let before = config.clone();
        config.dilate(1000.0);
        assert_eq!(config.control_timeout, Duration::from_secs(100));
        assert_eq!(config.rto_min, Duration::from_secs(10));
        assert_eq!(config.rto_initial, Duration::from_secs(100));
        assert_eq!(config.initial_rtt, Duration::from_secs(1));
        assert_eq!(config.idle_timeout, Duration::from_secs(10_000));
        let (dctcp_plus, dcqcn, dcqcn_tcd) = (
            |c: &EndpointConfig| c.schemes.config::<DctcpPlusConfig>("dctcp+").cloned().expect("DCTCP+"),
            |c: &EndpointConfig| c.schemes.config::<DcqcnConfig>("dcqcn").cloned().expect("DCQCN"),
            |c: &EndpointConfig| c.schemes.config::<DcqcnConfig>("dcqcn+tcd").cloned().expect("DCQCN+TCD"),
        );
        let (expresspass, dctcp) = (
            |c: &EndpointConfig| c.schemes.config::<ExpressPassConfig>("expresspass").cloned().expect("ExpressPass"),
            |c: &EndpointConfig| c.schemes.config::<DctcpConfig>("dctcp").cloned().expect("DCTCP"),
        );
        assert_eq!(dctcp_plus(&config).backoff_time_unit, Some(Duration::from_millis(125)));
        assert_eq!(dctcp_plus(&config).initial_backoff_time_unit, Duration::from_millis(100));
        assert_eq!(dcqcn(&config).increase_timer, Duration::from_millis(55));
        assert_eq!(dcqcn_tcd(&config).cnp_interval, Duration::from_millis(50));
        assert_eq!(dcqcn(&config).rate_ai_bps, dcqcn(&before).rate_ai_bps);
        assert_eq!(expresspass(&config).max_rate, expresspass(&before).max_rate);
        assert_eq!((config.mss, dctcp(&config).mss), (before.mss, dctcp(&before).mss));
        // Every field, nested configs included: each Duration is 1000 times what it was,
        // everything else (rates, sizes, fractions, counts, the epoch) is untouched.
        let (before, after) = (tokens(&before), tokens(&config));
        assert_eq!(before.len(), after.len());
        let mut times = 0;
        for (b, a) in before.iter().zip(&after) {
            match (seconds(b), seconds(a)) {
                (Some(b), Some(a)) => {
                    times += 1;
                    assert!((a - 1000.0 * b).abs() <= 1e-9 * a, "{b} s became {a} s");
                }
                _ => assert_eq!(b, a),
            }
        }
        assert_eq!(times, 13, "the times found: {before:?}");
    }

    #[test]
    fn a_dilation_of_one_changes_nothing() {
        let config = EndpointConfig::new(3, 10e6, Instant::now());
        let mut same = config.clone();
        same.dilate(1.0);
        assert_eq!(format!("{same:?}"), format!("{config:?}"));
    }
}
