//! One host's transport: every flow it sends and receives, as one sans-IO state machine.
//!
//! The shell (or a test's simulated network) feeds it packets and timeouts with the time
//! they happen, and drains what it wants sent, when it next wants to be woken, and the
//! records of finished flows:
//!
//! ```text
//! start_flow / handle_packet / handle_timeout (now)  ->  poll_transmit, poll_timeout, poll_record
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::cc::dctcp::DctcpConfig;
use crate::cc::expresspass::ExpressPassConfig;
use crate::flow::credit_receiver::CreditReceiver;
use crate::flow::credit_sender::CreditSender;
use crate::flow::window_receiver::WindowReceiver;
use crate::flow::window_sender::{AckInfo, WindowSender};
use crate::flow::Ctx;
use crate::wire::{Kind, Packet};

/// A host of the emulation: h1 is 1 (the shell maps it to 10.0.0.1, transport/wire-format.md).
pub type HostId = u32;

/// The ECN codepoint a packet is sent with (IP_TOS) or arrived with (IP_RECVTOS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecn {
    NotEct = 0,
    Ect0 = 2,
    Ce = 3,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    ExpressPass,
    Dctcp,
}

impl Scheme {
    pub fn name(self) -> &'static str {
        match self {
            Scheme::ExpressPass => "expresspass",
            Scheme::Dctcp => "dctcp",
        }
    }
}

/// One flow to send.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSpec {
    /// Unique among this host's flows.
    pub id: u32,
    pub dst: HostId,
    pub size_bytes: u64,
    pub scheme: Scheme,
    /// Path-id of every packet of the flow (both ways); `None`: a hash of the flow id.
    pub path_id: Option<u8>,
}

/// A datagram to send: the shell sends `payload` to `dst` from its socket for `path_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct Transmit {
    pub dst: HostId,
    pub path_id: u8,
    pub ecn: Ecn,
    pub kind: Kind,
    pub payload: Vec<u8>,
}

/// A datagram that arrived.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    pub src: HostId,
    /// Low 8 bits of the UDP source port.
    pub path_id: u8,
    pub ecn: Ecn,
    pub payload: &'a [u8],
}

/// One finished flow, written by its sender when the receiver's Finish arrives. Times are
/// microseconds of the shared clock (`EndpointConfig::epoch`).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowRecord {
    pub id: u32,
    pub src: HostId,
    pub dst: HostId,
    pub size_bytes: u64,
    pub scheme: Scheme,
    pub start_us: u64,
    /// When the receiver had every byte.
    pub end_us: u64,
    /// Data packets sent more than once.
    pub retransmits: u64,
    /// Retransmission timeouts (window schemes), and how many of them proved spurious.
    pub timeouts: u64,
    pub spurious_timeouts: u64,
    pub credits_sent: u64,
    /// Credits that arrived when the sender had nothing left to send.
    pub credits_wasted: u64,
}

impl FlowRecord {
    /// The record of `spec` sent by `src`, its per-scheme figures zero.
    pub(crate) fn of(spec: &FlowSpec, src: HostId, start_us: u64, end_us: u64) -> Self {
        Self {
            id: spec.id,
            src,
            dst: spec.dst,
            size_bytes: spec.size_bytes,
            scheme: spec.scheme,
            start_us,
            end_us,
            retransmits: 0,
            timeouts: 0,
            spurious_timeouts: 0,
            credits_sent: 0,
            credits_wasted: 0,
        }
    }

    pub fn fct(&self) -> Duration {
        Duration::from_micros(self.end_us.saturating_sub(self.start_us))
    }
}

