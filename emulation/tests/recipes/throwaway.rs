//! A throwaway scheme: CONTRIBUTING.md's "A scheme" followed in a copy of the tree by
//! emulation/tests/recipes/recipes.py (copied there as src/cc/throwaway.rs; never built here). A
//! fixed window, deaf to congestion: the least a scheme is. Its wire id is the highest there is, so
//! that a real scheme is unlikely to take it; if one does, the registry's panic names both.

use std::time::Instant;

use super::param::{Range, Spec, Table};
use super::{Ack, Driver, SchemeFactory, SenderControl};

/// Parameters.
#[derive(Debug, Clone)]
pub struct ThrowawayConfig {
    /// Segment size, bytes.
    pub mss: u64,
    /// The window, segments.
    pub window_segments: u64,
}

impl ThrowawayConfig {
    /// The defaults, for segments of `mss` payload bytes.
    pub fn with_mss(mss: u16) -> Self {
        Self { mss: mss.into(), window_segments: 8 }
    }
}

impl Table for ThrowawayConfig {
    const PARAMS: &'static [Spec<Self>] = &[Spec {
        name: "window_segments",
        unit: "segments",
        range: Range::Count(1),
        doc: "the window, whatever happens",
        get: |c| Some(c.window_segments as f64),
        set: |c, v| c.window_segments = v as u64,
    }];
}

impl SchemeFactory for ThrowawayConfig {
    fn name(&self) -> &'static str {
        "throwaway"
    }

    fn wire_id(&self) -> u8 {
        63
    }

    fn driver(&self) -> Driver {
        Driver::Sender
    }

    fn port_profile(&self) -> &'static str {
        "dctcp"
    }

    fn dilate(&mut self, _d: f64) {
        let ThrowawayConfig { mss: _, window_segments: _ } = self;
    }

    fn sender_control(&self, _seed: u64) -> Option<Box<dyn SenderControl>> {
        Some(Box::new(Throwaway { window: self.window_segments * self.mss }))
    }
}

struct Throwaway {
    window: u64,
}

impl SenderControl for Throwaway {
    fn on_ack(&mut self, _now: Instant, _ack: &Ack) {}
    fn on_loss(&mut self, _now: Instant, _lost_sent: Instant) {}
    fn on_timeout(&mut self, _now: Instant, _flight_bytes: u64) {}
    fn on_spurious_timeout(&mut self, _now: Instant) {}
    fn window(&self) -> u64 {
        self.window
    }
}
