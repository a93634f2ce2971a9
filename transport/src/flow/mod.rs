//! Per-flow state machines, one file per role. Each takes `now` and an event, pushes the
//! packets it wants sent into a [`Ctx`], and says when it next needs to be woken
//! (`deadline`). The [`crate::Endpoint`] owns them and routes packets and timers.
//!
//! | role | receiver-driven schemes | sender-driven schemes |
//! |---|---|---|
//! | data sender | [`credited_sender`]: one data packet per credit | [`window_sender`]: window and send gate |
//! | data receiver | [`crediting_receiver`]: paces credits | [`window_receiver`]: acks |

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;

use crate::record::Trace;
use crate::types::{Ecn, HostId, Transmit};
use crate::wire::Packet;

pub mod credited_sender;
pub mod crediting_receiver;
pub mod window_receiver;
pub mod window_sender;

/// How far beyond the cumulative point a data packet may be: more would mean a window of over
/// 65 536 packets (95 MB in flight; these fabrics' buffers hold 250 packets a port), or a
/// forged sequence number growing the bitmap (a fresh flow's to 8 KiB; 16 KiB at most, as the
/// vector grows by doubling).
pub(crate) const MAX_AHEAD: u32 = 1 << 16;

/// A data packet whose sequence number the flow cannot have.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct OutOfRange;

/// What a flow's handler may touch besides its own state.
pub(crate) struct Ctx<'a> {
    pub now: Instant,
    /// The endpoint's clock origin (`now_us` counts from it).
    pub epoch: Instant,
    /// `now` in microseconds of the endpoint's clock (the wire carries its low 32 bits).
    pub now_us: u64,
    pub out: &'a mut VecDeque<Transmit>,
    /// Payload buffers the shell gave back ([`crate::Endpoint::recycle`]): a packet is encoded
    /// into one of them rather than into a new allocation. Which buffer is taken changes
    /// nothing but where the bytes are: `encode` writes them all afresh.
    pub spare: &'a mut Vec<Vec<u8>>,
    pub rng: &'a mut SmallRng,
    /// Where the flows put their trace lines; `None`: tracing is off (`EndpointConfig::trace`),
    /// and flows keep nothing for it.
    pub trace: Option<&'a mut VecDeque<Trace>>,
}

impl Ctx<'_> {
    pub fn send(&mut self, dst: HostId, path_id: u8, ecn: Ecn, packet: &Packet) {
        let mut payload = self.spare.pop().unwrap_or_default();
        payload.clear();
        packet.encode(&mut payload);
        self.out.push_back(Transmit { dst, path_id, ecn, kind: packet.kind(), payload });
    }

    /// Microseconds since `sent_us` (a 32-bit timestamp of this endpoint's clock).
    pub fn since_us(&self, sent_us: u32) -> Duration {
        Duration::from_micros((self.now_us as u32).wrapping_sub(sent_us) as u64)
    }

    /// The start of the microsecond `sent_us` names (a 32-bit timestamp of this endpoint's
    /// clock, in the past): exact to the microsecond, never after the moment it stamps.
    pub fn instant_of(&self, sent_us: u32) -> Instant {
        let since = self.since_us(sent_us).as_micros() as u64;
        self.epoch + Duration::from_micros(self.now_us.saturating_sub(since))
    }
}

/// Packets of a flow of `size_bytes` in segments of `mss` payload bytes (an empty flow still
/// sends one packet, so that it has an end).
pub(crate) fn packets_of(size_bytes: u64, mss: u16) -> u64 {
    size_bytes.div_ceil(mss as u64).max(1)
}

/// Payload length of packet `seq` of a flow.
pub(crate) fn payload_of(seq: u32, size_bytes: u64, mss: u16) -> u16 {
    let before = seq as u64 * mss as u64;
    size_bytes.saturating_sub(before).min(mss as u64) as u16
}

/// Which sequence numbers arrived: a bitmap grown on demand, with the lowest missing one.
#[derive(Debug, Default, Clone)]
pub(crate) struct ReceivedSet {
    bits: Vec<u64>,
    count: u64,
    /// Every sequence number below this one arrived.
    cumulative: u32,
}

impl ReceivedSet {
    /// Records `seq`; false if it had arrived before.
    pub fn insert(&mut self, seq: u32) -> bool {
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= self.bits.len() {
            self.bits.resize(word + 1, 0);
        }
        if self.bits[word] & (1 << bit) != 0 {
            return false;
        }
        self.bits[word] |= 1 << bit;
        self.count += 1;
        while self.contains(self.cumulative) {
            self.cumulative += 1;
        }
        true
    }

    pub fn contains(&self, seq: u32) -> bool {
        self.bits.get((seq / 64) as usize).is_some_and(|w| w & (1 << (seq % 64)) != 0)
    }

    pub fn cumulative(&self) -> u32 {
        self.cumulative
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Bytes its bitmap holds.
    pub fn held_bytes(&self) -> usize {
        self.bits.capacity() * std::mem::size_of::<u64>()
    }

    /// Up to `limit` sequence numbers below `end` that have not arrived, lowest first.
    pub fn missing(&self, end: u32, limit: usize) -> Vec<u32> {
        (self.cumulative..end).filter(|&seq| !self.contains(seq)).take(limit).collect()
    }
}

/// Smoothed RTT and variation (RFC 6298), and the retransmission timeout built on them.
#[derive(Debug, Clone, Default)]
pub(crate) struct RttEstimator {
    smoothed: Option<Duration>,
    variation: Duration,
}

impl RttEstimator {
    pub fn sample(&mut self, rtt: Duration) {
        match self.smoothed {
            None => {
                self.smoothed = Some(rtt);
                self.variation = rtt / 2;
            }
            Some(srtt) => {
                let delta = srtt.abs_diff(rtt);
                self.variation = (self.variation * 3 + delta) / 4;
                self.smoothed = Some((srtt * 7 + rtt) / 8);
            }
        }
    }

    /// srtt + 4 rttvar, at least `min`; `initial` before the first sample.
    pub fn rto(&self, min: Duration, initial: Duration) -> Duration {
        match self.smoothed {
            None => initial,
            Some(srtt) => (srtt + 4 * self.variation).max(min),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cumulative_point_jumps_over_what_arrived_out_of_order() {
        let mut set = ReceivedSet::default();
        assert!(set.insert(1) && set.insert(2));
        assert_eq!(set.cumulative(), 0);
        assert_eq!(set.missing(5, 10), vec![0, 3, 4]);
        assert!(set.insert(0));
        assert!(!set.insert(2));
        assert_eq!((set.cumulative(), set.count()), (3, 3));
        assert!(set.insert(200));
        assert_eq!(set.missing(202, 2), vec![3, 4]);
    }

    #[test]
    fn the_last_packet_carries_what_is_left_of_the_flow() {
        assert_eq!(packets_of(3000, 1450), 3);
        assert_eq!(payload_of(1, 3000, 1450), 1450);
        assert_eq!(payload_of(2, 3000, 1450), 100);
        assert_eq!((packets_of(0, 1450), payload_of(0, 0, 1450)), (1, 0));
    }
}
