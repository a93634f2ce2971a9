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
