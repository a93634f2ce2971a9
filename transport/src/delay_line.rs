//! Propagation delay, added where the packet arrives: a [`DelayLine`] holds each packet for
//! its path's one-way delay ([`PathDelays`]) before the endpoint sees it. The emulator's
//! kernel has no netem, so the receiving host's shell puts this line between its sockets and
//! [`crate::Endpoint::handle_packet`].
//!
//! Sans-IO like the rest of the core: `push` and `pop_due` take `now`, and `next_due` says
//! when the caller must wake up to release the next packet.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use crate::types::HostId;

/// One-way delay of every path into this host: per (source, path-id), else per source, else
/// the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PathDelays {
    default: Duration,
    sources: HashMap<HostId, Duration>,
    paths: HashMap<(HostId, u8), Duration>,
}

impl PathDelays {
    /// Every path delayed by `default` until told otherwise.
    pub fn new(default: Duration) -> Self {
        Self { default, ..Self::default() }
    }

    /// Delay of every path from `src` that has no entry of its own; the previous one if any.
    pub fn set_source(&mut self, src: HostId, delay: Duration) -> Option<Duration> {
        self.sources.insert(src, delay)
    }

    /// Delay of the path `path_id` from `src`; the previous one if any.
    pub fn set_path(&mut self, src: HostId, path_id: u8, delay: Duration) -> Option<Duration> {
        self.paths.insert((src, path_id), delay)
    }

    /// How long a packet from `src` with `path_id` is held.
    pub fn delay(&self, src: HostId, path_id: u8) -> Duration {
        let path = self.paths.get(&(src, path_id));
        *path.or_else(|| self.sources.get(&src)).unwrap_or(&self.default)
    }
}

/// A packet in the line: ordered by release time, then by arrival.
struct Held<T> {
    release: Instant,
    arrival: u64,
    item: T,
}

impl<T> Held<T> {
    fn key(&self) -> (Instant, u64) {
        (self.release, self.arrival)
    }
}

impl<T> PartialEq for Held<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<T> Eq for Held<T> {}

impl<T> PartialOrd for Held<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Held<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// Packets held for their path's delay, released earliest first.
///
/// A path's delay is fixed, so with `now` never going backwards (as every hook of the core
/// assumes) a path's packets leave in the order they arrived, each exactly its delay after
/// its `push`; packets due at the same instant leave in arrival order.
pub struct DelayLine<T> {
    delays: PathDelays,
    held: BinaryHeap<Reverse<Held<T>>>,
    arrivals: u64,
    max_len: usize,
}

impl<T> DelayLine<T> {
    pub fn new(delays: PathDelays) -> Self {
        Self { delays, held: BinaryHeap::new(), arrivals: 0, max_len: 0 }
    }

    pub fn delays(&self) -> &PathDelays {
        &self.delays
    }

    /// `item` arrived `now` from `src` on `path_id`: it is due after that path's delay (at
    /// once for a zero delay: the next `pop_due(now)` returns it).
    pub fn push(&mut self, now: Instant, src: HostId, path_id: u8, item: T) {
        let release = now + self.delays.delay(src, path_id);
        self.arrivals += 1;
        self.held.push(Reverse(Held { release, arrival: self.arrivals, item }));
        self.max_len = self.max_len.max(self.held.len());
    }

    /// The earliest packet due at or before `now`; `None`: none is due yet.
    pub fn pop_due(&mut self, now: Instant) -> Option<T> {
        if self.next_due()? > now {
            return None;
        }
        self.held.pop().map(|Reverse(held)| held.item)
    }

    /// When the earliest held packet is due; `None`: the line is empty.
    pub fn next_due(&self) -> Option<Instant> {
        self.held.peek().map(|Reverse(held)| held.release)
    }

    /// Packets held now.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Most packets ever held at once.
    pub fn max_len(&self) -> usize {
        self.max_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: f64) -> Duration {
        Duration::from_secs_f64(n / 1e6)
    }

