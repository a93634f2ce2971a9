//! One endpoint fed packets by hand: what a peer that errs (or lies) cannot make it do.

use std::time::{Duration, Instant};

use cchost::wire::{Kind, Packet};
use cchost::{Ecn, Endpoint, EndpointConfig, FlowSpec, Incoming, Scheme};

fn encoded(packet: &Packet) -> Vec<u8> {
    let mut out = Vec::new();
    packet.encode(&mut out);
    out
}

fn deliver(endpoint: &mut Endpoint, now: Instant, src: u32, packet: &Packet) {
    let payload = encoded(packet);
    endpoint.handle_packet(now, Incoming { src, path_id: 0, ecn: Ecn::NotEct, payload: &payload });
}

fn receiver() -> (Endpoint, Instant) {
    let now = Instant::now();
    let mut endpoint = Endpoint::new(EndpointConfig::new(2, 10e9, now));
    let request = Packet::CreditRequest { flow: 1, size_bytes: 1 << 40, scheme: 1, paths: 1 };
    deliver(&mut endpoint, now, 1, &request);
    (endpoint, now)
}

fn data(seq: u32, echo_credit_seq: u32) -> Packet {
    Packet::Data {
        flow: 1,
        seq,
        echo_credit_seq,
        echo_sent_us: 0,
        payload_len: 0,
        last: false,
        credit_ce: false,
        scheme: 1,
    }
}

#[test]
fn data_echoing_a_credit_never_sent_is_dropped_as_malformed() {
    let (mut endpoint, now) = receiver();
    deliver(&mut endpoint, now, 1, &data(0, u32::MAX));
    assert_eq!(endpoint.counters().malformed, 1);
}

#[test]
fn data_far_beyond_what_arrived_is_dropped_without_growing_the_bitmap() {
    let (mut endpoint, now) = receiver();
    endpoint.handle_timeout(now); // the first credit goes out
    deliver(&mut endpoint, now, 1, &data(4_000_000_000, 0));
    assert_eq!(endpoint.counters().malformed, 1);
}

#[test]
fn a_credit_request_for_an_unknown_scheme_or_one_without_credits_is_malformed() {
    let now = Instant::now();
    let mut endpoint = Endpoint::new(EndpointConfig::new(2, 10e9, now));
    for scheme in [0, 3, 4, 99] {
        deliver(&mut endpoint, now, 1, &Packet::CreditRequest { flow: 1, size_bytes: 1000, scheme, paths: 1 });
    }
    assert_eq!(endpoint.counters().malformed, 4);
    assert_eq!(endpoint.poll_timeout(), None, "no flow was started");
}

/// The sender stops early, counting on the credits in flight; they are dropped, and the
/// receiver names packets that were never sent: the stop no longer holds, and the sender must
/// not repeat it (each repeat would stop the receiver's credits again), nor stop early again.
#[test]
fn a_nack_for_packets_never_sent_lifts_the_early_stop_for_the_rest_of_the_flow() {
    let now = Instant::now();
    let mut sender = Endpoint::new(EndpointConfig::new(1, 10e9, now));
    let spec = FlowSpec {
        id: 7,
        dst: 2,
        size_bytes: 10 * 1450,
        scheme: Scheme::from_name("expresspass").unwrap(),
        path_id: Some(0),
        paths: None,
    };
    sender.start_flow(now, spec);
    // The first credit 50 us after the request (the sender's RTT), then one every 10 us: an
    // RTT's worth of credits covers what is left once 6 of the 10 packets are sent.
    let mut later = now + Duration::from_micros(50);
    let mut credits = 0;
    while sender.counters().sent_packets[Kind::CreditStop as usize] == 0 {
        deliver(&mut sender, later, 2, &Packet::Credit { flow: 7, credit_seq: credits, sent_us: 0 });
        while sender.poll_transmit().is_some() {}
        credits += 1;
        later += Duration::from_micros(10);
    }
    assert!(credits < 10, "the stop was early");
    deliver(&mut sender, later, 2, &Packet::Nack { flow: 7, missing: (credits..10).collect() });
    assert_eq!(sender.poll_timeout(), None, "the stop is still pending a repeat");
    // Credits again: the next stop comes with the last packet, not early (an early stop again
    // would start the stop, wait, nack cycle over).
    let stop = Kind::CreditStop as usize;
    for seq in credits..10 {
        assert_eq!(sender.counters().sent_packets[stop], 1, "stopped early again before credit {seq}");
        deliver(&mut sender, later, 2, &Packet::Credit { flow: 7, credit_seq: 100 + seq, sent_us: 0 });
        while sender.poll_transmit().is_some() {}
        later += Duration::from_micros(10);
    }
    assert_eq!(sender.counters().sent_packets[stop], 2);
}

