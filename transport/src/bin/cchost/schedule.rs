//! The flows a host sends: JSON lines, one flow a line, ordered by start or not.
//!
//! ```text
//! {"id": 1, "dst": 2, "size": 1000000, "start": 0.5}
//! {"id": 2, "dst": 7, "size": 64000, "start": 0.75, "scheme": "dctcp", "path_id": 3}
//! {"id": 3, "dst": 9, "size": 64000, "start": 0.8, "scheme": "spraypass", "paths": 4}
//! ```
//! `dst` is a host number (h7 is 7), `size` bytes, `start` seconds after the experiment's
//! epoch; `scheme` defaults to the host's `--scheme`, `path_id` to a hash of the flow id;
//! `paths` (1..=256) is the number of equal-cost paths to `dst`, which spraying schemes
//! spread credits over (default 256: every path-id).

use std::fs;
use std::path::Path;
use std::time::Duration;

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

/// The flows of `path`, latest first (the caller pops the next one off the end).
pub fn read(path: &Path, default_scheme: Scheme) -> Result<Vec<ScheduledFlow>, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut flows = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for (number, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = || format!("{} line {}", path.display(), number + 1);
        let line: Line = serde_json::from_str(line).map_err(|e| format!("{}: {e}", at()))?;
        if !(line.start.is_finite() && (0.0..=MAX_START_S).contains(&line.start)) {
            return Err(format!("{}: start must be seconds from 0 to {MAX_START_S} (got {})", at(), line.start));
        }
        if line.dst == 0 {
            return Err(format!("{}: dst must be a host number >= 1", at()));
        }
        if line.paths.is_some_and(|n| !(1..=256).contains(&n)) {
            return Err(format!("{}: paths must be 1..=256 (got {})", at(), line.paths.unwrap_or_default()));
        }
        if !ids.insert(line.id) {
            return Err(format!("{}: flow id {} appears twice", at(), line.id));
        }
        let scheme = match line.scheme.as_deref() {
            Some(name) => parse_scheme(name).map_err(|e| format!("{}: {e}", at()))?,
            None => default_scheme,
        };
        flows.push(ScheduledFlow {
            start: Duration::from_secs_f64(line.start),
            spec: FlowSpec {
                id: line.id,
                dst: line.dst,
                size_bytes: line.size,
                scheme,
                path_id: line.path_id,
                paths: line.paths,
            },
        });
    }
    flows.sort_by(|a, b| b.start.cmp(&a.start).then(b.spec.id.cmp(&a.spec.id)));
    Ok(flows)
}
