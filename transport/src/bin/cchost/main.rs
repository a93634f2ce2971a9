//! `cchost`: one per emulated host, sender and receiver of every flow of the host. The shell
//! around the sans-IO [`cchost::Endpoint`]: UDP sockets (one per path-id), read and written in
//! batches (recvmmsg, sendmmsg), an epoll wait that ends at the endpoint's next deadline (with
//! 1 ns timer slack, for credit pacing), the flow schedule in, flow records and counters out. With `--delays`, arriving packets wait out their path's
//! propagation delay in a [`DelayLine`] before the endpoint sees them (the emulator's kernel
//! has no netem); with `--progress`, the bytes of the flows it receives are written as they
//! grow (throughput timelines). With `--schedule-stdin`, more flows come on standard input
//! while it runs (one cchost per host for a whole block of rounds).
//!
//! ```text
//! cchost --host 1 --link-mbps 100 --schedule h1.flows --records h1.records --exit-when-done
//! cchost --schemes --json      # the schemes, their wire ids, port profiles and parameters
//! ```

mod clock;
mod delays;
mod poller;
mod schedule;
mod sockets;

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cchost::{
    DelayLine, Driver, Ecn, Endpoint, EndpointConfig, FlowRecord, HostId, InboundFinish, Incoming, Registry, Transmit,
};
use clap::Parser;
use serde_json::json;

use crate::clock::{Clock, Lateness};
use crate::poller::Poller;
use crate::schedule::{parse_scheme, Schedule, ScheduleInput};
use crate::sockets::{host_of, PathSockets, Receiver, PATHS};

