//! DCTCP window control (SIGCOMM 2010; RFC 8257; Linux `tcp_dctcp.c`): alpha becomes
//! (1 - g) alpha + g F once per window of data, cwnd shrinks by alpha / 2 at most once per
//! window of data that saw CE; losses halve the window as Reno does, timeouts set RFC 5681's
//! values.

use std::time::Instant;

use super::param::{Range, Spec, Table};
use super::{Ack, Driver, SchemeFactory, SenderControl};

/// Parameters, with the paper's defaults.
#[derive(Debug, Clone)]
pub struct DctcpConfig {
    /// Segment size, bytes.
    pub mss: u64,
    /// Weight of the newest window's marked fraction (1/16).
    pub g: f64,
    /// Initial window, segments (10, as Linux).
    pub initial_window_segments: u64,
    /// Smallest window, segments (Linux DCTCP keeps 2; the DCTCP+ paper sets 1 for both
    /// schemes it compares).
    pub min_window_segments: u64,
}

impl Default for DctcpConfig {
    fn default() -> Self {
        Self { mss: 1448, g: 1.0 / 16.0, initial_window_segments: 10, min_window_segments: 2 }
    }
}

impl DctcpConfig {
    /// The defaults, for segments of `mss` payload bytes (the endpoint's data packets').
    pub fn with_mss(mss: u16) -> Self {
        Self { mss: mss.into(), ..Self::default() }
    }

    /// No time among them; field by field, so that a time added later must be placed here
    /// (DCTCP+, which runs this config, calls it too).
    pub fn dilate(&mut self, _d: f64) {
        let DctcpConfig { mss: _, g: _, initial_window_segments: _, min_window_segments: _ } = self;
    }

    pub fn build(&self) -> Dctcp {
        Dctcp {
            config: self.clone(),
            window: self.initial_window_segments * self.mss,
            slow_start_threshold: u64::MAX,
            alpha: 1.0,
            window_end: None,
            window_acked: 0,
            window_marked: 0,
            last_cut: None,
            before_timeout: None,
            reductions: 0,
        }
    }
}

impl Table for DctcpConfig {
    /// `--param dctcp.<name>=<value>`, and DCTCP+'s DCTCP underneath (`--param dctcp+.g=...`).
    /// The segment size is the endpoint's.
    const PARAMS: &'static [Spec<Self>] = &[
        Spec {
            name: "g",
            unit: "fraction",
            range: Range::Fraction,
            doc: "weight of the newest window's marked fraction in alpha",
            get: |c| Some(c.g),
            set: |c, v| c.g = v,
        },
        Spec {
            name: "initial_window_segments",
            unit: "segments",
            range: Range::Count(1),
            doc: "initial window (a flow on a reused connection keeps the window it takes over)",
            get: |c| Some(c.initial_window_segments as f64),
            set: |c, v| c.initial_window_segments = v as u64,
        },
        Spec {
            name: "min_window_segments",
            unit: "segments",
            range: Range::Count(1),
            doc: "smallest window",
            get: |c| Some(c.min_window_segments as f64),
            set: |c, v| c.min_window_segments = v as u64,
        },
    ];
}

impl SchemeFactory for DctcpConfig {
    fn name(&self) -> &'static str {
        "dctcp"
    }

    fn wire_id(&self) -> u8 {
        3
    }

    fn driver(&self) -> Driver {
        Driver::Sender
    }

    fn port_profile(&self) -> &'static str {
        "dctcp"
    }

    fn dilate(&mut self, d: f64) {
        DctcpConfig::dilate(self, d);
    }

    fn sender_control(&self, _seed: u64) -> Option<Box<dyn SenderControl>> {
        Some(Box::new(self.build()))
    }
}

#[derive(Debug, Clone)]
pub struct Dctcp {
    config: DctcpConfig,
    /// Congestion window, bytes.
    window: u64,
    slow_start_threshold: u64,
    /// Estimate of the fraction of marked bytes (starts at 1, as Linux).
    alpha: f64,
    /// RFC 8257 3.3: the observation window ends when the bytes sent when it began (SND.NXT
    /// then) are acknowledged (the first window: what was sent when the first ack came);
    /// bytes acked and ECE-marked within it.
    window_end: Option<u64>,
    window_acked: u64,
    window_marked: u64,
    /// When the window was last cut (ECN or loss): signals about packets sent before then
    /// belong to the window already cut (Linux's CWR/Recovery until high_seq is acked).
    last_cut: Option<Instant>,
    /// (window, slow start threshold) before the first of a run of timeouts.
    before_timeout: Option<(u64, u64)>,
    reductions: u64,
}

impl Dctcp {
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Window reductions (ECN cuts and loss halvings) so far.
    pub fn reductions(&self) -> u64 {
        self.reductions
    }

    pub fn min_window(&self) -> u64 {
        self.config.min_window_segments * self.config.mss
    }

