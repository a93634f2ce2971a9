//! cchost's command line: its flags (clap: the help text is their doc comments), their checks
//! (a number out of range is refused in one line naming its flag), the scheme parameters they
//! set (`--param`, and the older flags that set one) and `cchost --schemes`, the scheme table
//! the Python side reads.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use cchost::{Driver, EndpointConfig, Registry};
use clap::Parser;
use serde_json::json;

use crate::schedule::parse_scheme;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "ccemu's transport: one per emulated host, sends its scheduled flows and receives others'",
    after_help = "cchost --schemes [--json] lists the schemes (name, wire id, driver, port profile, parameters) \
                  and exits."
)]
pub struct Args {
    /// This host's number (h3 is 3); it binds 10.x.y.z of that number.
    #[arg(long)]
    pub host: u32,
    /// Rate of this host's link, Mbit/s (ExpressPass credits at most its credit share).
    #[arg(long)]
    pub link_mbps: f64,
    /// Flows to send, JSON lines (see schedule.rs); none: receive only.
    #[arg(long)]
    pub schedule: Option<PathBuf>,
    /// Also read schedule lines from standard input while running (same format and checks as
    /// --schedule; a flow id given before, by either, is refused): a cchost kept for many
    /// rounds is handed each round's flows. Until stdin's end, --exit-when-done does not exit
    /// (more flows may come).
    #[arg(long)]
    pub schedule_stdin: bool,
    /// Flow records out, JSON lines (default: stdout).
    #[arg(long)]
    pub records: Option<PathBuf>,
    /// Counters, rewritten as one JSON object every 100 ms and at exit.
    #[arg(long)]
    pub counters: Option<PathBuf>,
    /// Scheme of flows whose schedule line names none: one of `cchost --schemes`.
    #[arg(long, default_value = "expresspass", value_parser = parse_scheme)]
    pub scheme: cchost::Scheme,
    /// CLOCK_MONOTONIC nanoseconds of the experiment's start: flow starts count from it, and
    /// records' times are written as seconds after it. Default: now. (FCTs are right either
    /// way: every host's times are CLOCK_MONOTONIC, the same in every namespace.)
    #[arg(long)]
    pub epoch_ns: Option<u64>,
    /// Sockets are bound to base + path-id (a multiple of 256).
    #[arg(long, default_value_t = 40960)]
    pub port_base: u16,
    /// Exit once this host's flows are done and `--linger` seconds have passed (with
    /// --schedule-stdin: once stdin has ended too).
    #[arg(long)]
    pub exit_when_done: bool,
    /// Seconds to keep answering other hosts' flows after this host's own are done.
    #[arg(long, default_value_t = 1.0)]
    pub linger: f64,
    /// Exit after this many seconds whatever is left.
    #[arg(long)]
    pub duration: Option<f64>,
    /// A scheme's parameter, `<scheme>.<key>=<value>` (repeatable; `cchost --schemes` lists
    /// them): `--param dcqcn.timer_us=300`. Times are microseconds of datacenter time
    /// (x --dilation). Applied after the flags below that set parameters too.
    #[arg(long = "param", value_name = "SCHEME.KEY=VALUE")]
    pub params: Vec<String>,
    /// ExpressPass initial credit rate, fraction of the maximum (paper: 1/2; 1/16 for realistic
    /// workloads): `--param expresspass.alpha`.
    #[arg(long, default_value_t = 0.5)]
    pub alpha: f64,
    /// ExpressPass and SprayPass initial aggressiveness w (SprayPass: omega_init, its initial
    /// rate too); default: --alpha, as in the paper's runs: `--param expresspass.w_init` and
    /// `--param spraypass.w_init`.
    #[arg(long)]
    pub w_init: Option<f64>,
    /// DCTCP+ backoff_time_unit, us of datacenter time (x --dilation; default: the flow's base
    /// RTT, the paper's guideline): `--param dctcp+.slow_time_unit_us`.
    #[arg(long)]
    pub slow_time_unit_us: Option<f64>,
    /// Every sender-driven flow starts afresh (initial window, initial RTO), as a new connection
    /// would: the ExpressPass paper's simulated workloads. Default: a flow to a host takes over
    /// the congestion state the last one to it left (persistent connections, as the DCTCP+
    /// paper's incast application keeps).
    #[arg(long)]
    pub fresh_connections: bool,
    /// DCTCP retransmission timeout floor, ms of datacenter time (x --dilation).
    #[arg(long, default_value_t = 10.0)]
    pub rto_min_ms: f64,
    /// Unanswered credit requests and stops are sent again after this long, ms of datacenter
    /// time (x --dilation).
    #[arg(long, default_value_t = 100.0)]
    pub control_timeout_ms: f64,
    /// Time dilation d, 1 to 1e6: the emulation stands for a datacenter d times faster (its
    /// links run at the datacenter's rate / d). Every time parameter of the transport is read
    /// as datacenter time and multiplied by d: --rto-min-ms, --control-timeout-ms,
    /// --slow-time-unit-us, every scheme parameter in us (`cchost --schemes`: "dilates"), and
    /// the built-in initial RTO (100 ms) and initial RTT (1 ms). Not multiplied (wall time):
    /// --linger, --duration,
    /// --delays, --progress-every-ms, schedule start times, and every time written out.
    /// --link-mbps is the emulated rate already.
    #[arg(long, default_value_t = 1.0)]
    pub dilation: f64,
    /// One-way delays of the paths into this host, JSON lines in wall microseconds:
    /// {"src": 3, "delay_us": 1250.5} (every path from h3) or {"src": 3, "path_id": 5,
    /// "delay_us": 900} (h3's path-id 5). Arriving packets are held that long before the
    /// transport sees them; a source without a line is not delayed. None: no delay line.
    #[arg(long)]
    pub delays: Option<PathBuf>,
    /// Progress of the flows this host receives, JSON lines {"t", "src", "id", "bytes"}: every
    /// --progress-every-ms one line per flow being received, and one when a flow ends. `t` is
    /// wall seconds after the epoch; `bytes` the payload bytes received so far (every distinct
    /// packet's, in order or not; the flow's size on its last line).
    #[arg(long)]
    pub progress: Option<PathBuf>,
    /// Period of the --progress lines, wall ms.
    #[arg(long, default_value_t = 10.0)]
    pub progress_every_ms: f64,
    /// Trace of the credit schemes' flows, JSON lines (transport/README.md "Trace"): at a
    /// flow's receiver one line per feedback step (credits sent, accounted and lost in the
    /// period, loss and target, rate and w before and after, the RTT used), at its sender one
    /// per window of about an RTT (credits received, data sent, wasted). `t` is wall seconds
    /// after the epoch, as --progress. None: nothing is traced.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Wall microseconds before a deadline at which a wait stops sleeping and spins (polls
    /// with a zero timeout) until the deadline or input: a timed sleep costs this machine's
    /// CPU more than a short spin (poller.rs says what was measured) and wakes tens of us late.
    /// 0 (the default): every wait sleeps to its deadline. Not dilated: it is the host
    /// machine's scheduling, not the network's time.
    #[arg(long, default_value_t = DEFAULT_SPIN_US)]
    pub spin_us: f64,
    /// Run under SCHED_FIFO at this priority (1-99), so that a pacer woken by its timer runs
    /// before every ordinary process instead of waiting its turn among them: with ~200 hosts on
    /// 2 CPUs, the ordinary scheduler left 1 % of wake-ups 4-10 credit gaps late (issue 43).
    /// The kernel still keeps 5 % of each second for ordinary processes (sched_rt_runtime_us).
    /// 0 (the default): the ordinary scheduler. Not with --spin-us: a spin's sched_yield yields
    /// only to real-time processes, so it would starve the rest. Needs CAP_SYS_NICE.
    #[arg(long, default_value_t = 0)]
    pub realtime_priority: u8,
    /// Seed of the credit pacing jitter (default: the host number).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Judge the arguments (ranges, --param, the schedule and delays files) and exit before
    /// opening a socket: 0 if cchost would start with them. `ccemu validate` asks this, so the
    /// emulator's checks and cchost's can never disagree.
    #[arg(long)]
    pub check_args: bool,
}