/// Counters of the whole endpoint, for the collector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    pub sent_packets: [u64; 8],
    pub received_packets: [u64; 8],
    /// Datagrams that did not parse (dropped, never a crash).
    pub malformed: u64,
    /// Parsed, but for no flow this host knows (and not a late packet of a finished one).
    pub unknown_flow: u64,
    pub data_bytes_received: u64,
    /// Data packets that arrived CE-marked, and acks that echoed a mark.
    pub ce_received: u64,
    /// Window schemes: data packets that did not arrive in order (holes, reordering, duplicates).
    pub data_out_of_order: u64,
    pub ece_received: u64,
    /// Per-flow figures, added when the flow finishes.
    pub data_retransmits: u64,
    pub timeouts: u64,
    pub spurious_timeouts: u64,
    pub credits_sent: u64,
    pub credits_wasted: u64,
    pub flows_started: u64,
    pub flows_finished: u64,
    /// Control packets (credit request, credit stop) sent again after a timeout.
    pub control_retransmits: u64,
}

/// Parameters of one host's transport.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    pub host: HostId,
    /// Clock origin shared by every host of the emulation (flow records' times count from it).
    pub epoch: Instant,
    /// Data payload per packet, bytes: 1450 makes a 1500-byte IP packet (1538 on the wire)
    /// with IP, UDP and the 22-byte ccemu data header.
    pub mss: u16,
    /// ExpressPass; `max_rate` is the credit share of this host's link.
    pub expresspass: ExpressPassConfig,
    pub dctcp: DctcpConfig,
    /// Credit request / credit stop resent when unanswered this long (ExpressPass: 100 ms).
    pub control_timeout: Duration,
    /// DCTCP retransmission timeout floor (10 ms, as in DCTCP+'s comparison).
    pub rto_min: Duration,
    /// DCTCP retransmission timeout before the first RTT sample.
    pub rto_initial: Duration,
    /// RTT assumed by a credit receiver before its first sample (for its loss recovery).
    pub initial_rtt: Duration,
    /// Seed of the pacing jitter (deterministic per host).
    pub seed: u64,
}

impl EndpointConfig {
    pub fn new(host: HostId, link_bits_per_second: f64, epoch: Instant) -> Self {
        Self {
            host,
            epoch,
            mss: 1450,
            expresspass: ExpressPassConfig::for_link(link_bits_per_second),
            dctcp: DctcpConfig { mss: 1450, ..DctcpConfig::default() },
            control_timeout: Duration::from_millis(100),
            rto_min: Duration::from_millis(10),
            rto_initial: Duration::from_millis(100),
            initial_rtt: Duration::from_millis(1),
            seed: host as u64,
        }
    }
}

enum Sending {
    Credit(CreditSender),
    Window(WindowSender),
}

enum Receiving {
    Credit(CreditReceiver),
    Window(WindowReceiver),
}

/// What a receiver remembers of a finished flow, to answer its late packets.
#[derive(Debug, Clone, Copy)]
struct Finished {
    end_us: u64,
    credits_sent: u32,
    path_id: u8,
}

pub struct Endpoint {
    config: EndpointConfig,
    rng: SmallRng,
    sending: BTreeMap<u32, Sending>,
    receiving: BTreeMap<(HostId, u32), Receiving>,
    finished: BTreeMap<(HostId, u32), Finished>,
    out: VecDeque<Transmit>,
    records: VecDeque<FlowRecord>,
    counters: Counters,
}

impl Endpoint {
    pub fn new(config: EndpointConfig) -> Self {
        Self {
            rng: SmallRng::seed_from_u64(config.seed),
            config,
            sending: BTreeMap::new(),
            receiving: BTreeMap::new(),
            finished: BTreeMap::new(),
            out: VecDeque::new(),
            records: VecDeque::new(),
            counters: Counters::default(),
        }
    }

    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Flows this host is sending that have not finished.
    pub fn active_flows(&self) -> usize {
        self.sending.len()
    }

