//! One host's transport: every flow it sends and receives, as one sans-IO state machine.
//!
//! The shell (or a test's simulated network) feeds it packets and timeouts with the time
//! they happen, and drains what it wants sent, when it next wants to be woken, and the
//! records of finished flows:
//!
//! ```text
//! start_flow / handle_packet / handle_timeout (now)  ->  poll_transmit, poll_timeout, poll_record
//! ```
//!
//! (and, for throughput timelines, `inbound_progress` and `poll_inbound_finish`; with
//! `EndpointConfig::trace`, the credit schemes' per-period trace: `poll_trace`).

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::cc::Driver;
use crate::config::EndpointConfig;
use crate::flow::credited_sender::CreditedSender;
use crate::flow::crediting_receiver::{CreditingReceiver, DataArrival};
use crate::flow::window_receiver::{WindowData, WindowReceiver};
use crate::flow::window_sender::{AckInfo, Connection, WindowSender};
use crate::flow::RttEstimator;
use crate::flow::{packets_of, Ctx};
use crate::record::{Counters, FlowRecord, FlowSpec, InboundFinish, Trace};
use crate::scheme::Scheme;
use crate::types::{Ecn, HostId, Incoming, Transmit};
use crate::wire::{Kind, Packet, FRAME_OVERHEAD_BYTES};

/// Payload buffers [`Endpoint::recycle`] keeps at most: more than a window's burst of packets
/// between two sends of the shell, few enough that an idle host holds little (~1.5 MB).
const SPARE_PAYLOADS: usize = 1024;

/// The flows' context for one event: `now` and the endpoint's output, spare buffers and random
/// source. A macro, not a method: it borrows those fields alone, leaving the flows' maps free.
macro_rules! ctx {
    ($endpoint:ident, $now:expr, $now_us:expr) => {
        Ctx {
            now: $now,
            epoch: $endpoint.config.epoch,
            now_us: $now_us,
            out: &mut $endpoint.out,
            spare: &mut $endpoint.spare,
            rng: &mut $endpoint.rng,
            trace: $endpoint.config.trace.then_some(&mut $endpoint.traces),
        }
    };
}

enum Sending {
    Credited(CreditedSender),
    Window(WindowSender),
}

enum Receiving {
    Crediting(CreditingReceiver),
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
    /// Congestion state finished sender-driven flows left, per destination and scheme.
    connections: BTreeMap<(HostId, Scheme), Vec<Connection>>,
    out: VecDeque<Transmit>,
    /// Sent payloads handed back by the shell ([`Endpoint::recycle`]), for the next packets.
    spare: Vec<Vec<u8>>,
    records: VecDeque<FlowRecord>,
    inbound_finishes: VecDeque<InboundFinish>,
    /// Trace lines not yet polled (empty unless `EndpointConfig::trace`).
    traces: VecDeque<Trace>,
    /// `handle_timeout`'s list of the receiving flows due (kept to reuse its allocation).
    due: Vec<(Instant, (HostId, u32))>,
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
            connections: BTreeMap::new(),
            out: VecDeque::new(),
            spare: Vec::new(),
            records: VecDeque::new(),
            inbound_finishes: VecDeque::new(),
            traces: VecDeque::new(),
            due: Vec::new(),
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

