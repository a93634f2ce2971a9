//! Congestion control behind small traits (quinn-proto's `congestion` module is the model):
//! [`CreditControl`] for receiver-driven schemes (the data receiver paces credits:
//! ExpressPass, SprayPass), [`SenderControl`] for sender-driven ones (window, send gate, or a
//! rate pacer: DCTCP, DCTCP+, DCQCN) and, for the latter's data receivers, [`ReceiverControl`]
//! (DCQCN's notification point). Every hook takes `now`. One file per algorithm (one folder
//! when it grows helpers, or has two endpoints: DCQCN's reaction and notification points),
//! whose config is its scheme's factory ([`SchemeFactory`], with its parameters' table:
//! [`param`]); [`schemes`] is the one table of them, which an endpoint's [`crate::Registry`]
//! holds.

use std::any::Any;
use std::fmt;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;

use crate::types::Ecn;
use crate::wire::CnpFlag;
use param::Param;

pub mod dcqcn;
pub mod dctcp;
pub mod dctcp_plus;
pub mod expresspass;
pub mod param;
pub mod spraypass;

/// The schemes cchost runs, configured for a host's link of `link_bits_per_second` and its
/// data packets' `mss` payload bytes: the one table of them, one line per scheme, in the order
/// `cchost --schemes` lists them. A new scheme is a file above, its `pub mod` and a line here
/// (CONTRIBUTING.md, "A scheme", lists the rest).
pub fn schemes(link_bits_per_second: f64, mss: u16) -> Vec<Box<dyn SchemeFactory>> {
    let link = link_bits_per_second;
    vec![
        Box::new(expresspass::ExpressPassConfig::for_link(link)),
        Box::new(spraypass::SprayPassConfig::for_link(link)),
        Box::new(dctcp::DctcpConfig::with_mss(mss)),
        Box::new(dctcp_plus::DctcpPlusConfig::on(dctcp::DctcpConfig::with_mss(mss))),
        Box::new(dcqcn::DcqcnConfig::for_link(link)),
        Box::new(dcqcn::DcqcnConfig::for_link(link).with_tcd()),
    ]
}

/// Who drives a scheme's flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// The data receiver paces credits; the sender spends one per data packet.
    Receiver,
    /// The sender decides by a window (and a send gate: a pacer), from acks (and CNPs).
    Sender,
}

/// A scheme's config as its factory: what the registry, the flags and the endpoint ask of a
/// scheme. Implemented in the scheme's own `cc/` file; its config's fields are its parameters,
/// with their defaults documented there, and its [`param::Table`] lists them ([`Parameters`]).
pub trait SchemeFactory: Any + fmt::Debug + CloneFactory + Parameters {
    /// The name flows and flags give it (`--scheme`, a schedule line's `scheme`,
    /// `--param <name>.<key>=<value>`, flow records' `scheme`).
    fn name(&self) -> &'static str;
    /// The byte that names it on the wire (credit requests; the data header's scheme bits):
    /// 1 to [`crate::wire::MAX_SCHEME_ID`], unique in a registry, never reused for another
    /// scheme.
    fn wire_id(&self) -> u8;
    fn driver(&self) -> Driver;
    /// The port profile its hosts are written for (emulation/ccemu's ports: the Python side
    /// reads it from `cchost --schemes --json`).
    fn port_profile(&self) -> &'static str;
    /// Every time `d` times longer (`EndpointConfig::dilate`). Destructure the config field by
    /// field, so that a time added later does not compile until it is placed here.
    fn dilate(&mut self, d: f64);
    /// Receiver-driven: the credit control of one flow of `packets` data packets over `paths`
    /// equal-cost paths, at its data receiver.
    fn credit_control(&self, _now: Instant, _packets: u64, _paths: u16) -> Option<Box<dyn CreditControl>> {
        None
    }
    /// Sender-driven: the control of one connection at its sender (`seed`: the flow's own, for
    /// any randomness).
    fn sender_control(&self, _seed: u64) -> Option<Box<dyn SenderControl>> {
        None
    }
    /// Sender-driven: what the data receiver does beyond acking (DCQCN's notification point);
    /// `None`: nothing.
    fn receiver_control(&self) -> Option<Box<dyn ReceiverControl>> {
        None
    }
}

