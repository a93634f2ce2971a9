//! `cchost`: the transport every emulated host runs.
//!
//! The core is sans-IO (quinn-proto style): protocol state takes `now` and events and
//! returns packets and timers; it opens no socket and reads no clock, so tests drive it
//! with a simulated clock and network ([`sim`]). Congestion control sits behind small
//! traits in [`cc`], one file per algorithm; the per-flow state machines are in `flow`;
//! [`Endpoint`] is one host.

pub mod cc;
mod endpoint;
mod flow;
pub mod sim;
pub mod wire;

pub use endpoint::{
    flow_path_id, Counters, Ecn, Endpoint, EndpointConfig, FlowRecord, FlowSpec, HostId, Incoming, Scheme, Transmit,
};