    /// Holds the window at its minimum (DCTCP+ while it paces below it).
    pub fn hold_at_minimum(&mut self) {
        self.window = self.min_window();
        self.slow_start_threshold = self.slow_start_threshold.min(self.window.max(2 * self.config.mss));
    }

    /// Whether a congestion signal about a packet sent at `sent` may cut the window: not if
    /// the window was cut after that packet left. (`sent` comes from a microsecond stamp, the
    /// start of its microsecond: a packet sent in the cut's own microsecond counts as sent
    /// before it, so a window is never cut twice; at worst one mark goes unanswered.)
    fn may_cut(&self, sent: Instant) -> bool {
        self.last_cut.is_none_or(|cut| sent >= cut)
    }

    fn cut(&mut self, now: Instant, window: u64) {
        self.window = window.max(self.min_window());
        self.slow_start_threshold = self.window;
        self.last_cut = Some(now);
        self.reductions += 1;
    }
}

impl SenderControl for Dctcp {
    fn on_flow_start(&mut self, _now: Instant) {
        // Window, threshold and alpha carry over; the observation window counts bytes of
        // the new flow.
        self.window_end = None;
        (self.window_acked, self.window_marked) = (0, 0);
        self.before_timeout = None;
    }

    fn on_ack(&mut self, now: Instant, ack: &Ack) {
        if ack.acked_bytes > 0 {
            self.before_timeout = None;
        }
        self.window_acked += ack.acked_bytes;
        if ack.ece {
            self.window_marked += ack.acked_bytes;
            if self.may_cut(ack.sent) {
                self.cut(now, (self.window as f64 * (1.0 - self.alpha / 2.0)) as u64);
            }
        } else if self.window < self.slow_start_threshold {
            self.window += ack.acked_bytes;
        } else {
            self.window += (self.config.mss * ack.acked_bytes).div_ceil(self.window.max(1));
        }
        let window_end = *self.window_end.get_or_insert(ack.sent_bytes);
        // (A duplicate ack acknowledges nothing: no window to end, and no 0/0 for alpha.)
        if ack.delivered_bytes >= window_end && self.window_acked > 0 {
            let marked_fraction = self.window_marked as f64 / self.window_acked as f64;
            self.alpha = (1.0 - self.config.g) * self.alpha + self.config.g * marked_fraction;
            self.window_end = Some(ack.sent_bytes);
            self.window_acked = 0;
            self.window_marked = 0;
        }
    }

    fn on_loss(&mut self, now: Instant, lost_sent: Instant) {
        // Linux DCTCP answers loss as Reno (`dctcp_react_to_loss`), once per window of data:
        // a loss in a window an ECN cut already shrank is not cut again (and the reverse).
        if self.may_cut(lost_sent) {
            self.cut(now, self.window / 2);
        }
    }

    fn on_timeout(&mut self, now: Instant, flight_bytes: u64) {
        self.before_timeout.get_or_insert((self.window, self.slow_start_threshold));
        // RFC 5681 (4): ssthresh = max(FlightSize / 2, 2 SMSS); cwnd = the loss window, one
        // segment (DCTCP+'s minimum too).
        self.slow_start_threshold = (flight_bytes / 2).max(2 * self.config.mss);
        self.window = self.config.mss;
        self.last_cut = Some(now);
    }

    fn on_spurious_timeout(&mut self, _now: Instant) {
        if let Some((window, threshold)) = self.before_timeout.take() {
            (self.window, self.slow_start_threshold) = (window, threshold);
        }
    }

