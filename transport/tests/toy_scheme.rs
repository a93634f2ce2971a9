//! README's "Adding a scheme", followed once from outside the crate: a toy scheme (a fixed
//! window, deaf to congestion, whose data receiver answers every CE mark with a CNP at once)
//! is one config type implementing `SchemeFactory` and `param::Table` (its parameters), registered
//! with one line, and runs through the simulated network to the end of its flows like any
//! scheme.

use std::time::{Duration, Instant};

use cchost::cc::param::{Param, Range, Spec, Table};
use cchost::cc::{Ack, Parameters, ReceiverControl, SenderControl};
use cchost::sim::{Network, SimConfig, DATA_FRAME_BYTES};
use cchost::wire::Kind;
use cchost::{CnpFlag, Driver, Ecn, EndpointConfig, FlowSpec, Registry, Scheme, SchemeFactory};

const LINK: f64 = 10e9;
const PROPAGATION: Duration = Duration::from_micros(5);
const BUFFER: u64 = 250 * DATA_FRAME_BYTES;
/// DCTCP's ports, marking CE above 4 frames: one toy's window (8 segments, under the ~20
/// frames of the bandwidth-delay product) queues nowhere, four into one host do.
const K: u64 = 4 * DATA_FRAME_BYTES;
/// Senders of the incast tests: h1-h4 into h5.
const SENDERS: [u32; 4] = [1, 2, 3, 4];

/// The toy's parameters, and its factory.
#[derive(Debug, Clone)]
struct FixedWindowConfig {
    /// The window, in segments of `mss` bytes.
    window_segments: u64,
    mss: u64,
}

impl Default for FixedWindowConfig {
    fn default() -> Self {
        Self { window_segments: 8, mss: 1450 }
    }
}

impl Table for FixedWindowConfig {
    const PARAMS: &'static [Spec<Self>] = &[Spec {
        name: "window_segments",
        unit: "segments",
        range: Range::Count(1),
        doc: "the window, whatever happens",
        get: |c| Some(c.window_segments as f64),
        set: |c, v| c.window_segments = v as u64,
    }];
}

impl SchemeFactory for FixedWindowConfig {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn wire_id(&self) -> u8 {
        42
    }

    fn driver(&self) -> Driver {
        Driver::Sender
    }

    fn port_profile(&self) -> &'static str {
        "dctcp"
    }

    fn dilate(&mut self, _d: f64) {
        let FixedWindowConfig { window_segments: _, mss: _ } = self;
    }

    fn sender_control(&self, _seed: u64) -> Option<Box<dyn SenderControl>> {
        Some(Box::new(FixedWindow { window: self.window_segments * self.mss }))
    }

    fn receiver_control(&self) -> Option<Box<dyn ReceiverControl>> {
        Some(Box::new(EveryMark))
    }
}

struct FixedWindow {
    window: u64,
}

impl SenderControl for FixedWindow {
    fn on_ack(&mut self, _now: Instant, _ack: &Ack) {}
    fn on_loss(&mut self, _now: Instant, _lost_sent: Instant) {}
    fn on_timeout(&mut self, _now: Instant, _flight_bytes: u64) {}
    fn on_spurious_timeout(&mut self, _now: Instant) {}
    fn window(&self) -> u64 {
        self.window
    }
}

/// A CNP for every CE-marked data packet, none held back.
struct EveryMark;

impl ReceiverControl for EveryMark {
    fn on_data(&mut self, _now: Instant, ecn: Ecn) -> Option<CnpFlag> {
        (ecn == Ecn::Ce).then_some(CnpFlag::Congestion)
    }
}

/// Hosts `with_toy` run the toy besides the standard schemes.
fn network(hosts: u32, with_toy: impl Fn(u32) -> bool) -> Network {
    let config = SimConfig::dctcp(hosts, LINK, PROPAGATION, BUFFER, K);
    Network::new(config, |mut c: EndpointConfig| {
        if with_toy(c.host) {
            // The one line that registers a scheme.
            c.schemes = c.schemes.with(FixedWindowConfig::default());
        }
        c
    })
}

fn toy(net: &Network) -> Scheme {
    net.host(1).config().schemes.scheme("fixed").expect("registered")
}

