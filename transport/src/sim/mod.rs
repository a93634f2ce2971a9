//! A simulated network to drive [`Endpoint`]s with a virtual clock, on any [`Topology`] (a
//! star, a leaf-spine, a fat-tree), routed by path-id as the emulated fabric is. Every port,
//! host NIC and switch port alike, is the emulator's port model (emulation/ccemu/ports/; here
//! `port.rs`: a credit class and a data FIFO, marking as the scheme's ports do). Links have a
//! propagation delay and a rate each. What the emulator adds on its own is here on demand:
//! reordering (a packet overtaken by up to N others on its last hop) and late timers. The
//! [`Network`] (this file) moves packets between hosts and ports by the event queue
//! (`events.rs`) and records what they saw (`stats.rs`). Deterministic: the same inputs give
//! the same run.

mod events;
mod port;
mod stats;
mod topology;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

pub use port::{Red, CREDIT_WIRE_BYTES};
pub use stats::{jain_fairness, mean_queue, Delivery, PortStats};
pub use topology::{Node, Switch, Topology};

use crate::config::EndpointConfig;
use crate::endpoint::Endpoint;
use crate::record::{FlowRecord, FlowSpec, InboundFinish, Trace};
use crate::types::{Ecn, HostId, Incoming};
use crate::wire::{frame_wire_bytes, Kind, Packet, DATA_HEADER_BYTES, FRAME_OVERHEAD_BYTES};
use events::{Event, Events};
use port::{Departure, InFlight, Port};

/// A full data frame on the wire (1450 bytes of payload).
pub const DATA_FRAME_BYTES: u64 = 1450 + DATA_HEADER_BYTES as u64 + FRAME_OVERHEAD_BYTES;

#[derive(Debug, Clone)]
pub struct SimConfig {
    pub topology: Topology,
    /// Rate of every link, unless [`Network::set_link_rate`] changes one.
    pub link_bps: f64,
    /// One way, per link.
    pub propagation: Duration,
    pub data_buffer_bytes: u64,
    /// 0: no credit class (credits would be data).
    pub credit_share: f64,
    pub credit_buffer_credits: usize,
    pub credit_burst_credits: u64,
    /// SprayPass: credits are CE-marked with Pd = dropped / injected credits of the last this
    /// many (N_cdt = 4); `None`: never.
    pub credit_mark_window: Option<u32>,
    /// DCTCP K on the data FIFO.
    pub ecn_threshold_bytes: Option<u64>,
    /// DCQCN's CP: RED marking on the data FIFO.
    pub red: Option<Red>,
    /// Every packet's last hop is held back by U[0, this many full data frames at the link
    /// rate], so that up to that many packets overtake it (the emulator's CPUs reorder).
    pub reorder_frames: u32,
    /// Every host timer fires late by U[0, this] (the emulator's timer lateness).
    pub timer_jitter: Duration,
    /// Seed of the network's own randomness (marking, reordering, jitter).
    pub seed: u64,
    /// Every port logs every credit that comes to it (`PortStats::credit_log`).
    pub log_credits: bool,
}

impl SimConfig {
    /// The ExpressPass port model on a star of `hosts`: 84 / (84 + 1538) of the link for
    /// credits, 8 credits of buffer, bursts of 2.
    pub fn expresspass(hosts: u32, link_bps: f64, propagation: Duration, data_buffer_bytes: u64) -> Self {
        Self {
            topology: Topology::star(hosts),
            link_bps,
            propagation,
            data_buffer_bytes,
            credit_share: 84.0 / (84.0 + 1538.0),
            credit_buffer_credits: 8,
            credit_burst_credits: 2,
            credit_mark_window: None,
            ecn_threshold_bytes: None,
            red: None,
            reorder_frames: 0,
            timer_jitter: Duration::ZERO,
            seed: 1,
            log_credits: false,
        }
    }

    /// SprayPass's: ExpressPass's, and credits marked with Pd over N_cdt = 4 credits.
    pub fn spraypass(hosts: u32, link_bps: f64, propagation: Duration, data_buffer_bytes: u64) -> Self {
        Self { credit_mark_window: Some(4), ..Self::expresspass(hosts, link_bps, propagation, data_buffer_bytes) }
    }