/// The poller's tokens: a socket's is its path-id (0..PATHS), stdin's the next.
const STDIN: u64 = PATHS as u64;
/// Counters are rewritten, and progress lines flushed, this often.
const COUNTERS_EVERY: Duration = Duration::from_millis(100);
/// Receive buffers kept for reuse by the delay line (a burst beyond it allocates).
const SPARE_BUFFERS: usize = 4096;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "ccemu's transport: one per emulated host, sends its scheduled flows and receives others'",
    after_help = "cchost --schemes [--json] lists the schemes (name, wire id, driver, port profile, parameters) \
                  and exits."
)]
struct Args {
    /// This host's number (h3 is 3); it binds 10.x.y.z of that number.
    #[arg(long)]
    host: u32,
    /// Rate of this host's link, Mbit/s (ExpressPass credits at most its credit share).
    #[arg(long)]
    link_mbps: f64,
    /// Flows to send, JSON lines (see schedule.rs); none: receive only.
    #[arg(long)]
    schedule: Option<PathBuf>,
    /// Also read schedule lines from standard input while running (same format and checks as
    /// --schedule; a flow id given before, by either, is refused): a cchost kept for many
    /// rounds is handed each round's flows. Until stdin's end, --exit-when-done does not exit
    /// (more flows may come).
    #[arg(long)]
    schedule_stdin: bool,
    /// Flow records out, JSON lines (default: stdout).
    #[arg(long)]
    records: Option<PathBuf>,
    /// Counters, rewritten as one JSON object every 100 ms and at exit.
    #[arg(long)]
    counters: Option<PathBuf>,
    /// Scheme of flows whose schedule line names none: one of `cchost --schemes`.
    #[arg(long, default_value = "expresspass", value_parser = parse_scheme)]
    scheme: cchost::Scheme,
    /// CLOCK_MONOTONIC nanoseconds of the experiment's start: flow starts count from it, and
    /// records' times are written as seconds after it. Default: now. (FCTs are right either
    /// way: every host's times are CLOCK_MONOTONIC, the same in every namespace.)
    #[arg(long)]
    epoch_ns: Option<u64>,
    /// Sockets are bound to base + path-id (a multiple of 256).
    #[arg(long, default_value_t = 40960)]
    port_base: u16,
    /// Exit once this host's flows are done and `--linger` seconds have passed (with
    /// --schedule-stdin: once stdin has ended too).
    #[arg(long)]
    exit_when_done: bool,
    /// Seconds to keep answering other hosts' flows after this host's own are done.
    #[arg(long, default_value_t = 1.0)]
    linger: f64,
    /// Exit after this many seconds whatever is left.
    #[arg(long)]
    duration: Option<f64>,
    /// A scheme's parameter, `<scheme>.<key>=<value>` (repeatable; `cchost --schemes` lists
    /// them): `--param dcqcn.timer_us=300`. Times are microseconds of datacenter time
    /// (x --dilation). Applied after the flags below that set parameters too.
    #[arg(long = "param", value_name = "SCHEME.KEY=VALUE")]
    params: Vec<String>,
    /// ExpressPass initial credit rate, fraction of the maximum (paper: 1/2; 1/16 for realistic
    /// workloads): `--param expresspass.alpha`.
    #[arg(long, default_value_t = 0.5)]
    alpha: f64,
    /// ExpressPass and SprayPass initial aggressiveness w (SprayPass: omega_init, its initial
    /// rate too); default: --alpha, as in the paper's runs: `--param expresspass.w_init` and
    /// `--param spraypass.w_init`.
    #[arg(long)]
    w_init: Option<f64>,
    /// DCTCP+ backoff_time_unit, us of datacenter time (x --dilation; default: the flow's base
    /// RTT, the paper's guideline): `--param dctcp+.slow_time_unit_us`.
    #[arg(long)]
    slow_time_unit_us: Option<f64>,
    /// Every sender-driven flow starts afresh (initial window, initial RTO), as a new connection
    /// would: the ExpressPass paper's simulated workloads. Default: a flow to a host takes over
    /// the congestion state the last one to it left (persistent connections, as the DCTCP+
    /// paper's incast application keeps).
    #[arg(long)]
    fresh_connections: bool,
    /// DCTCP retransmission timeout floor, ms of datacenter time (x --dilation).
    #[arg(long, default_value_t = 10.0)]
    rto_min_ms: f64,
    /// Unanswered credit requests and stops are sent again after this long, ms of datacenter
    /// time (x --dilation).
    #[arg(long, default_value_t = 100.0)]
    control_timeout_ms: f64,
    /// Time dilation d, 1 to 1e6: the emulation stands for a datacenter d times faster (its
    /// links run at the datacenter's rate / d). Every time parameter of the transport is read
    /// as datacenter time and multiplied by d: --rto-min-ms, --control-timeout-ms,
    /// --slow-time-unit-us, every scheme parameter in us (`cchost --schemes`: "dilates"), and
    /// the built-in initial RTO (100 ms) and initial RTT (1 ms). Not multiplied (wall time):
    /// --linger, --duration,
    /// --delays, --progress-every-ms, schedule start times, and every time written out.
    /// --link-mbps is the emulated rate already.
    #[arg(long, default_value_t = 1.0)]
    dilation: f64,
    /// One-way delays of the paths into this host, JSON lines in wall microseconds:
    /// {"src": 3, "delay_us": 1250.5} (every path from h3) or {"src": 3, "path_id": 5,
    /// "delay_us": 900} (h3's path-id 5). Arriving packets are held that long before the
    /// transport sees them; a source without a line is not delayed. None: no delay line.
    #[arg(long)]
    delays: Option<PathBuf>,
    /// Progress of the flows this host receives, JSON lines {"t", "src", "id", "bytes"}: every
    /// --progress-every-ms one line per flow being received, and one when a flow ends. `t` is
    /// wall seconds after the epoch; `bytes` the payload bytes received so far (every distinct
    /// packet's, in order or not; the flow's size on its last line).
    #[arg(long)]
    progress: Option<PathBuf>,
    /// Period of the --progress lines, wall ms.
    #[arg(long, default_value_t = 10.0)]
    progress_every_ms: f64,
    /// Seed of the credit pacing jitter (default: the host number).
    #[arg(long)]
    seed: Option<u64>,
}

/// `cchost --schemes [--json]`: needs nothing else (the Python side asks it for the schemes).
#[derive(Parser, Debug)]
struct ListSchemes {
    #[arg(long)]
    schemes: bool,
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    if let Ok(list) = ListSchemes::try_parse() {
        if list.schemes {
            return print_schemes(list.json);
        }
    }
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("cchost h{}: {message}", args.host);
            ExitCode::FAILURE
        }
    }
}

struct Outputs {
    records: Box<dyn Write>,
    counters: Option<PathBuf>,
    progress: Option<BufWriter<File>>,
}

/// What the shell counts itself, beside the endpoint's counters.
#[derive(Debug, Default)]
struct ShellCounters {
    send_errors: u64,
    /// Packets that went through the delay line, and the most it held at once.
    delayed_packets: u64,
    delay_line_max: usize,
}