/// Two senders fed the same credits, one given back dirty buffers of every size after each
/// send: the same datagrams come out of both (a recycled buffer is encoded into afresh).
#[test]
fn recycled_payload_buffers_change_nothing_that_is_sent() {
    let now = Instant::now();
    let spec = FlowSpec {
        id: 7,
        dst: 2,
        size_bytes: 5000,
        scheme: Scheme::from_name("expresspass").unwrap(),
        path_id: Some(3),
        paths: None,
    };
    let (mut plain, mut recycling) =
        (Endpoint::new(EndpointConfig::new(1, 10e9, now)), Endpoint::new(EndpointConfig::new(1, 10e9, now)));
    plain.start_flow(now, spec.clone());
    recycling.start_flow(now, spec);
    for size in [0, 1, 18, 4000] {
        recycling.recycle(vec![0xAB; size]);
    }
    let mut sent = (Vec::new(), Vec::new());
    for credit_seq in 0..6 {
        let later = now + Duration::from_micros(10 * credit_seq as u64);
        let credit = Packet::Credit { flow: 7, credit_seq, sent_us: 0 };
        deliver(&mut plain, later, 2, &credit);
        deliver(&mut recycling, later, 2, &credit);
        sent.0.extend(std::iter::from_fn(|| plain.poll_transmit()));
        while let Some(transmit) = recycling.poll_transmit() {
            sent.1.push(transmit.clone());
            let mut dirty = transmit.payload;
            dirty.iter_mut().for_each(|byte| *byte = 0xFF);
            recycling.recycle(dirty);
        }
    }
    assert!(sent.0.len() >= 6, "a request, data and a stop");
    assert_eq!(sent.0, sent.1);
}

fn sender_of_two_flows(now: Instant) -> Endpoint {
    let mut sender = Endpoint::new(EndpointConfig::new(1, 10e9, now));
    for (id, dst, scheme) in [(7, 2, "expresspass"), (8, 3, "dctcp")] {
        let scheme = Scheme::from_name(scheme).unwrap();
        sender.start_flow(now, FlowSpec { id, dst, size_bytes: 100 * 1450, scheme, path_id: Some(0), paths: None });
    }
    while sender.poll_transmit().is_some() {}
    sender
}

/// Host 9 forges a Finish, credits, acks, a nack and a CNP for flows host 1 sends to hosts 2
/// and 3: neither flow ends, sends or changes; the receiver's own Finish ends its flow.
#[test]
fn packets_from_a_host_that_is_not_a_flows_receiver_change_nothing_of_that_flow() {
    let now = Instant::now();
    let mut sender = sender_of_two_flows(now);
    let later = now + Duration::from_micros(50);
    for flow in [7, 8] {
        deliver(&mut sender, later, 9, &Packet::Finish { flow, end_us: 1, credits_sent: 0 });
        deliver(&mut sender, later, 9, &Packet::Credit { flow, credit_seq: 0, sent_us: 0 });
        deliver(
            &mut sender,
            later,
            9,
            &Packet::Ack { flow, cumulative: 50, ece: true, duplicate: false, hole: false, echo_sent_us: 0 },
        );
        deliver(&mut sender, later, 9, &Packet::Nack { flow, missing: vec![0, 1, 2] });
        deliver(&mut sender, later, 9, &Packet::Cnp { flow, flag: cchost::CnpFlag::Congestion });
    }
    assert_eq!(sender.active_flows(), 2);
    assert!(sender.poll_record().is_none());
    assert!(sender.poll_transmit().is_none(), "a forged credit or ack made the sender send");
    assert_eq!(sender.counters().unknown_flow, 10);
    deliver(&mut sender, later, 2, &Packet::Finish { flow: 7, end_us: 1, credits_sent: 0 });
    assert_eq!((sender.active_flows(), sender.poll_record().map(|r| r.id)), (1, Some(7)));
}

