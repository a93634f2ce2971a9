//! The receiver's view of its flows for throughput timelines: `Endpoint::inbound_progress`
//! while they run, `poll_inbound_finish` once each ends.

use std::time::{Duration, Instant};

use cchost::sim::{Network, SimConfig};
use cchost::wire::Packet;
use cchost::{Ecn, Endpoint, EndpointConfig, FlowSpec, InboundFinish, Incoming, Scheme};

const LINK: f64 = 10e9;
const PROPAGATION: Duration = Duration::from_micros(5);
const BUFFER: u64 = 250 * 1538;
const SIZE: u64 = 1_000_000;

/// h1 sends one flow of `SIZE` bytes to h2; h2's progress is sampled every 20 us.
fn progress_of(scheme: Scheme, config: SimConfig) -> (Vec<u64>, Network) {
    let mut net = Network::new(config, |c| c);
    net.start_flow(Duration::ZERO, 1, FlowSpec { id: 9, dst: 2, size_bytes: SIZE, scheme, path_id: None, paths: None });
    let mut samples = Vec::new();
    for step in 1..=5_000u32 {
        net.run_for(Duration::from_micros(20) * step);
        let flows: Vec<_> = net.host(2).inbound_progress().collect();
        assert!(flows.len() <= 1, "{flows:?}");
        match flows.first() {
            Some(&(src, id, bytes)) => {
                assert_eq!((src, id), (1, 9));
                samples.push(bytes);
            }
            None if !net.inbound_finishes.is_empty() => break,
            None => {}
        }
    }
    (samples, net)
}

fn assert_grows_to_the_flow_size(scheme: Scheme, config: SimConfig) {
    let (samples, mut net) = progress_of(scheme, config);
    assert!(samples.len() > 10, "{scheme:?}: only {} samples", samples.len());
    assert!(samples.windows(2).all(|w| w[0] <= w[1]), "{scheme:?}: bytes went down: {samples:?}");
    let last = *samples.last().expect("sampled");
    assert!(last > SIZE / 2 && last < SIZE, "{scheme:?}: {last} bytes before the end");
    net.run_to_completion(Duration::from_secs(1)); // the sender's record, with the same end
    let record = &net.records[0];
    assert_eq!(net.inbound_finishes, [InboundFinish { src: 1, id: 9, bytes: SIZE, end_us: record.end_us }]);
}

#[test]
fn a_credited_flows_received_bytes_grow_to_its_size_and_its_end_is_reported_once() {
    assert_grows_to_the_flow_size(
        Scheme::from_name("expresspass").unwrap(),
        SimConfig::expresspass(2, LINK, PROPAGATION, BUFFER),
    );
}

#[test]
fn a_windowed_flows_received_bytes_grow_to_its_size_and_its_end_is_reported_once() {
    let config = SimConfig::dctcp(2, LINK, PROPAGATION, BUFFER, 65 * 1538);
    assert_grows_to_the_flow_size(Scheme::from_name("dctcp").unwrap(), config);
}

#[test]
fn a_duplicate_data_packet_is_counted_once_in_the_progress() {
    let now = Instant::now();
    let mut endpoint = Endpoint::new(EndpointConfig::new(2, 10e9, now));
    let deliver = |endpoint: &mut Endpoint, seq: u32, payload_len: u16, last: bool| {
        let packet = Packet::Data {
            flow: 4,
            seq,
            echo_credit_seq: 0,
            echo_sent_us: 0,
            payload_len,
            last,
            credit_ce: false,
            scheme: Scheme::from_name("dctcp").unwrap().wire_id(),
        };
        let mut payload = Vec::new();
        packet.encode(&mut payload);
        endpoint.handle_packet(now, Incoming { src: 1, path_id: 0, ecn: Ecn::Ect0, payload: &payload });
    };
    deliver(&mut endpoint, 0, 1450, false);
    deliver(&mut endpoint, 0, 1450, false);
    assert_eq!(endpoint.inbound_progress().collect::<Vec<_>>(), [(1, 4, 1450)]);
    assert_eq!(endpoint.poll_inbound_finish(), None);
    deliver(&mut endpoint, 1, 100, true);
    assert_eq!(endpoint.inbound_progress().count(), 0);
    let finish = endpoint.poll_inbound_finish().expect("the flow ended");
    assert_eq!((finish.src, finish.id, finish.bytes), (1, 4, 1550));
    deliver(&mut endpoint, 1, 100, true);
    assert_eq!(endpoint.poll_inbound_finish(), None, "a late packet does not end the flow again");
}
