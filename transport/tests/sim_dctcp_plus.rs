//! DCTCP+ against DCTCP in the DCTCP+ paper's incast (seed 002, section VI-B): an aggregator
//! asks N workers for 1 MB / N each, the next request once every response is in, over
//! persistent connections; 1 Gbit/s, a 128 KB port buffer, K = 32 KB, RTO_min 10 ms, about
//! 100 us of base RTT, the minimum window 1 MSS for both schemes (its footnote 3).

use std::time::Duration;

use cchost::cc::dctcp::DctcpConfig;
use cchost::cc::dctcp_plus::DctcpPlusConfig;
use cchost::sim::{Network, SimConfig};
use cchost::{FlowSpec, Scheme};

const LINK: f64 = 1e9;
/// 4 links of 25 us between a worker and the aggregator and back: ~100 us with serialization.
const PROPAGATION: Duration = Duration::from_micros(25);
const BUFFER: u64 = 128 * 1024;
const K: u64 = 32 * 1024;
const TOTAL: u64 = 1_000_000;
const ROUNDS: u32 = 30;
/// Rounds not counted: the first ones find fresh connections (initial window 10, a 100 ms
/// initial RTO), which the paper's 1000 requests per N over kept connections never show.
const WARM_UP: usize = 5;

struct Incast {
    goodput_mbps: f64,
    timeouts: u64,
}

fn incast(scheme: Scheme, n: u32) -> Incast {
    let aggregator = n + 1;
    let config = SimConfig::dctcp(n + 1, LINK, PROPAGATION, BUFFER, K);
    let mut net = Network::new(config, |mut c| {
        c.schemes.config_mut::<DctcpConfig>("dctcp").unwrap().min_window_segments = 1;
        c.rto_min = Duration::from_millis(10);
        c
    });
    let mut ends = Vec::new();
    for round in 0..ROUNDS {
        let now = net.now() - net.start();
        ends.push(now);
        for worker in 1..=n {
            let spec = FlowSpec {
                id: round,
                dst: aggregator,
                size_bytes: TOTAL / n as u64,
                scheme,
                path_id: None,
                paths: None,
            };
            net.start_flow(now, worker, spec);
        }
        net.run_to_completion(Duration::from_secs(60));
    }
    ends.push(net.now() - net.start());
    let counted = ends[ends.len() - 1] - ends[WARM_UP];
    assert_eq!(net.records.len(), (n * ROUNDS) as usize, "{scheme} N={n}: every response arrives");
    let bytes = (TOTAL / n as u64 * n as u64) as f64 * (ROUNDS as usize - WARM_UP) as f64;
    Incast {
        goodput_mbps: bytes * 8.0 / counted.as_secs_f64() / 1e6,
        timeouts: net.records.iter().filter(|r| r.id as usize >= WARM_UP).map(|r| r.timeouts).sum(),
    }
}

/// The issue asked DCTCP+ to keep >= 600 Mbit/s for N >= 200 (paper: 600-900 where DCTCP
/// collapses beyond ~35). NOT MET: this run gives DCTCP+ 528 Mbit/s at N = 200 and 241 at 300,
/// against DCTCP's 255 and 112 (at N = 50 and 100 DCTCP+ keeps ~870 without a timeout where
/// DCTCP gets 530-640); what is asserted is what holds: DCTCP collapses below 300 Mbit/s at
/// N >= 200, DCTCP+ keeps at least twice that there (1.8x, for margin), and more than DCTCP
/// from N = 50 on.
#[test]
fn at_200_and_300_incast_flows_dctcp_falls_below_300_mbits_and_dctcp_plus_keeps_at_least_1_8x_as_much() {
    println!("incast, 1 MB / N per round, rounds {WARM_UP}..{ROUNDS}: goodput Mbit/s (timeouts)");
    println!("{:>5} {:>16} {:>16}", "N", "dctcp", "dctcp+");
    for n in [10, 35, 50, 100, 200, 300] {
        let (dctcp, plus) =
            (incast(Scheme::from_name("dctcp").unwrap(), n), incast(Scheme::from_name("dctcp+").unwrap(), n));
        println!(
            "{n:>5} {:>9.0} ({:>4}) {:>9.0} ({:>4})",
            dctcp.goodput_mbps, dctcp.timeouts, plus.goodput_mbps, plus.timeouts
        );
        if n >= 50 {
            assert!(plus.goodput_mbps > dctcp.goodput_mbps, "dctcp+ N={n}: {:.0} Mbit/s", plus.goodput_mbps);
        }
        if n >= 200 {
            assert!(dctcp.goodput_mbps < 300.0, "dctcp N={n}: {:.0} Mbit/s", dctcp.goodput_mbps);
            assert!(plus.goodput_mbps >= 1.8 * dctcp.goodput_mbps, "dctcp+ N={n}: {:.0} Mbit/s", plus.goodput_mbps);
        }
    }
}

/// The paper's own figure (seed 002 line 267, Fig. 7): DCTCP+ keeps 600-900 Mbit/s of 1 Gbit/s
/// up to 200 concurrent flows (its N goes up to 200, line 237). NOT MET, kept as the target: this
/// simulation gives DCTCP+ 528 Mbit/s at N = 200 (the test above asserts what holds). Run it with
/// `cargo test --test sim_dctcp_plus -- --ignored`; a fix turns it green.
#[test]
#[ignore = "NOT MET: DCTCP+ keeps 528 Mbit/s at N = 200, the paper 600-900 (seed 002 Fig. 7)"]
fn at_200_incast_flows_dctcp_plus_keeps_600_to_900_mbits_as_in_the_paper() {
    let plus = incast(Scheme::from_name("dctcp+").unwrap(), 200);
    assert!(
        (600.0..=900.0).contains(&plus.goodput_mbps),
        "dctcp+ N=200: {:.0} Mbit/s ({} timeouts)",
        plus.goodput_mbps,
        plus.timeouts
    );
}

/// The send gate is no loss: while slow_time alone holds the next packet (nothing in flight),
/// the retransmission timer does not run, even when slow_time is longer than the timeout
/// (before: 351 timeouts and an FCT of 1.2 s here, 53 ms after).
#[test]
fn a_slow_time_longer_than_the_retransmission_timeout_causes_no_timeout() {
    // Four senders into one port marking every packet that finds another queued, over links
    // short enough that four packets in flight already queue: the windows fall to their
    // minimum and the marks that keep coming start slow_time, in units of 30 ms against a
    // 10 ms RTO_min.
    let config = SimConfig::dctcp(5, LINK, Duration::from_micros(1), BUFFER, 1);
    let mut net = Network::new(config, |mut c| {
        c.schemes.config_mut::<DctcpPlusConfig>("dctcp+").unwrap().backoff_time_unit = Some(Duration::from_millis(30));
        c.rto_min = Duration::from_millis(10);
        c
    });
    for sender in 1..=4 {
        let spec = FlowSpec {
            id: 1,
            dst: 5,
            size_bytes: 200_000,
            scheme: Scheme::from_name("dctcp+").unwrap(),
            path_id: None,
            paths: None,
        };
        net.start_flow(Duration::ZERO, sender, spec);
    }
    net.run_to_completion(Duration::from_secs(60));
    let slowest = net.records.iter().map(|r| r.fct()).max().unwrap();
    let timeouts: u64 = net.records.iter().map(|r| r.timeouts).sum();
    println!("DCTCP+ with a 30 ms backoff unit: slowest FCT {slowest:?}, {timeouts} timeouts");
    assert!(slowest > Duration::from_millis(30), "slow_time never held a packet long: {slowest:?}");
    assert_eq!(timeouts, 0);
}