/// A scheme's parameters, as `--param <scheme>.<key>=<value>` sets them and `cchost --schemes`
/// lists them: implemented for every factory whose config has a [`param::Table`], nothing to
/// write. A scheme whose parameters are not one table (DCTCP+: its own, then its DCTCP's)
/// implements it instead.
pub trait Parameters {
    /// Its parameters, with their values now (the defaults, before any `--param`).
    fn params(&self) -> Vec<Param>;
    /// Sets parameter `key` from `value` (a time in microseconds of the datacenter); the error
    /// names what was wrong in one line.
    fn set_param(&mut self, key: &str, value: &str) -> Result<(), String>;
}

impl<T: SchemeFactory + param::Table> Parameters for T {
    fn params(&self) -> Vec<Param> {
        param::describe(self, T::PARAMS)
    }

    fn set_param(&mut self, key: &str, value: &str) -> Result<(), String> {
        param::set(self, T::PARAMS, self.name(), key, value)
    }
}

/// Cloning a boxed factory (an endpoint's config, registry included, is `Clone`): implemented
/// for every `Clone` factory, nothing to write.
pub trait CloneFactory {
    fn clone_box(&self) -> Box<dyn SchemeFactory>;
}

impl<T: SchemeFactory + Clone> CloneFactory for T {
    fn clone_box(&self) -> Box<dyn SchemeFactory> {
        Box::new(self.clone())
    }
}

/// Gap before the next credit at `rate` credit bytes per second: `credit_bytes` over the rate,
/// spread by `jitter` in [-1, 1] times `spread` (both credit schemes pace this way).
pub(crate) fn credit_gap(credit_bytes: f64, rate: f64, spread: f64, jitter: f64) -> Duration {
    Duration::from_secs_f64(credit_bytes / rate * (1.0 + jitter.clamp(-1.0, 1.0) * spread))
}

/// The rate of one credit per `rtt`: the floor of both credit schemes' feedback.
pub(crate) fn one_credit_per_rtt(credit_bytes: f64, rtt: Duration) -> f64 {
    credit_bytes / rtt.as_secs_f64().max(1e-9)
}

/// One data packet as its credit receiver sees it: the credit it spent, and how it came.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Echo {
    /// Sequence number of the credit the data spent.
    pub credit_seq: u32,
    /// Path-id the data came back on (its credit's).
    pub path_id: u8,
    /// The credit was CE-marked on its way (the sender copies the mark into the data header).
    pub credit_ce: bool,
    /// Bytes of the data packet on the wire (path probing measures arrival speed in them).
    pub wire_bytes: u64,
    /// The receiver's smoothed credit -> data delay, this packet's sample included.
    pub srtt: Duration,
}

/// One feedback step of a credit scheme, as [`CreditControl::on_credit`] ran it: what the
/// period saw and what the step changed. The figures a trace of the feedback needs to tell a
/// slow convergence from a fast one (issue 39); built once per period, nothing per credit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Feedback {
    /// How long the period lasted (from its start, or the last step, to this one).
    pub period: Duration,
    /// The RTT the step used: the receiver's smoothed credit -> data delay.
    pub rtt: Duration,
    /// Credits accounted in the period and, of them, those that count against the rate.
    /// ExpressPass: credits echoed or judged lost, and judged lost (its `Ledger`); SprayPass:
    /// data packets that arrived, and those whose credit was CE-marked.
    pub credits: u64,
    pub lost: u64,
    /// ExpressPass: skipped credits not judged yet (within the reorder tolerance), which the
    /// next period will account; SprayPass: 0.
    pub unjudged: u64,
    /// The congestion signal and the threshold it was held against: ExpressPass's credit loss
    /// and target_loss (from the rate before the step); SprayPass's ECN ratio and aim_ratio.
    pub loss: f64,
    pub target_loss: f64,
    /// Credit rate before and after the step, and the scheme's maximum, credit bytes per second.
    pub rate_before: f64,
    pub rate_after: f64,
    pub max_rate: f64,
    /// Aggressiveness before and after the step (ExpressPass's w, SprayPass's omega).
    pub w_before: f64,
    pub w_after: f64,
    /// The step cut the rate (the signal was above its threshold).
    pub decreased: bool,
}

