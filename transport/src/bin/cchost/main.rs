//! `cchost`: one per emulated host, sender and receiver of every flow of the host. The shell
//! around the sans-IO [`cchost::Endpoint`]: UDP sockets (one per path-id), read and written in
//! batches (recvmmsg, sendmmsg), an epoll wait that ends at the endpoint's next deadline (with
//! 1 ns timer slack, for credit pacing), the flow schedule in, flow records and counters out. With `--delays`, arriving packets wait out their path's
//! propagation delay in a [`DelayLine`] before the endpoint sees them (the emulator's kernel
//! has no netem); with `--progress`, the bytes of the flows it receives are written as they
//! grow (throughput timelines); with `--trace`, the credit schemes' feedback steps and the
//! senders' credits per RTT (how a flow converged). With `--schedule-stdin`, more flows come on
//! standard input while it runs (one cchost per host for a whole block of rounds).
//!
//! ```text
//! cchost --host 1 --link-mbps 100 --schedule h1.flows --records h1.records --exit-when-done
//! cchost --schemes --json      # the schemes, their wire ids, port profiles and parameters
//! ```

mod args;
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

use cchost::wire::frame_wire_bytes;
use cchost::{Counters, DelayLine, Ecn, Endpoint, FlowRecord, HostId, InboundFinish, Incoming, Trace, Transmit};
use clap::Parser;
use serde_json::json;

use crate::args::{endpoint_config, invalid, print_schemes, Args, ListSchemes};
use crate::clock::{Clock, Lateness};
use crate::poller::Poller;
use crate::schedule::{Schedule, ScheduleInput};
use crate::sockets::{host_of, PathSockets, Receiver, PATHS};

/// The poller's tokens: a socket's is its path-id (0..PATHS), stdin's the next.
const STDIN: u64 = PATHS as u64;
/// Counters are rewritten (when they changed), and progress and trace lines flushed, this often.
const COUNTERS_EVERY: Duration = Duration::from_millis(100);
/// Receive buffers kept for reuse by the delay line (a burst beyond it allocates).
const SPARE_BUFFERS: usize = 4096;

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
            say(&format!("cchost h{}: {message}", args.host));
            ExitCode::FAILURE
        }
    }
}

/// One line on stderr, or nothing when stderr cannot take it: its log may be on the disk that just
/// filled up (eprintln! would panic, and the exit status would say "panicked" instead of failed).
fn say(line: &str) {
    let _ = writeln!(io::stderr(), "{line}");
}

struct Outputs {
    records: Box<dyn Write>,
    counters: Option<PathBuf>,
    /// What the counters file last said: an unchanged file is not rewritten (an idle host's
    /// rewrite every 100 ms was most of its CPU: 256 of them creating and renaming files in one
    /// directory took 51-66 % of this machine's 2 CPUs, 3.7 % without).
    counters_written: Option<(Counters, usize, u64, u64, ShellCounters)>,
    progress: Option<BufWriter<File>>,
    trace: Option<BufWriter<File>>,
}

/// What the shell counts itself, beside the endpoint's counters.
#[derive(Debug, Default, Clone, PartialEq)]
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

    /// The progress and trace lines written so far.
    fn flush_lines(&mut self) -> io::Result<()> {
        self.progress.as_mut().map_or(Ok(()), Write::flush)?;
        self.trace.as_mut().map_or(Ok(()), Write::flush)
    }

    /// The trace lines the endpoint holds (it holds none without --trace). Rates as fractions
    /// of the scheme's maximum and times in wall microseconds: a reader divides by the
    /// dilation, as for every time cchost writes.
    fn write_trace(&mut self, endpoint: &mut Endpoint, clock: &Clock) -> io::Result<()> {
        let Some(out) = &mut self.trace else { return Ok(()) };
        let host = endpoint.config().host;
        let micros = |d: Duration| d.as_secs_f64() * 1e6;
        while let Some(line) = endpoint.poll_trace() {
            let value = match line {
                Trace::Receiver(r) => {
                    let (f, max) = (r.step, r.step.max_rate);
                    json!({
                        "t": clock.seconds_after_epoch(r.at_us), "role": "receiver", "src": r.src, "dst": host,
                        "id": r.id, "credits_sent": r.credits_sent, "back_to_back": r.back_to_back,
                        "behind": r.behind, "credits": f.credits, "lost": f.lost, "unjudged": f.unjudged,
                        "loss": f.loss, "target_loss": f.target_loss, "rate_before": f.rate_before / max,
                        "rate_after": f.rate_after / max, "w_before": f.w_before, "w_after": f.w_after,
                        "decreased": f.decreased, "rtt_us": micros(f.rtt), "period_us": micros(f.period),
                    })
                }
                Trace::Sender(s) => json!({
                    "t": clock.seconds_after_epoch(s.at_us), "role": "sender", "src": host, "dst": s.dst,
                    "id": s.id, "window_us": micros(s.window), "credits": s.credits, "data": s.data,
                    "retransmits": s.retransmits, "wasted": s.wasted,
                }),
            };
            writeln!(out, "{value}")?;
        }
        Ok(())
    }

    fn write_counters(
        &mut self,
        endpoint: &Endpoint,
        lateness: &Lateness,
        start_lateness: &Lateness,
        shell: &ShellCounters,
    ) -> io::Result<()> {
        let Some(path) = &self.counters else { return Ok(()) };
        let c = endpoint.counters();
        let now = (c.clone(), endpoint.active_flows(), lateness.count(), start_lateness.count(), shell.clone());
        if self.counters_written.as_ref() == Some(&now) {
            return Ok(());
        }
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
            "flows_refused": c.flows_refused, "flows_dropped_idle": c.flows_dropped_idle,
            "send_errors": shell.send_errors, "timer_lateness": lateness.summary(),
            "start_lateness": start_lateness.summary(),
            "delayed_packets": shell.delayed_packets, "delay_line_max": shell.delay_line_max,
        });
        let temporary = path.with_extension("tmp");
        fs::write(&temporary, format!("{value}\n"))?;
        fs::rename(&temporary, path)?;
        self.counters_written = Some(now);
        Ok(())
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

