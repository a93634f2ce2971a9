//! Packets on the wire: the ccemu header (transport/wire-format.md) and the body of each
//! packet type. Parsing never panics: anything malformed is an [`Error`] the shell counts
//! and drops.

use std::fmt;

/// First two payload bytes of every ccemu datagram, big-endian.
pub const MAGIC: u16 = 0xCCE1;
/// UDP payload of a credit: a 60-byte minimum Ethernet frame minus Ethernet, IP and UDP.
pub const CREDIT_PAYLOAD_BYTES: usize = 18;
const HEADER_BYTES: usize = 4;

/// The packet types; the numbers are the header's type byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    CreditRequest = 1,
    Credit = 2,
    Data = 3,
    CreditStop = 4,
    Ack = 5,
    Finish = 6,
    Nack = 7,
    Cnp = 8,
}

/// Packet types there are, and one more: counters indexed by `Kind as usize` (0 unused).
pub const KINDS: usize = 9;

impl Kind {
    fn from_byte(byte: u8) -> Result<Self, Error> {
        Ok(match byte {
            1 => Kind::CreditRequest,
            2 => Kind::Credit,
            3 => Kind::Data,
            4 => Kind::CreditStop,
            5 => Kind::Ack,
            6 => Kind::Finish,
            7 => Kind::Nack,
            8 => Kind::Cnp,
            other => return Err(Error::UnknownKind(other)),
        })
    }
}

/// A decoded packet. Times are the sender's clock in microseconds, truncated to 32 bits
/// (wraps every 71 minutes; only differences are used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    /// Sender -> receiver: please send credits for `size_bytes` of flow `flow`, by `scheme`
    /// (a [`crate::Scheme`]'s wire id), over path-ids 0..`paths` if the scheme sprays.
    CreditRequest { flow: u32, size_bytes: u64, scheme: u8, paths: u16 },
    /// Receiver -> sender: permission to send one data packet. Minimum frame size.
    Credit { flow: u32, credit_seq: u32, sent_us: u32 },
    /// Sender -> receiver: data packet `seq` of the flow, echoing the credit it spends
    /// (window schemes: `echo_credit_seq` 0, `echo_sent_us` the data's own send time).
    /// `last`: the flow's last packet (tells a window scheme's receiver the flow's length).
    /// `credit_ce`: the credit it spends arrived CE-marked (SprayPass's feedback; a header
    /// flag, since a DCTCP port may rewrite the IP ECN bits).
    /// `scheme`: the sender's scheme's wire id (0..=[`MAX_SCHEME_ID`], in the flags byte's six
    /// high bits), from which a window scheme's receiver builds the flow's receiver control
    /// (DCQCN's: CNPs for marks).
    Data {
        flow: u32,
        seq: u32,
        echo_credit_seq: u32,
        echo_sent_us: u32,
        payload_len: u16,
        last: bool,
        credit_ce: bool,
        scheme: u8,
    },
    /// Sender -> receiver: no more credits needed.
    CreditStop { flow: u32 },
    /// Receiver -> sender (window-based schemes): cumulative ack, with ECN echo.
    /// `duplicate`: the packet acknowledged had arrived before (so this ack says nothing
    /// about a hole: like a D-SACK, it tells the sender a retransmission was spurious).
    /// `hole`: packets above `cumulative` have arrived, so `cumulative` is missing rather
    /// than merely not there yet (a one-bit SACK).
    Ack { flow: u32, cumulative: u32, ece: bool, duplicate: bool, hole: bool, echo_sent_us: u32 },
    /// Receiver -> sender: every byte arrived, at `end_us` of the receiver's clock
    /// (microseconds since the run's epoch, an instant every host of the run agrees on
    /// whatever its machine's clock); `credits_sent` by the receiver for the flow.
    Finish { flow: u32, end_us: u64, credits_sent: u32 },
    /// Receiver -> sender (credit schemes): these data packets never arrived (lost, or never
    /// sent because credits an early stop counted on were dropped); the receiver restarts its
    /// credits and the sender spends them on these. At most [`NACK_MAX_SEQS`].
    Nack { flow: u32, missing: Vec<u32> },
    /// Receiver -> sender (DCQCN): congestion notification for the flow, at most one per
    /// `cnp_interval`; with TCD its flag says CE or UE.
    Cnp { flow: u32, flag: CnpFlag },
}

