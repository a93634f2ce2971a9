//! DCTCP window control (SIGCOMM 2010): alpha <- (1 - g) alpha + g F once per window of
//! data, cwnd <- cwnd (1 - alpha / 2) once per window that saw CE.

use std::time::Instant;

use super::WindowControl;

/// Parameters, with the paper's defaults.
#[derive(Debug, Clone)]
pub struct DctcpConfig {
    /// Segment size, bytes.
    pub mss: u64,
    /// Weight of the newest window's marked fraction (1/16).
    pub g: f64,
    /// Initial window, segments (10, as Linux).
    pub initial_window_segments: u64,
    /// Smallest window, segments (DCTCP+ compares against 1; Linux DCTCP keeps 2).
    pub min_window_segments: u64,
}

impl Default for DctcpConfig {
    fn default() -> Self {
        Self { mss: 1448, g: 1.0 / 16.0, initial_window_segments: 10, min_window_segments: 2 }
    }
}

impl DctcpConfig {
    pub fn build(&self) -> Dctcp {
        Dctcp {
            config: self.clone(),
            window: self.initial_window_segments * self.mss,
            slow_start_threshold: u64::MAX,
            alpha: 1.0,
            observed_bytes: self.initial_window_segments * self.mss,
            window_acked: 0,
            window_marked: 0,
            cut_this_window: false,
            before_timeout: None,
        }
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
    /// Length of the current observation window: one window of data, as it was when the
    /// observation began (the paper updates alpha once per RTT's worth of acks).
    observed_bytes: u64,
    /// Bytes acked / of which ECE-marked, in the current observation window.
    window_acked: u64,
    window_marked: u64,
    /// A window is cut at most once per window of data.
    cut_this_window: bool,
    /// (window, slow start threshold) before the first of a run of timeouts.
    before_timeout: Option<(u64, u64)>,
}

impl Dctcp {
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    fn min_window(&self) -> u64 {
        self.config.min_window_segments * self.config.mss
    }
}

impl WindowControl for Dctcp {
    fn on_ack(&mut self, _now: Instant, acked: u64, ece: bool) {
        if acked > 0 {
            self.before_timeout = None;
        }
        self.window_acked += acked;
        if ece {
            self.window_marked += acked;
            if !self.cut_this_window {
                self.window = ((self.window as f64 * (1.0 - self.alpha / 2.0)) as u64).max(self.min_window());
                self.slow_start_threshold = self.window;
                self.cut_this_window = true;
            }
        } else if self.window < self.slow_start_threshold {
            self.window += acked;
        } else {
            self.window += (self.config.mss * acked).div_ceil(self.window.max(1));
        }
        if self.window_acked >= self.observed_bytes {
            let marked_fraction = self.window_marked as f64 / self.window_acked as f64;
            self.alpha = (1.0 - self.config.g) * self.alpha + self.config.g * marked_fraction;
            self.observed_bytes = self.window;
            self.window_acked = 0;
            self.window_marked = 0;
            self.cut_this_window = false;
        }
    }

    fn on_loss(&mut self, _now: Instant) {
        self.window = (self.window / 2).max(self.min_window());
        self.slow_start_threshold = self.window;
    }

    fn on_timeout(&mut self, _now: Instant) {
        self.before_timeout.get_or_insert((self.window, self.slow_start_threshold));
        self.slow_start_threshold = (self.window / 2).max(self.min_window());
        self.window = self.min_window();
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
    use super::*;

    /// Acks one observation window of segments, the first `marked_fraction` of them ECE.
    fn ack_window(cc: &mut Dctcp, now: Instant, marked_fraction: f64) {
        let segments = cc.observed_bytes.div_ceil(1448).max(1);
        let marked = (segments as f64 * marked_fraction).round() as u64;
        for i in 0..segments {
            cc.on_ack(now, 1448, i < marked);
        }
    }

    #[test]
    fn alpha_decays_by_g_per_unmarked_window() {
        let (mut cc, now) = (DctcpConfig::default().build(), Instant::now());
        ack_window(&mut cc, now, 0.0);
        assert!((cc.alpha() - 15.0 / 16.0).abs() < 1e-9, "{}", cc.alpha());
    }

    #[test]
    fn a_marked_window_is_cut_once_by_half_of_alpha() {
        let (mut cc, now) = (DctcpConfig::default().build(), Instant::now());
        cc.on_loss(now); // out of slow start: the window then grows by one segment per window
        for _ in 0..40 {
            ack_window(&mut cc, now, 0.0);
        }
        let (before, alpha) = (cc.window(), cc.alpha());
        cc.on_ack(now, 1448, true);
        cc.on_ack(now, 1448, true);
        let expected = (before as f64 * (1.0 - alpha / 2.0)) as u64;
        assert_eq!(cc.window(), expected);
    }

    #[test]
    fn alpha_tracks_a_steady_marked_fraction() {
        let (mut cc, now) = (DctcpConfig::default().build(), Instant::now());
        // Every fourth segment marked, whatever the window size.
        for segment in 0..20_000u32 {
            cc.on_ack(now, 1448, segment % 4 == 0);
        }
        assert!((cc.alpha() - 0.25).abs() < 0.05, "{}", cc.alpha());
    }

    #[test]
    fn a_spurious_timeout_gives_the_window_back() {
        let (mut cc, now) = (DctcpConfig::default().build(), Instant::now());
        let before = cc.window();
        cc.on_timeout(now);
        cc.on_timeout(now);
        assert_eq!(cc.window(), 2 * 1448);
        cc.on_spurious_timeout(now);
        assert_eq!(cc.window(), before);
    }

    #[test]
    fn the_window_never_falls_below_its_minimum() {
        let (mut cc, now) = (DctcpConfig::default().build(), Instant::now());
        for _ in 0..100 {
            cc.on_ack(now, 1448, true);
            cc.on_loss(now);
            cc.on_timeout(now);
        }
        assert_eq!(cc.window(), 2 * 1448);
    }
}