/// A datagram in the delay line: a copy of its own, since the receive buffer is reused.
struct Arrived {
    src: HostId,
    path_id: u8,
    ecn: Ecn,
    payload: Vec<u8>,
}

impl Outputs {
    fn write_record(&mut self, record: &FlowRecord, clock: &Clock) -> io::Result<()> {
        let seconds = |us: u64| clock.seconds_after_epoch(us);
        let line = json!({
            "id": record.id, "src": record.src, "dst": record.dst, "size": record.size_bytes,
            "start": seconds(record.start_us), "end": seconds(record.end_us), "fct": record.fct().as_secs_f64(),
            "retransmits": record.retransmits, "timeouts": record.timeouts,
            "spurious_timeouts": record.spurious_timeouts, "credits_sent": record.credits_sent,
            "credits_wasted": record.credits_wasted, "cnps_ce": record.cnps_ce, "cnps_ue": record.cnps_ue,
            "scheme": record.scheme.name(),
        });
        writeln!(self.records, "{line}")?;
        self.records.flush()
    }

    /// One line per flow this host is receiving, at `now`.
    fn write_progress(&mut self, endpoint: &Endpoint, clock: &Clock, now: Instant) -> io::Result<()> {
        let Some(progress) = &mut self.progress else { return Ok(()) };
        let t = clock.seconds_after_epoch_at(now);
        for (src, id, bytes) in endpoint.inbound_progress() {
            writeln!(progress, "{}", json!({"t": t, "src": src, "id": id, "bytes": bytes}))?;
        }
        Ok(())
    }

    /// The last line of a received flow, at its end.
    fn write_inbound_finish(&mut self, finish: &InboundFinish, clock: &Clock) -> io::Result<()> {
        let Some(progress) = &mut self.progress else { return Ok(()) };
        let t = clock.seconds_after_epoch(finish.end_us);
        writeln!(progress, "{}", json!({"t": t, "src": finish.src, "id": finish.id, "bytes": finish.bytes}))
    }

    fn flush_progress(&mut self) -> io::Result<()> {
        self.progress.as_mut().map_or(Ok(()), Write::flush)
    }

    fn write_counters(&self, endpoint: &Endpoint, lateness: &Lateness, shell: &ShellCounters) -> io::Result<()> {
        let Some(path) = &self.counters else { return Ok(()) };
        let c = endpoint.counters();
        let value = json!({
            "host": endpoint.config().host,
            "sent_packets": kinds(&c.sent_packets), "received_packets": kinds(&c.received_packets),
            "malformed": c.malformed, "unknown_flow": c.unknown_flow,
            "data_bytes_received": c.data_bytes_received, "data_retransmits": c.data_retransmits,
            "ce_received": c.ce_received, "ue_received": c.ue_received, "credit_ce_received": c.credit_ce_received,
            "credits_lost": c.credits_lost, "data_out_of_order": c.data_out_of_order, "ece_received": c.ece_received,
            "timeouts": c.timeouts, "spurious_timeouts": c.spurious_timeouts,
            "credits_sent": c.credits_sent, "credits_wasted": c.credits_wasted,
            "flows_started": c.flows_started, "flows_finished": c.flows_finished,
            "control_retransmits": c.control_retransmits, "active_flows": endpoint.active_flows(),
            "send_errors": shell.send_errors, "timer_lateness": lateness.summary(),
            "delayed_packets": shell.delayed_packets, "delay_line_max": shell.delay_line_max,
        });
        let temporary = path.with_extension("tmp");
        fs::write(&temporary, format!("{value}\n"))?;
        fs::rename(&temporary, path)
    }
}

/// `--schedule-stdin`: `stdin` (a copy of its descriptor) registered with `poll` and made
/// non-blocking until the flags are dropped (keep `stdin` open until then), and the flows of
/// what it already holds added to `schedule`. A regular file or /dev/null (epoll takes
/// neither) is read to its end at once.
fn open_stdin(
    poller: &Poller,
    stdin: BorrowedFd,
    schedule: &mut Schedule,
) -> Result<(ScheduleInput<File>, Option<NonBlocking>), String> {
    let copy = File::from(stdin.try_clone_to_owned().map_err(|e| format!("stdin: {e}"))?);
    let flags = match poller.add(copy.as_raw_fd(), STDIN) {
        Ok(()) => Some(NonBlocking::set(stdin.as_raw_fd()).map_err(|e| format!("stdin: {e}"))?),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => None,
        Err(e) => return Err(format!("stdin: {e}")),
    };
    let mut input = ScheduleInput::new(copy, "stdin");
    input.read_available(schedule)?;
    Ok((input, flags))
}