fn flow(id: u32, dst: u32, scheme: Scheme) -> FlowSpec {
    FlowSpec { id, dst, size_bytes: 2_000_000, scheme, path_id: None, paths: None }
}

#[test]
fn a_scheme_registered_with_one_line_runs_its_flow_to_completion_through_the_simulated_network() {
    let mut net = network(2, |_| true);
    let scheme = toy(&net);
    net.start_flow(Duration::ZERO, 1, flow(1, 2, scheme));
    net.run_to_completion(Duration::from_secs(1));
    let record = &net.records[0];
    assert_eq!((record.scheme.name(), record.size_bytes, record.retransmits), ("fixed", 2_000_000, 0));
    // Its window of 8 segments is all that ever queues, at the sender's own port.
    let queued = net.host_port(1).max_data_queue_bytes;
    assert!(queued <= 8 * DATA_FRAME_BYTES, "{queued} B queued");
    println!("fixed window of 8, 2 MB alone: {:?}", record.fct());
}

#[test]
fn the_receiver_builds_the_toys_receiver_control_from_the_wire_id_its_data_carries() {
    // Four toys into one host: their 32 segments queue beyond K at the receiver's port, which
    // marks them; its receiver control answers each mark with a CNP.
    let mut net = network(5, |_| true);
    let scheme = toy(&net);
    for sender in SENDERS {
        net.start_flow(Duration::ZERO, sender, flow(sender, 5, scheme));
    }
    net.run_to_completion(Duration::from_secs(1));
    let marked = net.host(5).counters().ce_received;
    let cnps = net.host(5).counters().sent_packets[Kind::Cnp as usize];
    let echoed: u64 = net.records.iter().map(|r| r.cnps_ce).sum();
    assert!(net.switch_port(5).marks > 0, "the windows queue beyond K");
    assert_eq!((cnps, echoed), (marked, marked), "one CNP per CE-marked packet, each counted by its sender");
}

#[test]
fn a_receiver_that_does_not_know_the_toy_acks_its_data_and_sends_no_cnp() {
    let mut net = network(5, |host| host != 5);
    let scheme = toy(&net);
    for sender in SENDERS {
        net.start_flow(Duration::ZERO, sender, flow(sender, 5, scheme));
    }
    net.run_to_completion(Duration::from_secs(1));
    assert_eq!(net.records.len(), 4);
    assert!(net.switch_port(5).marks > 0);
    assert_eq!(net.host(5).counters().sent_packets[Kind::Cnp as usize], 0);
}

#[test]
fn the_toy_takes_its_parameters_by_name_and_is_listed_with_them() {
    let mut registry = Registry::catalogue().with(FixedWindowConfig::default());
    registry.set_param("fixed", "window_segments", "4").expect("a parameter of the toy");
    assert_eq!(registry.config::<FixedWindowConfig>("fixed").map(|c| c.window_segments), Some(4));
    assert_eq!(
        registry.set_param("fixed", "window_segments", "0"),
        Err("fixed.window_segments must be a whole number from 1 to 4294967295 (got \"0\")".into())
    );
    assert_eq!(registry.names().last(), Some(&"fixed"));
    let params = registry.get("fixed").expect("listed").params();
    assert_eq!((params[0].name, params[0].default, params[0].dilates), ("window_segments", Some(4.0), false));
}

#[test]
#[should_panic(expected = "fixed and dcqcn both have wire id 5")]
fn a_scheme_cannot_take_a_wire_id_another_has() {
    #[derive(Debug, Clone)]
    struct Clash(FixedWindowConfig);
    impl SchemeFactory for Clash {
        fn name(&self) -> &'static str {
            "fixed"
        }
        fn wire_id(&self) -> u8 {
            5
        }
        fn driver(&self) -> Driver {
            Driver::Sender
        }
        fn port_profile(&self) -> &'static str {
            "dctcp"
        }
        fn dilate(&mut self, d: f64) {
            self.0.dilate(d);
        }
    }
    impl Parameters for Clash {
        fn params(&self) -> Vec<Param> {
            self.0.params()
        }
        fn set_param(&mut self, key: &str, value: &str) -> Result<(), String> {
            self.0.set_param(key, value)
        }
    }
    let _ = Registry::catalogue().with(Clash(FixedWindowConfig::default()));
}
