//! SprayPass against ExpressPass on a k=4 fat-tree (seed 003, section IV): permutation
//! traffic, and one core link slowed to a tenth.

use std::time::Duration;

use cchost::cc::spraypass::SprayPassConfig;
use cchost::sim::{Network, SimConfig, Topology};
use cchost::{EndpointConfig, FlowSpec, HostId, Scheme};

const LINK: f64 = 10e9;
const PROPAGATION: Duration = Duration::from_micros(2);
const DATA_BUFFER: u64 = 250 * 1538;
const FROM: Duration = Duration::from_millis(2);
const TO: Duration = Duration::from_millis(6);

/// Each host sends one long flow to the host of the same place in the next pod: every flow
/// crosses the core, no two share a receiver.
fn permutation(net: &mut Network, scheme: Scheme) {
    let topology = net.config.topology.clone();
    for src in 1..=16 {
        let dst: HostId = (src - 1 + 4) % 16 + 1;
        let paths = Some(topology.paths(src, dst));
        net.start_flow(Duration::ZERO, src, FlowSpec { id: 1, dst, size_bytes: 1 << 40, scheme, path_id: None, paths });
    }
}

/// Payload bits per second all receivers got in [FROM, TO].
fn aggregate(net: &Network) -> f64 {
    let (from, to) = (net.start() + FROM, net.start() + TO);
    let bytes: u64 = net.deliveries.iter().filter(|d| d.at >= from && d.at < to).map(|d| d.payload_bytes).sum();
    bytes as f64 * 8.0 / (TO - FROM).as_secs_f64()
}

fn run(scheme: Scheme, slow_core_link: Option<f64>, endpoint: impl Fn(EndpointConfig) -> EndpointConfig) -> Network {
    let config = SimConfig::spraypass(16, LINK, PROPAGATION, DATA_BUFFER).on(Topology::fat_tree(4));
    let (core, agg) = (config.topology.switch("c0"), config.topology.switch("a0_0"));
    let mut net = Network::new(config, endpoint);
    if let Some(fraction) = slow_core_link {
        net.set_link_rate(core, agg, LINK * fraction);
    }
    permutation(&mut net, scheme);
    net.run_for(TO);
    net
}

/// Payload bytes the receivers h1..h8 got on path-id `path` (of 0..4) in [FROM, TO].
fn bytes_on_path(net: &Network, path: u8) -> u64 {
    let (from, to) = (net.start() + FROM, net.start() + TO);
    let on_path = |d: &&cchost::sim::Delivery| d.dst <= 8 && d.path_id % 4 == path && d.at >= from && d.at < to;
    net.deliveries.iter().filter(on_path).map(|d| d.payload_bytes).sum()
}

#[test]
fn spraying_carries_at_least_1_2x_what_expresspass_carries_in_a_permutation_on_a_k4_fat_tree() {
    let expresspass = aggregate(&run(Scheme::from_name("expresspass").unwrap(), None, |c| c));
    let spraypass = aggregate(&run(Scheme::from_name("spraypass").unwrap(), None, |c| c));
    println!(
        "permutation, k=4 fat-tree, 16 flows at 10 Gbit/s: ExpressPass {:.1} Gbit/s, SprayPass {:.1} Gbit/s: {:.2}x \
         (paper 1.28x)",
        expresspass / 1e9,
        spraypass / 1e9,
        spraypass / expresspass
    );
    assert!(spraypass >= 1.2 * expresspass, "{:.2}x", spraypass / expresspass);
}

/// Path-id 0 of 0..4 crosses core c0 and aggregation a0_0 for every flow into pod 0 and out
/// of it (received in pods 0 and 1, by h1..h8): the oracle never sprays it there.
fn without_the_slow_path(mut config: EndpointConfig) -> EndpointConfig {
    if config.host <= 8 {
        config.schemes.config_mut::<SprayPassConfig>("spraypass").unwrap().excluded_paths = vec![0];
    }
    config
}

/// At a tenth of its rate the slow link gives each of its flows a tenth of another path's
/// speed: exactly theta, so probing removes it only now and then (the data it carries is
/// credit-limited anyway); at a twentieth it is removed for good.
#[test]
fn with_a_core_link_slowed_to_a_tenth_spraypass_keeps_90_percent_of_what_the_other_paths_carry_and_probing_removes_a_slower_one(
) {
    for fraction in [0.1, 0.05] {
        let probed = run(Scheme::from_name("spraypass").unwrap(), Some(fraction), |c| c);
        let oracle = aggregate(&run(Scheme::from_name("spraypass").unwrap(), Some(fraction), without_the_slow_path));
        let unprobed = run(Scheme::from_name("spraypass").unwrap(), Some(fraction), |mut c| {
            c.schemes.config_mut::<SprayPassConfig>("spraypass").unwrap().theta = 0.0;
            c
        });
        let share = |net: &Network| bytes_on_path(net, 0) as f64 / bytes_on_path(net, 1) as f64;
        println!(
            "permutation with c0-a0_0 at {fraction} of its rate: SprayPass {:.1} Gbit/s, without probing {:.1}, never \
             spraying the slow path {:.1}: {:.2} of the latter; data on the slow path-id / another, flows into h1..h8: \
             {:.3} ({:.3} without probing)",
            aggregate(&probed) / 1e9,
            aggregate(&unprobed) / 1e9,
            oracle / 1e9,
            aggregate(&probed) / oracle,
            share(&probed),
            share(&unprobed),
        );
        assert!(aggregate(&probed) >= 0.9 * oracle, "{:.2} of what the other paths carry", aggregate(&probed) / oracle);
        if fraction < 0.1 {
            // Removed: the slow path carries only the probes of its re-admissions.
            assert!(share(&probed) < 0.5 * share(&unprobed), "the slow path still carries {:.3}", share(&probed));
        }
    }
}
