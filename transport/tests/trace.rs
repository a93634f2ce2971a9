//! The credit schemes' trace (`EndpointConfig::trace`, `Endpoint::poll_trace`, `cchost --trace`)
//! against the simulated network: every feedback step of a flow at its receiver, every window
//! at its sender, and nothing at all when it is off.

use std::time::Duration;

use cchost::cc::expresspass::ExpressPassConfig;
use cchost::sim::{Network, SimConfig};
use cchost::wire::Kind;
use cchost::{FlowSpec, ReceiverTrace, Scheme, SenderTrace, Trace};

const LINK: f64 = 10e9;
const SIZE: u64 = 10_000_000;
const MSS: u64 = 1450;

/// One 10 MB ExpressPass flow h1 -> h2 on a star, its 300th credit lost on the way.
fn run(trace: bool) -> Network {
    let config = SimConfig::expresspass(2, LINK, Duration::from_micros(5), 250 * 1538);
    let mut net = Network::new(config, |c| cchost::EndpointConfig { trace, ..c });
    net.lose(Kind::Credit, 300);
    let scheme = Scheme::from_name("expresspass").unwrap();
    net.start_flow(Duration::ZERO, 1, FlowSpec { id: 1, dst: 2, size_bytes: SIZE, scheme, path_id: None, paths: None });
    net.run_to_completion(Duration::from_secs(1));
    net
}

fn receiver_lines(net: &Network) -> Vec<ReceiverTrace> {
    net.traces
        .iter()
        .filter_map(|(host, t)| match t {
            Trace::Receiver(r) => {
                assert_eq!(*host, 2, "a receiver line from h{host}");
                Some(*r)
            }
            Trace::Sender(_) => None,
        })
        .collect()
}

fn sender_lines(net: &Network) -> Vec<SenderTrace> {
    net.traces
        .iter()
        .filter_map(|(host, t)| match t {
            Trace::Sender(s) => {
                assert_eq!(*host, 1, "a sender line from h{host}");
                Some(*s)
            }
            Trace::Receiver(_) => None,
        })
        .collect()
}

#[test]
fn the_trace_holds_every_feedback_step_of_a_flow_one_after_the_other() {
    let net = run(true);
    let config = ExpressPassConfig::for_link(LINK);
    let lines = receiver_lines(&net);
    assert!(lines.len() > 10, "{} steps", lines.len());
    assert!(lines.iter().all(|r| (r.src, r.id) == (1, 1)));
    // The first step: the flow at alpha of the maximum, its first clean period re-enables w's
    // growth only (ExpressPass's defaults: alpha = w_init = 1/2).
    let first = lines[0].step;
    assert_eq!((first.rate_before / first.max_rate, first.w_before, first.w_after), (0.5, 0.5, 0.5));
    assert!(!first.decreased && (first.rate_after / first.max_rate - 0.75).abs() < 1e-9, "{first:?}");
    for pair in lines.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        // None missed: each step starts from where the one before left the rate and w.
        assert!(a.at_us < b.at_us && a.step.rate_after == b.step.rate_before && a.step.w_after == b.step.w_before);
        // At most once per RTT.
        assert!(b.step.period >= b.step.rtt, "{b:?}");
    }
    for r in &lines {
        let s = r.step;
        assert_eq!(s.decreased, s.loss > s.target_loss, "{r:?}");
        assert_eq!(s.loss, s.lost as f64 / s.credits as f64);
        if s.decreased {
            assert_eq!(s.w_after, (s.w_before / 2.0).max(config.w_min), "{r:?}");
        }
    }
    // What the steps account adds up to what the receiver sent and judged lost, but for the last
    // period (the flow ended before its step).
    let counters = net.host(2).counters();
    let sent: u64 = lines.iter().map(|r| r.credits_sent).sum();
    let lost: u64 = lines.iter().map(|r| r.step.lost).sum();
    assert!(sent <= counters.credits_sent && counters.credits_sent - sent < 100, "{sent} of {}", counters.credits_sent);
    assert!(lost >= 1 && lost <= counters.credits_lost, "{lost} of {} lost", counters.credits_lost);
    assert!(lines.iter().any(|r| r.step.decreased), "the lost credit cut the rate");
}

#[test]
fn the_senders_windows_spend_each_credit_they_count_once() {
    let net = run(true);
    let lines = sender_lines(&net);
    assert!(lines.len() > 10, "{} windows", lines.len());
    let packets = SIZE.div_ceil(MSS);
    let (data, retransmits): (u64, u64) =
        (lines.iter().map(|s| s.data).sum(), lines.iter().map(|s| s.retransmits).sum());
    for s in &lines {
        assert_eq!((s.dst, s.id), (2, 1));
        assert_eq!(s.credits, s.data + s.retransmits + s.wasted, "{s:?}");
    }
    // The last window, cut short by the flow's end, is not written.
    assert!(data <= packets && packets - data < 100 && retransmits == 0, "{data} of {packets} packets");
}

#[test]
fn off_the_trace_keeps_nothing_and_on_it_changes_nothing_in_the_run() {
    let (traced, plain) = (run(true), run(false));
    assert!(plain.traces.is_empty());
    assert!(!traced.traces.is_empty());
    assert_eq!(traced.records, plain.records);
    assert_eq!(traced.host(2).counters(), plain.host(2).counters());
}
