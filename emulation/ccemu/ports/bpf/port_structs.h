/* Generated from ccemu/ports/structs.py (python -m ccemu.ports.structs > port_structs.h): edit the
 * description there, not this file; tests/unit/test_port_structs.py fails when the two differ.
 * port.h includes it after the macros below. */
#ifndef CCEMU_PORT_STRUCTS_H
#define CCEMU_PORT_STRUCTS_H

/* The array lengths Python reads the structs with. */
#if PORT_CLASSES != 2
#error "PORT_CLASSES is not 2, the length ccemu/ports/structs.py reads"
#endif
#if PORT_QUEUE_BUCKETS != 80
#error "PORT_QUEUE_BUCKETS is not 80, the length ccemu/ports/structs.py reads"
#endif
#if PORT_RESIDENCE_BUCKETS != 96
#error "PORT_RESIDENCE_BUCKETS is not 96, the length ccemu/ports/structs.py reads"
#endif
#if PFC_HIST_BUCKETS != 32
#error "PFC_HIST_BUCKETS is not 32, the length ccemu/ports/structs.py reads"
#endif

/* Per port of the run (key: port id, shared by every namespace of the run): what has left the
 * port's queue, counted where it arrives, at the peer's ingress. */
struct port_departures {
	__u64 bytes[PORT_CLASSES];
	__u64 packets[PORT_CLASSES];
	__u64 unparsed_packets; /* of which not IPv4 (e.g. OVS's one priming frame) */
};

/* Per class of a port (port_state.stats). */
struct port_class_stats {
	__u64 enqueued_packets;
	__u64 enqueued_bytes;
	__u64 dropped_packets;
	__u64 dropped_bytes;
	/* CE set here: a packet that arrives already CE is not counted again */
	__u64 marked_packets;
	__u64 marked_bytes;
	__u64 ue_marked_packets; /* TCD's UE set here (ECT(0) -> ECT(1)) */
	__u64 max_queue_bytes;
	__u64 lag_sum_bytes; /* sum over enqueues of |real - ideal queue| */
	__u64 max_lag_bytes;
	/* Exact averages (never a histogram's midpoints). Per arrival: over the enqueued frames,
	 * the queue each joined, itself included (its mean: / enqueued_packets). Over time: the
	 * queue's integral in byte x ns, brought up to date at every enqueue and every departure
	 * (128 bits: a full 4 MB buffer would wrap 64 bits in 76 minutes). */
	__u64 queue_sum_bytes;
	__u64 queue_area_lo;
	__u64 queue_area_hi;
	/* one count per enqueue, by queue length after it */
	__u64 queue_histogram[PORT_QUEUE_BUCKETS];
};

/* Time spent inside the switch by the IPv4 packets that left through this (switch) port. */
struct port_residence {
	__u64 packets; /* with an arrival on record */
	__u64 sum_ns;
	__u64 max_ns;
	/* without one: its record was evicted (the switch held more packets than the residence map
	 * follows); rarely, two identical datagrams inside at once (one key), or one forwarded
	 * before its ingress hook ran (OVS's packet socket gets it first) */
	__u64 untracked_packets;
	__u64 histogram[PORT_RESIDENCE_BUCKETS];
};

/* Lossless mode, per port of the run (key: port id, shared by every namespace). A switch port as an
 * ingress holds bytes; any port as an egress may be paused by its downstream. */
struct port_pfc {
	/* arrived through this port, still queued in its switch's egress queues */
	__s64 held_bytes;
	__u64 max_held_bytes;
	/* 1: this port is paused now (its downstream's ingress is over xoff); 64-bit for BPF's
	 * compare-and-swap */
	__u64 paused;
	__u64 paused_since_ns;
	__u64 resumed_ns; /* the last resume (0: never paused) */
	__u64 pause_events;
	__u64 paused_ns; /* time paused, over the pauses that ended */
	__u64 pause_histogram[PFC_HIST_BUCKETS];
};

