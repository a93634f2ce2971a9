//! `cchost`: the transport every emulated host runs.
//!
//! The core is sans-IO (quinn-proto style): protocol state takes `now` and events and returns
//! packets and timers; it opens no socket and reads no clock, so tests drive it with a
//! simulated clock and network (`sim`, behind the feature of that name). Congestion control
//! sits behind small traits in [`cc`], one file per algorithm, whose config is its scheme's
//! [`SchemeFactory`]; an endpoint's [`Registry`] ([`cc::schemes`], the one table) builds the
//! controls of the [`Scheme`] a flow names; the per-flow state machines are in `flow`;
//! [`Endpoint`] is one host. Shared types ([`types`]), parameters ([`config`]) and what goes in
//! and out ([`record`]) have modules of their own, below everything that uses them.
//! [`DelayLine`] holds arriving packets for their path's propagation delay (the emulator has no
//! netem).

pub mod cc;
pub mod config;
pub mod delay_line;
mod endpoint;
mod flow;
pub mod record;
pub mod scheme;
#[cfg(feature = "sim")]
pub mod sim;
pub mod types;
pub mod wire;

pub use cc::{Driver, SchemeFactory};
pub use config::EndpointConfig;
pub use delay_line::{DelayLine, OneWay, PathDelays};
pub use endpoint::{flow_path_id, Endpoint, Held};
pub use record::{Counters, FlowRecord, FlowSpec, InboundFinish, ReceiverTrace, SenderTrace, Trace};
pub use scheme::{Registry, Scheme};
pub use types::{Ecn, HostId, Incoming, Transmit};
pub use wire::CnpFlag;
