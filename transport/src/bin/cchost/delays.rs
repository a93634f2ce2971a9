//! The one-way delays of the paths into this host (`--delays`): JSON lines, one entry a line,
//! wall time (the emulation's, already dilated).
//!
//! ```text
//! {"src": 3, "delay_us": 1250.5, "link_ns_per_byte": [0.8, 2.4, 2.4, 0.8]}
//! {"src": 3, "path_id": 5, "delay_us": 900}
//! ```
//! The first line delays every packet from h3 by 1250.5 us plus its serialization at the four
//! links of the path, 0.8, 2.4, 2.4 and 0.8 ns per byte it has on the wire, store-and-forward
//! ([`cchost::OneWay`] says why); the second only h3's packets with path-id 5 (the low 8 bits of
//! their UDP source port), by 900 us (no serialization: the key is optional). Packets from a host without a line are not delayed.
//! A path's own line wins over its source's, whatever their order.

use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::time::Duration;

use cchost::{OneWay, PathDelays};
use serde::Deserialize;
use serde_json::Value;

/// Longest delay a line may give, microseconds (a year).
const MAX_DELAY_US: f64 = 365.0 * 24.0 * 3600.0 * 1e6;
/// Slowest serialization a line may give, nanoseconds per byte (a second: 8 bit/s links), and the
/// most links.
const MAX_NS_PER_BYTE: f64 = 1e9;
const MAX_LINKS: usize = 64;

/// A line's fields as JSON values: serde names an unknown, missing or repeated key; the
/// checks below name a field whose value is wrong (serde's own type errors would not).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    src: Value,
    path_id: Option<Value>,
    delay_us: Value,
    link_ns_per_byte: Option<Value>,
}

pub fn read(path: &Path) -> Result<PathDelays, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, &path.display().to_string())
}

