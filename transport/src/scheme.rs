//! The schemes cchost runs, and the one place that knows which controller each one builds: a
//! new scheme is a file in `cc/`, a variant here and its arms in the matches below.

use std::fmt;
use std::time::Instant;

use crate::cc::{CreditControl, SenderControl};
use crate::config::EndpointConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// Receiver-driven credits (SIGCOMM 2017), [`crate::cc::expresspass`].
    ExpressPass,
    /// ExpressPass with per-credit path spraying and ECN-ratio feedback, [`crate::cc::spraypass`].
    SprayPass,
    /// Window and ECN fraction (SIGCOMM 2010, RFC 8257), [`crate::cc::dctcp`].
    Dctcp,
    /// DCTCP with slow_time pacing below the minimum window, [`crate::cc::dctcp_plus`].
    DctcpPlus,
    /// Rate-based, from the receiver's CNPs (SIGCOMM 2015), [`crate::cc::dcqcn`].
    Dcqcn,
    /// DCQCN with TCD's ternary marks: UE CNPs hold the rate, CE cuts harder
    /// ([`crate::cc::dcqcn`]).
    DcqcnTcd,
}

/// Who drives a scheme's flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// The data receiver paces credits; the sender spends one per data packet.
    Receiver,
    /// The sender decides by a window (and a send gate: a pacer), from acks (and CNPs).
    Sender,
}

impl Scheme {
    pub const ALL: [Scheme; 6] =
        [Scheme::ExpressPass, Scheme::SprayPass, Scheme::Dctcp, Scheme::DctcpPlus, Scheme::Dcqcn, Scheme::DcqcnTcd];

    pub fn name(self) -> &'static str {
        match self {
            Scheme::ExpressPass => "expresspass",
            Scheme::SprayPass => "spraypass",
            Scheme::Dctcp => "dctcp",
            Scheme::DctcpPlus => "dctcp+",
            Scheme::Dcqcn => "dcqcn",
            Scheme::DcqcnTcd => "dcqcn+tcd",
        }
    }

    pub fn from_name(name: &str) -> Result<Scheme, String> {
        Scheme::ALL.into_iter().find(|s| s.name() == name).ok_or_else(|| {
            let names: Vec<_> = Scheme::ALL.iter().map(|s| s.name()).collect();
            format!("unknown scheme {name:?} ({})", names.join(", "))
        })
    }

    pub fn driver(self) -> Driver {
        match self {
            Scheme::ExpressPass | Scheme::SprayPass => Driver::Receiver,
            Scheme::Dctcp | Scheme::DctcpPlus | Scheme::Dcqcn | Scheme::DcqcnTcd => Driver::Sender,
        }
    }

    /// Whether the flow's data receiver answers marks with CNPs (DCQCN's notification point),
    /// and whether it reports TCD's UE marks too: the data header says so (wire.rs).
    pub(crate) fn notifications(self) -> (bool, bool) {
        match self {
            Scheme::Dcqcn => (true, false),
            Scheme::DcqcnTcd => (true, true),
            Scheme::ExpressPass | Scheme::SprayPass | Scheme::Dctcp | Scheme::DctcpPlus => (false, false),
        }
    }

    /// The byte a credit request carries, so that the receiver builds the sender's scheme.
    pub(crate) fn wire_id(self) -> u8 {
        match self {
            Scheme::ExpressPass => 1,
            Scheme::SprayPass => 2,
            Scheme::Dctcp => 3,
            Scheme::DctcpPlus => 4,
            Scheme::Dcqcn => 5,
            Scheme::DcqcnTcd => 6,
        }
    }

    pub(crate) fn from_wire_id(id: u8) -> Option<Scheme> {
        Scheme::ALL.into_iter().find(|s| s.wire_id() == id)
    }

    /// A receiver-driven scheme's credit control for one flow of `packets` data packets over
    /// `paths` equal-cost paths; `None` for sender-driven schemes.
    pub(crate) fn credit_control(
        self,
        config: &EndpointConfig,
        now: Instant,
        packets: u64,
        paths: u16,
    ) -> Option<Box<dyn CreditControl>> {
        match self {
            Scheme::ExpressPass => Some(Box::new(config.expresspass.build(now, packets))),
            Scheme::SprayPass => Some(Box::new(config.spraypass.build(now, paths))),
            Scheme::Dctcp | Scheme::DctcpPlus | Scheme::Dcqcn | Scheme::DcqcnTcd => None,
        }
    }

    /// A sender-driven scheme's control for one flow (`flow` seeds its randomness); `None`
    /// for receiver-driven schemes.
    pub(crate) fn sender_control(self, config: &EndpointConfig, flow: u32) -> Option<Box<dyn SenderControl>> {
        match self {
            Scheme::Dctcp => Some(Box::new(config.dctcp.build())),
            Scheme::DctcpPlus => Some(Box::new(config.dctcp_plus.build(config.seed ^ u64::from(flow) << 32))),
            Scheme::Dcqcn => Some(Box::new(config.dcqcn.build())),
            Scheme::DcqcnTcd => Some(Box::new(config.dcqcn_tcd.build())),
            Scheme::ExpressPass | Scheme::SprayPass => None,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_is_found_by_its_name_and_its_wire_id() {
        for scheme in Scheme::ALL {
            assert_eq!(Scheme::from_name(scheme.name()), Ok(scheme));
            assert_eq!(Scheme::from_wire_id(scheme.wire_id()), Some(scheme));
        }
        assert!(Scheme::from_name("tcp")
            .unwrap_err()
            .contains("expresspass, spraypass, dctcp, dctcp+, dcqcn, dcqcn+tcd"));
        assert_eq!(Scheme::from_wire_id(0), None);
    }

    #[test]
    fn each_scheme_builds_the_controller_of_its_driver() {
        let config = EndpointConfig::new(1, 10e9, Instant::now());
        for scheme in Scheme::ALL {
            let credit = scheme.credit_control(&config, Instant::now(), 10, 4).is_some();
            let sender = scheme.sender_control(&config, 1).is_some();
            assert_eq!((credit, sender), (scheme.driver() == Driver::Receiver, scheme.driver() == Driver::Sender));
        }
    }
}