/// A file descriptor made non-blocking, its flags restored on drop (stdin's file description
/// may be shared, with a terminal's shell say).
struct NonBlocking {
    fd: RawFd,
    flags: libc::c_int,
}

impl NonBlocking {
    fn set(fd: RawFd) -> io::Result<Self> {
        // SAFETY: fcntl on a descriptor the caller keeps open for the guard's life.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { fd, flags })
    }
}

impl Drop for NonBlocking {
    fn drop(&mut self) {
        // SAFETY: as in `set`; the flags are the descriptor's own from before.
        unsafe { libc::fcntl(self.fd, libc::F_SETFL, self.flags) };
    }
}

/// Per packet type, by name (the wire's type numbers index the counters).
fn kinds(counts: &[u64; cchost::wire::KINDS]) -> serde_json::Value {
    const NAMES: [&str; cchost::wire::KINDS] =
        ["", "credit_request", "credit", "data", "credit_stop", "ack", "finish", "nack", "cnp"];
    NAMES.iter().zip(counts).skip(1).map(|(name, count)| (name.to_string(), json!(count))).collect()
}

fn create(path: &Path) -> Result<BufWriter<File>, String> {
    Ok(BufWriter::new(File::create(path).map_err(|e| format!("{}: {e}", path.display()))?))
}

fn open_records(path: Option<&Path>) -> Result<Box<dyn Write>, String> {
    Ok(match path {
        Some(path) => Box::new(create(path)?),
        None => Box::new(io::stdout()),
    })
}

