//! The schemes an endpoint runs: a [`Registry`] of their factories (each scheme's config, which
//! implements [`SchemeFactory`] in its own `cc/` file: quinn-proto's `ControllerFactory` is the
//! model), the standard ones from [`cc::schemes`], the one table, and the [`Scheme`] handle a
//! flow names its scheme by, which the endpoint looks up in its registry to build the flow's
//! controllers.

use std::any::Any;
use std::fmt;

use crate::cc::{self, SchemeFactory};
use crate::wire::{DEFAULT_MSS, MAX_SCHEME_ID};

/// A flow's scheme: a handle a [`Registry`] gives out, naming one of its factories (by wire
/// id). Copy, so flow specs and records carry it freely.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scheme {
    wire_id: u8,
    name: &'static str,
}

impl Scheme {
    fn of(factory: &dyn SchemeFactory) -> Scheme {
        Scheme { wire_id: factory.wire_id(), name: factory.name() }
    }

    pub fn name(self) -> &'static str {
        self.name
    }

    pub fn wire_id(self) -> u8 {
        self.wire_id
    }

    /// One of the standard schemes ([`cc::schemes`]) by name; the error lists them.
    pub fn from_name(name: &str) -> Result<Scheme, String> {
        Registry::catalogue().scheme(name)
    }

    /// One of the standard schemes by wire id.
    pub fn from_wire_id(id: u8) -> Option<Scheme> {
        Registry::catalogue().by_wire_id(id).map(Scheme::of)
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl fmt::Debug for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// The schemes an endpoint runs, one factory each (quinn's endpoint holds its
/// `ControllerFactory` so). [`Registry::standard`] holds the schemes of [`cc::schemes`], the
/// one table; [`Registry::with`] adds a scheme defined elsewhere (a test's, say).
#[derive(Debug, Default)]
pub struct Registry {
    factories: Vec<Box<dyn SchemeFactory>>,
}

impl Clone for Registry {
    fn clone(&self) -> Self {
        Self { factories: self.factories.iter().map(|f| f.clone_box()).collect() }
    }
}

/// The link the catalogue's factories are configured for: any would do, the names, wire ids
/// and parameter defaults it is read for do not depend on it.
const CATALOGUE_LINK_BPS: f64 = 10e9;

impl Registry {
    pub fn empty() -> Self {
        Self::default()
    }

    /// The standard schemes ([`cc::schemes`], in its order), configured for a host's link of
    /// `link_bits_per_second` and its data packets' `mss` payload bytes.
    ///
    /// # Panics
    /// As [`Registry::with`], if the table gives two schemes one name or wire id.
    pub fn standard(link_bits_per_second: f64, mss: u16) -> Self {
        cc::schemes(link_bits_per_second, mss).into_iter().fold(Self::empty(), Self::with_box)
    }

    /// The standard schemes, for what does not depend on a host's link: names, wire ids,
    /// drivers, port profiles, parameter defaults. (An endpoint's are configured for its
    /// link: `EndpointConfig::new`.)
    pub fn catalogue() -> Self {
        Self::standard(CATALOGUE_LINK_BPS, DEFAULT_MSS)
    }

    /// This registry and `factory`'s scheme.
    ///
    /// # Panics
    /// If its name or wire id is taken, or its wire id is 0 or above [`MAX_SCHEME_ID`]: a
    /// table that cannot be is a programming error, caught by the first test that builds it.
    pub fn with(self, factory: impl SchemeFactory) -> Self {
        self.with_box(Box::new(factory))
    }

    fn with_box(mut self, factory: Box<dyn SchemeFactory>) -> Self {
        let (name, id) = (factory.name(), factory.wire_id());
        assert!((1..=MAX_SCHEME_ID).contains(&id), "scheme {name}: wire id {id} is not in 1..={MAX_SCHEME_ID}");
        for other in &self.factories {
            assert!(other.name() != name, "two schemes are called {name}");
            assert!(other.wire_id() != id, "{name} and {} both have wire id {id}", other.name());
        }
        self.factories.push(factory);
        self
    }

    /// Every factory, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = &dyn SchemeFactory> + '_ {
        self.factories.iter().map(|f| f.as_ref())
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.iter().map(|f| f.name()).collect()
    }

    /// The scheme called `name`; the error lists the known ones.
    pub fn scheme(&self, name: &str) -> Result<Scheme, String> {
        self.get(name).map(Scheme::of).ok_or_else(|| format!("unknown scheme {name:?} ({})", self.names().join(", ")))
    }

    /// The factory called `name`.
    pub fn get(&self, name: &str) -> Option<&dyn SchemeFactory> {
        self.iter().find(|f| f.name() == name)
    }

    fn get_mut(&mut self, name: &str) -> Option<&mut Box<dyn SchemeFactory>> {
        self.factories.iter_mut().find(|f| f.name() == name)
    }

    /// The factory of wire id `id`; `None`: no scheme of this registry has it.
    pub fn by_wire_id(&self, id: u8) -> Option<&dyn SchemeFactory> {
        self.iter().find(|f| f.wire_id() == id)
    }

    /// The factory of `scheme`.
    pub fn factory(&self, scheme: Scheme) -> Option<&dyn SchemeFactory> {
        self.by_wire_id(scheme.wire_id).filter(|f| f.name() == scheme.name)
    }

    /// The config of the scheme called `name`, if it is a `T`.
    pub fn config<T: SchemeFactory>(&self, name: &str) -> Option<&T> {
        (self.get(name)? as &dyn Any).downcast_ref()
    }

    /// The config of the scheme called `name`, if it is a `T`, to change (tests, and shells
    /// that set what is no `--param`).
    pub fn config_mut<T: SchemeFactory>(&mut self, name: &str) -> Option<&mut T> {
        (self.get_mut(name)?.as_mut() as &mut dyn Any).downcast_mut()
    }

    /// Sets `--param <scheme>.<key>=<value>`; the error names the scheme, key or value wrong.
    pub fn set_param(&mut self, scheme: &str, key: &str, value: &str) -> Result<(), String> {
        let names = self.names();
        match self.get_mut(scheme) {
            Some(factory) => factory.set_param(key, value),
            None => Err(format!("unknown scheme {scheme:?} ({})", names.join(", "))),
        }
    }

    /// Every scheme's times `d` times longer.
    pub fn dilate(&mut self, d: f64) {
        for factory in &mut self.factories {
            factory.dilate(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::cc::dcqcn::DcqcnConfig;
    use crate::cc::Driver;
    use crate::config::EndpointConfig;

    #[test]
    fn every_scheme_is_found_by_its_name_and_its_wire_id() {
        let registry = Registry::catalogue();
        // The catalogue is the table, every scheme of it, in its order (a scheme added to the table
        // needs no line here).
        let table: Vec<_> = cc::schemes(10e9, DEFAULT_MSS).iter().map(|f| f.name()).collect();
        assert_eq!(registry.names(), table);
        for scheme in registry.iter().map(Scheme::of) {
            assert_eq!(Scheme::from_name(scheme.name()), Ok(scheme));
            assert_eq!(Scheme::from_wire_id(scheme.wire_id()), Some(scheme));
        }
        assert!(Scheme::from_name("tcp").unwrap_err().ends_with(&format!("({})", table.join(", "))));
        assert_eq!(Scheme::from_wire_id(0), None);
    }

    #[test]
    fn the_standard_schemes_keep_their_wire_ids_drivers_and_port_profiles() {
        // Wire ids are never reused and bundles name these schemes: each keeps what it has, whatever
        // schemes join the table (Registry::with refuses a second name or wire id).
        let registry = Registry::catalogue();
        for (name, wire_id, driver, profile) in [
            ("expresspass", 1, Driver::Receiver, "expresspass"),
            ("spraypass", 2, Driver::Receiver, "spraypass"),
            ("dctcp", 3, Driver::Sender, "dctcp"),
            ("dctcp+", 4, Driver::Sender, "dctcp"),
            ("dcqcn", 5, Driver::Sender, "dcqcn"),
            ("dcqcn+tcd", 6, Driver::Sender, "tcd"),
        ] {
            let factory = registry.get(name).unwrap_or_else(|| panic!("{name} left the table"));
            assert_eq!(
                (factory.wire_id(), factory.driver(), factory.port_profile()),
                (wire_id, driver, profile),
                "{name}"
            );
        }
    }

    #[test]
    fn each_scheme_builds_the_controller_of_its_driver() {
        let config = EndpointConfig::new(1, 10e9, Instant::now());
        for factory in config.schemes.iter() {
            let credit = factory.credit_control(Instant::now(), 10, 4).is_some();
            let sender = factory.sender_control(1).is_some();
            let driver = factory.driver();
            assert_eq!((credit, sender), (driver == Driver::Receiver, driver == Driver::Sender), "{}", factory.name());
        }
    }

    #[test]
    fn of_the_standard_schemes_only_dcqcns_give_their_data_receivers_something_to_do() {
        let registry = Registry::catalogue();
        for (name, receives) in [
            ("expresspass", false),
            ("spraypass", false),
            ("dctcp", false),
            ("dctcp+", false),
            ("dcqcn", true),
            ("dcqcn+tcd", true),
        ] {
            let factory = registry.get(name).unwrap_or_else(|| panic!("{name} left the table"));
            assert_eq!(factory.receiver_control().is_some(), receives, "{name}");
        }
    }

    #[test]
    fn a_time_parameter_dilates_with_its_scheme_and_no_other_parameter_does() {
        for factory in Registry::catalogue().iter() {
            let mut dilated = factory.clone_box();
            dilated.dilate(1000.0);
            for (before, after) in factory.params().iter().zip(dilated.params()) {
                let expected = before.default.map(|v| if before.dilates { 1000.0 * v } else { v });
                let close = match (after.default, expected) {
                    (Some(a), Some(e)) => (a - e).abs() <= 1e-9 * e.abs(),
                    (a, e) => a == e,
                };
                assert!(close, "{}.{}: {:?} became {:?}", factory.name(), before.name, before.default, after.default);
                assert_eq!(before.dilates, before.unit == "us", "{}.{}: times are in us", factory.name(), before.name);
            }
        }
    }

    #[test]
    fn a_param_reaches_only_the_scheme_it_names() {
        let mut registry = Registry::catalogue();
        registry.set_param("dcqcn", "timer_us", "300").expect("a known parameter");
        let timer = |r: &Registry, name| r.config::<DcqcnConfig>(name).expect("a DCQCN").increase_timer;
        assert_eq!(timer(&registry, "dcqcn"), std::time::Duration::from_micros(300));
        assert_eq!(timer(&registry, "dcqcn+tcd"), std::time::Duration::from_micros(55));
        assert_eq!(
            registry.set_param("tcp", "timer_us", "1"),
            Err(format!("unknown scheme \"tcp\" ({})", registry.names().join(", ")))
        );
        assert!(registry.set_param("dcqcn", "timer", "1").unwrap_err().starts_with("dcqcn has no parameter \"timer\""));
        assert!(registry.config::<DcqcnConfig>("dctcp").is_none(), "DCTCP's config is no DCQCN's");
    }

    #[test]
    #[should_panic(expected = "two schemes are called dcqcn")]
    fn a_second_scheme_of_a_taken_name_is_refused() {
        let _ = Registry::catalogue().with(DcqcnConfig::for_link(1e9));
    }
}
