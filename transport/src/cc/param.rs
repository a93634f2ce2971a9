//! A scheme's parameters, as `--param <scheme>.<key>=<value>` sets them and
//! `cchost --schemes --json` lists them: one table per scheme ([`Spec`]s, beside its config
//! in its `cc/` file) that says each one's name, unit, range and meaning and how to read and
//! write it, so that the flag, the listing and the checks cannot drift apart.

use std::time::Duration;

/// A year in microseconds: the longest time a parameter may be (Durations are built from them,
/// and `--dilation` multiplies them by up to 1e6).
const YEAR_US: f64 = 365.0 * 24.0 * 3600.0 * 1e6;

/// What values a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// In (0, 1].
    Fraction,
    /// In [0, 1].
    UnitInterval,
    /// Finite and > 0.
    Positive,
    /// A whole number from this to 2^32 - 1.
    Count(u32),
    /// A time of the datacenter, microseconds, > 0 and at most a year: multiplied by
    /// `--dilation` (the scheme's `dilate` stretches it, with every other time).
    Micros,
}

/// A range as bounds, the one description both cchost's check and the listing (`cchost
/// --schemes --json`, which ccemu's validation reads) use: a value is admitted when it is
/// finite, above `above` (if any), at least `at_least` (if any), at most `at_most`, and whole
/// where `whole` says so.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    pub above: Option<f64>,
    pub at_least: Option<f64>,
    pub at_most: f64,
    pub whole: bool,
}

impl Bounds {
    pub fn admits(self, value: f64) -> bool {
        value.is_finite()
            && self.above.is_none_or(|above| value > above)
            && self.at_least.is_none_or(|least| value >= least)
            && value <= self.at_most
            && (!self.whole || value.fract() == 0.0)
    }
}

impl Range {
    pub fn bounds(self) -> Bounds {
        let (above, at_least, at_most, whole) = match self {
            Range::Fraction => (Some(0.0), None, 1.0, false),
            Range::UnitInterval => (None, Some(0.0), 1.0, false),
            Range::Positive => (Some(0.0), None, f64::MAX, false),
            Range::Count(least) => (None, Some(f64::from(least)), f64::from(u32::MAX), true),
            Range::Micros => (Some(0.0), None, YEAR_US, false),
        };
        Bounds { above, at_least, at_most, whole }
    }

    fn admits(self, value: f64) -> bool {
        self.bounds().admits(value)
    }

    /// What `admits` asks, for an error message.
    pub fn says(self) -> String {
        match self {
            Range::Fraction => "in (0, 1]".into(),
            Range::UnitInterval => "in [0, 1]".into(),
            Range::Positive => "a finite number > 0".into(),
            Range::Count(least) => format!("a whole number from {least} to {}", u32::MAX),
            Range::Micros => "microseconds > 0, at most a year".into(),
        }
    }
}

/// One row of a scheme's parameter table, for its config type `C`.
pub struct Spec<C> {
    pub name: &'static str,
    /// What a value counts: "us" for every [`Range::Micros`], else "fraction", "segments", ...
    pub unit: &'static str,
    pub range: Range,
    pub doc: &'static str,
    /// The value in `unit`; `None`: unset (the doc says what holds then).
    pub get: fn(&C) -> Option<f64>,
    /// Sets it, `value` already checked against `range`.
    pub set: fn(&mut C, f64),
}

/// A scheme config's parameters, one [`Spec`] each, in the order `cchost --schemes` lists them:
/// the scheme's `params` and `set_param` come from it (`cc::Parameters`).
pub trait Table: Sized + 'static {
    const PARAMS: &'static [Spec<Self>];
}

/// A parameter as a scheme describes it (`Parameters::params`).
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: &'static str,
    /// Its value before any `--param` (for a time, before `--dilation`); `None`: unset.
    pub default: Option<f64>,
    pub unit: &'static str,
    /// A time of the datacenter: multiplied by `--dilation`.
    pub dilates: bool,
    pub doc: &'static str,
    pub range: Range,
}