/// The delays of `text`, whose errors name it `name`.
pub fn parse(text: &str, name: &str) -> Result<PathDelays, String> {
    let mut delays = PathDelays::default();
    let mut seen = HashSet::new();
    for (number, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = || format!("{name} line {}", number + 1);
        let line: Line = serde_json::from_str(line).map_err(|e| format!("{}: {e}", at()))?;
        let src = line.src.as_u64().filter(|&s| s >= 1).and_then(|s| u32::try_from(s).ok());
        let Some(src) = src else {
            return Err(format!("{}: src must be a host number >= 1 (got {})", at(), line.src));
        };
        let path_id = match &line.path_id {
            None => None,
            Some(value) => match value.as_u64().and_then(|p| u8::try_from(p).ok()) {
                Some(p) => Some(p),
                None => return Err(format!("{}: path_id must be 0..=255 (got {value})", at())),
            },
        };
        let delay_us = line.delay_us.as_f64().filter(|us| us.is_finite() && (0.0..=MAX_DELAY_US).contains(us));
        let Some(delay_us) = delay_us else {
            return Err(format!(
                "{}: delay_us must be microseconds from 0 to {MAX_DELAY_US} (got {})",
                at(),
                line.delay_us
            ));
        };
        let links = match &line.link_ns_per_byte {
            None => Vec::new(),
            Some(value) => {
                let ns: Option<Vec<f64>> =
                    value.as_array().filter(|links| links.len() <= MAX_LINKS).and_then(|links| {
                        links
                            .iter()
                            .map(|link| {
                                link.as_f64().filter(|ns| ns.is_finite() && (0.0..=MAX_NS_PER_BYTE).contains(ns))
                            })
                            .collect()
                    });
                let Some(ns) = ns else {
                    return Err(format!(
                        "{}: link_ns_per_byte must be a list of at most {MAX_LINKS} links' nanoseconds per byte, each \
                         from 0 to {MAX_NS_PER_BYTE} (got {value})",
                        at()
                    ));
                };
                ns.iter().map(|ns| (ns * 1e3).round() as u64).collect()
            }
        };
        if !seen.insert((src, path_id)) {
            let path = path_id.map(|p| format!(" path_id {p}")).unwrap_or_default();
            return Err(format!("{}: src {src}{path} appears twice", at()));
        }
        let delay = OneWay { fixed: Duration::from_secs_f64(delay_us / 1e6), links_ps_per_byte: links };
        match path_id {
            Some(path_id) => delays.set_path(src, path_id, delay),
            None => delays.set_source(src, delay),
        };
    }
    Ok(delays)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_line_wins_over_its_sources_line_and_other_sources_are_not_delayed() {
        let text = "{\"src\": 3, \"path_id\": 5, \"delay_us\": 900}\n\n\
                    {\"src\": 3, \"delay_us\": 1250.5, \"link_ns_per_byte\": [800.5, 2400]}\n";
        let delays = parse(text, "h2.delays").expect("parses");
        assert_eq!(delays.delay(3, 5), &OneWay::fixed(Duration::from_micros(900)));
        let path = OneWay { fixed: Duration::from_nanos(1_250_500), links_ps_per_byte: vec![800_500, 2_400_000] };
        assert_eq!(delays.delay(3, 6), &path);
        assert_eq!(delays.delay(4, 5), &OneWay::default());
        assert_eq!(parse("", "empty"), Ok(PathDelays::default()));
    }

    #[test]
    fn every_bad_line_is_refused_in_one_line_naming_the_file_the_line_and_the_field() {
        let good = "{\"src\": 1, \"delay_us\": 10}\n";
        for (bad, says) in [
            ("{\"src\": 3, \"delay_us\": -1}", "delay_us must be microseconds from 0"),
            ("{\"src\": 3, \"delay_us\": 4e13}", "delay_us must be microseconds from 0"),
            ("{\"src\": 3, \"delay_us\": \"5\"}", "delay_us must be microseconds from 0"),
            ("{\"src\": 3, \"delay_us\": 1e999}", "number out of range"),
            ("{\"src\": 3, \"delay_us\": NaN}", "expected value"),
            ("{\"src\": 3, \"delay\": 5}", "unknown field `delay`"),
            ("{\"src\": 3}", "missing field `delay_us`"),
            ("{\"src\": 3, \"src\": 4, \"delay_us\": 5}", "duplicate field `src`"),
            ("{\"src\": 0, \"delay_us\": 5}", "src must be a host number >= 1 (got 0)"),
            ("{\"src\": 2.5, \"delay_us\": 5}", "src must be a host number >= 1 (got 2.5)"),
            ("{\"src\": 3, \"path_id\": 256, \"delay_us\": 5}", "path_id must be 0..=255 (got 256)"),
            ("{\"src\": 1, \"delay_us\": 5}", "src 1 appears twice"),
            ("{\"src\": 3, \"delay_us\": 5, \"link_ns_per_byte\": [0.8, -1]}", "link_ns_per_byte must be a list"),
            ("{\"src\": 3, \"delay_us\": 5, \"link_ns_per_byte\": [2e9]}", "link_ns_per_byte must be a list"),
            ("{\"src\": 3, \"delay_us\": 5, \"link_ns_per_byte\": 0.8}", "link_ns_per_byte must be a list"),
        ] {
            let message = parse(&format!("{good}{bad}\n"), "h2.delays").expect_err(bad);
            assert!(message.starts_with("h2.delays line 2: "), "{bad}: {message}");
            assert!(message.contains(says), "{bad}: {message}");
            assert!(!message.contains('\n'), "{bad}: {message}");
        }
        let twice = "{\"src\": 1, \"path_id\": 2, \"delay_us\": 5}\n{\"src\": 1, \"path_id\": 2, \"delay_us\": 6}";
        assert_eq!(parse(twice, "f").unwrap_err(), "f line 2: src 1 path_id 2 appears twice");
    }
}