/// `--spin-us`'s default: no spin (poller.rs: the A/B, and why it is off).
pub const DEFAULT_SPIN_US: f64 = 0.0;

/// `cchost --schemes [--json]`: needs nothing else (the Python side asks it for the schemes).
#[derive(Parser, Debug)]
pub struct ListSchemes {
    #[arg(long)]
    pub schemes: bool,
    #[arg(long)]
    pub json: bool,
}

/// The first argument that is out of range, said in one line; `None`: all fit.
pub fn invalid(args: &Args) -> Option<String> {
    let fraction = |f: f64| f > 0.0 && f <= 1.0;
    // Positive and finite, and at most a year where it is a time (Durations are built from them).
    let positive = |f: f64, most: f64| f.is_finite() && f > 0.0 && f <= most;
    const YEAR_S: f64 = 365.0 * 24.0 * 3600.0;
    let checks = [
        (args.host >= 1, "--host must be >= 1".to_string()),
        (positive(args.link_mbps, 1e9), format!("--link-mbps must be > 0 (got {})", args.link_mbps)),
        (fraction(args.alpha), format!("--alpha must be in (0, 1] (got {})", args.alpha)),
        (args.w_init.is_none_or(fraction), format!("--w-init must be in (0, 1] (got {:?})", args.w_init)),
        (
            positive(args.rto_min_ms, YEAR_S * 1e3),
            format!("--rto-min-ms must be > 0, at most a year (got {})", args.rto_min_ms),
        ),
        (
            positive(args.control_timeout_ms, YEAR_S * 1e3),
            format!("--control-timeout-ms must be > 0, at most a year (got {})", args.control_timeout_ms),
        ),
        (
            args.slow_time_unit_us.is_none_or(|us| positive(us, YEAR_S * 1e6)),
            format!("--slow-time-unit-us must be > 0, at most a year (got {:?})", args.slow_time_unit_us),
        ),
        ((1.0..=1e6).contains(&args.dilation), format!("--dilation must be in [1, 1e6] (got {})", args.dilation)),
        (
            // At least 0.1 ms: a period that rounds to nothing would write lines in a busy loop.
            args.progress_every_ms.is_finite() && (0.1..=YEAR_S * 1e3).contains(&args.progress_every_ms),
            format!("--progress-every-ms must be from 0.1 to a year (got {})", args.progress_every_ms),
        ),
        (
            args.linger.is_finite() && (0.0..=YEAR_S).contains(&args.linger),
            format!("--linger must be from 0 to a year (got {})", args.linger),
        ),
        (
            args.spin_us.is_finite() && (0.0..=1e6).contains(&args.spin_us),
            format!("--spin-us must be from 0 to 1e6 (got {})", args.spin_us),
        ),
        (args.realtime_priority <= 99, format!("--realtime-priority must be 0 to 99 (got {})", args.realtime_priority)),
        (
            args.realtime_priority == 0 || args.spin_us == 0.0,
            "--realtime-priority and --spin-us cannot go together: a real-time spin yields only to real-time \
             processes and starves the others"
                .to_string(),
        ),
        (
            args.duration.is_none_or(|s| positive(s, YEAR_S)),
            format!("--duration must be > 0 (got {:?})", args.duration),
        ),
    ];
    checks.into_iter().find(|(ok, _)| !ok).map(|(_, message)| message)
}