/* A pause or resume decision, for ports/pfc.py's agent, which carries it out. */
struct pfc_event {
	__u64 ns; /* bpf_ktime_get_ns() of the decision */
	__u32 port_id; /* the port to pause or resume */
	__u32 pause; /* 1: pause, 0: resume */
};

/* Per port (key: its id in the run): the program's own state and counters. */
struct port_state {
	struct bpf_spin_lock lock; /* egress may run on several CPUs at once */
	__u32 pad;
	__u64 last_ns; /* when the fluid queues were last drained */
	__u64 queue_mbytes[PORT_CLASSES]; /* ideal (fluid) queue lengths in milli-bytes */
	__u64 tokens_mbytes[PORT_CLASSES]; /* unused drain saved up while idle, <= burst */
	__u64 admitted_bytes[PORT_CLASSES]; /* real queue = admitted - departed */
	__u32 window_credits; /* credits seen in the current N_cdt window */
	__u32 window_drops; /* of which dropped */
	__u32 mark_probability_ppm; /* SprayPass Pd, refreshed every window */
	__u32 unparsed_packets; /* counted into data, never marked */
	/* still "queued" when an idle reset forgot them: lost after admission */
	__u64 reset_residue_bytes;
	__u32 tcd_state; /* TCD_* */
	__u32 tcd_decreasing; /* the queue shrank over the last trend sample */
	__u64 tcd_sample_ns; /* when the trend was last sampled */
	__u64 tcd_sample_queue; /* the queue then */
	/* The time integrals' own queue (port_class_stats.queue_area_*): what the real queue held
	 * since integral_ns, moved at every enqueue (here) and departure (at the peer's ingress). */
	__u64 integral_ns;
	__u64 integral_queue_bytes[PORT_CLASSES];
	struct port_class_stats stats[PORT_CLASSES];
	struct port_residence residence;
};

/* Every struct and field, for the loader's --layout: SIZE(struct) FIELD(struct, field). */
#define PORT_STRUCTS_LAYOUT(SIZE, FIELD) \
	SIZE(port_departures) \
	FIELD(port_departures, bytes) \
	FIELD(port_departures, packets) \
	FIELD(port_departures, unparsed_packets) \
	SIZE(port_class_stats) \
	FIELD(port_class_stats, enqueued_packets) \
	FIELD(port_class_stats, enqueued_bytes) \
	FIELD(port_class_stats, dropped_packets) \
	FIELD(port_class_stats, dropped_bytes) \
	FIELD(port_class_stats, marked_packets) \
	FIELD(port_class_stats, marked_bytes) \
	FIELD(port_class_stats, ue_marked_packets) \
	FIELD(port_class_stats, max_queue_bytes) \
	FIELD(port_class_stats, lag_sum_bytes) \
	FIELD(port_class_stats, max_lag_bytes) \
	FIELD(port_class_stats, queue_sum_bytes) \
	FIELD(port_class_stats, queue_area_lo) \
	FIELD(port_class_stats, queue_area_hi) \
	FIELD(port_class_stats, queue_histogram) \
	SIZE(port_residence) \
	FIELD(port_residence, packets) \
	FIELD(port_residence, sum_ns) \
	FIELD(port_residence, max_ns) \
	FIELD(port_residence, untracked_packets) \
	FIELD(port_residence, histogram) \
	SIZE(port_pfc) \
	FIELD(port_pfc, held_bytes) \
	FIELD(port_pfc, max_held_bytes) \
	FIELD(port_pfc, paused) \
	FIELD(port_pfc, paused_since_ns) \
	FIELD(port_pfc, resumed_ns) \
	FIELD(port_pfc, pause_events) \
	FIELD(port_pfc, paused_ns) \
	FIELD(port_pfc, pause_histogram) \
	SIZE(pfc_event) \
	FIELD(pfc_event, ns) \
	FIELD(pfc_event, port_id) \
	FIELD(pfc_event, pause) \
	SIZE(port_state) \
	FIELD(port_state, lock) \
	FIELD(port_state, pad) \
	FIELD(port_state, last_ns) \
	FIELD(port_state, queue_mbytes) \
	FIELD(port_state, tokens_mbytes) \
	FIELD(port_state, admitted_bytes) \
	FIELD(port_state, window_credits) \
	FIELD(port_state, window_drops) \
	FIELD(port_state, mark_probability_ppm) \
	FIELD(port_state, unparsed_packets) \
	FIELD(port_state, reset_residue_bytes) \
	FIELD(port_state, tcd_state) \
	FIELD(port_state, tcd_decreasing) \
	FIELD(port_state, tcd_sample_ns) \
	FIELD(port_state, tcd_sample_queue) \
	FIELD(port_state, integral_ns) \
	FIELD(port_state, integral_queue_bytes) \
	FIELD(port_state, stats) \
	FIELD(port_state, residence) \

