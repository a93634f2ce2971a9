//! The endpoint fed arbitrary packets from arbitrary hosts, with time passing (proptest): it
//! never panics, what other hosts make it hold stays under its bounds, and a flow it sends
//! ends only by its own receiver's Finish.
//!
//! Packets are drawn mostly near the flows it has (small flow ids and sequence numbers, the
//! hosts of its flows), so that they reach deep into the flows' state machines, and sometimes
//! from anywhere. `PROPTEST_CASES=20000 cargo test --test fuzz_endpoint -- --nocapture`
//! prints the figures of a longer run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use proptest::prelude::*;

use cchost::wire::{CnpFlag, Packet, MAX_SCHEME_ID, NACK_MAX_SEQS};
use cchost::{Ecn, Endpoint, EndpointConfig, FlowSpec, Incoming, Scheme};

/// This host, and the receivers of its two flows (one credited, one window).
const HOST: u32 = 1;
const CREDITED: (u32, u32) = (7, 2); // (flow id, its receiver)
const WINDOW: (u32, u32) = (8, 3);
/// A flow received holds at most this much bitmap: `flow::MAX_AHEAD` bits and a word, twice
/// (the vector grows by doubling).
const MAX_BITMAP_BYTES: usize = 2 * ((1 << 16) / 8 + 8);

fn flow_id() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0u32..12, 1 => any::<u32>()]
}

fn seq() -> impl Strategy<Value = u32> {
    // Near the flows' start, around the bound of how far ahead a packet may be, or anything.
    prop_oneof![8 => 0u32..40, 1 => 60_000u32..1_100_000, 1 => any::<u32>()]
}

fn packet() -> impl Strategy<Value = Packet> {
    prop_oneof![
        (flow_id(), prop_oneof![0u64..100_000, any::<u64>()], 0..=MAX_SCHEME_ID, any::<u16>())
            .prop_map(|(flow, size_bytes, scheme, paths)| Packet::CreditRequest { flow, size_bytes, scheme, paths }),
        (flow_id(), seq(), any::<u32>()).prop_map(|(flow, credit_seq, sent_us)| Packet::Credit {
            flow,
            credit_seq,
            sent_us
        }),
        ((flow_id(), seq(), seq(), any::<u32>(), 0u16..1500), (any::<bool>(), any::<bool>(), 0..=MAX_SCHEME_ID))
            .prop_map(|((flow, seq, echo_credit_seq, echo_sent_us, payload_len), (last, credit_ce, scheme))| {
                Packet::Data { flow, seq, echo_credit_seq, echo_sent_us, payload_len, last, credit_ce, scheme }
            }),
        flow_id().prop_map(|flow| Packet::CreditStop { flow }),
        (flow_id(), seq(), any::<bool>(), any::<bool>(), any::<bool>(), any::<u32>()).prop_map(
            |(flow, cumulative, ece, duplicate, hole, echo_sent_us)| Packet::Ack {
                flow,
                cumulative,
                ece,
                duplicate,
                hole,
                echo_sent_us
            }
        ),
        (flow_id(), any::<u64>(), any::<u32>()).prop_map(|(flow, end_us, credits_sent)| Packet::Finish {
            flow,
            end_us,
            credits_sent
        }),
        (flow_id(), proptest::collection::vec(seq(), 0..=NACK_MAX_SEQS))
            .prop_map(|(flow, missing)| Packet::Nack { flow, missing }),
        (flow_id(), any::<bool>()).prop_map(|(flow, congestion)| Packet::Cnp {
            flow,
            flag: if congestion { CnpFlag::Congestion } else { CnpFlag::Undetermined }
        }),
    ]
}

/// One input: a packet (or bytes that may not parse) from a host, some time after the last.
#[derive(Debug, Clone)]
struct Input {
    src: u32,
    ecn: u8,
    bytes: Vec<u8>,
    finish_for: Option<u32>,
    after_us: u64,
}

fn input() -> impl Strategy<Value = Input> {
    let src = prop_oneof![4 => 1u32..6, 1 => any::<u32>()];
    let bytes = prop_oneof![
        9 => packet().prop_map(|p| {
            let finish_for = match p {
                Packet::Finish { flow, .. } => Some(flow),
                _ => None,
            };
            let mut bytes = Vec::new();
            p.encode(&mut bytes);
            (bytes, finish_for)
        }),
        1 => proptest::collection::vec(any::<u8>(), 0..80).prop_map(|b| (b, None)),
    ];
    (src, 0u8..4, bytes, prop_oneof![0u64..50, 0u64..200_000, Just(11_000_000)])
        .prop_map(|(src, ecn, (bytes, finish_for), after_us)| Input { src, ecn, bytes, finish_for, after_us })
}

static INPUTS: AtomicUsize = AtomicUsize::new(0);
static MOST_HELD: AtomicUsize = AtomicUsize::new(0);

fn spec(id: u32, dst: u32, scheme: &str) -> FlowSpec {
    FlowSpec { id, dst, size_bytes: 20 * 1450, scheme: Scheme::from_name(scheme).unwrap(), path_id: None, paths: None }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_packets_from_any_host_never_panic_stay_bounded_and_end_no_flow_but_by_its_receiver(
        inputs in proptest::collection::vec(input(), 1..300)
    ) {
        let start = Instant::now();
        let mut now = start;
        let mut endpoint = Endpoint::new(EndpointConfig::new(HOST, 10e9, start));
        endpoint.start_flow(now, spec(CREDITED.0, CREDITED.1, "expresspass"));
        endpoint.start_flow(now, spec(WINDOW.0, WINDOW.1, "dctcp"));
        let mut finished_by_receiver = 0;
        for input in &inputs {
            now += Duration::from_micros(input.after_us);
            while endpoint.poll_timeout().is_some_and(|at| at <= now) {
                endpoint.handle_timeout(now);
            }
            let ecn = [Ecn::NotEct, Ecn::Ect1, Ecn::Ect0, Ecn::Ce][input.ecn as usize];
            // A Finish from a flow's own receiver may end it (the flow's records count those).
            let ends_own = matches!(input.finish_for, Some(f) if (f, input.src) == CREDITED || (f, input.src) == WINDOW);
            finished_by_receiver += ends_own as usize;
            endpoint.handle_packet(now, Incoming { src: input.src, path_id: 0, ecn, payload: &input.bytes });
            while let Some(transmit) = endpoint.poll_transmit() {
                endpoint.recycle(transmit.payload);
            }
            while endpoint.poll_inbound_finish().is_some() {}
            let held = endpoint.held();
            prop_assert!(held.receiving <= 8 * 1024 && held.finished <= 64 * 1024, "{held:?}");
            prop_assert!(held.bitmap_bytes <= held.receiving * MAX_BITMAP_BYTES, "{held:?}");
            MOST_HELD.fetch_max(held.bitmap_bytes, Ordering::Relaxed);
        }
        let records: Vec<_> = std::iter::from_fn(|| endpoint.poll_record()).collect();
        for record in &records {
            prop_assert!(record.id == CREDITED.0 || record.id == WINDOW.0);
        }
        prop_assert!(records.len() <= finished_by_receiver, "a flow ended by another host's Finish");
        let total = INPUTS.fetch_add(inputs.len(), Ordering::Relaxed) + inputs.len();
        if total % 10_000 < inputs.len() {
            eprintln!("fuzz_endpoint: {total} inputs, no panic, most bitmap bytes held {}",
                      MOST_HELD.load(Ordering::Relaxed));
        }
    }
}