    fn micros(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.config.epoch).as_micros() as u64
    }

    pub fn start_flow(&mut self, now: Instant, spec: FlowSpec) {
        let now_us = self.micros(now);
        let config = &self.config;
        let path_id = spec.path_id.unwrap_or_else(|| flow_path_id(config.host, spec.id));
        let mut ctx = Ctx { now, now_us, out: &mut self.out, rng: &mut self.rng };
        let flow = match spec.scheme {
            Scheme::ExpressPass => Sending::Credit(CreditSender::start(&mut ctx, spec.clone(), path_id, config)),
            Scheme::Dctcp => Sending::Window(WindowSender::start(&mut ctx, spec.clone(), path_id, config)),
        };
        self.counters.flows_started += 1;
        self.sending.insert(spec.id, flow);
    }

    pub fn handle_packet(&mut self, now: Instant, incoming: Incoming) {
        let packet = match Packet::decode(incoming.payload) {
            Ok(packet) => packet,
            Err(_) => {
                self.counters.malformed += 1;
                return;
            }
        };
        self.counters.received_packets[packet.kind() as usize] += 1;
        let now_us = self.micros(now);
        let src = incoming.src;
        let mut ctx = Ctx { now, now_us, out: &mut self.out, rng: &mut self.rng };
        match packet {
            Packet::CreditRequest { flow, size_bytes } => {
                if let Some(done) = self.finished.get(&(src, flow)) {
                    send_finish(&mut ctx, src, flow, done);
                } else {
                    let config = &self.config;
                    self.receiving.entry((src, flow)).or_insert_with(|| {
                        Receiving::Credit(CreditReceiver::new(
                            &mut ctx,
                            src,
                            flow,
                            size_bytes,
                            incoming.path_id,
                            config,
                        ))
                    });
                }
            }
            Packet::Credit { flow, credit_seq, sent_us } => match self.sending.get_mut(&flow) {
                Some(Sending::Credit(sender)) => sender.on_credit(&mut ctx, credit_seq, sent_us, incoming.path_id),
                _ => self.counters.credits_wasted += 1, // a late credit of a finished flow
            },
            Packet::Data { flow, seq, echo_credit_seq, echo_sent_us, payload_len, last } => {
                self.counters.data_bytes_received += payload_len as u64;
                let ce = incoming.ecn == Ecn::Ce;
                self.counters.ce_received += ce as u64;
                if let Some(done) = self.finished.get(&(src, flow)) {
                    send_finish(&mut ctx, src, flow, done);
                    return;
                }
                let config = &self.config;
                let receiver = self
                    .receiving
                    .entry((src, flow))
                    .or_insert_with(|| Receiving::Window(WindowReceiver::new(src, flow, incoming.path_id)));
                let complete = match receiver {
                    Receiving::Credit(r) => r.on_data(&mut ctx, seq, echo_credit_seq, echo_sent_us, config),
                    Receiving::Window(r) => r.on_data(&mut ctx, seq, last, echo_sent_us, ce).map(|arrival| {
                        self.counters.data_out_of_order += arrival.out_of_order as u64;
                        arrival.complete
                    }),
                };
                match complete {
                    Ok(true) => self.finish_receiving(now, src, flow),
                    Ok(false) => {}
                    Err(_) => self.counters.malformed += 1,
                }
            }
            Packet::CreditStop { flow } => {
                if let Some(done) = self.finished.get(&(src, flow)) {
                    send_finish(&mut ctx, src, flow, done);
                } else if let Some(Receiving::Credit(r)) = self.receiving.get_mut(&(src, flow)) {
                    r.on_credit_stop(&mut ctx, &self.config);
                } else {
                    self.counters.unknown_flow += 1;
                }
            }
            Packet::Ack { flow, cumulative, ece, duplicate, hole, echo_sent_us } => {
                self.counters.ece_received += ece as u64;
                match self.sending.get_mut(&flow) {
                    Some(Sending::Window(sender)) => sender.on_ack(
                        &mut ctx,
                        AckInfo { cumulative, ece, duplicate, hole, echo_sent_us },
                        &self.config,
                    ),
                    _ => self.counters.unknown_flow += 1,
                }
            }
            Packet::Nack { flow, missing } => match self.sending.get_mut(&flow) {
                Some(Sending::Credit(sender)) => sender.on_nack(&missing),
                _ => self.counters.unknown_flow += 1,
            },
            Packet::Finish { flow, end_us, credits_sent } => {
                // A repeated Finish finds the flow gone.
                if let Some(sending) = self.sending.remove(&flow) {
                    let record = match sending {
                        Sending::Credit(s) => s.record(self.config.host, end_us, credits_sent),
                        Sending::Window(s) => s.record(self.config.host, end_us),
                    };
                    self.counters.flows_finished += 1;
                    self.counters.data_retransmits += record.retransmits;
                    self.counters.timeouts += record.timeouts;
                    self.counters.spurious_timeouts += record.spurious_timeouts;
                    self.counters.credits_wasted += record.credits_wasted;
                    self.records.push_back(record);
                }
            }
        }
    }

    fn finish_receiving(&mut self, now: Instant, src: HostId, flow: u32) {
        let now_us = self.micros(now);
        let Some(receiver) = self.receiving.remove(&(src, flow)) else { return };
        let (credits_sent, path_id) = match receiver {
            Receiving::Credit(r) => (r.credits_sent(), r.path_id()),
            Receiving::Window(r) => (0, r.path_id()),
        };
        let done = Finished { end_us: now_us, credits_sent, path_id };
        let mut ctx = Ctx { now, now_us, out: &mut self.out, rng: &mut self.rng };
        send_finish(&mut ctx, src, flow, &done);
        self.finished.insert((src, flow), done);
    }

    /// When `handle_timeout` next has work; `None`: only a packet can wake this host.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let senders = self.sending.values().filter_map(|flow| match flow {
            Sending::Credit(s) => s.deadline(&self.config),
            Sending::Window(s) => s.deadline(),
        });
        let receivers = self.receiving.values().filter_map(|flow| match flow {
            Receiving::Credit(r) => r.deadline(),
            Receiving::Window(_) => None,
        });
        senders.chain(receivers).min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        let now_us = self.micros(now);
        let mut ctx = Ctx { now, now_us, out: &mut self.out, rng: &mut self.rng };
        for flow in self.sending.values_mut() {
            match flow {
                Sending::Credit(s) if s.deadline(&self.config).is_some_and(|d| d <= now) => {
                    s.on_timeout(&mut ctx);
                    self.counters.control_retransmits += 1;
                }
                Sending::Window(s) if s.deadline().is_some_and(|d| d <= now) => s.on_timeout(&mut ctx, &self.config),
                _ => {}
            }
        }
        for flow in self.receiving.values_mut() {
            if let Receiving::Credit(r) = flow {
                if r.deadline().is_some_and(|d| d <= now) {
                    r.on_timeout(&mut ctx);
                }
            }
        }
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let transmit = self.out.pop_front()?;
        self.counters.sent_packets[transmit.kind as usize] += 1;
        if transmit.kind == Kind::Credit {
            self.counters.credits_sent += 1;
        }
        Some(transmit)
    }

    pub fn poll_record(&mut self) -> Option<FlowRecord> {
        self.records.pop_front()
    }
}

fn send_finish(ctx: &mut Ctx, src: HostId, flow: u32, done: &Finished) {
    ctx.send(
        src,
        done.path_id,
        Ecn::NotEct,
        &Packet::Finish { flow, end_us: done.end_us, credits_sent: done.credits_sent },
    );
}

/// The path a flow takes when its spec does not pin one: a hash of host and flow id (the
/// sender's choice; credits, data and acks all follow it, wire-format.md).
pub fn flow_path_id(host: HostId, flow: u32) -> u8 {
    let mixed = (u64::from(host) << 32 | u64::from(flow)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> 56) as u8
}
