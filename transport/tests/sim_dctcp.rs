//! DCTCP against the simulated network (virtual clock).

use std::time::Duration;

use cchost::sim::{mean_queue, Network, SimConfig};
use cchost::wire::Kind;
use cchost::{FlowSpec, HostId, Scheme};

const LINK: f64 = 10e9;
const PROPAGATION: Duration = Duration::from_micros(5);
const FRAME: u64 = 1538;
/// The DCTCP paper's K at 10 Gbit/s: 65 packets.
const K: u64 = 65 * FRAME;

fn flow(id: u32, dst: HostId, size_bytes: u64) -> FlowSpec {
    FlowSpec { id, dst, size_bytes, scheme: Scheme::from_name("dctcp").unwrap(), path_id: None, paths: None }
}

fn network(hosts: u32, buffer: u64) -> Network {
    Network::new(SimConfig::dctcp(hosts, LINK, PROPAGATION, buffer, K), |c| c)
}

#[test]
fn long_flows_keep_the_queue_near_k_and_the_link_busy() {
    let mut net = network(3, 250 * FRAME);
    for sender in [1, 2] {
        net.start_flow(Duration::ZERO, sender, flow(sender, 3, 10_000_000_000));
    }
    net.run_for(Duration::from_millis(60));
    let (from, to) = (net.start() + Duration::from_millis(20), net.start() + Duration::from_millis(60));
    let port = net.switch_port(3);
    let queue = mean_queue(&port.data_queue, from, to);
    assert!((0.5 * K as f64..1.5 * K as f64).contains(&queue), "mean queue {queue:.0} B, K {K} B");
    let payload: u64 = net.deliveries.iter().filter(|d| d.at >= from && d.at < to).map(|d| d.payload_bytes).sum();
    let utilization = payload as f64 / (to - from).as_secs_f64() / (LINK / 8.0 * 1450.0 / FRAME as f64);
    println!(
        "DCTCP, 2 flows: mean queue {queue:.0} B (K {K} B), max {} B, utilization {utilization:.3}",
        port.max_data_queue_bytes
    );
    assert!(utilization >= 0.95, "utilization {utilization:.3}");
    assert_eq!(port.data_drops, 0);
}

#[test]
fn a_lost_data_packet_is_recovered_by_fast_retransmit_not_a_timeout() {
    let mut net = network(2, 250 * FRAME);
    net.lose(Kind::Data, 30);
    net.start_flow(Duration::ZERO, 1, flow(1, 2, 1_000_000));
    net.run_to_completion(Duration::from_secs(1));
    let record = &net.records[0];
    assert_eq!(record.retransmits, 1);
    assert!(record.fct() < Duration::from_millis(5), "{:?}: a timeout (10 ms) was needed", record.fct());
}

#[test]
fn a_lost_last_packet_and_finish_are_recovered_by_the_timeout() {
    let mut net = network(2, 250 * FRAME);
    net.lose(Kind::Finish, 1);
    net.start_flow(Duration::ZERO, 1, flow(1, 2, 100_000));
    net.run_to_completion(Duration::from_secs(1));
    assert_eq!(net.records.len(), 1);
    assert!(net.records[0].fct() < Duration::from_millis(5), "the receiver's end time is kept");
}

#[test]
fn an_incast_that_overflows_the_buffer_still_completes_every_flow() {
    let senders = 32;
    let mut net = network(senders + 1, 30 * FRAME);
    for sender in 1..=senders {
        net.start_flow(Duration::ZERO, sender, flow(sender, senders + 1, 64_000));
    }
    net.run_to_completion(Duration::from_secs(5));
    assert_eq!(net.records.len(), senders as usize);
    assert!(net.switch_port(senders + 1).data_drops > 0, "the incast was meant to overflow");
    assert!(net.records.iter().any(|r| r.retransmits > 0));
}

#[test]
fn a_stall_longer_than_the_timeout_is_found_spurious_and_nothing_is_sent_twice_but_one_packet() {
    let mut net = network(2, 250 * FRAME);
    net.start_flow(Duration::ZERO, 1, flow(1, 2, 20_000_000));
    net.stall_switch_port(2, Duration::from_millis(5), Duration::from_millis(30));
    net.run_to_completion(Duration::from_secs(1));
    let record = &net.records[0];
    assert!(record.timeouts >= 1, "the stall was meant to outlast the timeout");
    assert_eq!((record.spurious_timeouts, record.retransmits), (record.timeouts, record.timeouts));
    // The window was given back: the transfer lost little more than the stall itself.
    let ideal = Duration::from_secs_f64(20e6 / (LINK / 8.0 * 1450.0 / FRAME as f64));
    assert!(record.fct() < ideal + Duration::from_millis(32), "{:?} vs {ideal:?} + the 30 ms stall", record.fct());
}

#[test]
fn reordering_costs_at_most_one_needless_retransmission_and_no_timeout() {
    for overtaken_by in [1u64, 3, 10] {
        let mut net = network(2, 250 * FRAME);
        let frame_time = Duration::from_secs_f64(FRAME as f64 * 8.0 / LINK);
        net.delay(Kind::Data, 100, frame_time * overtaken_by as u32 + frame_time / 2);
        net.start_flow(Duration::ZERO, 1, flow(1, 2, 2_000_000));
        net.run_to_completion(Duration::from_secs(1));
        let record = &net.records[0];
        assert!(record.retransmits <= 1 && record.timeouts == 0, "overtaken by {overtaken_by}: {record:?}");
    }
}

/// As for ExpressPass (sim_expresspass.rs): ordinary window flows, a data packet lost and
/// recovered, and no packet malformed, no flow refused or dropped idle.
#[test]
fn ordinary_window_flows_with_a_loss_have_no_packet_refused_by_the_bounds_against_forgery() {
    let mut net = network(5, 250 * FRAME);
    net.lose(Kind::Data, 30);
    for sender in 1..=4 {
        net.start_flow(Duration::from_micros(sender as u64), sender, flow(sender, 5, 300_000));
    }
    net.run_to_completion(Duration::from_secs(1));
    assert_eq!(net.records.len(), 4);
    for host in 1..=5 {
        let c = net.host(host).counters();
        assert_eq!((c.malformed, c.flows_refused, c.flows_dropped_idle), (0, 0, 0), "host {host}");
    }
}