/// The parameters of `config`, as its `table` describes them.
pub fn describe<C>(config: &C, table: &[Spec<C>]) -> Vec<Param> {
    table
        .iter()
        .map(|spec| Param {
            name: spec.name,
            default: (spec.get)(config),
            unit: spec.unit,
            dilates: spec.range == Range::Micros,
            doc: spec.doc,
            range: spec.range,
        })
        .collect()
}

/// Sets parameter `key` of `config` (of the scheme called `scheme`) from `value`; the error
/// names what was wrong in one line.
pub fn set<C>(config: &mut C, table: &[Spec<C>], scheme: &str, key: &str, value: &str) -> Result<(), String> {
    let Some(spec) = table.iter().find(|spec| spec.name == key) else {
        return Err(unknown(scheme, key, table.iter().map(|spec| spec.name)));
    };
    match value.trim().parse::<f64>() {
        Ok(number) if spec.range.admits(number) => {
            (spec.set)(config, number);
            Ok(())
        }
        _ => Err(format!("{scheme}.{key} must be {} (got {value:?})", spec.range.says())),
    }
}

/// The error for a `key` that `scheme` does not have, listing the `names` it has.
pub fn unknown<'a>(scheme: &str, key: &str, names: impl Iterator<Item = &'a str>) -> String {
    format!("{scheme} has no parameter {key:?} (its parameters: {})", names.collect::<Vec<_>>().join(", "))
}

/// A time parameter's value: `time` in microseconds.
pub fn micros(time: Duration) -> f64 {
    time.as_secs_f64() * 1e6
}

/// The time of `us` microseconds (checked by [`Range::Micros`]).
pub fn from_micros(us: f64) -> Duration {
    Duration::from_secs_f64(us / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct Toy {
        share: f64,
        packets: u32,
        wait: Option<Duration>,
    }

    const TABLE: &[Spec<Toy>] = &[
        Spec {
            name: "share",
            unit: "fraction",
            range: Range::Fraction,
            doc: "a share",
            get: |c| Some(c.share),
            set: |c, v| c.share = v,
        },
        Spec {
            name: "packets",
            unit: "packets",
            range: Range::Count(1),
            doc: "a count",
            get: |c| Some(c.packets.into()),
            set: |c, v| c.packets = v as u32,
        },
        Spec {
            name: "wait_us",
            unit: "us",
            range: Range::Micros,
            doc: "a time",
            get: |c| c.wait.map(micros),
            set: |c, v| c.wait = Some(from_micros(v)),
        },
    ];

    #[test]
    fn a_value_in_range_is_set_and_described_back() {
        let mut toy = Toy::default();
        for (key, value) in [("share", "0.25"), ("packets", "7"), ("wait_us", "55")] {
            set(&mut toy, TABLE, "toy", key, value).expect(key);
        }
        assert_eq!((toy.share, toy.packets, toy.wait), (0.25, 7, Some(Duration::from_micros(55))));
        let params = describe(&toy, TABLE);
        assert_eq!(params.iter().map(|p| p.default).collect::<Vec<_>>(), [Some(0.25), Some(7.0), Some(55.0)]);
        assert_eq!(params.iter().map(|p| p.dilates).collect::<Vec<_>>(), [false, false, true]);
    }

    #[test]
    fn an_unknown_key_or_a_value_out_of_range_is_refused_in_one_line_naming_it() {
        let mut toy = Toy::default();
        for (key, value, message) in [
            ("size", "1", "toy has no parameter \"size\" (its parameters: share, packets, wait_us)"),
            ("share", "0", "toy.share must be in (0, 1] (got \"0\")"),
            ("share", "half", "toy.share must be in (0, 1] (got \"half\")"),
            ("packets", "2.5", "toy.packets must be a whole number from 1 to 4294967295 (got \"2.5\")"),
            ("packets", "0", "toy.packets must be a whole number from 1 to 4294967295 (got \"0\")"),
            ("wait_us", "NaN", "toy.wait_us must be microseconds > 0, at most a year (got \"NaN\")"),
            ("wait_us", "1e30", "toy.wait_us must be microseconds > 0, at most a year (got \"1e30\")"),
        ] {
            assert_eq!(set(&mut toy, TABLE, "toy", key, value), Err(message.to_string()));
        }
        assert_eq!((toy.share, toy.packets, toy.wait), (0.0, 0, None), "nothing was set");
    }
}
