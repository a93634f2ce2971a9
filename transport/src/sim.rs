//! A simulated network to drive [`Endpoint`]s with a virtual clock: hosts on one switch (a
//! star, so every host's link to the switch is its own and the switch port toward a host is
//! where flows to it meet). Every port, host NIC and switch port alike, is the emulator's port
//! model (emulation/ccemu/shaping.py): a credit class served first, through a token bucket
//! at the credit share with a burst of two credits and a buffer of a few credits, and a data
//! FIFO that tail-drops at its buffer and CE-marks ECN-capable packets above K; links have a
//! propagation delay. Deterministic: the same inputs give the same run.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::endpoint::{Ecn, Endpoint, EndpointConfig, FlowRecord, FlowSpec, HostId, Incoming, Transmit};
use crate::wire::{Kind, Packet};

/// IPv4 + UDP + Ethernet headers, and preamble + FCS + inter-frame gap on the wire.
const HEADERS_BYTES: u64 = 20 + 8 + 14;
const WIRE_OVERHEAD_BYTES: u64 = 24;
pub const CREDIT_WIRE_BYTES: u64 = 84;

#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Hosts h1..hN.
    pub hosts: u32,
    pub link_bps: f64,
    /// One way, per link (a host to the switch).
    pub propagation: Duration,
    pub data_buffer_bytes: u64,
    /// 0: no credit class (credits would be data).
    pub credit_share: f64,
    pub credit_buffer_credits: usize,
    pub credit_burst_credits: u64,
    /// DCTCP K on the data FIFO.
    pub ecn_threshold_bytes: Option<u64>,
}

impl SimConfig {
    /// The ExpressPass port model: 84 / (84 + 1538) of the link for credits, 8 credits of
    /// buffer, bursts of 2.
    pub fn expresspass(hosts: u32, link_bps: f64, propagation: Duration, data_buffer_bytes: u64) -> Self {
        Self {
            hosts,
            link_bps,
            propagation,
            data_buffer_bytes,
            credit_share: 84.0 / (84.0 + 1538.0),
            credit_buffer_credits: 8,
            credit_burst_credits: 2,
            ecn_threshold_bytes: None,
        }
    }

    pub fn dctcp(hosts: u32, link_bps: f64, propagation: Duration, data_buffer_bytes: u64, k: u64) -> Self {
        Self {
            credit_share: 0.0,
            ecn_threshold_bytes: Some(k),
            ..Self::expresspass(hosts, link_bps, propagation, data_buffer_bytes)
        }
    }

    /// Data payload rate an ExpressPass flow can reach on one link: the link minus the credit
    /// share, times payload / wire bytes of a full data packet.
    pub fn ideal_data_rate(&self, mss: u16) -> f64 {
        let wire = mss as f64 + 22.0 + (HEADERS_BYTES + WIRE_OVERHEAD_BYTES) as f64;
        self.link_bps / 8.0 * (1.0 - self.credit_share) * mss as f64 / wire
    }
}

/// A packet inside the network.
#[derive(Debug, Clone)]
struct InFlight {
    src: HostId,
    transmit: Transmit,
    ce: bool,
    wire_bytes: u64,
}

/// What one port saw.
#[derive(Debug, Clone, Default)]
pub struct PortStats {
    pub data_drops: u64,
    pub credit_drops: u64,
    pub marks: u64,
    pub max_data_queue_bytes: u64,
    /// (time, data queue bytes) at every change.
    pub data_queue: Vec<(Instant, u64)>,
    pub sent_data_bytes: u64,
    pub sent_credits: u64,
}

struct Port {
    /// Where a packet goes after this port's link: the switch (None) or a host.
    to_host: Option<HostId>,
    busy_until: Instant,
    credits: VecDeque<InFlight>,
    data: VecDeque<InFlight>,
    data_bytes: u64,
    tokens: f64,
    tokens_at: Instant,
    stats: PortStats,
}

