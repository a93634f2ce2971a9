//! The flows a host sends: JSON lines, one flow a line, ordered by start or not, from the
//! `--schedule` file and, with `--schedule-stdin`, from standard input as they come.
//!
//! ```text
//! {"id": 1, "dst": 2, "size": 1000000, "start": 0.5}
//! {"id": 2, "dst": 7, "size": 64000, "start": 0.75, "scheme": "dctcp", "path_id": 3}
//! {"id": 3, "dst": 9, "size": 64000, "start": 0.8, "scheme": "spraypass", "paths": 4}
//! {"id": 4, "dst": 9, "size": 64000, "start": 0.9, "scheme": "dcqcn+tcd"}
//! ```
//! `dst` is a host number (h7 is 7), `size` bytes, `start` seconds after the experiment's
//! epoch; `scheme` defaults to the host's `--scheme`, `path_id` to a hash of the flow id;
//! `paths` (1..=256) is the number of equal-cost paths to `dst`, which spraying schemes
//! spread credits over (default 256: every path-id). An `id` is given to a host once for its
//! whole life, whichever input it comes from.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read};
use std::path::Path;
use std::time::{Duration, Instant};

use cchost::{FlowSpec, Scheme};
use serde::Deserialize;

/// Latest start a schedule may give, seconds (a year).
const MAX_START_S: f64 = 365.0 * 24.0 * 3600.0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    id: u32,
    dst: u32,
    size: u64,
    start: f64,
    scheme: Option<String>,
    path_id: Option<u8>,
    paths: Option<u16>,
}

#[derive(Debug, Clone)]
pub struct ScheduledFlow {
    pub start: Duration,
    pub spec: FlowSpec,
}

pub fn parse_scheme(name: &str) -> Result<Scheme, String> {
    Scheme::from_name(name)
}

/// The flow of one schedule line, checked; errors are one line starting with `at()` (which
/// names the line: "h1.flows line 3", "stdin line 7").
pub fn parse_line(text: &str, at: &dyn Fn() -> String, default_scheme: Scheme) -> Result<ScheduledFlow, String> {
    let line: Line = serde_json::from_str(text).map_err(|e| format!("{}: {e}", at()))?;
    if !(line.start.is_finite() && (0.0..=MAX_START_S).contains(&line.start)) {
        return Err(format!("{}: start must be seconds from 0 to {MAX_START_S} (got {})", at(), line.start));
    }
    if line.dst == 0 {
        return Err(format!("{}: dst must be a host number >= 1", at()));
    }
    if line.paths.is_some_and(|n| !(1..=256).contains(&n)) {
        return Err(format!("{}: paths must be 1..=256 (got {})", at(), line.paths.unwrap_or_default()));
    }
    let scheme = match line.scheme.as_deref() {
        Some(name) => parse_scheme(name).map_err(|e| format!("{}: {e}", at()))?,
        None => default_scheme,
    };
    Ok(ScheduledFlow {
        start: Duration::from_secs_f64(line.start),
        spec: FlowSpec {
            id: line.id,
            dst: line.dst,
            size_bytes: line.size,
            scheme,
            path_id: line.path_id,
            paths: line.paths,
        },
    })
}

/// The flows this host has still to start, and the id of every flow it was ever given.
#[derive(Debug)]
pub struct Schedule {
    /// Latest first (ties: highest id first), so that the next flow to start is the last.
    pending: Vec<ScheduledFlow>,
    ids: HashSet<u32>,
    default_scheme: Scheme,
}

impl Schedule {
    pub fn new(default_scheme: Scheme) -> Self {
        Self { pending: Vec::new(), ids: HashSet::new(), default_scheme }
    }

    /// Adds the flows of the file `path`.
    pub fn read_file(&mut self, path: &Path) -> Result<(), String> {
        let bytes = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut lines = Lines::default();
        let mut all = lines.split(&bytes);
        all.extend(lines.finish());
        self.add_lines(&path.display().to_string(), all)
    }

    /// Adds the flows of `lines` (numbered, of the input called `name`; blank ones are
    /// skipped). The first bad line, or a flow id this host was given before (started, pending
    /// or earlier in `lines`), is refused in one line naming `name line N`.
    pub fn add_lines(&mut self, name: &str, lines: Vec<(usize, Vec<u8>)>) -> Result<(), String> {
        let mut flows = Vec::with_capacity(lines.len());
        for (number, bytes) in lines {
            let at = || format!("{name} line {number}");
            let text = std::str::from_utf8(&bytes).map_err(|e| format!("{}: {e}", at()))?;
            if text.trim().is_empty() {
                continue;
            }
            let flow = parse_line(text, &at, self.default_scheme)?;
            if !self.ids.insert(flow.spec.id) {
                return Err(format!("{}: flow id {} was given to this host before", at(), flow.spec.id));
            }
            flows.push(flow);
        }
        self.insert(flows);
        Ok(())
    }