    pub fn dctcp(hosts: u32, link_bps: f64, propagation: Duration, data_buffer_bytes: u64, k: u64) -> Self {
        Self {
            credit_share: 0.0,
            ecn_threshold_bytes: Some(k),
            ..Self::expresspass(hosts, link_bps, propagation, data_buffer_bytes)
        }
    }

    /// DCQCN's: no credit class, data CE-marked by RED (the DCQCN paper's CP).
    pub fn dcqcn(hosts: u32, link_bps: f64, propagation: Duration, data_buffer_bytes: u64, red: Red) -> Self {
        Self { credit_share: 0.0, red: Some(red), ..Self::expresspass(hosts, link_bps, propagation, data_buffer_bytes) }
    }

    /// The same ports on another topology.
    pub fn on(self, topology: Topology) -> Self {
        Self { topology, ..self }
    }

    pub fn hosts(&self) -> u32 {
        self.topology.hosts
    }

    /// Data payload rate an ExpressPass flow can reach on one link: the link minus the credit
    /// share, times payload / wire bytes of a full data packet.
    pub fn ideal_data_rate(&self, mss: u16) -> f64 {
        let wire = mss as f64 + (DATA_HEADER_BYTES as u64 + FRAME_OVERHEAD_BYTES) as f64;
        self.link_bps / 8.0 * (1.0 - self.credit_share) * mss as f64 / wire
    }
}

pub struct Network {
    pub config: SimConfig,
    start: Instant,
    now: Instant,
    hosts: Vec<Endpoint>,
    /// Per host: the deadline it asked to be woken at, and when its (late) timer fires.
    wakes: Vec<Option<(Instant, Instant)>>,
    ports: Vec<Port>,
    /// The port from a node toward a neighbour.
    port_of: HashMap<(Node, Node), usize>,
    /// Per host (h1 at 0): its NIC's port, looked up once (every packet a host sends takes it).
    nics: Vec<usize>,
    events: Events,
    rng: SmallRng,
    /// Lose the n-th packet (1-based) of a kind that any host sends.
    losses: Vec<(Kind, u64)>,
    /// Hold the n-th packet of a kind back this long, so that the next ones overtake it.
    delays: Vec<(Kind, u64, Duration)>,
    sent_by_kind: HashMap<Kind, u64>,
    pub records: Vec<FlowRecord>,
    /// Every flow received in full, by any host.
    pub inbound_finishes: Vec<InboundFinish>,
    /// Every host's trace lines, with the host (empty unless the hosts' `EndpointConfig::trace`).
    pub traces: Vec<(HostId, Trace)>,
    pub deliveries: Vec<Delivery>,
}

