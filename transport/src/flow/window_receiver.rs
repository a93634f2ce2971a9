//! Sender-driven schemes (DCTCP, DCTCP+, DCQCN), data receiving side: one cumulative ack per
//! data packet, echoing its CE mark and send time; the flow ends when every packet up to the
//! last one arrived. For DCQCN flows (the data header asks) it is also the notification point:
//! marked data triggers CNPs, at most one per interval ([`CnpGenerator`]).

use std::time::Instant;

use super::{Ctx, OutOfRange, ReceivedSet, MAX_AHEAD};
use crate::cc::dcqcn::CnpGenerator;
use crate::config::EndpointConfig;
use crate::types::{CnpFlag, Ecn, HostId};
use crate::wire::Packet;

/// One data packet as a window receiver sees it (wire.rs `Packet::Data`, and its ECN bits).
pub(crate) struct WindowData {
    pub seq: u32,
    pub payload_len: u16,
    pub last: bool,
    pub echo_sent_us: u32,
    pub ecn: Ecn,
    /// The sender asks for CNPs (DCQCN), and for UE ones too (TCD).
    pub cnp: bool,
    pub tcd: bool,
}

pub(crate) struct Arrival {
    pub complete: bool,
    /// Not the packet the cumulative ack waited for: a hole, reordering or a duplicate.
    pub out_of_order: bool,
}

pub(crate) struct WindowReceiver {
    src: HostId,
    flow: u32,
    path_id: u8,
    received: ReceivedSet,
    /// Payload bytes of the packets in `received` (each counted once).
    bytes: u64,
    /// Packets of the flow, once its last one arrived.
    packets: Option<u32>,
    /// DCQCN's notification point, from the first marked packet of a flow that asks for CNPs.
    notifier: Option<CnpGenerator>,
}

impl WindowReceiver {
    pub fn new(src: HostId, flow: u32, path_id: u8) -> Self {
        Self { src, flow, path_id, received: ReceivedSet::default(), bytes: 0, packets: None, notifier: None }
    }

    pub fn path_id(&self) -> u8 {
        self.path_id
    }

    /// Payload bytes received so far, in order or not, each packet counted once.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn on_data(&mut self, ctx: &mut Ctx, data: WindowData, config: &EndpointConfig) -> Result<Arrival, OutOfRange> {
        let WindowData { seq, payload_len, last, echo_sent_us, ecn, cnp, tcd } = data;
        if seq.saturating_sub(self.received.cumulative()) > MAX_AHEAD || self.packets.is_some_and(|n| seq >= n) {
            return Err(OutOfRange);
        }
        if last {
            self.packets = Some(seq + 1);
        }
        let out_of_order = seq != self.received.cumulative();
        let duplicate = !self.received.insert(seq);
        if !duplicate {
            self.bytes += u64::from(payload_len);
        }
        let hole = self.received.count() > self.received.cumulative() as u64;
        // Plain DCQCN reads UE (which its ports never set) as unmarked.
        let mark = match ecn {
            Ecn::Ce => Some(CnpFlag::Congestion),
            Ecn::Ect1 if tcd => Some(CnpFlag::Undetermined),
            _ => None,
        };
        if let Some(mark) = mark.filter(|_| cnp) {
            let interval = if tcd { config.dcqcn_tcd.cnp_interval } else { config.dcqcn.cnp_interval };
            let notifier = self.notifier.get_or_insert_with(|| CnpGenerator::new(interval));
            if let Some(flag) = notifier.on_mark(ctx.now, mark) {
                self.send_cnp(ctx, flag);
            }
        }
        ctx.send(
            self.src,
            self.path_id,
            Ecn::NotEct,
            &Packet::Ack {
                flow: self.flow,
                cumulative: self.received.cumulative(),
                ece: ecn == Ecn::Ce,
                duplicate,
                hole,
                echo_sent_us,
            },
        );
        Ok(Arrival { complete: self.packets.is_some_and(|n| self.received.cumulative() >= n), out_of_order })
    }

    /// When a CNP held back by the interval may go.
    pub fn deadline(&self) -> Option<Instant> {
        self.notifier.as_ref()?.deadline()
    }

    pub fn on_timeout(&mut self, ctx: &mut Ctx) {
        if let Some(flag) = self.notifier.as_mut().and_then(|n| n.on_timeout(ctx.now)) {
            self.send_cnp(ctx, flag);
        }
    }

    fn send_cnp(&self, ctx: &mut Ctx, flag: CnpFlag) {
        ctx.send(self.src, self.path_id, Ecn::NotEct, &Packet::Cnp { flow: self.flow, flag });
    }
}