    /// Files `flows` among the pending ones by start. The sort is stable and finds runs: the
    /// sorted pending list plus a batch costs about a pass and the batch's own sort.
    fn insert(&mut self, flows: Vec<ScheduledFlow>) {
        if flows.is_empty() {
            return;
        }
        self.pending.extend(flows);
        self.pending.sort_by(|a, b| b.start.cmp(&a.start).then(b.spec.id.cmp(&a.spec.id)));
    }

    /// Start of the next flow to start, after the epoch.
    pub fn next_start(&self) -> Option<Duration> {
        self.pending.last().map(|flow| flow.start)
    }

    /// The next flow to start if its time (`epoch` + its start) has come by `now`, and that
    /// time: a flow given after its start time is due at once (and starts late).
    pub fn pop_due(&mut self, epoch: Instant, now: Instant) -> Option<(FlowSpec, Instant)> {
        let at = epoch + self.pending.last()?.start;
        (at <= now).then(|| (self.pending.pop().expect("checked").spec, at))
    }

    /// Flows not started yet.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

/// Bytes arriving in pieces, split into lines: each complete line comes out once, numbered
/// from 1, without its newline; a partial last line waits for the rest or for the end.
#[derive(Debug, Default)]
pub struct Lines {
    partial: Vec<u8>,
    count: usize,
}

impl Lines {
    /// The lines that `bytes` completes.
    pub fn split(&mut self, bytes: &[u8]) -> Vec<(usize, Vec<u8>)> {
        let mut lines = Vec::new();
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.partial.extend_from_slice(&rest[..end]);
            self.count += 1;
            lines.push((self.count, std::mem::take(&mut self.partial)));
            rest = &rest[end + 1..];
        }
        self.partial.extend_from_slice(rest);
        lines
    }

    /// At the end of the input: its last line, if it had no newline.
    pub fn finish(&mut self) -> Option<(usize, Vec<u8>)> {
        if self.partial.is_empty() {
            return None;
        }
        self.count += 1;
        Some((self.count, std::mem::take(&mut self.partial)))
    }
}

/// Schedule lines read from a non-blocking input while cchost runs (`--schedule-stdin`).
#[derive(Debug)]
pub struct ScheduleInput<R> {
    input: R,
    name: String,
    lines: Lines,
    open: bool,
}

impl<R: Read> ScheduleInput<R> {
    /// `name` names the input in errors ("stdin").
    pub fn new(input: R, name: &str) -> Self {
        Self { input, name: name.to_string(), lines: Lines::default(), open: true }
    }

    pub fn get_ref(&self) -> &R {
        &self.input
    }

    /// Until the end of the input: more flows may come.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Reads what the input has (until it would block, or to its end) and adds the flows of
    /// the lines it completes to `schedule`; at the end, a last line without its newline too.
    pub fn read_available(&mut self, schedule: &mut Schedule) -> Result<(), String> {
        let mut buffer = [0u8; 16384];
        let mut lines = Vec::new();
        while self.open {
            match self.input.read(&mut buffer) {
                Ok(0) => {
                    self.open = false;
                    lines.extend(self.lines.finish());
                }
                Ok(n) => lines.extend(self.lines.split(&buffer[..n])),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("{}: {e}", self.name)),
            }
        }
        schedule.add_lines(&self.name, lines)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    fn line(id: u32, start: f64) -> String {
        format!("{{\"id\": {id}, \"dst\": 2, \"size\": 1000, \"start\": {start}}}\n")
    }

    fn numbered(lines: &[(usize, &str)]) -> Vec<(usize, Vec<u8>)> {
        lines.iter().map(|&(n, text)| (n, text.as_bytes().to_vec())).collect()
    }

    /// A non-blocking pipe: each read hands out the next piece; `None` is "would block" (the
    /// writer has not written yet); once the pieces are out, the writer has closed it.
    struct Pipe(VecDeque<Option<Vec<u8>>>);

    impl Pipe {
        fn new(pieces: &[Option<&str>]) -> Self {
            Self(pieces.iter().map(|p| p.map(|p| p.as_bytes().to_vec())).collect())
        }
    }