    fn window(&self) -> u64 {
        self.window
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const MSS: u64 = 1448;

    /// A flow clocked by its acks: segment n leaves at `start` + n us, each ack lets the
    /// window refill.
    struct Flow {
        cc: Dctcp,
        start: Instant,
        sent: u64,
        delivered: u64,
    }

    impl Flow {
        fn new() -> Self {
            let cc = DctcpConfig::default().build();
            Self { sent: cc.window(), cc, start: Instant::now(), delivered: 0 }
        }

        fn at(&self, segment: u64) -> Instant {
            self.start + Duration::from_micros(segment)
        }

        /// Acks what is in flight, the first `marked` acks ECE.
        fn round(&mut self, marked: u64) {
            self.round_marking(|i, _| i < marked);
        }

        /// Acks what is in flight, those for which `ece(index in the round, segment)` holds ECE.
        fn round_marking(&mut self, ece: impl Fn(u64, u64) -> bool) {
            let segments = (self.sent - self.delivered) / MSS;
            for i in 0..segments {
                let seq = self.delivered / MSS;
                self.delivered += MSS;
                let ack = Ack {
                    acked_bytes: MSS,
                    ece: ece(i, seq),
                    sent: self.at(seq),
                    rtt: Duration::from_micros(100),
                    delivered_bytes: self.delivered,
                    sent_bytes: self.sent,
                };
                self.cc.on_ack(self.at(self.sent / MSS), &ack);
                while self.sent - self.delivered + MSS <= self.cc.window() {
                    self.sent += MSS;
                }
            }
        }
    }

    #[test]
    fn alpha_decays_by_g_per_unmarked_window() {
        let mut flow = Flow::new();
        flow.round(0);
        assert!((flow.cc.alpha() - 15.0 / 16.0).abs() < 1e-9, "{}", flow.cc.alpha());
    }

    #[test]
    fn a_window_with_many_marks_is_cut_once_by_half_of_alpha() {
        let mut flow = Flow::new();
        for _ in 0..5 {
            flow.round(0);
        }
        let (before, alpha) = (flow.cc.window(), flow.cc.alpha());
        flow.round(3);
        // The first mark cut the window; the marks on packets sent before that cut did not.
        let expected = (before as f64 * (1.0 - alpha / 2.0)) as u64;
        assert_eq!(flow.cc.reductions(), 1);
        assert!(flow.cc.window() >= expected && flow.cc.window() < expected + 2 * MSS, "{}", flow.cc.window());
    }

    #[test]
    fn a_late_mark_on_a_packet_sent_before_the_cut_does_not_cut_again_after_alpha_is_updated() {
        let mut flow = Flow::new();
        flow.round(1);
        let (window, alpha) = (flow.cc.window(), flow.cc.alpha());
        assert_eq!(flow.cc.reductions(), 1);
        // The observation window has ended (alpha moved); a reordered ack of the first window
        // still echoes CE: counting cuts per observation window would cut a second time.
        assert!(alpha < 1.0);
        let late = Ack {
            acked_bytes: 0,
            ece: true,
            sent: flow.at(1),
            rtt: Duration::from_micros(100),
            delivered_bytes: flow.delivered,
            sent_bytes: flow.sent,
        };
        flow.cc.on_ack(flow.at(flow.sent / MSS), &late);
        assert_eq!((flow.cc.reductions(), flow.cc.window()), (1, window));
    }

    #[test]
    fn a_marked_duplicate_ack_after_everything_sent_was_acked_leaves_alpha_a_number() {
        let (mut cc, start) = (DctcpConfig::default().build(), Instant::now());
        let ack = |acked_bytes, ece| Ack {
            acked_bytes,
            ece,
            sent: start,
            rtt: Duration::from_micros(100),
            delivered_bytes: 10 * MSS,
            sent_bytes: 10 * MSS,
        };
        // Everything sent is acked: the observation window ends where the flow stands.
        cc.on_ack(start + Duration::from_micros(100), &ack(10 * MSS, false));
        // A duplicate ack (nothing new) echoes CE: no window of acked bytes to end.
        cc.on_ack(start + Duration::from_micros(101), &ack(0, true));
        assert!(cc.alpha().is_finite(), "{}", cc.alpha());
    }

    #[test]
    fn a_mark_on_a_packet_sent_after_the_cut_cuts_again() {
        let mut flow = Flow::new();
        flow.round(1);
        flow.round(1);
        assert_eq!(flow.cc.reductions(), 2);
    }

    #[test]
    fn a_loss_in_a_window_already_cut_by_ecn_does_not_halve_it_again() {
        let mut flow = Flow::new();
        flow.round(1);
        let after_ecn = flow.cc.window();
        // A packet of the same window (sent before the cut) turns out lost.
        let (lost_sent, now) = (flow.at(0), flow.at(flow.sent / MSS + 20));
        flow.cc.on_loss(now, lost_sent);
        assert_eq!((flow.cc.window(), flow.cc.reductions()), (after_ecn, 1));
        // One sent after the cut does.
        flow.cc.on_loss(now, now);
        assert_eq!((flow.cc.window(), flow.cc.reductions()), (after_ecn / 2, 2));
    }

    #[test]
    fn alpha_tracks_a_steady_marked_fraction() {
        let mut flow = Flow::new();
        // Every fourth segment marked, whatever the window.
        for _ in 0..2000 {
            flow.round_marking(|_, segment| segment % 4 == 0);
        }
        assert!((flow.cc.alpha() - 0.25).abs() < 0.05, "{}", flow.cc.alpha());
    }

    #[test]
    fn a_timeout_sets_rfc_5681s_values_and_a_spurious_one_gives_them_back() {
        let mut flow = Flow::new();
        let before = flow.cc.window();
        flow.cc.on_timeout(flow.at(100), 20 * MSS);
        assert_eq!((flow.cc.window(), flow.cc.slow_start_threshold), (MSS, 10 * MSS));
        flow.cc.on_timeout(flow.at(200), MSS);
        assert_eq!(flow.cc.slow_start_threshold, 2 * MSS, "at least two segments");
        flow.cc.on_spurious_timeout(flow.at(300));
        assert_eq!(flow.cc.window(), before);
    }

    #[test]
    fn cuts_never_take_the_window_below_its_minimum() {
        let mut flow = Flow::new();
        for _ in 0..100 {
            flow.round(100);
            flow.cc.on_loss(flow.at(flow.sent / MSS + 1), flow.at(flow.sent / MSS + 1));
        }
        assert_eq!(flow.cc.window(), 2 * MSS);
    }
}