/// The endpoint's configuration from the command line (checked by `invalid` first): the
/// scheme parameters that flags set, then `--param`s, then every time dilated. A bad
/// `--param` is refused in one line naming it.
pub fn endpoint_config(args: &Args, epoch: Instant) -> Result<EndpointConfig, String> {
    let mut config = EndpointConfig::new(args.host, args.link_mbps * 1e6, epoch);
    let w_init = args.w_init.unwrap_or(args.alpha).to_string();
    let mut params = vec![
        ("expresspass", "alpha", args.alpha.to_string()),
        ("expresspass", "w_init", w_init.clone()),
        ("spraypass", "w_init", w_init),
    ];
    if let Some(us) = args.slow_time_unit_us {
        params.push(("dctcp+", "slow_time_unit_us", us.to_string()));
    }
    for (scheme, key, value) in params {
        config.schemes.set_param(scheme, key, &value)?;
    }
    for param in &args.params {
        let parsed = param.split_once('=').and_then(|(name, value)| Some((name.split_once('.')?, value)));
        let Some(((scheme, key), value)) = parsed else {
            return Err(format!("--param {param}: expected <scheme>.<key>=<value>"));
        };
        config.schemes.set_param(scheme, key, value).map_err(|e| format!("--param {param}: {e}"))?;
    }
    config.rto_min = Duration::from_secs_f64(args.rto_min_ms / 1e3);
    config.control_timeout = Duration::from_secs_f64(args.control_timeout_ms / 1e3);
    config.seed = args.seed.unwrap_or(args.host as u64);
    config.reuse_connections = !args.fresh_connections;
    config.trace = args.trace.is_some();
    config.dilate(args.dilation);
    Ok(config)
}