    impl Read for Pipe {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            match self.0.pop_front() {
                None => Ok(0),
                Some(None) => Err(io::ErrorKind::WouldBlock.into()),
                Some(Some(piece)) => {
                    buffer[..piece.len()].copy_from_slice(&piece);
                    Ok(piece.len())
                }
            }
        }
    }

    /// Every pending flow's id, in the order they start.
    fn start_order(schedule: &mut Schedule) -> Vec<u32> {
        let (epoch, later) = (Instant::now(), Instant::now() + Duration::from_secs(MAX_START_S as u64));
        std::iter::from_fn(|| schedule.pop_due(epoch, later)).map(|(spec, _)| spec.id).collect()
    }

    #[test]
    fn a_line_split_across_reads_comes_out_once_whole_with_its_number() {
        let mut lines = Lines::default();
        assert_eq!(lines.split(b"{\"id\""), numbered(&[]));
        assert_eq!(lines.split(b": 1}"), numbered(&[]));
        assert_eq!(
            lines.split(b"\n\n  \n{\"id\": 2}\n{\"id\""),
            numbered(&[(1, "{\"id\": 1}"), (2, ""), (3, "  "), (4, "{\"id\": 2}")])
        );
        assert_eq!(lines.split(b""), numbered(&[]));
        assert_eq!(lines.split(b": 3}\n"), numbered(&[(5, "{\"id\": 3}")]));
        assert_eq!(lines.finish(), None, "nothing after the last newline");
        assert_eq!(lines.split(b"{\"id\": 4}"), numbered(&[]));
        assert_eq!(lines.finish(), Some((6, b"{\"id\": 4}".to_vec())), "a last line without its newline");
    }

    #[test]
    fn flows_read_from_stdin_are_added_as_their_lines_complete_until_its_end() {
        let (first, second, third) = (line(1, 0.5), line(2, 0.25), line(3, 0.75));
        let (head, tail) = first.split_at(10);
        let rest = format!("{tail}\n{second}");
        let last = third.trim_end();
        let mut input = ScheduleInput::new(Pipe::new(&[Some(head), None, Some(&rest), None, Some(last)]), "stdin");
        let mut schedule = Schedule::new(Scheme::from_name("expresspass").unwrap());
        input.read_available(&mut schedule).expect("a partial line");
        assert!(schedule.is_empty() && input.is_open());
        input.read_available(&mut schedule).expect("two lines and a blank one");
        assert!(schedule.len() == 2 && input.is_open());
        input.read_available(&mut schedule).expect("the last line, at the end");
        assert!(schedule.len() == 3 && !input.is_open());
        assert_eq!(start_order(&mut schedule), [2, 1, 3]);
        input.read_available(&mut schedule).expect("nothing more once closed");
    }

    #[test]
    fn a_bad_stdin_line_is_refused_in_one_line_naming_stdin_and_its_line_number() {
        let good = line(1, 0.5);
        for (bad, says) in [
            ("{\"id\": 2, \"dst\": 2, \"size\": 10, \"start\": -1}", "start must be seconds from 0"),
            ("{\"id\": 2, \"dst\": 0, \"size\": 10, \"start\": 1}", "dst must be a host number >= 1"),
            ("{\"id\": 2, \"dst\": 2, \"size\": 10, \"start\": 1, \"paths\": 0}", "paths must be 1..=256 (got 0)"),
            ("{\"id\": 2, \"dst\": 2, \"size\": 10, \"start\": 1, \"scheme\": \"tcp\"}", "tcp"),
            ("{\"id\": 2, \"dst\": 2, \"size\": 10}", "missing field `start`"),
            ("{\"id\": 2, \"dst\": 2, \"size\": 10, \"start\": 1, \"rate\": 5}", "unknown field `rate`"),
            ("{\"id\": 2, \"dst\": 2, \"size\"", "EOF while parsing"),
            ("\u{fffd}\u{fffd}", "expected value"),
            ("{\"id\": 1, \"dst\": 3, \"size\": 10, \"start\": 1}", "flow id 1 was given to this host before"),
        ] {
            // Blank lines count: the bad one is line 4, whichever read brought its newline.
            let (head, tail) = bad.split_at(bad.len() / 2);
            let second = format!("{tail}\n");
            let pieces = [Some("\n"), Some(&good[..]), None, Some("\n"), Some(head), Some(&second[..])];
            let mut input = ScheduleInput::new(Pipe::new(&pieces), "stdin");
            let mut schedule = Schedule::new(Scheme::from_name("expresspass").unwrap());
            input.read_available(&mut schedule).expect("good so far");
            let message = input.read_available(&mut schedule).expect_err(bad);
            assert!(message.starts_with("stdin line 4: "), "{bad}: {message}");
            assert!(message.contains(says), "{bad}: {message}");
            assert!(!message.contains('\n'), "{bad}: {message}");
        }
        let mut schedule = Schedule::new(Scheme::from_name("expresspass").unwrap());
        let message = schedule.add_lines("stdin", vec![(2, vec![0xff, b'\n'])]).expect_err("not UTF-8");
        assert!(message.starts_with("stdin line 2: invalid utf-8"), "{message}");
    }

    #[test]
    fn a_flow_id_given_before_is_refused_whether_its_flow_started_or_is_pending() {
        let mut schedule = Schedule::new(Scheme::from_name("dctcp").unwrap());
        let file = format!("{}{}", line(1, 0.0), line(2, 100.0));
        schedule
            .add_lines("h1.flows", numbered(&file.lines().enumerate().map(|(n, l)| (n + 1, l)).collect::<Vec<_>>()))
            .expect("two flows");
        let now = Instant::now();
        assert_eq!(
            schedule.pop_due(now, now).map(|(spec, _)| (spec.id, spec.scheme)),
            Some((1, Scheme::from_name("dctcp").unwrap()))
        );
        for id in [1, 2] {
            let again = line(id, 5.0);
            assert_eq!(
                schedule.add_lines("stdin", numbered(&[(7, again.trim_end())])),
                Err(format!("stdin line 7: flow id {id} was given to this host before"))
            );
        }
        let twice = format!("{}{}", line(3, 1.0), line(3, 2.0));
        let lines: Vec<_> = twice.lines().enumerate().map(|(n, l)| (n + 1, l)).collect();
        assert_eq!(
            schedule.add_lines("stdin", numbered(&lines)),
            Err("stdin line 2: flow id 3 was given to this host before".into())
        );
    }

    #[test]
    fn pending_flows_start_earliest_first_whatever_order_they_arrive_in() {
        let mut schedule = Schedule::new(Scheme::from_name("expresspass").unwrap());
        let batches: [&[(u32, f64)]; 4] = [
            &[(10, 3.0), (11, 1.0), (12, 2.0)],
            &[],
            &[(20, 0.5), (21, 2.5), (22, 2.0)],
            &[(30, 9.0), (9, 1.0), (31, 0.0)],
        ];
        for (number, batch) in batches.iter().enumerate() {
            let text: String = batch.iter().map(|&(id, start)| line(id, start)).collect();
            let mut lines = Lines::default();
            schedule.add_lines(&format!("batch {number}"), lines.split(text.as_bytes())).expect("good lines");
        }
        assert_eq!(schedule.next_start(), Some(Duration::ZERO));
        // Equal starts: lowest id first (12 and 22 at 2 s, 9 and 11 at 1 s).
        assert_eq!(start_order(&mut schedule), [31, 20, 9, 11, 12, 22, 21, 10, 30]);
        assert_eq!(schedule.next_start(), None);
    }

    #[test]
    fn a_flow_whose_start_has_passed_is_due_at_once_with_its_own_time_and_a_later_one_waits_for_its_time() {
        let mut schedule = Schedule::new(Scheme::from_name("expresspass").unwrap());
        let now = Instant::now();
        let epoch = now - Duration::from_secs(10);
        let text = format!("{}{}", line(1, 20.0), line(2, 5.0));
        schedule.add_lines("stdin", Lines::default().split(text.as_bytes())).expect("good lines");
        // Due 5 s after the epoch: the 5 s it is late are what cchost counts as start lateness.
        assert_eq!(
            schedule.pop_due(epoch, now).map(|(spec, due)| (spec.id, due)),
            Some((2, epoch + Duration::from_secs(5)))
        );
        assert_eq!(schedule.pop_due(epoch, now).map(|(spec, _)| spec.id), None);
        assert_eq!(schedule.next_start(), Some(Duration::from_secs(20)));
        assert_eq!(schedule.pop_due(epoch, epoch + Duration::from_secs(20)).map(|(spec, _)| spec.id), Some(1));
        assert!(schedule.is_empty());
    }

    #[test]
    fn a_schedule_file_is_read_whole_and_its_bad_line_is_named_by_file_and_number() {
        let path = std::env::temp_dir().join(format!("cchost-schedule-test-{}.flows", std::process::id()));
        let text = format!("{}\n{}", line(1, 1.0), line(2, 0.5).trim_end());
        fs::write(&path, &text).expect("temporary file");
        let mut schedule = Schedule::new(Scheme::from_name("expresspass").unwrap());
        schedule.read_file(&path).expect("good file");
        assert_eq!(start_order(&mut schedule), [2, 1]);
        fs::write(&path, format!("{text}\n{{\"id\": 3}}\n")).expect("temporary file");
        let message = Schedule::new(Scheme::from_name("expresspass").unwrap()).read_file(&path).expect_err("bad line");
        fs::remove_file(&path).expect("removes the temporary file");
        assert!(message.starts_with(&format!("{} line 4: missing field", path.display())), "{message}");
    }
}
