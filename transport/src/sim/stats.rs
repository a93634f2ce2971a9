//! What the simulated network records for the tests to judge: each port's counters and data
//! queue ([`PortStats`]), each data packet handed to its receiver ([`Delivery`]), and the
//! figures computed from them (a queue's time-weighted mean, Jain's fairness).

use std::time::Instant;

use crate::types::HostId;

/// What one port saw.
#[derive(Debug, Clone, Default)]
pub struct PortStats {
    pub data_drops: u64,
    pub credit_drops: u64,
    pub marks: u64,
    /// Packets this port marked UE (ECT(1), TCD's undetermined).
    pub ue_marks: u64,
    pub credit_marks: u64,
    pub max_data_queue_bytes: u64,
    /// (time, data queue bytes) at every change.
    pub data_queue: Vec<(Instant, u64)>,
    pub sent_data_bytes: u64,
    pub sent_credits: u64,
    /// With [`super::SimConfig::log_credits`]: (time, the credit's destination, the data
    /// sender it was for; dropped) of every credit that came to this port: which flow's credits
    /// a shared credit queue takes and drops, period by period.
    pub credit_log: Vec<(Instant, HostId, bool)>,
}

/// A data packet handed to its receiver: for throughput and fairness over time.
#[derive(Debug, Clone, Copy)]
pub struct Delivery {
    pub at: Instant,
    pub src: HostId,
    pub dst: HostId,
    pub flow: u32,
    pub path_id: u8,
    pub payload_bytes: u64,
}

/// Time-weighted mean of a queue trace over [from, to].
pub fn mean_queue(trace: &[(Instant, u64)], from: Instant, to: Instant) -> f64 {
    let mut area = 0.0;
    let mut level = trace.iter().take_while(|(t, _)| *t <= from).last().map_or(0, |&(_, q)| q);
    let mut at = from;
    for &(t, q) in trace.iter().filter(|(t, _)| *t > from && *t <= to) {
        area += level as f64 * (t - at).as_secs_f64();
        (at, level) = (t, q);
    }
    area += level as f64 * (to - at).as_secs_f64();
    area / (to - from).as_secs_f64()
}

/// Jain's fairness index of some rates: 1 when all are equal.
pub fn jain_fairness(rates: &[f64]) -> f64 {
    let sum: f64 = rates.iter().sum();
    let squares: f64 = rates.iter().map(|r| r * r).sum();
    sum * sum / (rates.len() as f64 * squares)
}