/// The first argument that is out of range, said in one line; `None`: all fit.
fn invalid(args: &Args) -> Option<String> {
    let fraction = |f: f64| f > 0.0 && f <= 1.0;
    // Positive and finite, and at most a year where it is a time (Durations are built from them).
    let positive = |f: f64, most: f64| f.is_finite() && f > 0.0 && f <= most;
    const YEAR_S: f64 = 365.0 * 24.0 * 3600.0;
    let checks = [
        (args.host >= 1, "--host must be >= 1".to_string()),
        (positive(args.link_mbps, 1e9), format!("--link-mbps must be > 0 (got {})", args.link_mbps)),
        (fraction(args.alpha), format!("--alpha must be in (0, 1] (got {})", args.alpha)),
        (args.w_init.is_none_or(fraction), format!("--w-init must be in (0, 1] (got {:?})", args.w_init)),
        (positive(args.rto_min_ms, YEAR_S * 1e3), format!("--rto-min-ms must be > 0 (got {})", args.rto_min_ms)),
        (
            positive(args.control_timeout_ms, YEAR_S * 1e3),
            format!("--control-timeout-ms must be > 0 (got {})", args.control_timeout_ms),
        ),
        (
            args.slow_time_unit_us.is_none_or(|us| positive(us, YEAR_S * 1e6)),
            format!("--slow-time-unit-us must be > 0 (got {:?})", args.slow_time_unit_us),
        ),
        ((1.0..=1e6).contains(&args.dilation), format!("--dilation must be in [1, 1e6] (got {})", args.dilation)),
        (
            // At least 0.1 ms: a period that rounds to nothing would write lines in a busy loop.
            args.progress_every_ms.is_finite() && (0.1..=YEAR_S * 1e3).contains(&args.progress_every_ms),
            format!("--progress-every-ms must be from 0.1 to a year (got {})", args.progress_every_ms),
        ),
        (
            args.linger.is_finite() && (0.0..=YEAR_S).contains(&args.linger),
            format!("--linger must be >= 0 (got {})", args.linger),
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
fn endpoint_config(args: &Args, epoch: Instant) -> Result<EndpointConfig, String> {
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
                    .map(|p| json!({"name": p.name, "default": p.default, "unit": p.unit, "dilates": p.dilates, "doc": p.doc}))
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

fn print_schemes(as_json: bool) -> ExitCode {
    let mut out = io::stdout();
    match out.write_all(schemes_listing(&Registry::catalogue(), as_json).as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cchost --schemes: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    if let Some(message) = invalid(args) {
        return Err(message);
    }
    let mut schedule = Schedule::new(args.scheme);
    if let Some(path) = &args.schedule {
        schedule.read_file(path)?;
    }
    let clock = Clock::new(args.epoch_ns);
    let mut endpoint = Endpoint::new(endpoint_config(args, clock.origin())?);
    let mut delay_line: Option<DelayLine<Arrived>> = match &args.delays {
        Some(path) => Some(DelayLine::new(delays::read(path)?)),
        None => None,
    };
    let mut sockets = PathSockets::bind(args.host, args.port_base).map_err(|e| e.to_string())?;
    let mut outputs = Outputs {
        records: open_records(args.records.as_deref())?,
        counters: args.counters.clone(),
        progress: args.progress.as_deref().map(create).transpose()?,
    };

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).map_err(|e| e.to_string())?;
    }
    let mut poller = Poller::new(PATHS + 1).map_err(|e| format!("epoll: {e}"))?;
    for (path, socket) in sockets.sockets.iter().enumerate() {
        poller.add(socket.as_raw_fd(), path as u64).map_err(|e| format!("epoll: {e}"))?;
    }
    // Flags of stdin, made non-blocking, come back when `_stdin_flags` is dropped (at return).
    let (mut input, _stdin_flags) = match args.schedule_stdin {
        true => {
            let (input, flags) = open_stdin(&poller, io::stdin().as_fd(), &mut schedule)?;
            (Some(input), flags)
        }
        false => (None, None),
    };

    let deadline = args.duration.map(|s| Instant::now() + Duration::from_secs_f64(s));
    let linger = Duration::from_secs_f64(args.linger);
    let mut receiver = Receiver::new();
    // What the endpoint wants sent, gathered for one batched send, then its payloads recycled.
    let mut outgoing: Vec<Transmit> = Vec::new();
    let mut lateness = Lateness::default();
    let mut shell = ShellCounters::default();
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let progress_every = Duration::from_secs_f64(args.progress_every_ms / 1e3);
    let mut progress_due = outputs.progress.is_some().then(Instant::now);
    let mut counters_due = Instant::now();
    let mut done_since: Option<Instant> = None;
    let mut armed: Option<Instant> = None;

    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        while let Some(spec) = schedule.pop_due(clock.epoch(), now) {
            endpoint.start_flow(now, spec);
        }
        if let Some(line) = &mut delay_line {
            while let Some(arrived) = line.pop_due(now) {
                let Arrived { src, path_id, ecn, payload } = arrived;
                // At the loop's `now`, not later: the timeouts handled below take the same `now`,
                // and the endpoint's clock must not go backwards.
                endpoint.handle_packet(now, Incoming { src, path_id, ecn, payload: &payload });
                if spare.len() < SPARE_BUFFERS {
                    spare.push(payload);
                }
            }
        }
        if let Some(due) = endpoint.poll_timeout().filter(|&due| due <= now) {
            if armed.is_some_and(|a| a == due) {
                lateness.record(now - due);
            }
            endpoint.handle_timeout(now);
        }
        outgoing.extend(std::iter::from_fn(|| endpoint.poll_transmit()));
        if !outgoing.is_empty() {
            shell.send_errors += sockets.send(&outgoing);
            for transmit in outgoing.drain(..) {
                endpoint.recycle(transmit.payload);
            }
        }
        while let Some(record) = endpoint.poll_record() {
            outputs.write_record(&record, &clock).map_err(|e| format!("writing a flow record: {e}"))?;
        }
        while let Some(finish) = endpoint.poll_inbound_finish() {
            outputs.write_inbound_finish(&finish, &clock).map_err(|e| format!("progress: {e}"))?;
        }
        if let Some(due) = progress_due.filter(|&due| now >= due) {
            outputs.write_progress(&endpoint, &clock, now).map_err(|e| format!("progress: {e}"))?;
            // On the period's grid; a late wake-up skips the lines it missed.
            let next = due + progress_every;
            progress_due = Some(if next > now { next } else { now + progress_every });
        }
        if now >= counters_due {
            shell.delay_line_max = delay_line.as_ref().map_or(0, DelayLine::max_len);
            outputs.write_counters(&endpoint, &lateness, &shell).map_err(|e| format!("counters: {e}"))?;
            outputs.flush_progress().map_err(|e| format!("progress: {e}"))?;
            counters_due = now + COUNTERS_EVERY;
        }
        let more_may_come = input.as_ref().is_some_and(ScheduleInput::is_open);
        let own_flows_done = schedule.is_empty() && endpoint.active_flows() == 0 && !more_may_come;
        done_since = if own_flows_done { done_since.or(Some(now)) } else { None };
        if deadline.is_some_and(|d| now >= d) || (args.exit_when_done && done_since.is_some_and(|t| now - t >= linger))
        {
            break;
        }

        let mut wake = counters_due;
        let next_release = delay_line.as_ref().and_then(DelayLine::next_due);
        let next_flow = schedule.next_start().map(|start| clock.epoch() + start);
        for next in [endpoint.poll_timeout(), next_flow, deadline, next_release, progress_due] {
            wake = next.map_or(wake, |n| wake.min(n));
        }
        if let Some(t) = done_since.filter(|_| args.exit_when_done) {
            wake = wake.min(t + linger);
        }
        if wake <= Instant::now() {
            continue;
        }
        armed = Some(wake);
        poller.wait(&clock, wake).map_err(|e| format!("epoll: {e}"))?;
        for token in poller.tokens() {
            if token == STDIN {
                if let Some(reader) = input.as_mut().filter(|reader| reader.is_open()) {
                    reader.read_available(&mut schedule)?;
                    if !reader.is_open() {
                        let _ = poller.remove(reader.get_ref().as_raw_fd());
                    }
                }
                continue;
            }
            // One batch per ready socket per wake-up (the poller is level-triggered: what is
            // left makes the next wait return at once, after the timers due have run). A
            // socket error (none is expected of UDP without IP_RECVERR) reads as empty.
            let fd = sockets.sockets[token as usize].as_raw_fd();
            let count = receiver.receive(fd).unwrap_or(0);
            for i in 0..count {
                let (received, payload) = receiver.get(i);
                let Some(src) = host_of(*received.from.ip()) else { continue };
                let (path_id, ecn) = (received.from.port() as u8, received.ecn);
                match &mut delay_line {
                    Some(line) => {
                        let mut copy = spare.pop().unwrap_or_default();
                        copy.clear();
                        copy.extend_from_slice(payload);
                        line.push(Instant::now(), src, path_id, Arrived { src, path_id, ecn, payload: copy });
                        shell.delayed_packets += 1;
                    }
                    None => endpoint.handle_packet(Instant::now(), Incoming { src, path_id, ecn, payload }),
                }
            }
        }
    }
    while let Some(record) = endpoint.poll_record() {
        outputs.write_record(&record, &clock).map_err(|e| format!("writing a flow record: {e}"))?;
    }
    while let Some(finish) = endpoint.poll_inbound_finish() {
        outputs.write_inbound_finish(&finish, &clock).map_err(|e| format!("progress: {e}"))?;
    }
    outputs.flush_progress().map_err(|e| format!("progress: {e}"))?;
    shell.delay_line_max = delay_line.as_ref().map_or(0, DelayLine::max_len);
    outputs.write_counters(&endpoint, &lateness, &shell).map_err(|e| format!("counters: {e}"))?;
    if endpoint.active_flows() > 0 || !schedule.is_empty() {
        eprintln!(
            "cchost h{}: stopped with {} flows unfinished and {} not started",
            args.host,
            endpoint.active_flows(),
            schedule.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use cchost::Scheme;

    use super::*;

    const FLOW_1: &[u8] = b"{\"id\": 1, \"dst\": 2, \"size\": 1000, \"start\": 0}\n";
    const FLOW_2: &[u8] = b"{\"id\": 2, \"dst\": 2, \"size\": 1000, \"start\": 0}";

    /// Waits until `poller` says stdin is readable (a test pipe's writer has written or closed).
    fn wait_readable(poller: &mut Poller) {
        poller.wait(&Clock::new(None), Instant::now() + Duration::from_secs(10)).expect("waits");
        assert!(poller.tokens().any(|token| token == STDIN), "stdin readable");
    }

    #[test]
    fn a_pipe_on_stdin_is_read_as_poll_finds_it_readable_without_blocking_until_its_writer_closes() {
        let (reader, mut writer) = io::pipe().expect("a pipe");
        let mut poller = Poller::new(4).expect("a poller");
        let mut schedule = Schedule::new(Scheme::from_name("expresspass").unwrap());
        writer.write_all(&FLOW_1[..10]).expect("writes");
        let (mut input, flags) = open_stdin(&poller, reader.as_fd(), &mut schedule).expect("opens");
        assert!(flags.is_some(), "registered and non-blocking");
        assert!(schedule.is_empty() && input.is_open(), "a partial line waits");
        writer.write_all(&FLOW_1[10..]).expect("writes");
        writer.write_all(FLOW_2).expect("writes");
        wait_readable(&mut poller);
        input.read_available(&mut schedule).expect("a good line; a partial one waits, without blocking");
        assert!(schedule.len() == 1 && input.is_open());
        drop(writer);
        wait_readable(&mut poller);
        input.read_available(&mut schedule).expect("the last line, at the end");
        assert!(schedule.len() == 2 && !input.is_open(), "closed: no more flows will come");
        drop(flags);
    }

    #[test]
    fn a_regular_file_on_stdin_which_epoll_refuses_is_read_to_its_end_at_once() {
        let path = std::env::temp_dir().join(format!("cchost-stdin-test-{}.flows", std::process::id()));
        fs::write(&path, [FLOW_1, FLOW_2].concat()).expect("temporary file");
        let file = File::open(&path).expect("opens");
        fs::remove_file(&path).expect("removes the temporary file");
        let poller = Poller::new(4).expect("a poller");
        let mut schedule = Schedule::new(Scheme::from_name("expresspass").unwrap());
        let (input, flags) = open_stdin(&poller, file.as_fd(), &mut schedule).expect("opens");
        assert!(flags.is_none() && !input.is_open() && schedule.len() == 2);
    }

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
            (&["--rto-min-ms=-1"], "--rto-min-ms must be > 0 (got -1)"),
            (&["--control-timeout-ms=0"], "--control-timeout-ms must be > 0 (got 0)"),
            (&["--slow-time-unit-us=NaN"], "--slow-time-unit-us must be > 0 (got Some(NaN))"),
            (&["--linger=-0.5"], "--linger must be >= 0 (got -0.5)"),
            (&["--param=dcqcn.timer_us=0"], "--param dcqcn.timer_us=0: dcqcn.timer_us must be microseconds > 0, at most a year (got \"0\")"),
            (&["--param=dcqcn.cnp_interval_us=-50"], "--param dcqcn.cnp_interval_us=-50: dcqcn.cnp_interval_us must be microseconds > 0, at most a year (got \"-50\")"),
            (&["--duration=1e30"], "--duration must be > 0 (got Some(1e30))"),
            (&["--dilation=0.5"], "--dilation must be in [1, 1e6] (got 0.5)"),
            (&["--dilation=NaN"], "--dilation must be in [1, 1e6] (got NaN)"),
            (&["--dilation=inf"], "--dilation must be in [1, 1e6] (got inf)"),
            (&["--dilation=2e6"], "--dilation must be in [1, 1e6] (got 2000000)"),
            (&["--progress-every-ms=0"], "--progress-every-ms must be from 0.1 to a year (got 0)"),
            (&["--progress-every-ms=1e-9"], "--progress-every-ms must be from 0.1 to a year (got 0.000000001)"),
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
        for (flag, message) in [
            ("--param=tcp.timer_us=1", "--param tcp.timer_us=1: unknown scheme \"tcp\" (expresspass, spraypass, dctcp, dctcp+, dcqcn, dcqcn+tcd)"),
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
        assert_eq!(names, ["expresspass", "spraypass", "dctcp", "dctcp+", "dcqcn", "dcqcn+tcd"]);
        let tcd = &schemes[5];
        assert_eq!(
            (&tcd["wire_id"], &tcd["driver"], &tcd["port_profile"], &tcd["credit"]),
            (&json!(6), &json!("sender"), &json!("tcd"), &json!(false))
        );
        assert_eq!(
            tcd["params"][0],
            json!({"name": "timer_us", "default": 55.0, "unit": "us", "dilates": true, "doc": tcd["params"][0]["doc"]})
        );
        assert_eq!(schemes[0]["credit"], json!(true));
        assert_eq!(schemes[3]["params"][0]["default"], json!(null), "DCTCP+'s unit is unset: the base RTT");
        assert!(
            schemes_listing(&Registry::catalogue(), false).contains("  --param dcqcn.timer_us=55 (us, x --dilation): ")
        );
    }
}