    /// Everything due at `now`, in release order.
    fn drain<T>(line: &mut DelayLine<T>, now: Instant) -> Vec<T> {
        std::iter::from_fn(|| line.pop_due(now)).collect()
    }

    #[test]
    fn packets_leave_after_exactly_the_configured_delay() {
        let t0 = Instant::now();
        let delay = us(1250.5);
        let mut line = DelayLine::new(PathDelays::new(delay));
        line.push(t0, 3, 0, "a");
        line.push(t0 + us(10.0), 3, 0, "b");
        assert_eq!(line.next_due(), Some(t0 + delay));
        assert_eq!(line.pop_due(t0 + delay - Duration::from_nanos(1)), None);
        assert_eq!(line.pop_due(t0 + delay), Some("a"));
        assert_eq!(line.next_due(), Some(t0 + us(10.0) + delay));
        assert_eq!(line.pop_due(t0 + us(10.0) + delay - Duration::from_nanos(1)), None);
        assert_eq!(line.pop_due(t0 + us(10.0) + delay), Some("b"));
        assert_eq!((line.len(), line.next_due(), line.max_len()), (0, None, 2));
    }

    #[test]
    fn a_zero_delay_releases_a_packet_at_the_instant_it_arrived() {
        let t0 = Instant::now();
        let mut line = DelayLine::new(PathDelays::default());
        line.push(t0, 1, 7, 42);
        assert_eq!(line.next_due(), Some(t0));
        assert_eq!(line.pop_due(t0), Some(42));
        assert!(line.is_empty());
    }

    #[test]
    fn order_is_kept_per_path() {
        let t0 = Instant::now();
        let mut line = DelayLine::new(PathDelays::new(us(500.0)));
        // Bursts arriving at the same instant, and arrivals a nanosecond apart.
        for n in 0..100u32 {
            let at = t0 + Duration::from_nanos(u64::from(n / 10));
            line.push(at, 2, 9, n);
        }
        assert_eq!(line.max_len(), 100);
        assert_eq!(drain(&mut line, t0 + us(1000.0)), (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn paths_with_different_delays_interleave_by_release_time() {
        let t0 = Instant::now();
        let mut delays = PathDelays::default();
        delays.set_path(1, 0, us(100.0));
        delays.set_path(1, 1, us(30.0));
        let mut line = DelayLine::new(delays);
        line.push(t0, 1, 0, "slow 1"); // due 100
        line.push(t0 + us(10.0), 1, 1, "fast 1"); // due 40
        line.push(t0 + us(20.0), 1, 0, "slow 2"); // due 120
        line.push(t0 + us(90.0), 1, 1, "fast 2"); // due 120 too: arrived later, leaves later
        line.push(t0 + us(95.0), 1, 1, "fast 3"); // due 125
        assert_eq!(drain(&mut line, t0 + us(40.0)), ["fast 1"]);
        assert_eq!(drain(&mut line, t0 + us(119.0)), ["slow 1"]);
        assert_eq!(line.next_due(), Some(t0 + us(120.0)));
        assert_eq!(drain(&mut line, t0 + us(200.0)), ["slow 2", "fast 2", "fast 3"]);
    }

    #[test]
    fn a_source_without_an_entry_gets_the_default() {
        let mut delays = PathDelays::new(us(7.0));
        delays.set_source(3, us(1250.5));
        delays.set_path(3, 5, us(900.0));
        assert_eq!(delays.delay(3, 5), us(900.0), "the path's own entry first");
        assert_eq!(delays.delay(3, 6), us(1250.5), "then the source's");
        assert_eq!(delays.delay(4, 5), us(7.0), "then the default");
        assert_eq!(PathDelays::default().delay(4, 5), Duration::ZERO);
        assert_eq!(delays.set_source(3, us(1.0)), Some(us(1250.5)), "a second entry says it replaced one");
    }
}
