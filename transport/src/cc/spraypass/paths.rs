//! SprayPass's path table (section III-C): credits take path-ids round by round without
//! replacement ("uniform spraying"), and path probing removes the path-ids whose data
//! arrives far slower than the fastest path's.

/// A probe also waits for this many data packets per sprayed path (on average): with many
/// path-ids (256 when the sender does not know the topology) N_b bits (~49 packets) would not
/// reach every one, and a path that had no chance to carry data has no speed to compare.
/// Paths are sprayed round by round, so a healthy one gets its share within a packet or two.
const PACKETS_PER_PATH_JUDGED: u64 = 8;

use rand::rngs::SmallRng;
use rand::RngExt;

/// The path-ids a receiver sprays one flow's credits over, and their probing.
#[derive(Debug, Clone)]
pub struct PathTable {
    /// Path-ids 0..count (count <= 256).
    count: u16,
    /// Path-ids left in the current round.
    round: Vec<u8>,
    /// Per path-id: bits of data that arrived on it since the last probe.
    bits: Vec<u64>,
    /// Per path-id: `None` while sprayed; removed until this probe number.
    removed_until: Vec<Option<u64>>,
    /// Per path-id: probe intervals it stays out the next time it is removed.
    penalty: Vec<u64>,
    probe_bits: u64,
    theta: f64,
    readmit_after: u64,
    /// Bits and packets of data since the last probe, over all paths.
    interval_bits: u64,
    interval_packets: u64,
    probes: u64,
    removals: u64,
}

impl PathTable {
    pub fn new(count: u16, probe_bits: u64, theta: f64, readmit_after: u32) -> Self {
        let count = count.clamp(1, 256);
        let n = count as usize;
        Self {
            count,
            round: Vec::with_capacity(n),
            bits: vec![0; n],
            removed_until: vec![None; n],
            penalty: vec![u64::from(readmit_after.max(1)); n],
            probe_bits: probe_bits.max(1),
            theta,
            readmit_after: u64::from(readmit_after.max(1)),
            interval_bits: 0,
            interval_packets: 0,
            probes: 0,
            removals: 0,
        }
    }

    /// This table with `paths` never sprayed (one path is always kept).
    pub fn without(mut self, paths: &[u8]) -> Self {
        for &path in paths.iter().filter(|&&p| (p as u16) < self.count) {
            if self.active().count() > 1 {
                self.removed_until[path as usize] = Some(u64::MAX);
            }
        }
        self
    }

    /// The path-id of the next credit: a random one of those left in this round; a round
    /// holds every path-id not removed.
    pub fn next(&mut self, rng: &mut SmallRng) -> u8 {
        if self.round.is_empty() {
            self.round.extend((0..self.count).filter(|&p| self.removed_until[p as usize].is_none()).map(|p| p as u8));
        }
        let pick = rng.random_range(0..self.round.len());
        self.round.swap_remove(pick)
    }