/// What a congestion notification packet (DCQCN's CNP) says: the data receiver saw CE, or,
/// with TCD, only UE (the flow crossed a paused port: "undetermined", not congested).
/// The numbers are the CNP's flag byte on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CnpFlag {
    /// Congestion (CE); the sender cuts its rate.
    Congestion = 1,
    /// Undetermined (TCD's UE: ECT(1)); the sender holds its rate.
    Undetermined = 2,
}

impl CnpFlag {
    /// What one notification says of two marks: CE wins (TCD, seed 004 section 5.2.1).
    pub fn or(self, other: CnpFlag) -> CnpFlag {
        match (self, other) {
            (CnpFlag::Undetermined, CnpFlag::Undetermined) => CnpFlag::Undetermined,
            _ => CnpFlag::Congestion,
        }
    }
}

/// Sequence numbers one Nack carries at most (a data-sized packet).
pub const NACK_MAX_SEQS: usize = 256;
/// Header flags of a data packet: the flow's last packet; its credit arrived CE-marked. The
/// six bits above them are the sender's scheme's wire id.
const FLAG_LAST: u8 = 1;
const FLAG_CREDIT_CE: u8 = 2;
const SCHEME_SHIFT: u8 = 2;
/// Highest wire id a scheme may have: the data header's six scheme bits (a credit request's
/// scheme byte could hold more, but data must name the scheme too).
pub const MAX_SCHEME_ID: u8 = u8::MAX >> SCHEME_SHIFT;
/// Path-ids a credit request may ask credits to be sprayed over (all of them).
pub const MAX_PATHS: u16 = 256;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    TooShort {
        needed: usize,
        got: usize,
    },
    BadMagic(u16),
    UnknownKind(u8),
    /// A data packet whose declared payload is longer than the datagram.
    Truncated,
    /// A nack listing more than [`NACK_MAX_SEQS`] sequence numbers.
    NackTooLong(u16),
    /// A CNP whose flag is neither CE (1) nor UE (2).
    BadCnpFlag(u8),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::TooShort { needed, got } => write!(f, "packet of {got} bytes, needs {needed}"),
            Error::BadMagic(magic) => write!(f, "magic {magic:#06x} is not ccemu's {MAGIC:#06x}"),
            Error::UnknownKind(kind) => write!(f, "unknown packet type {kind}"),
            Error::Truncated => write!(f, "data payload longer than the datagram"),
            Error::NackTooLong(n) => write!(f, "nack of {n} sequence numbers, at most {NACK_MAX_SEQS}"),
            Error::BadCnpFlag(flag) => write!(f, "CNP flag {flag}: neither 1 (CE) nor 2 (UE)"),
        }
    }
}

impl std::error::Error for Error {}

/// What a datagram's frame adds on the wire to its UDP payload: UDP, IPv4 and Ethernet
/// headers (8 + 20 + 14), and preamble, FCS and inter-frame gap (24).
pub const FRAME_OVERHEAD_BYTES: u64 = 8 + 20 + 14 + 24;

/// A minimum Ethernet frame on the wire (64 bytes with its FCS, and 20 of preamble and gap): a
/// credit's size.
pub const MIN_FRAME_WIRE_BYTES: u64 = 84;

/// Bytes on the wire of a datagram of `udp_payload` bytes (padded to a minimum frame).
pub fn frame_wire_bytes(udp_payload: usize) -> u64 {
    (udp_payload as u64 + FRAME_OVERHEAD_BYTES).max(MIN_FRAME_WIRE_BYTES)
}

/// Bytes of a data packet before its payload.
pub const DATA_HEADER_BYTES: usize = HEADER_BYTES + 18;

