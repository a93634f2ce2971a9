//! DCQCN and DCQCN+TCD: the reaction point against a simulated clock, the notification point
//! against an endpoint fed by hand, and flows against the simulated network (virtual clock).

use std::time::{Duration, Instant};

use cchost::cc::dcqcn::{Dcqcn, DcqcnConfig, Phase};
use cchost::cc::SenderControl;
use cchost::sim::{Network, Red, SimConfig};
use cchost::wire::{Kind, Packet, FRAME_OVERHEAD_BYTES};
use cchost::{CnpFlag, Ecn, Endpoint, EndpointConfig, FlowSpec, HostId, Incoming, Scheme};

const LINK: f64 = 10e9;
const PROPAGATION: Duration = Duration::from_micros(5);
const FRAME: u64 = 1538;
const US: Duration = Duration::from_micros(1);
/// The DCQCN paper's RED: Kmin 5 KB, Kmax 200 KB, Pmax 1 %.
const RED: Red = Red { kmin_bytes: 5_000, kmax_bytes: 200_000, pmax: 0.01 };

fn flow(id: u32, dst: HostId, size_bytes: u64, scheme: Scheme) -> FlowSpec {
    FlowSpec { id, dst, size_bytes, scheme, path_id: None, paths: None }
}

/// Hosts on one switch, ports marking by RED, buffers deep enough never to drop (a lossless
/// fabric's PFC is not modelled: nothing should need it).
fn network(hosts: u32) -> Network {
    Network::new(SimConfig::dcqcn(hosts, LINK, PROPAGATION, 4000 * FRAME, RED), |c| c)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Payload rate of one flow at the whole link (full frames).
fn goodput_at_line_rate() -> f64 {
    LINK / 8.0 * 1450.0 / FRAME as f64
}

#[test]
fn two_flows_sharing_a_red_bottleneck_converge_to_a_fair_share() {
    let mut net = network(3);
    net.start_flow(Duration::ZERO, 1, flow(1, 3, 10_000_000_000, Scheme::from_name("dcqcn").unwrap()));
    // The second joins at line rate while the first has the link.
    net.start_flow(Duration::from_millis(5), 2, flow(2, 3, 10_000_000_000, Scheme::from_name("dcqcn").unwrap()));
    net.run_for(Duration::from_millis(80));
    let (from, to) = (net.start() + Duration::from_millis(40), net.start() + Duration::from_millis(80));
    let rate = |src: HostId| {
        let bytes: u64 =
            net.deliveries.iter().filter(|d| d.src == src && d.at >= from && d.at < to).map(|d| d.payload_bytes).sum();
        bytes as f64 / (to - from).as_secs_f64()
    };
    let (a, b) = (rate(1), rate(2));
    let (half, port) = (goodput_at_line_rate() / 2.0, net.switch_port(3));
    println!(
        "DCQCN, 2 flows: {:.2} and {:.2} Gbit/s of payload (half the link {:.2}), {} marks, max queue {} B",
        a * 8e-9,
        b * 8e-9,
        half * 8e-9,
        port.marks,
        port.max_data_queue_bytes
    );
    for (flow, got) in [(1, a), (2, b)] {
        assert!((got / half - 1.0).abs() <= 0.2, "flow {flow}: {:.2} Gbit/s, half is {:.2}", got * 8e-9, half * 8e-9);
    }
    assert!((a + b) / goodput_at_line_rate() >= 0.9, "utilization {:.3}", (a + b) / goodput_at_line_rate());
    assert_eq!(port.data_drops, 0);
}

/// A reaction point on a 40 Gbit/s link (the paper's), and the time it starts at.
fn rp(config: DcqcnConfig) -> (Dcqcn, Instant) {
    (config.build(), Instant::now())
}

#[test]
fn one_cnp_cuts_the_rate_by_half_of_alpha_and_sets_the_target_to_the_old_rate() {
    let (mut cc, t) = rp(DcqcnConfig::for_link(40e9));
    cc.on_congestion_notification(t, CnpFlag::Congestion);
    assert_eq!((cc.rate_bps(), cc.target_bps()), (20e9, 40e9), "alpha starts at 1: the first CE halves");
    // Ten alpha periods without a CNP: alpha decays, the rate recovers part of the way.
    let now = t + 10 * 55 * US + US;
    cc.next_send(now);
    let (before, alpha) = (cc.rate_bps(), cc.alpha());
    assert!(alpha < 1.0 && before > 20e9);
    cc.on_congestion_notification(now, CnpFlag::Congestion);
    assert!(
        close(cc.rate_bps(), before * (1.0 - alpha / 2.0)),
        "{} vs {}",
        cc.rate_bps(),
        before * (1.0 - alpha / 2.0)
    );
    assert_eq!(cc.target_bps(), before);
    assert!(close(cc.alpha(), (1.0 - 1.0 / 256.0) * alpha + 1.0 / 256.0));
    assert_eq!(cc.cuts(), 2);
}

#[test]
fn the_tcd_cut_uses_a_rate_reduction_factor_of_1_2_instead_of_0_5() {
    for (config, factor) in [(DcqcnConfig::for_link(40e9), 0.5), (DcqcnConfig::for_link(40e9).with_tcd(), 1.2)] {
        let (mut cc, t) = rp(DcqcnConfig { initial_alpha: 0.5, ..config });
        cc.on_congestion_notification(t, CnpFlag::Congestion);
        assert!(close(cc.rate_bps(), 40e9 * (1.0 - factor * 0.5)), "factor {factor}: {}", cc.rate_bps());
    }
}

#[test]
fn with_tcd_a_ue_cnp_holds_the_rate_and_increases_resume_once_they_stop() {
    let (mut cc, t) = rp(DcqcnConfig::for_link(40e9).with_tcd());
    cc.on_congestion_notification(t, CnpFlag::Congestion);
    let (rate, target, alpha) = (cc.rate_bps(), cc.target_bps(), cc.alpha());
    // UE CNPs every 50 us (the NP's interval) for a millisecond: no cut, and no increase.
    let mut now = t;
    for _ in 0..20 {
        now += 50 * US;
        cc.on_congestion_notification(now, CnpFlag::Undetermined);
        assert_eq!((cc.rate_bps(), cc.target_bps(), cc.stages()), (rate, target, (0, 0)));
    }
    assert!(cc.alpha() < alpha, "alpha decays: UE is no congestion");
    assert_eq!((cc.cuts(), cc.holds()), (1, 20));
    // Quiet again: the timer's first fast recovery step comes T after the last UE CNP.
    cc.next_send(now + 54 * US);
    assert_eq!(cc.rate_bps(), rate);
    cc.next_send(now + 55 * US);
    assert_eq!((cc.stages(), cc.rate_bps()), ((1, 0), (rate + target) / 2.0));
}

#[test]
fn plain_dcqcn_ignores_a_ue_cnp() {
    let (mut cc, t) = rp(DcqcnConfig::for_link(40e9));
    cc.on_congestion_notification(t, CnpFlag::Congestion);
    cc.on_congestion_notification(t + 50 * US, CnpFlag::Undetermined);
    cc.next_send(t + 55 * US);
    assert_eq!((cc.stages(), cc.holds()), ((1, 0), 0), "the timer was not restarted");
}

#[test]
fn the_timer_and_the_byte_counter_drive_fast_recovery_then_additive_then_hyper_increase() {
    let config = DcqcnConfig::for_link(40e9);
    let (r_ai, r_hai, t_inc, b) =
        (config.rate_ai_bps, config.rate_hai_bps, config.increase_timer, config.byte_counter_bytes);
    let (mut cc, t) = rp(config);
    // Two cuts: RT is then below the line rate, so that its increases show.
    cc.on_congestion_notification(t, CnpFlag::Congestion);
    let cut = t + US;
    cc.on_congestion_notification(cut, CnpFlag::Congestion);
    assert_eq!((cc.rate_bps(), cc.target_bps()), (10e9, 20e9));
    // F = 5 timer stages of fast recovery: RC halves its distance to RT, RT stays.
    for stage in 1..=5 {
        let rate = cc.rate_bps();
        cc.next_send(cut + t_inc * stage);
        assert_eq!((cc.stages(), cc.phase()), ((stage, 0), Phase::FastRecovery));
        assert_eq!((cc.target_bps(), cc.rate_bps()), (20e9, (rate + 20e9) / 2.0));
    }
    // The sixth: additive increase.
    let now = cut + t_inc * 6;
    cc.next_send(now);
    assert_eq!((cc.stages(), cc.phase()), ((6, 0), Phase::AdditiveIncrease));
    assert!(close(cc.target_bps(), 20e9 + r_ai));
    // Every B bytes sent counts a byte stage: additive until it too has passed F...
    let packet = b - FRAME_OVERHEAD_BYTES; // one packet of B bytes on the wire
    for stage in 1..=5 {
        let target = cc.target_bps();
        cc.on_sent(now, packet);
        assert_eq!((cc.stages(), cc.phase()), ((6, stage), Phase::AdditiveIncrease));
        assert!(close(cc.target_bps(), target + r_ai));
    }
    // ... then hyper increase: RT += i R_HAI, i the stages past F of the slower counter.
    for (stages, i) in [((6, 6), 1.0), ((7, 6), 1.0), ((7, 7), 2.0)] {
        let target = cc.target_bps();
        if stages.0 > cc.stages().0 {
            cc.next_send(cut + t_inc * stages.0);
        } else {
            cc.on_sent(now, packet);
        }
        assert_eq!((cc.stages(), cc.phase()), (stages, Phase::HyperIncrease));
        assert!(close(cc.target_bps(), target + i * r_hai), "{stages:?}");
    }
    // A cut starts over.
    cc.on_congestion_notification(cut + t_inc * 7 + US, CnpFlag::Congestion);
    assert_eq!((cc.stages(), cc.phase()), ((0, 0), Phase::FastRecovery));
}

#[test]
fn the_rate_never_goes_above_the_line_or_below_the_minimum() {
    let config = DcqcnConfig::for_link(40e9);
    let (mut cc, t) = rp(config.clone());
    let mut now = t;
    for _ in 0..100 {
        cc.on_congestion_notification(now, CnpFlag::Congestion);
        now += US;
    }
    assert_eq!(cc.rate_bps(), config.min_rate_bps);
    cc.next_send(now + Duration::from_secs(10));
    assert_eq!((cc.rate_bps(), cc.target_bps()), (40e9, 40e9));
}

/// Feeds `endpoint` a data packet of flow 1 from h1, `ecn`-marked, at `now`; what it sends back.
fn data(endpoint: &mut Endpoint, now: Instant, seq: u32, ecn: Ecn, scheme: Scheme) -> Vec<Packet> {
    let packet = Packet::Data {
        flow: 1,
        seq,
        echo_credit_seq: 0,
        echo_sent_us: 0,
        payload_len: 1450,
        last: false,
        credit_ce: false,
        scheme: scheme.wire_id(),
    };
    let mut payload = Vec::new();
    packet.encode(&mut payload);
    endpoint.handle_packet(now, Incoming { src: 1, path_id: 0, ecn, payload: &payload });
    drain(endpoint)
}

fn drain(endpoint: &mut Endpoint) -> Vec<Packet> {
    std::iter::from_fn(|| endpoint.poll_transmit()).map(|t| Packet::decode(&t.payload).expect("valid")).collect()
}

fn cnps(packets: &[Packet]) -> Vec<CnpFlag> {
    packets.iter().filter_map(|p| if let Packet::Cnp { flag, .. } = p { Some(*flag) } else { None }).collect()
}

#[test]
fn the_np_sends_at_most_one_cnp_per_50_us_per_flow() {
    let start = Instant::now();
    let mut receiver = Endpoint::new(EndpointConfig::new(2, LINK, start));
    // A CE-marked packet every microsecond for a millisecond, the receiver's timer kept.
    let mut sent_at = Vec::new();
    for seq in 0..1000u32 {
        let now = start + US * seq;
        while let Some(at) = receiver.poll_timeout().filter(|&at| at <= now) {
            receiver.handle_timeout(at);
            sent_at.extend(cnps(&drain(&mut receiver)).iter().map(|_| at));
        }
        let cnps = cnps(&data(&mut receiver, now, seq, Ecn::Ce, Scheme::from_name("dcqcn").unwrap()));
        assert!(cnps.iter().all(|&f| f == CnpFlag::Congestion));
        sent_at.extend(cnps.iter().map(|_| now));
    }
    assert_eq!(sent_at.len(), 20, "one every 50 us over 1 ms: {sent_at:?}");
    assert!(sent_at.windows(2).all(|w| w[1] - w[0] >= 50 * US), "{sent_at:?}");
    assert_eq!(sent_at[0], start, "the first mark is answered at once");
}

#[test]
fn the_np_answers_ue_only_for_tcd_flows_and_ce_wins_within_an_interval() {
    let start = Instant::now();
    let mut receiver = Endpoint::new(EndpointConfig::new(2, LINK, start));
    // Plain DCQCN: UE is unmarked. DCTCP: no CNP for anything.
    assert!(cnps(&data(&mut receiver, start, 0, Ecn::Ect1, Scheme::from_name("dcqcn").unwrap())).is_empty());
    let mut dctcp = Endpoint::new(EndpointConfig::new(2, LINK, start));
    assert!(cnps(&data(&mut dctcp, start, 0, Ecn::Ce, Scheme::from_name("dctcp").unwrap())).is_empty());
    // No CNP timer: its only wake-up is the check for flows gone idle.
    assert_eq!(dctcp.poll_timeout(), Some(start + dctcp.config().idle_timeout));
    // TCD: UE first (answered at once), then UE and CE within the interval: one CE CNP at its end.
    let mut tcd = Endpoint::new(EndpointConfig::new(2, LINK, start));
    assert_eq!(
        cnps(&data(&mut tcd, start, 0, Ecn::Ect1, Scheme::from_name("dcqcn+tcd").unwrap())),
        [CnpFlag::Undetermined]
    );
    assert!(cnps(&data(&mut tcd, start + 10 * US, 1, Ecn::Ce, Scheme::from_name("dcqcn+tcd").unwrap())).is_empty());
    assert!(cnps(&data(&mut tcd, start + 20 * US, 2, Ecn::Ect1, Scheme::from_name("dcqcn+tcd").unwrap())).is_empty());
    assert_eq!(tcd.poll_timeout(), Some(start + 50 * US));
    tcd.handle_timeout(start + 50 * US);
    assert_eq!(cnps(&drain(&mut tcd)), [CnpFlag::Congestion]);
    assert_eq!(tcd.counters().ue_received, 2);
}

/// One 20 MB flow from h1 to h2 whose switch port marks everything `mark` for the whole run.
fn marked_flow(scheme: Scheme, mark: Option<Ecn>) -> Network {
    let mut net = network(2);
    if let Some(mark) = mark {
        net.mark_switch_port(2, mark, Duration::ZERO, Duration::from_secs(10));
    }
    net.start_flow(Duration::ZERO, 1, flow(1, 2, 20_000_000, scheme));
    net.run_to_completion(Duration::from_secs(10));
    net
}

#[test]
fn with_tcd_a_flow_that_only_sees_ue_marks_keeps_its_rate_and_the_same_flow_with_ce_cuts() {
    let unmarked = marked_flow(Scheme::from_name("dcqcn+tcd").unwrap(), None).records[0].fct();
    let ue = marked_flow(Scheme::from_name("dcqcn+tcd").unwrap(), Some(Ecn::Ect1));
    let ce = marked_flow(Scheme::from_name("dcqcn+tcd").unwrap(), Some(Ecn::Ce));
    let cnps_of = |net: &Network| net.host(2).counters().sent_packets[Kind::Cnp as usize];
    let (ue_fct, ce_fct) = (ue.records[0].fct(), ce.records[0].fct());
    println!(
        "DCQCN+TCD, 20 MB: unmarked {unmarked:?}, all UE {ue_fct:?} ({} CNPs), all CE {ce_fct:?} ({} CNPs)",
        cnps_of(&ue),
        cnps_of(&ce)
    );
    assert!(ue.switch_port(2).ue_marks > 10_000 && cnps_of(&ue) > 100, "the UE marks were answered");
    assert_eq!(ue.host(2).counters().ce_received, 0);
    // At line rate throughout: the UE flow takes as long as the unmarked one.
    assert!(ue_fct.as_secs_f64() <= unmarked.as_secs_f64() * 1.01, "{ue_fct:?} vs {unmarked:?}");
    let ideal = Duration::from_secs_f64(20e6 / goodput_at_line_rate());
    assert!(unmarked < ideal + Duration::from_micros(100), "{unmarked:?} vs {ideal:?}");
    // CE on every packet: cut to the floor, many times slower.
    assert!(cnps_of(&ce) > 100 && ce_fct > 10 * ue_fct, "{ce_fct:?}");
    // The sender's record counts the CNPs by flag (the victim experiment's "marked CE").
    let (ue_record, ce_record) = (&ue.records[0], &ce.records[0]);
    assert_eq!((ue_record.cnps_ce, ue_record.cnps_ue), (0, cnps_of(&ue)));
    assert_eq!((ce_record.cnps_ce, ce_record.cnps_ue), (cnps_of(&ce), 0));
}

#[test]
fn plain_dcqcn_reads_ue_marks_as_unmarked() {
    let ue = marked_flow(Scheme::from_name("dcqcn").unwrap(), Some(Ecn::Ect1));
    assert!(ue.switch_port(2).ue_marks > 0);
    assert_eq!(ue.host(2).counters().sent_packets[Kind::Cnp as usize], 0);
}

#[test]
fn a_lost_data_packet_is_retransmitted_and_the_rate_is_left_alone() {
    let mut net = network(2);
    net.lose(Kind::Data, 30);
    net.start_flow(Duration::ZERO, 1, flow(1, 2, 2_000_000, Scheme::from_name("dcqcn").unwrap()));
    net.run_to_completion(Duration::from_secs(1));
    let record = &net.records[0];
    assert_eq!((record.retransmits, record.timeouts), (1, 0));
    let ideal = Duration::from_secs_f64(2e6 / goodput_at_line_rate());
    assert!(record.fct() < ideal + Duration::from_micros(200), "{:?} vs {ideal:?}", record.fct());
}
