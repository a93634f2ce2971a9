//! Sender-driven schemes (DCTCP, DCTCP+), data receiving side: one cumulative ack per data packet, echoing its
//! CE mark and send time; the flow ends when every packet up to the last one arrived.

use super::{Ctx, OutOfRange, ReceivedSet, MAX_AHEAD};
use crate::types::{Ecn, HostId};
use crate::wire::Packet;

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
}

impl WindowReceiver {
    pub fn new(src: HostId, flow: u32, path_id: u8) -> Self {
        Self { src, flow, path_id, received: ReceivedSet::default(), bytes: 0, packets: None }
    }

    pub fn path_id(&self) -> u8 {
        self.path_id
    }

    /// Payload bytes received so far, in order or not, each packet counted once.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn on_data(
        &mut self,
        ctx: &mut Ctx,
        seq: u32,
        payload_len: u16,
        last: bool,
        echo_sent_us: u32,
        ce: bool,
    ) -> Result<Arrival, OutOfRange> {
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
        ctx.send(
            self.src,
            self.path_id,
            Ecn::NotEct,
            &Packet::Ack {
                flow: self.flow,
                cumulative: self.received.cumulative(),
                ece: ce,
                duplicate,
                hole,
                echo_sent_us,
            },
        );
        Ok(Arrival { complete: self.packets.is_some_and(|n| self.received.cumulative() >= n), out_of_order })
    }
}
