//! What the core and its shell exchange: host numbers, ECN codepoints, and datagrams out
//! ([`Transmit`]) and in ([`Incoming`]). What is inside a packet (its types, a CNP's flag) is
//! the codec's, [`crate::wire`].

use crate::wire::Kind;

/// A host of the emulation: h1 is 1 (the shell maps it to 10.0.0.1, transport/wire-format.md).
pub type HostId = u32;

/// The ECN codepoint a packet is sent with (IP_TOS) or arrived with (IP_RECVTOS).
/// cchost sends ECT(0); a TCD port turns it into ECT(1) for "undetermined" (UE) and any
/// ECN-capable packet into CE for "congested" (wire-format.md, "Ternary congestion
/// detection (TCD) marks").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecn {
    NotEct = 0,
    /// TCD's UE mark: the packet crossed a port paused by PFC that was not congested.
    Ect1 = 1,
    Ect0 = 2,
    Ce = 3,
}

impl Ecn {
    /// The codepoint of the two low bits of a TOS byte.
    pub fn from_tos(tos: u8) -> Ecn {
        match tos & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
}

/// A datagram to send: the shell sends `payload` to `dst` from its socket for `path_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct Transmit {
    pub dst: HostId,
    pub path_id: u8,
    pub ecn: Ecn,
    pub kind: Kind,
    pub payload: Vec<u8>,
}

/// A datagram that arrived.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    pub src: HostId,
    /// Low 8 bits of the UDP source port.
    pub path_id: u8,
    pub ecn: Ecn,
    pub payload: &'a [u8],
}