    /// Flows this host is receiving that have not finished, as (source host, the sender's
    /// flow id, payload bytes received so far: every distinct packet's, in order or not).
    /// A flow leaves this list when its last byte arrives; `poll_inbound_finish` then says
    /// so once.
    pub fn inbound_progress(&self) -> impl Iterator<Item = (HostId, u32, u64)> + '_ {
        self.receiving.iter().map(|(&(src, flow), receiver)| {
            let bytes = match receiver {
                Receiving::Crediting(r) => r.bytes(),
                Receiving::Window(r) => r.bytes(),
            };
            (src, flow, bytes)
        })
    }

    fn micros(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.config.epoch).as_micros() as u64
    }

    /// Starts sending `spec`, by its scheme's factory in this endpoint's registry.
    ///
    /// # Panics
    /// If the registry has no such scheme: a handle comes from a registry (`Scheme::from_name`:
    /// the standard table, which every endpoint's holds), so this is a caller's mix-up.
    pub fn start_flow(&mut self, now: Instant, spec: FlowSpec) {
        let now_us = self.micros(now);
        let config = &self.config;
        let path_id = spec.path_id.unwrap_or_else(|| flow_path_id(config.host, spec.id));
        let mut ctx = ctx!(self, now, now_us);
        let id = spec.id;
        let scheme = config.schemes.factory(spec.scheme).unwrap_or_else(|| {
            panic!(
                "flow {id}: scheme {} is not in this endpoint's registry ({:?})",
                spec.scheme,
                config.schemes.names()
            )
        });
        let flow = match scheme.driver() {
            Driver::Receiver => Sending::Credited(CreditedSender::start(&mut ctx, spec, path_id, config)),
            Driver::Sender => {
                let reused = self.connections.get_mut(&(spec.dst, spec.scheme)).and_then(Vec::pop);
                let connection = reused.unwrap_or_else(|| Connection {
                    // The flow's own seed: the host's and the flow id.
                    cc: scheme.sender_control(config.seed ^ u64::from(id) << 32).expect("a sender-driven scheme"),
                    rtt: RttEstimator::default(),
                });
                Sending::Window(WindowSender::start(&mut ctx, spec, path_id, connection, config))
            }
        };
        self.counters.flows_started += 1;
        self.sending.insert(id, flow);
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
        let mut ctx = ctx!(self, now, now_us);
        match packet {
            Packet::CreditRequest { flow, size_bytes, scheme, paths } => {
                if let Some(done) = self.finished.get(&(src, flow)) {
                    send_finish(&mut ctx, src, flow, done);
                } else if !self.receiving.contains_key(&(src, flow)) {
                    let config = &self.config;
                    let packets = packets_of(size_bytes, config.mss);
                    let cc = config.schemes.by_wire_id(scheme).and_then(|s| s.credit_control(now, packets, paths));
                    let Some(cc) = cc else {
                        self.counters.malformed += 1; // no credit scheme of that id
                        return;
                    };
                    let receiver = CreditingReceiver::new(&mut ctx, src, flow, packets, incoming.path_id, cc);
                    self.receiving.insert((src, flow), Receiving::Crediting(receiver));
                }
            }
            Packet::Credit { flow, credit_seq, sent_us } => match self.sending.get_mut(&flow) {
                Some(Sending::Credited(sender)) => {
                    let marked = incoming.ecn == Ecn::Ce;
                    sender.on_credit(&mut ctx, credit_seq, sent_us, incoming.path_id, marked)
                }
                _ => self.counters.credits_wasted += 1, // a late credit of a finished flow
            },
            Packet::Data { flow, seq, echo_credit_seq, echo_sent_us, payload_len, last, credit_ce, scheme } => {
                self.counters.data_bytes_received += payload_len as u64;
                let ecn = incoming.ecn;
                self.counters.ce_received += (ecn == Ecn::Ce) as u64;
                self.counters.ue_received += (ecn == Ecn::Ect1) as u64;
                self.counters.credit_ce_received += credit_ce as u64;
                if let Some(done) = self.finished.get(&(src, flow)) {
                    send_finish(&mut ctx, src, flow, done);
                    return;
                }
                let config = &self.config;
                let receiver = self.receiving.entry((src, flow)).or_insert_with(|| {
                    // A flow without a credit request is a window scheme's: the scheme its data
                    // names says what the receiver does with marks (none it does not know).
                    let control = config.schemes.by_wire_id(scheme).and_then(|s| s.receiver_control());
                    Receiving::Window(WindowReceiver::new(src, flow, incoming.path_id, control))
                });
                let complete = match receiver {
                    Receiving::Crediting(r) => {
                        let wire_bytes = incoming.payload.len() as u64 + FRAME_OVERHEAD_BYTES;
                        let path_id = incoming.path_id;
                        let payload_bytes = payload_len as u64;
                        let data = DataArrival {
                            seq,
                            echo_credit_seq,
                            echo_sent_us,
                            credit_ce,
                            path_id,
                            wire_bytes,
                            payload_bytes,
                        };
                        r.on_data(&mut ctx, data, config)
                    }
                    Receiving::Window(r) => {
                        let data = WindowData { seq, payload_len, last, echo_sent_us, ecn };
                        r.on_data(&mut ctx, data).map(|arrival| {
                            self.counters.data_out_of_order += arrival.out_of_order as u64;
                            arrival.complete
                        })
                    }
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
                } else if let Some(Receiving::Crediting(r)) = self.receiving.get_mut(&(src, flow)) {
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
                Some(Sending::Credited(sender)) => sender.on_nack(&missing),
                _ => self.counters.unknown_flow += 1,
            },
            Packet::Cnp { flow, flag } => match self.sending.get_mut(&flow) {
                Some(Sending::Window(sender)) => sender.on_congestion_notification(&mut ctx, flag, &self.config),
                _ => self.counters.unknown_flow += 1, // a late CNP of a finished flow
            },
            Packet::Finish { flow, end_us, credits_sent } => {
                // A repeated Finish finds the flow gone.
                if let Some(sending) = self.sending.remove(&flow) {
                    let record = match sending {
                        Sending::Credited(s) => s.record(self.config.host, end_us, credits_sent),
                        Sending::Window(s) => {
                            let record = s.record(self.config.host, end_us);
                            if self.config.reuse_connections {
                                let connection = s.into_connection();
                                self.connections.entry((record.dst, record.scheme)).or_default().push(connection);
                            }
                            record
                        }
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
        let (credits_sent, path_id, bytes) = match receiver {
            Receiving::Crediting(r) => {
                self.counters.credits_lost += r.credits_lost();
                (r.credits_sent(), r.path_id(), r.bytes())
            }
            Receiving::Window(r) => (0, r.path_id(), r.bytes()),
        };
        self.inbound_finishes.push_back(InboundFinish { src, id: flow, bytes, end_us: now_us });
        let done = Finished { end_us: now_us, credits_sent, path_id };
        let mut ctx = ctx!(self, now, now_us);
        send_finish(&mut ctx, src, flow, &done);
        self.finished.insert((src, flow), done);
    }

    /// When `handle_timeout` next has work; `None`: only a packet can wake this host.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let senders = self.sending.values().filter_map(|flow| match flow {
            Sending::Credited(s) => s.deadline(&self.config),
            Sending::Window(s) => s.deadline(),
        });
        let receivers = self.receiving.values().filter_map(|flow| match flow {
            Receiving::Crediting(r) => r.deadline(),
            Receiving::Window(r) => r.deadline(),
        });
        senders.chain(receivers).min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        let now_us = self.micros(now);
        let mut ctx = ctx!(self, now, now_us);
        for flow in self.sending.values_mut() {
            match flow {
                Sending::Credited(s) if s.deadline(&self.config).is_some_and(|d| d <= now) => {
                    s.on_timeout(&mut ctx);
                    self.counters.control_retransmits += 1;
                }
                Sending::Window(s) if s.deadline().is_some_and(|d| d <= now) => s.on_timeout(&mut ctx, &self.config),
                _ => {}
            }
        }
        // The flows due, earliest deadline first: what they send leaves in one batch (the
        // shell's sendmmsg) into this host's credit queue, so after a late wake-up the credit
        // that was due first must be first. (In the flows' key order, the flow of the lowest
        // source always won the queue's last free place: with timers late by up to half a credit
        // gap, a flow joining one from a lower host lost 4x more of its credits there, and 44 of
        // 100 simulated first joins did not reach 80 % of their share in 200 RTTs; issue 39,
        // tests/sim_convergence.rs. The reference sends each credit at its own time, so its
        // queue sees them in the order they were due.)
        let mut due = std::mem::take(&mut self.due);
        due.extend(self.receiving.iter().filter_map(|(&key, flow)| {
            let deadline = match flow {
                Receiving::Crediting(r) => r.deadline(),
                Receiving::Window(r) => r.deadline(),
            };
            deadline.filter(|&d| d <= now).map(|d| (d, key))
        }));
        due.sort_unstable();
        for (_, key) in due.drain(..) {
            match self.receiving.get_mut(&key) {
                Some(Receiving::Crediting(r)) => r.on_timeout(&mut ctx),
                Some(Receiving::Window(r)) => r.on_timeout(&mut ctx),
                None => {}
            }
        }
        self.due = due;
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let transmit = self.out.pop_front()?;
        self.counters.sent_packets[transmit.kind as usize] += 1;
        if transmit.kind == Kind::Credit {
            self.counters.credits_sent += 1;
        }
        Some(transmit)
    }

    /// Gives back the payload of a [`Transmit`] once sent, to be reused for a later packet: a
    /// shell that does so allocates nothing per packet (a data packet is 1.5 KB). Optional,
    /// and invisible in what is sent: every packet is encoded afresh. At most
    /// `SPARE_PAYLOADS` are kept (a burst's worth); more are freed.
    pub fn recycle(&mut self, payload: Vec<u8>) {
        if self.spare.len() < SPARE_PAYLOADS {
            self.spare.push(payload);
        }
    }

    pub fn poll_record(&mut self) -> Option<FlowRecord> {
        self.records.pop_front()
    }

    /// The next flow this host received in full (once per flow, in the order they ended).
    pub fn poll_inbound_finish(&mut self) -> Option<InboundFinish> {
        self.inbound_finishes.pop_front()
    }

    /// The next line of the credit schemes' trace, in the order they happened (only with
    /// `EndpointConfig::trace`: otherwise never any).
    pub fn poll_trace(&mut self) -> Option<Trace> {
        self.traces.pop_front()
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
