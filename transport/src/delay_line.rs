//! Propagation delay and serialization, added where the packet arrives: a [`DelayLine`] holds
//! each packet for its path's one-way delay ([`PathDelays`]) before the endpoint sees it. The
//! emulator's kernel has no netem, so the receiving host's shell puts this line between its
//! sockets and [`crate::Endpoint::handle_packet`].
//!
//! Sans-IO like the rest of the core: `push` and `pop_due` take `now`, and `next_due` says
//! when the caller must wake up to release the next packet.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use crate::types::HostId;

/// What a path adds to each packet: a fixed delay (the propagation the fabric lacks) and the
/// packet's serialization at each link of the path, store-and-forward.
///
/// Why the second: the emulated ports are HTB classes that release a frame the moment its turn
/// comes, and a veth hands it whole to the next hop at that instant: a packet leaves each port at
/// the start of its transmission, not at its end, and an idle port lets the frames of its burst
/// (two full frames: less would lose the line to HTB's late timers) go at once. A store-and-forward
/// switch sends a frame on only once its last bit arrived, and one frame after another. So the
/// line holds each packet for its own transmission time at every link, summed, and a packet from
/// the same source no less than its links make it follow the one before ([`OneWay::follow`]):
/// what a flow's frames sent back to back take through the path, as on a real one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OneWay {
    pub fixed: Duration,
    /// Serialization of one wire byte at each link of the path, from the source on, picoseconds.
    pub links_ps_per_byte: Vec<u64>,
}

impl OneWay {
    pub fn fixed(fixed: Duration) -> Self {
        Self { fixed, links_ps_per_byte: Vec::new() }
    }

    /// The delay of a packet of `wire_bytes` on the wire that crosses the path alone.
    pub fn of(&self, wire_bytes: u64) -> Duration {
        let ps = self.links_ps_per_byte.iter().map(|ps| ps.saturating_mul(wire_bytes)).fold(0, u64::saturating_add);
        self.fixed + Duration::from_nanos(ps / 1000)
    }

    /// The least time between the arrivals of two packets of the path, `previous_bytes` then
    /// `wire_bytes` long, that crossed it one behind the other: at each link j the second leaves
    /// after the first has, and then crosses the links from j on, while the first crossed those
    /// after j (the most over j; for frames of one size, one frame time at the slowest link).
    /// One pass from the last link back, both sums kept as it goes: every packet that arrives
    /// asks this.
    pub fn follow(&self, previous_bytes: u64, wire_bytes: u64) -> Duration {
        let (mut mine_from, mut theirs_after, mut most) = (0u64, 0u64, 0u64);
        for ps in self.links_ps_per_byte.iter().rev() {
            mine_from = mine_from.saturating_add(ps.saturating_mul(wire_bytes));
            most = most.max(mine_from.saturating_sub(theirs_after));
            theirs_after = theirs_after.saturating_add(ps.saturating_mul(previous_bytes));
        }
        Duration::from_nanos(most / 1000)
    }
}

/// One-way delay of every path into this host: per (source, path-id), else per source, else
/// the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PathDelays {
    default: OneWay,
    sources: HashMap<HostId, OneWay>,
    paths: HashMap<(HostId, u8), OneWay>,
}

impl PathDelays {
    /// Every path delayed by `default` until told otherwise.
    pub fn new(default: OneWay) -> Self {
        Self { default, ..Self::default() }
    }

    /// Delay of every path from `src` that has no entry of its own; the previous one if any.
    pub fn set_source(&mut self, src: HostId, delay: OneWay) -> Option<OneWay> {
        self.sources.insert(src, delay)
    }

    /// Delay of the path `path_id` from `src`; the previous one if any.
    pub fn set_path(&mut self, src: HostId, path_id: u8, delay: OneWay) -> Option<OneWay> {
        self.paths.insert((src, path_id), delay)
    }

