//! DCQCN's notification point (NP), at a flow's data receiver: which ECN marks call for a CNP,
//! and when it may go (the algorithm: [`crate::cc::dcqcn`]'s doc).

use std::time::{Duration, Instant};

use crate::cc::ReceiverControl;
use crate::types::Ecn;
use crate::wire::CnpFlag;

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

impl NotificationPoint {
    /// The NP of one flow of DCQCN (`tcd` false) or DCQCN+TCD, at most one CNP per `cnp_interval`.
    pub(super) fn new(tcd: bool, cnp_interval: Duration) -> Self {
        Self { tcd, cnps: CnpGenerator::new(cnp_interval) }
    }
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

    const US: Duration = Duration::from_micros(1);

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