/// The scheme table as `cchost --schemes` prints it: JSON (one array, one object per scheme;
/// the Python side reads it) or a line per scheme and parameter.
fn schemes_listing(registry: &Registry, as_json: bool) -> String {
    let driver = |driver| match driver {
        Driver::Receiver => "receiver",
        Driver::Sender => "sender",
    };
    if as_json {
        let schemes: Vec<_> = registry
            .iter()
            .map(|scheme| {
                let params: Vec<_> = scheme
                    .params()
                    .iter()
                    .map(|p| {
                        let bounds = p.range.bounds();
                        json!({"name": p.name, "default": p.default, "unit": p.unit, "dilates": p.dilates, "doc": p.doc,
                               "range": {"above": bounds.above, "at_least": bounds.at_least, "at_most": bounds.at_most,
                                         "whole": bounds.whole, "says": p.range.says()}})
                    })
                    .collect();
                json!({
                    "name": scheme.name(), "wire_id": scheme.wire_id(), "driver": driver(scheme.driver()),
                    "port_profile": scheme.port_profile(), "credit": scheme.driver() == Driver::Receiver,
                    "params": params,
                })
            })
            .collect();
        return format!("{}\n", serde_json::Value::Array(schemes));
    }
    let mut text = String::new();
    for scheme in registry.iter() {
        let (name, id, profile) = (scheme.name(), scheme.wire_id(), scheme.port_profile());
        text += &format!("{name} (wire id {id}, {}-driven, {profile} ports)\n", driver(scheme.driver()));
        for p in scheme.params() {
            let default = p.default.map_or("unset".to_string(), |v| v.to_string());
            let dilates = if p.dilates { ", x --dilation" } else { "" };
            text += &format!("  --param {name}.{}={default} ({}{dilates}): {}\n", p.name, p.unit, p.doc);
        }
    }
    text
}

