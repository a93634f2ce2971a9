//! The simulated network's event queue: what happens next, in time order, and among events
//! due at the same time in the order they were scheduled (so that a run is deterministic).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Instant;

use super::port::InFlight;
use super::topology::Node;
use crate::record::FlowSpec;
use crate::types::HostId;

pub(super) enum Event {
    Start {
        host: HostId,
        spec: FlowSpec,
    },
    /// The packet reaches a node: a switch forwards it, a host takes it.
    Arrive {
        node: Node,
        packet: InFlight,
    },
    PortFree(usize),
    Wake(HostId),
    /// The port sends nothing until then (a CPU stall of the emulator, say).
    Stall {
        port: usize,
        until: Instant,
    },
    /// A packet held back by `delay`, joining its host's port late.
    Late {
        port: usize,
        packet: InFlight,
    },
}

struct Scheduled {
    at: Instant,
    order: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}

#[derive(Default)]
pub(super) struct Events {
    heap: BinaryHeap<Reverse<Scheduled>>,
    /// Events scheduled so far: the next one's place among those due at the same time.
    order: u64,
}

impl Events {
    pub(super) fn schedule(&mut self, at: Instant, event: Event) {
        self.order += 1;
        self.heap.push(Reverse(Scheduled { at, order: self.order, event }));
    }

    /// The next event, and when it is due.
    pub(super) fn pop(&mut self) -> Option<(Instant, Event)> {
        self.heap.pop().map(|Reverse(Scheduled { at, event, .. })| (at, event))
    }

    /// The next event if it is due by `end`.
    pub(super) fn pop_until(&mut self, end: Instant) -> Option<(Instant, Event)> {
        match self.heap.peek() {
            Some(Reverse(next)) if next.at <= end => self.pop(),
            _ => None,
        }
    }

    /// A flow is still to start.
    pub(super) fn starts_pending(&self) -> bool {
        self.heap.iter().any(|Reverse(s)| matches!(s.event, Event::Start { .. }))
    }
}