/// Data payload per packet, bytes, unless an endpoint's config says otherwise
/// (`EndpointConfig::mss`): 1450 makes a 1500-byte IP packet (1538 on the wire) with IP (20),
/// UDP (8) and the ccemu data header.
pub const DEFAULT_MSS: u16 = (1500 - 20 - 8 - DATA_HEADER_BYTES) as u16;

impl Packet {
    pub fn kind(&self) -> Kind {
        match self {
            Packet::CreditRequest { .. } => Kind::CreditRequest,
            Packet::Credit { .. } => Kind::Credit,
            Packet::Data { .. } => Kind::Data,
            Packet::CreditStop { .. } => Kind::CreditStop,
            Packet::Ack { .. } => Kind::Ack,
            Packet::Finish { .. } => Kind::Finish,
            Packet::Nack { .. } => Kind::Nack,
            Packet::Cnp { .. } => Kind::Cnp,
        }
    }

    /// Appends the encoded packet to `out`. Data payload bytes are zeros: the emulator
    /// measures transport behaviour, not content. Credits are padded to a minimum frame.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&MAGIC.to_be_bytes());
        out.push(self.kind() as u8);
        out.push(match *self {
            Packet::Data { last, credit_ce, scheme, .. } => {
                // A scheme id above MAX_SCHEME_ID (no registry admits one) loses its high bits.
                (last as u8 * FLAG_LAST) | (credit_ce as u8 * FLAG_CREDIT_CE) | (scheme << SCHEME_SHIFT)
            }
            _ => 0,
        });
        match *self {
            Packet::CreditRequest { flow, size_bytes, scheme, paths } => {
                put32(out, flow);
                out.extend_from_slice(&size_bytes.to_be_bytes());
                out.push(scheme);
                out.extend_from_slice(&paths.to_be_bytes());
            }
            Packet::Credit { flow, credit_seq, sent_us } => {
                put32(out, flow);
                put32(out, credit_seq);
                put32(out, sent_us);
                out.resize(start + CREDIT_PAYLOAD_BYTES, 0);
            }
            Packet::Data { flow, seq, echo_credit_seq, echo_sent_us, payload_len, .. } => {
                put32(out, flow);
                put32(out, seq);
                put32(out, echo_credit_seq);
                put32(out, echo_sent_us);
                out.extend_from_slice(&payload_len.to_be_bytes());
                out.resize(out.len() + payload_len as usize, 0);
            }
            Packet::CreditStop { flow } => put32(out, flow),
            Packet::Ack { flow, cumulative, ece, duplicate, hole, echo_sent_us } => {
                put32(out, flow);
                put32(out, cumulative);
                out.push(ece as u8 | (duplicate as u8) << 1 | (hole as u8) << 2);
                put32(out, echo_sent_us);
            }
            Packet::Finish { flow, end_us, credits_sent } => {
                put32(out, flow);
                out.extend_from_slice(&end_us.to_be_bytes());
                put32(out, credits_sent);
            }
            Packet::Nack { flow, ref missing } => {
                put32(out, flow);
                let count = missing.len().min(NACK_MAX_SEQS);
                out.extend_from_slice(&(count as u16).to_be_bytes());
                for &seq in &missing[..count] {
                    put32(out, seq);
                }
            }
            Packet::Cnp { flow, flag } => {
                put32(out, flow);
                out.push(flag as u8);
            }
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Packet, Error> {
        let mut r = Reader { bytes, at: 0 };
        let magic = r.u16()?;
        if magic != MAGIC {
            return Err(Error::BadMagic(magic));
        }
        let kind = Kind::from_byte(r.u8()?)?;
        let flags = r.u8()?;
        Ok(match kind {
            Kind::CreditRequest => {
                Packet::CreditRequest { flow: r.u32()?, size_bytes: r.u64()?, scheme: r.u8()?, paths: r.u16()? }
            }
            Kind::Credit => Packet::Credit { flow: r.u32()?, credit_seq: r.u32()?, sent_us: r.u32()? },
            Kind::Data => {
                let (flow, seq, echo_credit_seq, echo_sent_us) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
                let payload_len = r.u16()?;
                if bytes.len() < r.at + payload_len as usize {
                    return Err(Error::Truncated);
                }
                Packet::Data {
                    flow,
                    seq,
                    echo_credit_seq,
                    echo_sent_us,
                    payload_len,
                    last: flags & FLAG_LAST != 0,
                    credit_ce: flags & FLAG_CREDIT_CE != 0,
                    scheme: flags >> SCHEME_SHIFT,
                }
            }
            Kind::CreditStop => Packet::CreditStop { flow: r.u32()? },
            Kind::Ack => {
                let (flow, cumulative, bits) = (r.u32()?, r.u32()?, r.u8()?);
                let (ece, duplicate, hole) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
                Packet::Ack { flow, cumulative, ece, duplicate, hole, echo_sent_us: r.u32()? }
            }
            Kind::Finish => Packet::Finish { flow: r.u32()?, end_us: r.u64()?, credits_sent: r.u32()? },
            Kind::Nack => {
                let flow = r.u32()?;
                let count = r.u16()?;
                if count as usize > NACK_MAX_SEQS {
                    return Err(Error::NackTooLong(count));
                }
                let missing = (0..count).map(|_| r.u32()).collect::<Result<_, _>>()?;
                Packet::Nack { flow, missing }
            }
            Kind::Cnp => {
                let flow = r.u32()?;
                let flag = match r.u8()? {
                    1 => CnpFlag::Congestion,
                    2 => CnpFlag::Undetermined,
                    other => return Err(Error::BadCnpFlag(other)),
                };
                Packet::Cnp { flow, flag }
            }
        })
    }
}

fn put32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_be_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let end = self.at + N;
        let slice = self.bytes.get(self.at..end).ok_or(Error::TooShort { needed: end, got: self.bytes.len() })?;
        self.at = end;
        Ok(slice.try_into().expect("slice of N bytes"))
    }
    fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.take::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, Error> {
        Ok(u16::from_be_bytes(self.take()?))
    }
    fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_be_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_be_bytes(self.take()?))
    }
}

