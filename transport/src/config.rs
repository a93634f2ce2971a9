//! One host's transport parameters. Every time here is a parameter (experiments in
//! datacenter time scale them all by the dilation factor).

use std::time::{Duration, Instant};

use crate::cc::dctcp::DctcpConfig;
use crate::cc::dctcp_plus::DctcpPlusConfig;
use crate::cc::expresspass::ExpressPassConfig;
use crate::cc::spraypass::SprayPassConfig;
use crate::types::HostId;

#[derive(Debug, Clone)]
pub struct EndpointConfig {
    pub host: HostId,
    /// Clock origin shared by every host of the emulation (flow records' times count from it).
    pub epoch: Instant,
    /// Data payload per packet, bytes: 1450 makes a 1500-byte IP packet (1538 on the wire)
    /// with IP, UDP and the 22-byte ccemu data header.
    pub mss: u16,
    /// ExpressPass; `max_rate` is the credit share of this host's link.
    pub expresspass: ExpressPassConfig,
    pub spraypass: SprayPassConfig,
    pub dctcp: DctcpConfig,
    pub dctcp_plus: DctcpPlusConfig,
    /// Credit request / credit stop resent when unanswered this long (ExpressPass: 100 ms).
    pub control_timeout: Duration,
    /// Window schemes' retransmission timeout floor (10 ms, as in DCTCP+'s comparison).
    pub rto_min: Duration,
    /// Window schemes' retransmission timeout before the first RTT sample.
    pub rto_initial: Duration,
    /// RTT assumed by a credit receiver before its first sample (for its loss recovery).
    pub initial_rtt: Duration,
    /// Sender-driven flows to a host take over the congestion state (window, alpha, DCTCP+'s
    /// slow_time, RTT estimate) the last finished flow to that host left, as successive
    /// responses on a persistent connection do (the DCTCP+ paper's incast keeps its
    /// connections); false: every flow starts afresh (initial window, `rto_initial`).
    pub reuse_connections: bool,
    /// Seed of the pacing jitter and of the schemes' randomness (deterministic per host).
    pub seed: u64,
}

impl EndpointConfig {
    pub fn new(host: HostId, link_bits_per_second: f64, epoch: Instant) -> Self {
        let dctcp = DctcpConfig { mss: 1450, ..DctcpConfig::default() };
        Self {
            host,
            epoch,
            mss: 1450,
            expresspass: ExpressPassConfig::for_link(link_bits_per_second),
            spraypass: SprayPassConfig::for_link(link_bits_per_second),
            dctcp_plus: DctcpPlusConfig::on(dctcp.clone()),
            dctcp,
            control_timeout: Duration::from_millis(100),
            rto_min: Duration::from_millis(10),
            rto_initial: Duration::from_millis(100),
            initial_rtt: Duration::from_millis(1),
            reuse_connections: true,
            seed: host as u64,
        }
    }
}