pub fn print_schemes(as_json: bool) -> ExitCode {
    let mut out = io::stdout();
    match out.write_all(schemes_listing(&Registry::catalogue(), as_json).as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cchost --schemes: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `invalid`, then `endpoint_config`, say of cchost's command line with `flags` (link
    /// 10 Mbit/s unless given).
    fn problem(flags: &[&str]) -> Option<String> {
        let link: &[&str] = if flags.iter().any(|f| f.starts_with("--link-mbps")) { &[] } else { &["--link-mbps=10"] };
        let argv = ["cchost", "--host=1"].iter().chain(link).chain(flags);
        let args = Args::try_parse_from(argv).expect("parses");
        invalid(&args).or_else(|| endpoint_config(&args, Instant::now()).err())
    }

    #[test]
    fn every_out_of_range_number_is_refused_in_one_line_naming_its_flag() {
        assert_eq!(problem(&[]), None);
        assert_eq!(problem(&["--dilation=1", "--progress-every-ms=0.5"]), None);
        assert_eq!(problem(&["--dilation=1e6"]), None);
        for (flags, message) in [
            (&["--link-mbps=NaN"][..], "--link-mbps must be > 0 (got NaN)"),
            (&["--link-mbps=inf"], "--link-mbps must be > 0 (got inf)"),
            (&["--alpha=0"], "--alpha must be in (0, 1] (got 0)"),
            (&["--w-init=1.5"], "--w-init must be in (0, 1] (got Some(1.5))"),
            (&["--rto-min-ms=-1"], "--rto-min-ms must be > 0, at most a year (got -1)"),
            (&["--control-timeout-ms=0"], "--control-timeout-ms must be > 0, at most a year (got 0)"),
            (&["--slow-time-unit-us=NaN"], "--slow-time-unit-us must be > 0, at most a year (got Some(NaN))"),
            (&["--linger=-0.5"], "--linger must be from 0 to a year (got -0.5)"),
            (&["--param=dcqcn.timer_us=0"], "--param dcqcn.timer_us=0: dcqcn.timer_us must be microseconds > 0, at most a year (got \"0\")"),
            (&["--param=dcqcn.cnp_interval_us=-50"], "--param dcqcn.cnp_interval_us=-50: dcqcn.cnp_interval_us must be microseconds > 0, at most a year (got \"-50\")"),
            (&["--duration=1e30"], "--duration must be > 0 (got Some(1e30))"),
            (&["--dilation=0.5"], "--dilation must be in [1, 1e6] (got 0.5)"),
            (&["--dilation=NaN"], "--dilation must be in [1, 1e6] (got NaN)"),
            (&["--dilation=inf"], "--dilation must be in [1, 1e6] (got inf)"),
            (&["--dilation=2e6"], "--dilation must be in [1, 1e6] (got 2000000)"),
            (&["--progress-every-ms=0"], "--progress-every-ms must be from 0.1 to a year (got 0)"),
            (&["--progress-every-ms=1e-9"], "--progress-every-ms must be from 0.1 to a year (got 0.000000001)"),
            (&["--realtime-priority=100"], "--realtime-priority must be 0 to 99 (got 100)"),
            (
                &["--realtime-priority=1", "--spin-us=20"],
                "--realtime-priority and --spin-us cannot go together: a real-time spin yields only to real-time \
                 processes and starves the others",
            ),
        ] {
            assert_eq!(problem(flags).as_deref(), Some(message), "{flags:?}");
        }
    }

    #[test]
    fn a_param_sets_its_schemes_parameter_in_datacenter_time_and_the_legacy_flags_still_set_theirs() {
        let argv = [
            "cchost",
            "--host=1",
            "--link-mbps=10",
            "--dilation=10",
            "--alpha=0.0625",
            "--slow-time-unit-us=30",
            "--param",
            "dcqcn.timer_us=300",
            "--param=dcqcn+tcd.cnp_interval_us=40",
            "--param=spraypass.w_init=0.25",
        ];
        let config = endpoint_config(&Args::try_parse_from(argv).expect("parses"), Instant::now()).expect("good");
        let value = |scheme: &str, key: &str| {
            let params = config.schemes.get(scheme).expect("a scheme").params();
            params.iter().find(|p| p.name == key).expect("a parameter").default
        };
        assert_eq!(value("dcqcn", "timer_us"), Some(3000.0));
        assert_eq!(value("dcqcn+tcd", "timer_us"), Some(550.0), "another scheme keeps its own");
        assert_eq!(value("dcqcn+tcd", "cnp_interval_us"), Some(400.0));
        assert_eq!(value("dcqcn", "cnp_interval_us"), Some(500.0));
        assert_eq!((value("expresspass", "alpha"), value("expresspass", "w_init")), (Some(0.0625), Some(0.0625)));
        assert_eq!(value("spraypass", "w_init"), Some(0.25), "a --param wins over --w-init's default, --alpha");
        assert_eq!(value("dctcp+", "slow_time_unit_us"), Some(300.0));
    }

    #[test]
    fn an_unknown_scheme_key_or_a_malformed_param_is_refused_in_one_line_naming_it() {
        let unknown =
            format!("--param tcp.timer_us=1: unknown scheme \"tcp\" ({})", Registry::catalogue().names().join(", "));
        for (flag, message) in [
            ("--param=tcp.timer_us=1", unknown.as_str()),
            ("--param=dcqcn.rate=1", "--param dcqcn.rate=1: dcqcn has no parameter \"rate\" (its parameters: timer_us, cnp_interval_us, alpha_timer_us, g, initial_alpha, beta, fast_recovery_stages)"),
            ("--param=dcqcn.timer_us", "--param dcqcn.timer_us: expected <scheme>.<key>=<value>"),
            ("--param=timer_us=5", "--param timer_us=5: expected <scheme>.<key>=<value>"),
            ("--param=dctcp+.g=2", "--param dctcp+.g=2: dctcp+.g must be in (0, 1] (got \"2\")"),
        ] {
            assert_eq!(problem(&[flag]).as_deref(), Some(message), "{flag}");
        }
    }

    #[test]
    fn the_json_scheme_listing_names_each_scheme_once_with_its_parameters() {
        let listing: serde_json::Value =
            serde_json::from_str(&schemes_listing(&Registry::catalogue(), true)).expect("JSON");
        let schemes = listing.as_array().expect("one array");
        let names: Vec<_> = schemes.iter().map(|s| s["name"].as_str().expect("a name")).collect();
        assert_eq!(names, Registry::catalogue().names());
        let named = |name: &str| &schemes[names.iter().position(|n| *n == name).expect("listed")];
        let tcd = named("dcqcn+tcd");
        assert_eq!(
            (&tcd["wire_id"], &tcd["driver"], &tcd["port_profile"], &tcd["credit"]),
            (&json!(6), &json!("sender"), &json!("tcd"), &json!(false))
        );
        assert_eq!(
            tcd["params"][0],
            json!({"name": "timer_us", "default": 55.0, "unit": "us", "dilates": true, "doc": tcd["params"][0]["doc"],
                   "range": {"above": 0.0, "at_least": null, "at_most": 365.0 * 24.0 * 3600.0 * 1e6, "whole": false,
                             "says": "microseconds > 0, at most a year"}})
        );
        assert_eq!(named("expresspass")["credit"], json!(true));
        assert_eq!(named("dctcp+")["params"][0]["default"], json!(null), "DCTCP+'s unit is unset: the base RTT");
        assert!(
            schemes_listing(&Registry::catalogue(), false).contains("  --param dcqcn.timer_us=55 (us, x --dilation): ")
        );
    }
}