    /// Path-ids sprayed now.
    pub fn active(&self) -> impl Iterator<Item = u8> + '_ {
        (0..self.count).filter(|&p| self.removed_until[p as usize].is_none()).map(|p| p as u8)
    }

    /// Times a path was removed so far.
    pub fn removals(&self) -> u64 {
        self.removals
    }

    /// A data packet of `bits` arrived on `path_id`.
    pub fn on_arrival(&mut self, path_id: u8, bits: u64) {
        let path = path_id as usize % self.count as usize;
        self.bits[path] += bits;
        self.interval_bits += bits;
        self.interval_packets += 1;
        let enough_packets = self.interval_packets >= PACKETS_PER_PATH_JUDGED * self.active().count() as u64;
        if self.interval_bits >= self.probe_bits && enough_packets {
            self.probe();
        }
    }

    /// The speed board (Eq. 2): every path sprayed during the interval whose speed is below
    /// theta x the fastest's is removed. All speeds share the interval, so bits compare as speeds.
    fn probe(&mut self) {
        self.probes += 1;
        let sprayed: Vec<usize> = (0..self.count as usize).filter(|&p| self.removed_until[p].is_none()).collect();
        let fastest = sprayed.iter().map(|&p| self.bits[p]).max().unwrap_or(0) as f64;
        for &path in &sprayed {
            // Never the last path: a flow needs one.
            if (self.bits[path] as f64) < self.theta * fastest && self.active().count() > 1 {
                self.removed_until[path] = Some(self.probes + self.penalty[path]);
                // CHOICE: the paper removes a path for good; paths recover (a link repaired,
                // a burst gone), so a removed path is sprayed again after a while, and
                // removed for twice as long each time it proves slow again (capped at 64x).
                self.penalty[path] = (self.penalty[path] * 2).min(64 * self.readmit_after);
                self.round.retain(|&p| p as usize != path);
                self.removals += 1;
            }
        }
        for path in 0..self.count as usize {
            if self.removed_until[path].is_some_and(|until| self.probes >= until) {
                self.removed_until[path] = None;
            }
        }
        self.bits.iter_mut().for_each(|b| *b = 0);
        (self.interval_bits, self.interval_packets) = (0, 0);
    }

    /// Credits restart after a stop: the idle time is no measurement.
    pub fn on_restart(&mut self) {
        self.bits.iter_mut().for_each(|b| *b = 0);
        (self.interval_bits, self.interval_packets) = (0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn every_path_gets_one_credit_per_round() {
        let (mut table, mut rng) = (PathTable::new(4, 600_000, 0.1, 8), SmallRng::seed_from_u64(1));
        for _ in 0..10 {
            let mut round: Vec<u8> = (0..4).map(|_| table.next(&mut rng)).collect();
            round.sort();
            assert_eq!(round, vec![0, 1, 2, 3]);
        }
    }

    /// `rounds` rounds of data, one packet per path a round as spraying sends them, path p
    /// delivering a packet only every `every[p]`-th round (0: never).
    fn interval(table: &mut PathTable, rounds: u32, every: &[u32]) {
        for round in 0..rounds {
            for (path, &every) in every.iter().enumerate() {
                if every > 0 && round % every == 0 {
                    table.on_arrival(path as u8, 1538 * 8);
                }
            }
        }
    }

    #[test]
    fn a_path_below_a_tenth_of_the_fastest_is_removed_and_sprayed_again_later() {
        let (mut table, mut rng) = (PathTable::new(4, 600_000, 0.1, 2), SmallRng::seed_from_u64(1));
        // One interval (49 packets make N_b): paths 0-2 get one packet a round, path 3 one in 20.
        interval(&mut table, 17, &[1, 1, 1, 20]);
        assert_eq!((table.probes, table.removals()), (1, 1));
        assert_eq!(table.active().collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!((0..30).all(|_| table.next(&mut rng) != 3));
        // Two more probe intervals on the healthy paths: path 3 is back.
        interval(&mut table, 2 * 17, &[1, 1, 1]);
        assert_eq!(table.active().count(), 4);
    }

    #[test]
    fn with_256_path_ids_a_probe_waits_for_data_on_every_one_and_keeps_them_all() {
        let mut table = PathTable::new(256, 600_000, 0.1, 8);
        // N_b bits arrive within the first round: most path-ids had no data yet.
        interval(&mut table, 1, &[1; 256]);
        assert_eq!(table.probes, 0);
        interval(&mut table, 7, &[1; 256]);
        assert_eq!((table.probes, table.removals(), table.active().count()), (1, 0, 256));
    }

    #[test]
    fn the_last_path_is_never_removed() {
        let mut table = PathTable::new(1, 8, 0.1, 8);
        interval(&mut table, 8, &[1]);
        assert_eq!((table.probes, table.active().count()), (1, 1));
    }
}