/* The layouts Python reads (ports/layouts.py), checked by every compiler that includes this. */
_Static_assert(sizeof(struct port_departures) == 40, "struct port_departures");
_Static_assert(__builtin_offsetof(struct port_departures, bytes) == 0, "port_departures.bytes");
_Static_assert(__builtin_offsetof(struct port_departures, packets) == 16, "port_departures.packets");
_Static_assert(__builtin_offsetof(struct port_departures, unparsed_packets) == 32, "port_departures.unparsed_packets");
_Static_assert(sizeof(struct port_class_stats) == 744, "struct port_class_stats");
_Static_assert(__builtin_offsetof(struct port_class_stats, enqueued_packets) == 0, "port_class_stats.enqueued_packets");
_Static_assert(__builtin_offsetof(struct port_class_stats, enqueued_bytes) == 8, "port_class_stats.enqueued_bytes");
_Static_assert(__builtin_offsetof(struct port_class_stats, dropped_packets) == 16, "port_class_stats.dropped_packets");
_Static_assert(__builtin_offsetof(struct port_class_stats, dropped_bytes) == 24, "port_class_stats.dropped_bytes");
_Static_assert(__builtin_offsetof(struct port_class_stats, marked_packets) == 32, "port_class_stats.marked_packets");
_Static_assert(__builtin_offsetof(struct port_class_stats, marked_bytes) == 40, "port_class_stats.marked_bytes");
_Static_assert(__builtin_offsetof(struct port_class_stats, ue_marked_packets) == 48, "port_class_stats.ue_marked_packets");
_Static_assert(__builtin_offsetof(struct port_class_stats, max_queue_bytes) == 56, "port_class_stats.max_queue_bytes");
_Static_assert(__builtin_offsetof(struct port_class_stats, lag_sum_bytes) == 64, "port_class_stats.lag_sum_bytes");
_Static_assert(__builtin_offsetof(struct port_class_stats, max_lag_bytes) == 72, "port_class_stats.max_lag_bytes");
_Static_assert(__builtin_offsetof(struct port_class_stats, queue_sum_bytes) == 80, "port_class_stats.queue_sum_bytes");
_Static_assert(__builtin_offsetof(struct port_class_stats, queue_area_lo) == 88, "port_class_stats.queue_area_lo");
_Static_assert(__builtin_offsetof(struct port_class_stats, queue_area_hi) == 96, "port_class_stats.queue_area_hi");
_Static_assert(__builtin_offsetof(struct port_class_stats, queue_histogram) == 104, "port_class_stats.queue_histogram");
_Static_assert(sizeof(struct port_residence) == 800, "struct port_residence");
_Static_assert(__builtin_offsetof(struct port_residence, packets) == 0, "port_residence.packets");
_Static_assert(__builtin_offsetof(struct port_residence, sum_ns) == 8, "port_residence.sum_ns");
_Static_assert(__builtin_offsetof(struct port_residence, max_ns) == 16, "port_residence.max_ns");
_Static_assert(__builtin_offsetof(struct port_residence, untracked_packets) == 24, "port_residence.untracked_packets");
_Static_assert(__builtin_offsetof(struct port_residence, histogram) == 32, "port_residence.histogram");
_Static_assert(sizeof(struct port_pfc) == 312, "struct port_pfc");
_Static_assert(__builtin_offsetof(struct port_pfc, held_bytes) == 0, "port_pfc.held_bytes");
_Static_assert(__builtin_offsetof(struct port_pfc, max_held_bytes) == 8, "port_pfc.max_held_bytes");
_Static_assert(__builtin_offsetof(struct port_pfc, paused) == 16, "port_pfc.paused");
_Static_assert(__builtin_offsetof(struct port_pfc, paused_since_ns) == 24, "port_pfc.paused_since_ns");
_Static_assert(__builtin_offsetof(struct port_pfc, resumed_ns) == 32, "port_pfc.resumed_ns");
_Static_assert(__builtin_offsetof(struct port_pfc, pause_events) == 40, "port_pfc.pause_events");
_Static_assert(__builtin_offsetof(struct port_pfc, paused_ns) == 48, "port_pfc.paused_ns");
_Static_assert(__builtin_offsetof(struct port_pfc, pause_histogram) == 56, "port_pfc.pause_histogram");
_Static_assert(sizeof(struct pfc_event) == 16, "struct pfc_event");
_Static_assert(__builtin_offsetof(struct pfc_event, ns) == 0, "pfc_event.ns");
_Static_assert(__builtin_offsetof(struct pfc_event, port_id) == 8, "pfc_event.port_id");
_Static_assert(__builtin_offsetof(struct pfc_event, pause) == 12, "pfc_event.pause");
_Static_assert(sizeof(struct port_state) == 2424, "struct port_state");
_Static_assert(__builtin_offsetof(struct port_state, lock) == 0, "port_state.lock");
_Static_assert(__builtin_offsetof(struct port_state, pad) == 4, "port_state.pad");
_Static_assert(__builtin_offsetof(struct port_state, last_ns) == 8, "port_state.last_ns");
_Static_assert(__builtin_offsetof(struct port_state, queue_mbytes) == 16, "port_state.queue_mbytes");
_Static_assert(__builtin_offsetof(struct port_state, tokens_mbytes) == 32, "port_state.tokens_mbytes");
_Static_assert(__builtin_offsetof(struct port_state, admitted_bytes) == 48, "port_state.admitted_bytes");
_Static_assert(__builtin_offsetof(struct port_state, window_credits) == 64, "port_state.window_credits");
_Static_assert(__builtin_offsetof(struct port_state, window_drops) == 68, "port_state.window_drops");
_Static_assert(__builtin_offsetof(struct port_state, mark_probability_ppm) == 72, "port_state.mark_probability_ppm");
_Static_assert(__builtin_offsetof(struct port_state, unparsed_packets) == 76, "port_state.unparsed_packets");
_Static_assert(__builtin_offsetof(struct port_state, reset_residue_bytes) == 80, "port_state.reset_residue_bytes");
_Static_assert(__builtin_offsetof(struct port_state, tcd_state) == 88, "port_state.tcd_state");
_Static_assert(__builtin_offsetof(struct port_state, tcd_decreasing) == 92, "port_state.tcd_decreasing");
_Static_assert(__builtin_offsetof(struct port_state, tcd_sample_ns) == 96, "port_state.tcd_sample_ns");
_Static_assert(__builtin_offsetof(struct port_state, tcd_sample_queue) == 104, "port_state.tcd_sample_queue");
_Static_assert(__builtin_offsetof(struct port_state, integral_ns) == 112, "port_state.integral_ns");
_Static_assert(__builtin_offsetof(struct port_state, integral_queue_bytes) == 120, "port_state.integral_queue_bytes");
_Static_assert(__builtin_offsetof(struct port_state, stats) == 136, "port_state.stats");
_Static_assert(__builtin_offsetof(struct port_state, residence) == 1624, "port_state.residence");

#endif