/// Property tests' packets (this module's, and the endpoint's fuzzing).
#[cfg(test)]
pub(crate) mod strategies {
    use super::*;
    use proptest::prelude::*;

    /// Packets of every kind, their flow ids, sequence numbers (credit numbers, cumulative points
    /// and nacked packets too) and request sizes drawn from the strategies given, the rest from
    /// anything.
    pub(crate) fn packets(
        flow: BoxedStrategy<u32>,
        seq: BoxedStrategy<u32>,
        size: BoxedStrategy<u64>,
    ) -> impl Strategy<Value = Packet> {
        prop_oneof![
            (flow.clone(), size, any::<u8>(), any::<u16>()).prop_map(|(flow, size_bytes, scheme, paths)| {
                Packet::CreditRequest { flow, size_bytes, scheme, paths }
            }),
            (flow.clone(), seq.clone(), any::<u32>()).prop_map(|(flow, credit_seq, sent_us)| Packet::Credit {
                flow,
                credit_seq,
                sent_us
            }),
            (
                (flow.clone(), seq.clone(), seq.clone(), any::<u32>(), 0u16..2000),
                (any::<bool>(), any::<bool>(), 0..=MAX_SCHEME_ID)
            )
                .prop_map(
                    |((flow, seq, echo_credit_seq, echo_sent_us, payload_len), (last, credit_ce, scheme))| {
                        Packet::Data { flow, seq, echo_credit_seq, echo_sent_us, payload_len, last, credit_ce, scheme }
                    }
                ),
            flow.clone().prop_map(|flow| Packet::CreditStop { flow }),
            (flow.clone(), seq.clone(), any::<bool>(), any::<bool>(), any::<bool>(), any::<u32>()).prop_map(
                |(flow, cumulative, ece, duplicate, hole, echo_sent_us)| Packet::Ack {
                    flow,
                    cumulative,
                    ece,
                    duplicate,
                    hole,
                    echo_sent_us
                }
            ),
            (flow.clone(), any::<u64>(), any::<u32>()).prop_map(|(flow, end_us, credits_sent)| Packet::Finish {
                flow,
                end_us,
                credits_sent
            }),
            (flow.clone(), proptest::collection::vec(seq, 0..=NACK_MAX_SEQS))
                .prop_map(|(flow, missing)| Packet::Nack { flow, missing }),
            (flow, any::<bool>()).prop_map(|(flow, ce)| Packet::Cnp {
                flow,
                flag: if ce { CnpFlag::Congestion } else { CnpFlag::Undetermined }
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encoded(packet: &Packet) -> Vec<u8> {
        let mut out = Vec::new();
        packet.encode(&mut out);
        out
    }

    #[test]
    fn a_credit_is_a_minimum_frame_that_the_port_program_recognises() {
        let bytes = encoded(&Packet::Credit { flow: 7, credit_seq: 9, sent_us: 11 });
        assert_eq!(bytes.len(), CREDIT_PAYLOAD_BYTES);
        // What bpf/port.bpf.c reads: magic, then type 2.
        assert_eq!(&bytes[..3], &[0xCC, 0xE1, 2]);
    }

    #[test]
    fn data_carries_its_payload_length_in_zeros() {
        let bytes = encoded(&Packet::Data {
            flow: 1,
            seq: 2,
            echo_credit_seq: 3,
            echo_sent_us: 4,
            payload_len: 1000,
            last: true,
            credit_ce: true,
            scheme: MAX_SCHEME_ID,
        });
        assert_eq!(bytes.len(), DATA_HEADER_BYTES + 1000);
        assert_eq!(DATA_HEADER_BYTES, 22, "the payload, 1450 bytes, is sized on it");
        assert_eq!(bytes[3], 0xFF, "the flags byte holds last, credit CE and the scheme");
    }

    #[test]
    fn foreign_and_cut_packets_are_errors_not_panics() {
        assert_eq!(Packet::decode(&[0x12, 0x34, 2, 0]), Err(Error::BadMagic(0x1234)));
        assert_eq!(Packet::decode(&[0xCC, 0xE1, 99, 0]), Err(Error::UnknownKind(99)));
        assert!(matches!(Packet::decode(&[0xCC, 0xE1, 2, 0, 1]), Err(Error::TooShort { .. })));
        let mut data = encoded(&Packet::Data {
            flow: 1,
            seq: 2,
            echo_credit_seq: 3,
            echo_sent_us: 4,
            payload_len: 10,
            last: true,
            credit_ce: true,
            scheme: 1,
        });
        data.truncate(data.len() - 1);
        assert_eq!(Packet::decode(&data), Err(Error::Truncated));
        assert_eq!(Packet::decode(&[0xCC, 0xE1, 7, 0, 0, 0, 0, 1, 0xFF, 0xFF]), Err(Error::NackTooLong(0xFFFF)));
        assert_eq!(Packet::decode(&[0xCC, 0xE1, 8, 0, 0, 0, 0, 1, 3]), Err(Error::BadCnpFlag(3)));
    }

    fn any_packet() -> impl Strategy<Value = Packet> {
        strategies::packets(any::<u32>().boxed(), any::<u32>().boxed(), any::<u64>().boxed())
    }

    proptest! {
        #[test]
        fn every_packet_decodes_to_itself(packet in any_packet()) {
            prop_assert_eq!(Packet::decode(&encoded(&packet)), Ok(packet));
        }

        #[test]
        fn arbitrary_bytes_never_panic_the_parser(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Packet::decode(&bytes);
        }

        #[test]
        fn bytes_after_a_valid_header_never_panic_the_parser(
            kind in 0u8..10, flags in any::<u8>(), rest in proptest::collection::vec(any::<u8>(), 0..40)
        ) {
            let mut bytes = vec![0xCC, 0xE1, kind, flags];
            bytes.extend(rest);
            let _ = Packet::decode(&bytes);
        }
    }
}
