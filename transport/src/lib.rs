//! `cchost`: the transport every emulated host runs.
//!
//! The core is sans-IO (quinn-proto style): protocol state takes `now` and events and
//! returns packets and timers; it opens no socket and reads no clock, so tests drive it
//! with a simulated clock and network. Congestion control sits behind small traits in
//! [`cc`], one file per algorithm.

pub mod cc;
pub mod wire;