/// Receiver-driven: how fast (and, for spraying schemes, where) credits are paced out.
pub trait CreditControl {
    /// A data packet of the flow arrived.
    fn on_echo(&mut self, now: Instant, echo: &Echo);
    /// A credit is about to be sent: a feedback period that has lasted an RTT ends here (the
    /// reference runs its feedback before each credit, ns2-xpass `send_credit`). Returns the
    /// step it ran, if one (for the flow's trace; the receiver drops it when tracing is off).
    fn on_credit(&mut self, now: Instant) -> Option<Feedback>;
    /// Credits restart after a credit stop (the receiver asks for missing data), the next one
    /// numbered `next_credit_seq`: the idle time must not count into the next period, nor
    /// the credits sent before the stop that the sender could only waste.
    fn on_restart(&mut self, now: Instant, next_credit_seq: u32);
    /// Gap before the next credit; `jitter` in [-1, 1] spreads it by the algorithm's
    /// randomisation (the caller draws it, so the core stays deterministic).
    fn credit_gap(&self, jitter: f64) -> Duration;
    /// Current credit rate, credit bytes per second on the wire.
    fn rate(&self) -> f64;
    /// Path-id of the next credit (data follows its credit's); by default the flow's own.
    fn next_path(&mut self, _rng: &mut SmallRng, flow_path: u8) -> u8 {
        flow_path
    }
    /// Credits this control judged lost so far (for the counters; 0 where it does not count).
    fn credits_lost(&self) -> u64 {
        0
    }
}

/// What one acknowledgement tells a sender-driven scheme.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ack {
    /// Bytes newly acknowledged (0 for a duplicate ack).
    pub acked_bytes: u64,
    /// The acknowledged packet arrived CE-marked.
    pub ece: bool,
    /// When the packet this ack answers was sent (its echoed send time).
    pub sent: Instant,
    /// RTT sample of that packet.
    pub rtt: Duration,
    /// Bytes acknowledged since the flow began, this ack included.
    pub delivered_bytes: u64,
    /// Bytes up to the highest ever sent (RFC 8257's SND.NXT, for its observation window).
    pub sent_bytes: u64,
}

/// Sender-driven: how many bytes may be in flight, and when the next packet may leave.
pub trait SenderControl {
    /// A new flow takes this control over from the last finished one to the same host (a
    /// persistent connection): its sequence space starts again.
    fn on_flow_start(&mut self, _now: Instant) {}
    /// A data packet left (new or retransmitted).
    fn on_sent(&mut self, _now: Instant, _bytes: u64) {}
    fn on_ack(&mut self, now: Instant, ack: &Ack);
    /// Loss detected by duplicate acks; `lost_sent`: when the lost packet was sent.
    fn on_loss(&mut self, now: Instant, lost_sent: Instant);
    /// Retransmission timeout with `flight_bytes` outstanding.
    fn on_timeout(&mut self, now: Instant, flight_bytes: u64);
    /// The last timeouts were spurious (the originals arrived): undo what they did to the
    /// window (RFC 4015's response).
    fn on_spurious_timeout(&mut self, now: Instant);
    /// A congestion notification from the receiver (DCQCN's CNP; with TCD its flag says
    /// congestion or undetermined). Window schemes learn from acks instead.
    fn on_congestion_notification(&mut self, _now: Instant, _flag: CnpFlag) {}
    /// Congestion window, bytes.
    fn window(&self) -> u64;
    /// The next packet is ready (the window allows it) at `now`: the earliest it may leave,
    /// when something other than the window holds it (DCTCP+'s slow_time, a rate pacer);
    /// `None`: at once. Asked again until the packet leaves (`on_sent`).
    fn next_send(&mut self, _now: Instant) -> Option<Instant> {
        None
    }
}

/// Sender-driven schemes, at the data receiver: what a data packet's ECN mark calls for besides
/// the ack that echoes it (DCQCN's notification point answers marks with CNPs, at most one per
/// interval). Built per flow by the scheme the data header names
/// ([`SchemeFactory::receiver_control`]); schemes that need none build none.
pub trait ReceiverControl {
    /// A data packet of the flow arrived with `ecn`: the notification to send now, if any.
    fn on_data(&mut self, now: Instant, ecn: Ecn) -> Option<CnpFlag>;
    /// When a notification held back may go (then `on_timeout`); `None`: none is held.
    fn deadline(&self) -> Option<Instant> {
        None
    }
    /// The deadline passed: the notification to send, if one is held.
    fn on_timeout(&mut self, _now: Instant) -> Option<CnpFlag> {
        None
    }
}