/// This thread (cchost's only one) under SCHED_FIFO at `priority` (args.rs: --realtime-priority).
fn realtime(priority: u8) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: priority as libc::c_int };
    // SAFETY: sched_setscheduler reads `param` and changes only the calling thread's policy.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
    let mut endpoint = Endpoint::new(endpoint_config(args, clock.epoch())?);
    let mut delay_line: Option<DelayLine<Arrived>> = match &args.delays {
        Some(path) => Some(DelayLine::new(delays::read(path)?)),
        None => None,
    };
    if args.check_args {
        return Ok(());
    }
    if args.realtime_priority > 0 {
        realtime(args.realtime_priority).map_err(|e| format!("--realtime-priority {}: {e}", args.realtime_priority))?;
    }
    let mut sockets = PathSockets::bind(args.host, args.port_base).map_err(|e| e.to_string())?;
    let mut outputs = Outputs {
        records: open_records(args.records.as_deref())?,
        counters: args.counters.clone(),
        counters_written: None,
        progress: args.progress.as_deref().map(create).transpose()?,
        trace: args.trace.as_deref().map(create).transpose()?,
    };

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).map_err(|e| e.to_string())?;
    }
    let mut poller = Poller::new(PATHS + 1).map_err(|e| format!("epoll: {e}"))?;
    poller.set_spin(Duration::from_secs_f64(args.spin_us / 1e6));
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
    let mut start_lateness = Lateness::default();
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let progress_every = Duration::from_secs_f64(args.progress_every_ms / 1e3);
    let mut progress_due = outputs.progress.is_some().then(Instant::now);
    let mut counters_due = Instant::now();
    let mut done_since: Option<Instant> = None;
    let mut armed: Option<Instant> = None;

    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        while let Some((spec, due)) = schedule.pop_due(clock.epoch(), now) {
            // A flow that came after its time (on standard input, from a controller that fell
            // behind) or that the loop reached late: the verdict's "started late".
            start_lateness.record(now - due);
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
        outputs.write_trace(&mut endpoint, &clock).map_err(|e| format!("trace: {e}"))?;
        if let Some(due) = progress_due.filter(|&due| now >= due) {
            outputs.write_progress(&endpoint, &clock, now).map_err(|e| format!("progress: {e}"))?;
            // On the period's grid; a late wake-up skips the lines it missed.
            let next = due + progress_every;
            progress_due = Some(if next > now { next } else { now + progress_every });
        }
        if now >= counters_due {
            shell.delay_line_max = delay_line.as_ref().map_or(0, DelayLine::max_len);
            outputs
                .write_counters(&endpoint, &lateness, &start_lateness, &shell)
                .map_err(|e| format!("counters: {e}"))?;
            outputs.flush_lines().map_err(|e| format!("progress, trace: {e}"))?;
            counters_due = now + COUNTERS_EVERY;
        }
        let more_may_come = input.as_ref().is_some_and(ScheduleInput::is_open);
        let own_flows_done = schedule.is_empty() && endpoint.active_flows() == 0 && !more_may_come;
        done_since = if own_flows_done { done_since.or(Some(now)) } else { None };
        if deadline.is_some_and(|d| now >= d) || (args.exit_when_done && done_since.is_some_and(|t| now - t >= linger))
        {
            break;
        }

        // The network's deadlines (the endpoint's timers, a delayed packet's release, a flow's
        // start) are waited for precisely (the poller spins before them); the shell's own
        // (counters, progress, the run's end) are not: an idle host spins for nothing.
        let next_release = delay_line.as_ref().and_then(DelayLine::next_due);
        let next_flow = schedule.next_start().map(|start| clock.epoch() + start);
        let network = [endpoint.poll_timeout(), next_flow, next_release].into_iter().flatten().min();
        let lingered = done_since.filter(|_| args.exit_when_done).map(|t| t + linger);
        let shell_due = [deadline, progress_due, lingered].into_iter().flatten().fold(counters_due, Instant::min);
        let wake = network.map_or(shell_due, |n| n.min(shell_due));
        if wake <= Instant::now() {
            continue;
        }
        armed = Some(wake);
        let precise = network.is_some_and(|n| n <= wake);
        poller.wait(&clock, wake, precise).map_err(|e| format!("epoll: {e}"))?;
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
                        let wire_bytes = frame_wire_bytes(payload.len());
                        line.push(
                            Instant::now(),
                            src,
                            path_id,
                            wire_bytes,
                            Arrived { src, path_id, ecn, payload: copy },
                        );
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
    outputs.write_trace(&mut endpoint, &clock).map_err(|e| format!("trace: {e}"))?;
    outputs.flush_lines().map_err(|e| format!("progress, trace: {e}"))?;
    shell.delay_line_max = delay_line.as_ref().map_or(0, DelayLine::max_len);
    outputs.write_counters(&endpoint, &lateness, &start_lateness, &shell).map_err(|e| format!("counters: {e}"))?;
    if endpoint.active_flows() > 0 || !schedule.is_empty() {
        say(&format!(
            "cchost h{}: stopped with {} flows unfinished and {} not started",
            args.host,
            endpoint.active_flows(),
            schedule.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use cchost::Scheme;

    use super::*;

    #[test]
    fn realtime_puts_the_calling_thread_under_sched_fifo_or_says_why_it_cannot() {
        // On a thread of its own, so that the test harness's threads keep their policy.
        std::thread::spawn(|| {
            // SAFETY: sched_getscheduler reads the calling thread's policy.
            let policy = || unsafe { libc::sched_getscheduler(0) };
            match realtime(1) {
                Ok(()) => assert_eq!(policy(), libc::SCHED_FIFO),
                // Without CAP_SYS_NICE (not root): refused in one line, the policy unchanged.
                Err(e) => assert_eq!((e.raw_os_error(), policy()), (Some(libc::EPERM), libc::SCHED_OTHER)),
            }
        })
        .join()
        .expect("the thread ran");
    }

    const FLOW_1: &[u8] = b"{\"id\": 1, \"dst\": 2, \"size\": 1000, \"start\": 0}\n";
    const FLOW_2: &[u8] = b"{\"id\": 2, \"dst\": 2, \"size\": 1000, \"start\": 0}";

    /// Waits until `poller` says stdin is readable (a test pipe's writer has written or closed).
    fn wait_readable(poller: &mut Poller) {
        poller.wait(&Clock::new(None), Instant::now() + Duration::from_secs(10), false).expect("waits");
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
    fn counters_are_rewritten_only_when_they_changed() {
        let dir = std::env::temp_dir().join(format!("cchost-counters-test-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("a temporary directory");
        let path = dir.join("h1.counters");
        let mut outputs = Outputs {
            records: Box::new(io::sink()),
            counters: Some(path.clone()),
            counters_written: None,
            progress: None,
            trace: None,
        };
        let endpoint = Endpoint::new(cchost::EndpointConfig::new(1, 1e8, Instant::now()));
        let (mut lateness, start_lateness, shell) =
            (Lateness::default(), Lateness::default(), ShellCounters::default());
        outputs.write_counters(&endpoint, &lateness, &start_lateness, &shell).expect("writes");
        assert!(path.exists(), "the first write");
        fs::remove_file(&path).expect("removes it");
        outputs.write_counters(&endpoint, &lateness, &start_lateness, &shell).expect("skips");
        assert!(!path.exists(), "unchanged: not rewritten");
        lateness.record(Duration::from_micros(3));
        outputs.write_counters(&endpoint, &lateness, &start_lateness, &shell).expect("writes");
        assert!(path.exists(), "a timer measured since: rewritten");
        fs::remove_dir_all(&dir).expect("removes the temporary directory");
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
}