impl Network {
    /// `endpoint` tailors each host's transport from the default for the link.
    pub fn new(config: SimConfig, endpoint: impl Fn(EndpointConfig) -> EndpointConfig) -> Self {
        let start = Instant::now();
        let hosts = (1..=config.hosts())
            .map(|host| Endpoint::new(endpoint(EndpointConfig::new(host, config.link_bps, start))))
            .collect();
        let (mut ports, mut port_of) = (Vec::new(), HashMap::new());
        for (a, b) in config.topology.links() {
            for (from, to) in [(a, b), (b, a)] {
                port_of.insert((from, to), ports.len());
                ports.push(Port::new(to, &config, start));
            }
        }
        let nics =
            (1..=config.hosts()).map(|host| port_of[&(Node::Host(host), config.topology.edge_of(host))]).collect();
        Self {
            nics,
            wakes: vec![None; config.hosts() as usize],
            rng: SmallRng::seed_from_u64(config.seed),
            config,
            start,
            now: start,
            hosts,
            ports,
            port_of,
            events: Events::default(),
            losses: Vec::new(),
            delays: Vec::new(),
            sent_by_kind: HashMap::new(),
            records: Vec::new(),
            inbound_finishes: Vec::new(),
            traces: Vec::new(),
            deliveries: Vec::new(),
        }
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn host(&self, host: HostId) -> &Endpoint {
        &self.hosts[host as usize - 1]
    }

    fn port_index(&self, from: Node, to: Node) -> usize {
        *self.port_of.get(&(from, to)).unwrap_or_else(|| panic!("no link {from:?} -> {to:?}"))
    }

    /// The port toward `host` on its switch (where its incoming flows queue).
    pub fn switch_port(&self, host: HostId) -> &PortStats {
        let edge = self.config.topology.edge_of(host);
        &self.ports[self.port_index(edge, Node::Host(host))].stats
    }

    /// `host`'s own NIC (where the credits it paces queue).
    pub fn host_port(&self, host: HostId) -> &PortStats {
        &self.ports[self.nics[host as usize - 1]].stats
    }

    pub fn ports(&self) -> impl Iterator<Item = &PortStats> {
        self.ports.iter().map(|p| &p.stats)
    }

    /// Both directions of the link between `a` and `b` run at `bps` (a slow or degraded link;
    /// the credit class keeps its share of it).
    pub fn set_link_rate(&mut self, a: Node, b: Node, bps: f64) {
        for (from, to) in [(a, b), (b, a)] {
            let port = self.port_index(from, to);
            self.ports[port].rate_bps = bps;
        }
    }

    /// Drop the `nth` (1-based) packet of `kind` that any host sends.
    pub fn lose(&mut self, kind: Kind, nth: u64) {
        self.losses.push((kind, nth));
    }

    /// Hold the `nth` packet of `kind` back by `by` before its host's port (packets sent
    /// after it overtake it: reordering, as CPUs of the emulator can cause).
    pub fn delay(&mut self, kind: Kind, nth: u64, by: Duration) {
        self.delays.push((kind, nth, by));
    }

    /// From `after` the start, the switch port toward `host` sends nothing for `stall`: what a
    /// CPU stall does to the emulated fabric.
    pub fn stall_switch_port(&mut self, host: HostId, after: Duration, stall: Duration) {
        let port = self.port_index(self.config.topology.edge_of(host), Node::Host(host));
        self.schedule(self.start + after, Event::Stall { port, until: self.start + after + stall });
    }

    /// From `after` the start and for `duration`, the switch port toward `host` marks every
    /// ECN-capable data packet `mark`: `Ecn::Ect1` is TCD's UE (the port paused by PFC
    /// without being congested, which the sim does not model), `Ecn::Ce` congestion. CE is
    /// never turned into UE; the port's own CE marking still applies over UE.
    pub fn mark_switch_port(&mut self, host: HostId, mark: Ecn, after: Duration, duration: Duration) {
        let port = self.port_index(self.config.topology.edge_of(host), Node::Host(host));
        self.ports[port].forced_mark = Some((mark, self.start + after, self.start + after + duration));
    }

    pub fn start_flow(&mut self, after: Duration, host: HostId, spec: FlowSpec) {
        self.schedule(self.start + after, Event::Start { host, spec });
    }

    /// Runs until `until` after the start, or until nothing is left to happen.
    pub fn run_for(&mut self, until: Duration) {
        let end = self.start + until;
        while let Some((at, event)) = self.events.pop_until(end) {
            self.now = at;
            self.dispatch(event);
        }
        self.now = self.now.max(end);
    }

    /// Runs until every flow has finished; panics past `limit` (a test that hangs says so).
    pub fn run_to_completion(&mut self, limit: Duration) {
        loop {
            let busy = self.hosts.iter().any(|h| h.active_flows() > 0) || self.events.starts_pending();
            if !busy {
                return;
            }
            let Some((at, event)) = self.events.pop() else {
                panic!("flows still running with nothing left to happen: a hang");
            };
            assert!(at - self.start <= limit, "flows still running after {limit:?}");
            self.now = at;
            self.dispatch(event);
        }
    }

    fn schedule(&mut self, at: Instant, event: Event) {
        self.events.schedule(at, event);
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Start { host, spec } => {
                self.hosts[host as usize - 1].start_flow(self.now, spec);
                self.after(host);
            }
            Event::Arrive { node: Node::Switch(switch), packet } => {
                let next = self.config.topology.next_hop(switch, packet.transmit.dst, packet.transmit.path_id);
                let port = self.port_index(Node::Switch(switch), next);
                self.enqueue(port, packet);
            }
            Event::Arrive { node: Node::Host(host), packet } => self.deliver(host, packet),
            Event::PortFree(port) => self.try_send(port),
            Event::Late { port, packet } => self.enqueue(port, packet),
            Event::Stall { port, until } => {
                self.ports[port].busy_until = self.ports[port].busy_until.max(until);
                self.schedule(until, Event::PortFree(port));
            }
            Event::Wake(host) => {
                if self.wakes[host as usize - 1].is_some_and(|(_, fire)| fire == self.now) {
                    self.wakes[host as usize - 1] = None;
                    self.hosts[host as usize - 1].handle_timeout(self.now);
                    self.after(host);
                }
            }
        }
    }