enum Event {
    Start {
        host: HostId,
        spec: FlowSpec,
    },
    /// Arrives at the switch and joins the port toward its destination.
    AtSwitch(InFlight),
    Deliver {
        host: HostId,
        packet: InFlight,
    },
    PortFree(usize),
    Wake(HostId),
    /// The port sends nothing until then (a CPU stall of the emulator, say).
    Stall {
        port: usize,
        until: Instant,
    },
    /// A packet held back by `delay`, joining its host's port late.
    Late {
        port: usize,
        packet: InFlight,
    },
}

struct Scheduled {
    at: Instant,
    order: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}

/// A data packet handed to its receiver: for throughput and fairness over time.
#[derive(Debug, Clone, Copy)]
pub struct Delivery {
    pub at: Instant,
    pub src: HostId,
    pub flow: u32,
    pub payload_bytes: u64,
}

pub struct Network {
    pub config: SimConfig,
    start: Instant,
    now: Instant,
    hosts: Vec<Endpoint>,
    wakes: Vec<Option<Instant>>,
    /// 0..n: host NICs (host i at i-1); n..2n: the switch's port toward host i.
    ports: Vec<Port>,
    events: BinaryHeap<Reverse<Scheduled>>,
    order: u64,
    /// Lose the n-th packet (1-based) of a kind that any host sends.
    losses: Vec<(Kind, u64)>,
    /// Hold the n-th packet of a kind back this long, so that the next ones overtake it.
    delays: Vec<(Kind, u64, Duration)>,
    sent_by_kind: HashMap<Kind, u64>,
    pub records: Vec<FlowRecord>,
    pub deliveries: Vec<Delivery>,
}

