//! Sender-driven schemes (DCTCP, DCTCP+, DCQCN), data receiving side: one cumulative ack per
//! data packet, echoing its CE mark and send time; the flow ends when every packet up to the
//! last one arrived. Each packet's ECN mark also goes to the flow's [`ReceiverControl`], if its
//! scheme (named in the data header) has one: DCQCN's notification point answers marks with
//! CNPs, which are sent from here.

use std::time::Instant;

use super::{Ctx, OutOfRange, ReceivedSet, MAX_AHEAD};
use crate::cc::ReceiverControl;
use crate::types::{Ecn, HostId};
use crate::wire::{CnpFlag, Packet};

/// One data packet as a window receiver sees it (wire.rs `Packet::Data`, and its ECN bits).
pub(crate) struct WindowData {
    pub seq: u32,
    pub payload_len: u16,
    pub last: bool,
    pub echo_sent_us: u32,
    pub ecn: Ecn,
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
    /// What the flow's scheme does with marks beyond echoing them (DCQCN's notification
    /// point); `None`: nothing.
    control: Option<Box<dyn ReceiverControl>>,
}

impl WindowReceiver {
    pub fn new(src: HostId, flow: u32, path_id: u8, control: Option<Box<dyn ReceiverControl>>) -> Self {
        Self { src, flow, path_id, received: ReceivedSet::default(), bytes: 0, packets: None, control }
    }

    pub fn path_id(&self) -> u8 {
        self.path_id
    }

    /// Bytes of its arrival bitmap.
    pub fn held_bytes(&self) -> usize {
        self.received.held_bytes()
    }

    /// Payload bytes received so far, in order or not, each packet counted once.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn on_data(&mut self, ctx: &mut Ctx, data: WindowData) -> Result<Arrival, OutOfRange> {
        let WindowData { seq, payload_len, last, echo_sent_us, ecn } = data;
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
        if let Some(flag) = self.control.as_mut().and_then(|control| control.on_data(ctx.now, ecn)) {
            self.send_cnp(ctx, flag);
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

    /// When a notification the receiver control held back may go.
    pub fn deadline(&self) -> Option<Instant> {
        self.control.as_ref()?.deadline()
    }

    pub fn on_timeout(&mut self, ctx: &mut Ctx) {
        if let Some(flag) = self.control.as_mut().and_then(|control| control.on_timeout(ctx.now)) {
            self.send_cnp(ctx, flag);
        }
    }

    fn send_cnp(&self, ctx: &mut Ctx, flag: CnpFlag) {
        ctx.send(self.src, self.path_id, Ecn::NotEct, &Packet::Cnp { flow: self.flow, flag });
    }
}