    fn deliver(&mut self, host: HostId, packet: InFlight) {
        if packet.transmit.kind == Kind::Data {
            if let Ok(Packet::Data { flow, payload_len, .. }) = Packet::decode(&packet.transmit.payload) {
                self.deliveries.push(Delivery {
                    at: self.now,
                    src: packet.src,
                    dst: host,
                    flow,
                    path_id: packet.transmit.path_id,
                    payload_bytes: payload_len as u64,
                });
            }
        }
        let incoming = Incoming {
            src: packet.src,
            path_id: packet.transmit.path_id,
            ecn: packet.ecn,
            payload: &packet.transmit.payload,
        };
        self.hosts[host as usize - 1].handle_packet(self.now, incoming);
        self.after(host);
    }

    /// Collects what `host` wants to send and when it wants to be woken.
    fn after(&mut self, host: HostId) {
        let index = host as usize - 1;
        let nic = self.nics[index];
        while let Some(transmit) = self.hosts[index].poll_transmit() {
            let sent = self.sent_by_kind.entry(transmit.kind).or_default();
            *sent += 1;
            if self.losses.contains(&(transmit.kind, *sent)) {
                continue;
            }
            let wire_bytes = frame_wire_bytes(transmit.payload.len());
            let delay = self.delays.iter().find(|(kind, nth, _)| (*kind, *nth) == (transmit.kind, *sent)).map(|d| d.2);
            let packet = InFlight { src: host, ecn: transmit.ecn, transmit, wire_bytes };
            match delay {
                Some(by) => self.schedule(self.now + by, Event::Late { port: nic, packet }),
                None => self.enqueue(nic, packet),
            }
        }
        while let Some(record) = self.hosts[index].poll_record() {
            self.records.push(record);
        }
        while let Some(finish) = self.hosts[index].poll_inbound_finish() {
            self.inbound_finishes.push(finish);
        }
        while let Some(line) = self.hosts[index].poll_trace() {
            self.traces.push((host, line));
        }
        if let Some(at) = self.hosts[index].poll_timeout() {
            let at = at.max(self.now);
            if self.wakes[index].is_none_or(|(due, _)| at < due) {
                // A late timer: the host handles at `late` what was due at `at` (a timer
                // already armed for that deadline keeps its lateness). What is already due is
                // handled at once, as the shell loops without sleeping.
                let late = match at > self.now {
                    true => at + self.config.timer_jitter.mul_f64(self.rng.random_range(0.0..=1.0)),
                    false => at,
                };
                self.wakes[index] = Some((at, late));
                self.schedule(late, Event::Wake(host));
            }
        }
    }

    fn enqueue(&mut self, port: usize, packet: InFlight) {
        // One draw per packet, whether a mark by probability needs it or not: what a seeded
        // run does follows from the sequence of draws.
        let draw: f64 = self.rng.random_range(0.0..1.0);
        if self.ports[port].enqueue(&self.config, self.now, packet, draw) {
            self.try_send(port);
        }
    }

    fn try_send(&mut self, port: usize) {
        match self.ports[port].dequeue(&self.config, self.now) {
            Departure::Nothing => {}
            Departure::TokensAt(at) => self.schedule(at, Event::PortFree(port)),
            Departure::Sends { done, packet } => {
                let to = self.ports[port].to;
                let mut arrival = done + self.config.propagation;
                if let (Node::Host(_), frames @ 1..) = (to, self.config.reorder_frames) {
                    let frame_time = DATA_FRAME_BYTES as f64 * 8.0 / self.config.link_bps;
                    arrival += Duration::from_secs_f64(frame_time * frames as f64 * self.rng.random_range(0.0..=1.0));
                }
                self.schedule(done, Event::PortFree(port));
                self.schedule(arrival, Event::Arrive { node: to, packet });
            }
        }
    }
}