impl Network {
    /// `endpoint` tailors each host's transport from the default for the link.
    pub fn new(config: SimConfig, endpoint: impl Fn(EndpointConfig) -> EndpointConfig) -> Self {
        let start = Instant::now();
        let hosts = (1..=config.hosts)
            .map(|host| Endpoint::new(endpoint(EndpointConfig::new(host, config.link_bps, start))))
            .collect();
        let port = |to_host| Port {
            to_host,
            busy_until: start,
            credits: VecDeque::new(),
            data: VecDeque::new(),
            data_bytes: 0,
            tokens: (config.credit_burst_credits * CREDIT_WIRE_BYTES) as f64,
            tokens_at: start,
            stats: PortStats::default(),
        };
        let ports = (0..config.hosts).map(|_| port(None)).chain((1..=config.hosts).map(|h| port(Some(h)))).collect();
        Self {
            wakes: vec![None; config.hosts as usize],
            config,
            start,
            now: start,
            hosts,
            ports,
            events: BinaryHeap::new(),
            order: 0,
            losses: Vec::new(),
            delays: Vec::new(),
            sent_by_kind: HashMap::new(),
            records: Vec::new(),
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

    /// The port toward `host` on the switch (where its incoming flows queue).
    pub fn switch_port(&self, host: HostId) -> &PortStats {
        &self.ports[(self.config.hosts + host - 1) as usize].stats
    }

    /// `host`'s own NIC (where the credits it paces queue).
    pub fn host_port(&self, host: HostId) -> &PortStats {
        &self.ports[host as usize - 1].stats
    }

    pub fn ports(&self) -> impl Iterator<Item = &PortStats> {
        self.ports.iter().map(|p| &p.stats)
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
        let port = (self.config.hosts + host - 1) as usize;
        self.schedule(self.start + after, Event::Stall { port, until: self.start + after + stall });
    }

    pub fn start_flow(&mut self, after: Duration, host: HostId, spec: FlowSpec) {
        self.schedule(self.start + after, Event::Start { host, spec });
    }

    /// Runs until `until` after the start, or until nothing is left to happen.
    pub fn run_for(&mut self, until: Duration) {
        let end = self.start + until;
        while let Some(Reverse(next)) = self.events.peek() {
            if next.at > end {
                break;
            }
            let Reverse(Scheduled { at, event, .. }) = self.events.pop().expect("peeked");
            self.now = at;
            self.dispatch(event);
        }
        self.now = self.now.max(end);
    }

    /// Runs until every flow has finished; panics past `limit` (a test that hangs says so).
    pub fn run_to_completion(&mut self, limit: Duration) {
        loop {
            let busy = self.hosts.iter().any(|h| h.active_flows() > 0)
                || self.events.iter().any(|Reverse(s)| matches!(s.event, Event::Start { .. }));
            if !busy {
                return;
            }
            let Some(Reverse(next)) = self.events.pop() else { return };
            assert!(next.at - self.start <= limit, "flows still running after {limit:?}");
            self.now = next.at;
            self.dispatch(next.event);
        }
    }

    fn schedule(&mut self, at: Instant, event: Event) {
        self.order += 1;
        self.events.push(Reverse(Scheduled { at, order: self.order, event }));
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Start { host, spec } => {
                self.hosts[host as usize - 1].start_flow(self.now, spec);
                self.after(host);
            }
            Event::AtSwitch(packet) => {
                let port = (self.config.hosts + packet.transmit.dst - 1) as usize;
                self.enqueue(port, packet);
            }
            Event::Deliver { host, packet } => {
                if packet.transmit.kind == Kind::Data {
                    if let Ok(Packet::Data { flow, payload_len, .. }) = Packet::decode(&packet.transmit.payload) {
                        self.deliveries.push(Delivery {
                            at: self.now,
                            src: packet.src,
                            flow,
                            payload_bytes: payload_len as u64,
                        });
                    }
                }
                let ecn = if packet.ce { Ecn::Ce } else { packet.transmit.ecn };
                let incoming = Incoming {
                    src: packet.src,
                    path_id: packet.transmit.path_id,
                    ecn,
                    payload: &packet.transmit.payload,
                };
                self.hosts[host as usize - 1].handle_packet(self.now, incoming);
                self.after(host);
            }
            Event::PortFree(port) => self.try_send(port),
            Event::Late { port, packet } => self.enqueue(port, packet),
            Event::Stall { port, until } => {
                self.ports[port].busy_until = self.ports[port].busy_until.max(until);
                self.schedule(until, Event::PortFree(port));
            }
            Event::Wake(host) => {
                if self.wakes[host as usize - 1] == Some(self.now) {
                    self.wakes[host as usize - 1] = None;
                    self.hosts[host as usize - 1].handle_timeout(self.now);
                    self.after(host);
                }
            }
        }
    }

    /// Collects what `host` wants to send and when it wants to be woken.
    fn after(&mut self, host: HostId) {
        let index = host as usize - 1;
        while let Some(transmit) = self.hosts[index].poll_transmit() {
            let sent = self.sent_by_kind.entry(transmit.kind).or_default();
            *sent += 1;
            if self.losses.contains(&(transmit.kind, *sent)) {
                continue;
            }
            let wire_bytes =
                (transmit.payload.len() as u64 + HEADERS_BYTES + WIRE_OVERHEAD_BYTES).max(CREDIT_WIRE_BYTES);
            let delay = self.delays.iter().find(|(kind, nth, _)| (*kind, *nth) == (transmit.kind, *sent)).map(|d| d.2);
            let packet = InFlight { src: host, transmit, ce: false, wire_bytes };
            match delay {
                Some(by) => self.schedule(self.now + by, Event::Late { port: index, packet }),
                None => self.enqueue(index, packet),
            }
        }
        while let Some(record) = self.hosts[index].poll_record() {
            self.records.push(record);
        }
        if let Some(at) = self.hosts[index].poll_timeout() {
            let at = at.max(self.now);
            if self.wakes[index].is_none_or(|pending| at < pending) {
                self.wakes[index] = Some(at);
                self.schedule(at, Event::Wake(host));
            }
        }
    }

    fn is_credit(&self, packet: &InFlight) -> bool {
        packet.transmit.kind == Kind::Credit && self.config.credit_share > 0.0
    }

    fn enqueue(&mut self, port_index: usize, mut packet: InFlight) {
        let credit = self.is_credit(&packet);
        let (buffer, k, now) = (self.config.data_buffer_bytes, self.config.ecn_threshold_bytes, self.now);
        let credit_buffer = self.config.credit_buffer_credits;
        let port = &mut self.ports[port_index];
        if credit {
            if port.credits.len() >= credit_buffer {
                port.stats.credit_drops += 1;
                return;
            }
            port.credits.push_back(packet);
        } else {
            if port.data_bytes + packet.wire_bytes > buffer {
                port.stats.data_drops += 1;
                return;
            }
            port.data_bytes += packet.wire_bytes;
            if k.is_some_and(|k| port.data_bytes > k) && packet.transmit.ecn != Ecn::NotEct {
                packet.ce = true;
                port.stats.marks += 1;
            }
            port.stats.max_data_queue_bytes = port.stats.max_data_queue_bytes.max(port.data_bytes);
            port.stats.data_queue.push((now, port.data_bytes));
            port.data.push_back(packet);
        }
        self.try_send(port_index);
    }

    fn try_send(&mut self, port_index: usize) {
        let now = self.now;
        let credit_rate = self.config.link_bps / 8.0 * self.config.credit_share;
        let burst = (self.config.credit_burst_credits * CREDIT_WIRE_BYTES) as f64;
        let (link_bps, propagation) = (self.config.link_bps, self.config.propagation);
        let port = &mut self.ports[port_index];
        if port.busy_until > now {
            return;
        }
        port.tokens = (port.tokens + (now - port.tokens_at).as_secs_f64() * credit_rate).min(burst);
        port.tokens_at = now;
        let packet = if !port.credits.is_empty() && port.tokens >= CREDIT_WIRE_BYTES as f64 - 1e-6 {
            port.tokens = (port.tokens - CREDIT_WIRE_BYTES as f64).max(0.0);
            port.stats.sent_credits += 1;
            port.credits.pop_front()
        } else if let Some(packet) = port.data.pop_front() {
            port.data_bytes -= packet.wire_bytes;
            port.stats.sent_data_bytes += packet.wire_bytes;
            port.stats.data_queue.push((now, port.data_bytes));
            Some(packet)
        } else {
            None
        };
        let Some(packet) = packet else {
            if !port.credits.is_empty() {
                // Rounded up to whole nanoseconds: rounding down would wake to find a hair
                // too few tokens, forever.
                let wait_ns = ((CREDIT_WIRE_BYTES as f64 - port.tokens) / credit_rate * 1e9).ceil().max(1.0);
                let at = now + Duration::from_nanos(wait_ns as u64);
                port.busy_until = at;
                self.schedule(at, Event::PortFree(port_index));
            }
            return;
        };
        let done = now + Duration::from_secs_f64(packet.wire_bytes as f64 * 8.0 / link_bps);
        port.busy_until = done;
        let to_host = port.to_host;
        self.schedule(done, Event::PortFree(port_index));
        let arrival = done + propagation;
        match to_host {
            None => self.schedule(arrival, Event::AtSwitch(packet)),
            Some(host) => self.schedule(arrival, Event::Deliver { host, packet }),
        }
    }
}

/// Time-weighted mean of a queue trace over [from, to].
pub fn mean_queue(trace: &[(Instant, u64)], from: Instant, to: Instant) -> f64 {
    let mut area = 0.0;
    let mut level = trace.iter().take_while(|(t, _)| *t <= from).last().map_or(0, |&(_, q)| q);
    let mut at = from;
    for &(t, q) in trace.iter().filter(|(t, _)| *t > from && *t <= to) {
        area += level as f64 * (t - at).as_secs_f64();
        (at, level) = (t, q);
    }
    area += level as f64 * (to - at).as_secs_f64();
    area / (to - from).as_secs_f64()
}

/// Jain's fairness index of some rates: 1 when all are equal.
pub fn jain_fairness(rates: &[f64]) -> f64 {
    let sum: f64 = rates.iter().sum();
    let squares: f64 = rates.iter().map(|r| r * r).sum();
    sum * sum / (rates.len() as f64 * squares)
}