    /// What a packet from `src` with `path_id` is held for.
    pub fn delay(&self, src: HostId, path_id: u8) -> &OneWay {
        let path = self.paths.get(&(src, path_id));
        path.or_else(|| self.sources.get(&src)).unwrap_or(&self.default)
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
/// A source's packets leave in the order they arrived, each at its path's delay for its size
/// after it arrived, and not before its links let it follow the source's packet before it
/// ([`OneWay::follow`]: they crossed the same links into this host, the last one at least);
/// packets due at the same instant leave in arrival order. With `now` never going backwards (as
/// every hook of the core assumes), a packet is held at least its delay.
pub struct DelayLine<T> {
    delays: PathDelays,
    held: BinaryHeap<Reverse<Held<T>>>,
    /// Per source, when its last packet is released and its wire bytes.
    last: HashMap<HostId, (Instant, u64)>,
    arrivals: u64,
    max_len: usize,
}

impl<T> DelayLine<T> {
    pub fn new(delays: PathDelays) -> Self {
        Self { delays, held: BinaryHeap::new(), last: HashMap::new(), arrivals: 0, max_len: 0 }
    }

    pub fn delays(&self) -> &PathDelays {
        &self.delays
    }

    /// `item`, `wire_bytes` long on the wire, arrived `now` from `src` on `path_id`: it is due after
    /// that path's delay for its size, and after it follows `src`'s packet before (at once for a
    /// zero delay: the next `pop_due(now)` returns it).
    pub fn push(&mut self, now: Instant, src: HostId, path_id: u8, wire_bytes: u64, item: T) {
        let path = self.delays.delay(src, path_id);
        let mut release = now + path.of(wire_bytes);
        if let Some(&(previous, previous_bytes)) = self.last.get(&src) {
            release = release.max(previous + path.follow(previous_bytes, wire_bytes));
        }
        self.last.insert(src, (release, wire_bytes));
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

    /// A full frame on the wire.
    const FRAME: u64 = 1538;

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
        let mut line = DelayLine::new(PathDelays::new(OneWay::fixed(delay)));
        line.push(t0, 3, 0, FRAME, "a");
        line.push(t0 + us(10.0), 3, 0, FRAME, "b");
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
        line.push(t0, 1, 7, FRAME, 42);
        assert_eq!(line.next_due(), Some(t0));
        assert_eq!(line.pop_due(t0), Some(42));
        assert!(line.is_empty());
    }

    #[test]
    fn order_is_kept_per_source() {
        let t0 = Instant::now();
        let mut line = DelayLine::new(PathDelays::new(OneWay::fixed(us(500.0))));
        // Bursts arriving at the same instant, and arrivals a nanosecond apart.
        for n in 0..100u32 {
            let at = t0 + Duration::from_nanos(u64::from(n / 10));
            line.push(at, 2, 9, FRAME, n);
        }
        assert_eq!(line.max_len(), 100);
        assert_eq!(drain(&mut line, t0 + us(1000.0)), (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn sources_with_different_delays_interleave_by_release_time() {
        let t0 = Instant::now();
        let mut delays = PathDelays::default();
        delays.set_source(1, OneWay::fixed(us(100.0)));
        delays.set_source(2, OneWay::fixed(us(30.0)));
        let mut line = DelayLine::new(delays);
        line.push(t0, 1, 0, FRAME, "slow 1"); // due 100
        line.push(t0 + us(10.0), 2, 1, FRAME, "fast 1"); // due 40
        line.push(t0 + us(20.0), 1, 0, FRAME, "slow 2"); // due 120
        line.push(t0 + us(90.0), 2, 1, FRAME, "fast 2"); // due 120 too: arrived later, leaves later
        line.push(t0 + us(95.0), 2, 1, FRAME, "fast 3"); // due 125
        assert_eq!(drain(&mut line, t0 + us(40.0)), ["fast 1"]);
        assert_eq!(drain(&mut line, t0 + us(119.0)), ["slow 1"]);
        assert_eq!(line.next_due(), Some(t0 + us(120.0)));
        assert_eq!(drain(&mut line, t0 + us(200.0)), ["slow 2", "fast 2", "fast 3"]);
    }

    /// Six links of 10 Gbit/s (800 ps a byte), the middle four at a third of it: the realistic workload's 3:1
    /// fat-tree across pods.
    fn three_to_one() -> OneWay {
        OneWay { fixed: us(26.0), links_ps_per_byte: vec![800, 2400, 2400, 2400, 2400, 800] }
    }

    #[test]
    fn a_packet_is_held_its_paths_fixed_delay_plus_its_own_bytes_serialized_at_every_link() {
        let t0 = Instant::now();
        let path = three_to_one();
        let mut line = DelayLine::new(PathDelays::new(path.clone()));
        line.push(t0, 1, 0, FRAME, "frame");
        // 1538 B: 1.2304 us at each fast link, 3.6912 at each slow one: 17.2256 us.
        assert_eq!(line.next_due(), Some(t0 + us(26.0) + Duration::from_nanos(17_225)));
        assert_eq!(path.of(84), us(26.0) + Duration::from_nanos(940));
    }

    /// When the last of `sizes`, all handed over at `t0`, is released.
    fn released_last(path: &OneWay, sizes: &[u64], t0: Instant) -> Instant {
        let mut line = DelayLine::new(PathDelays::new(path.clone()));
        for (i, &size) in sizes.iter().enumerate() {
            line.push(t0, 1, 0, size, i);
        }
        let mut last = t0;
        while let Some(due) = line.next_due() {
            last = due;
            line.pop_due(due);
        }
        last
    }

    /// The tandem of store-and-forward links: frames sent back to back, each link sending a frame once it has it
    /// whole and has sent the one before; when the last is through (ns).
    fn tandem_ns(links_ps_per_byte: &[u64], sizes: &[u64]) -> u64 {
        let mut sent = vec![0u64; links_ps_per_byte.len()];
        let mut through = 0;
        for &size in sizes {
            let mut arrived = 0;
            for (j, ps) in links_ps_per_byte.iter().enumerate() {
                arrived = arrived.max(sent[j]) + ps * size;
                sent[j] = arrived;
            }
            through = arrived;
        }
        through / 1000
    }

    #[test]
    fn frames_the_fabric_delivered_at_once_leave_as_a_store_and_forward_path_would_deliver_them() {
        // An idle emulated port lets its burst go at once; the line spaces them as the links would: ten full frames
        // and a short last one (what most flows end with), over the 3:1 path and over six equal links.
        let t0 = Instant::now();
        let sizes: Vec<u64> = std::iter::repeat_n(FRAME, 10).chain([700]).collect();
        for path in [three_to_one(), OneWay { fixed: us(26.0), links_ps_per_byte: vec![800; 6] }] {
            let tandem = t0 + us(26.0) + Duration::from_nanos(tandem_ns(&path.links_ps_per_byte, &sizes));
            let last = released_last(&path, &sizes, t0);
            // Instants saturate: the difference both ways, a nanosecond of rounding per packet.
            let error = (last - tandem).max(tandem - last);
            assert!(error <= Duration::from_nanos(sizes.len() as u64), "{:?}: {error:?}", path.links_ps_per_byte);
        }
    }

    #[test]
    fn a_short_packet_right_behind_a_long_one_from_the_same_source_does_not_overtake_it() {
        let t0 = Instant::now();
        let path = three_to_one();
        let mut line = DelayLine::new(PathDelays::new(path.clone()));
        line.push(t0, 1, 0, FRAME, "long");
        line.push(t0 + us(1.0), 1, 3, 84, "short"); // alone it would be due at 26 + 1 + 0.94 us
        line.push(t0 + us(2.0), 2, 0, 84, "other source"); // another source: its own time
        assert_eq!(drain(&mut line, t0 + us(26.0 + 2.0 + 0.94)), ["other source"]);
        let long = t0 + path.of(FRAME);
        assert_eq!(line.next_due(), Some(long));
        assert_eq!(drain(&mut line, long), ["long"]);
        // It follows the long one by its own time at the last link, behind it at the slow ones.
        assert_eq!(line.next_due(), Some(long + path.follow(FRAME, 84)));
        assert!(path.follow(FRAME, 84) >= Duration::from_nanos(84 * 800 / 1000));
    }

    #[test]
    fn a_source_without_an_entry_gets_the_default() {
        let (seven, long, short) = (OneWay::fixed(us(7.0)), OneWay::fixed(us(1250.5)), OneWay::fixed(us(900.0)));
        let mut delays = PathDelays::new(seven.clone());
        delays.set_source(3, long.clone());
        delays.set_path(3, 5, short.clone());
        assert_eq!(delays.delay(3, 5), &short, "the path's own entry first");
        assert_eq!(delays.delay(3, 6), &long, "then the source's");
        assert_eq!(delays.delay(4, 5), &seven, "then the default");
        assert_eq!(PathDelays::default().delay(4, 5).of(FRAME), Duration::ZERO);
        assert_eq!(delays.set_source(3, OneWay::fixed(us(1.0))), Some(long), "a second entry says it replaced one");
    }
}