fn window_data(flow: u32, seq: u32, last: bool) -> Packet {
    Packet::Data { flow, seq, echo_credit_seq: 0, echo_sent_us: 0, payload_len: 0, last, credit_ce: false, scheme: 3 }
}

/// A peer sending data for 2000 fresh flow ids, each far ahead: it holds 1024 flows of at most
/// 8 KiB of bitmap each, the rest are refused, and another peer's flow still starts.
#[test]
fn a_peer_forging_fresh_flows_holds_at_most_its_share_of_flows_and_of_memory() {
    let now = Instant::now();
    let mut receiver = Endpoint::new(EndpointConfig::new(2, 10e9, now));
    for flow in 0..2000 {
        deliver(&mut receiver, now, 5, &window_data(flow, (1 << 16) - 1, false));
        while receiver.poll_transmit().is_some() {}
    }
    let held = receiver.held();
    assert_eq!((held.receiving, receiver.counters().flows_refused), (1024, 976));
    assert!(held.bitmap_bytes <= 1024 * ((1 << 16) / 8 + 64), "{held:?}");
    deliver(&mut receiver, now, 6, &window_data(0, 0, false));
    assert_eq!(receiver.held().receiving, 1025);
    // Far beyond what arrived: refused without a bitmap for it.
    deliver(&mut receiver, now, 6, &window_data(1, 1 << 17, false));
    assert_eq!(receiver.counters().malformed, 1);
}

/// A credit request for 2^64 - 1 bytes from a host that sends no data: the receiver credits it
/// until the idle timeout (10 s), then drops the flow and sends nothing more.
#[test]
fn a_forged_credit_request_is_credited_only_until_the_idle_timeout() {
    let now = Instant::now();
    // At 10 Mbit/s: a credit every 1.2 ms, 8 000 in the 10 s (at 10 Gbit/s, 8 million).
    let mut receiver = Endpoint::new(EndpointConfig::new(2, 10e6, now));
    deliver(&mut receiver, now, 5, &Packet::CreditRequest { flow: 1, size_bytes: u64::MAX, scheme: 1, paths: 1 });
    let mut at = now;
    while let Some(next) = receiver.poll_timeout() {
        assert!(next <= now + Duration::from_millis(12_600), "still crediting at {:?}", next - now);
        at = next;
        receiver.handle_timeout(at);
        while receiver.poll_transmit().is_some() {}
    }
    assert!(at - now >= Duration::from_secs(10));
    assert_eq!((receiver.held().receiving, receiver.counters().flows_dropped_idle), (0, 1));
}

#[test]
fn a_crediting_receiver_refuses_data_numbered_beyond_the_credits_it_sent() {
    let (mut endpoint, now) = receiver();
    endpoint.handle_timeout(now); // credit 0 goes out
    deliver(&mut endpoint, now, 1, &data(5, 0));
    assert_eq!(endpoint.counters().malformed, 1);
    deliver(&mut endpoint, now, 1, &data(0, 0));
    assert_eq!(endpoint.counters().malformed, 1);
}

/// Finished flows are remembered to answer late packets, at most 65 536 of them: the oldest
/// goes first.
#[test]
fn finished_flows_remembered_are_bounded_and_the_oldest_is_forgotten_first() {
    let now = Instant::now();
    let mut receiver = Endpoint::new(EndpointConfig::new(2, 10e9, now));
    for flow in 0..(64 * 1024 + 10) {
        deliver(&mut receiver, now, 5, &window_data(flow, 0, true));
        while receiver.poll_transmit().is_some() {}
    }
    assert_eq!(receiver.held().finished, 64 * 1024);
    // The newest still gets its Finish again; the oldest starts a flow anew.
    deliver(&mut receiver, now, 5, &window_data(64 * 1024 + 9, 0, false));
    assert_eq!(receiver.poll_transmit().map(|t| t.kind), Some(Kind::Finish));
    deliver(&mut receiver, now, 5, &window_data(0, 0, false));
    assert_eq!(receiver.poll_transmit().map(|t| t.kind), Some(Kind::Ack));
}
