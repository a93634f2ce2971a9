/* Shared by port.bpf.c (kernel side), port_loader.c and ccemu/ports/maps.py (which mirrors the
 * layouts with the struct module; tests compare them with `port_loader --layout`).
 *
 * Two programs per port. At egress, before the HTB tree that does the real shaping, it
 * classifies credits vs data (transport/wire-format.md), drops at the buffer size, CE-marks
 * and counts. At ingress, it counts what the port at the other end of the link has sent:
 * a packet arriving here has left that port's queue. A port's queue is thus measured, not
 * modelled: admitted minus departed bytes. An exact fluid queue per class, draining at the
 * rates HTB gives the classes, is kept beside it as the ideal port; the gap between the two
 * is how far the emulation lags behind an ideal switch.
 *
 * A switch also holds packets between its ports: ovs-vswitchd reads them from its receive
 * sockets and forwards them in one thread, and when it falls behind they wait there, in no
 * port's queue. The programs measure that too: a switch port's ingress notes when each packet
 * arrived (keyed by the packet's first bytes), the egress port it leaves by looks it up, and
 * the difference (the packet's residence in the switch) goes into that egress port's
 * histogram. */
#ifndef CCEMU_PORT_H
#define CCEMU_PORT_H

#define PORT_CLASS_DATA 0
#define PORT_CLASS_CREDIT 1
#define PORT_CLASSES 2
#define PORT_MAX_PORTS 4096      /* per namespace: the lines of one attach config */
#define PORT_MAX_FABRIC_PORTS 65536 /* port ids of a whole run */
/* Histograms are log-linear: bucket 0 holds values under 2^FIRST_LOG2, then 2^LOG_SUB_BUCKETS_LOG2
 * buckets per doubling (each 14-25 % of its lower edge wide), the last bucket holding the rest.
 * ccemu/ports/maps.py log_linear_bounds reads them. */
#define LOG_SUB_BUCKETS_LOG2 2
/* Residence: from ~1 us (2^10 ns) up to ~14 s. */
#define PORT_RESIDENCE_BUCKETS 96
#define RESIDENCE_FIRST_LOG2 10
/* Queue length: from 64 B (below the smallest frame: 80-96 B holds one credit, 1536-1792 B one
 * full frame) up to ~56 MB. */
#define PORT_QUEUE_BUCKETS 80
#define QUEUE_FIRST_LOG2 6
/* A packet is recognised inside its switch by its first bytes from the IP header on: IP
 * addresses, id and length, the transport ports and the start of its payload (TCP's sequence
 * and ack numbers; ccemu's flow, sequence and echo fields). Nothing a switch forwards changes
 * them between its ingress and its egress port. */
#define RESIDENCE_KEY_BYTES 48
/* Bytes of that key a port may rewrite (ECN marks change tos and the header checksum): the
 * lossless mode's per-packet record, looked up where the packet arrives at the next hop, leaves
 * them out of its key. */
#define KEY_TOS_BYTE 1
#define KEY_CHECKSUM_BYTE 10

/* Lossless (PFC) mode. Pause durations: bucket 0 holds pauses under 2 us, bucket b >= 1 those in
 * [2^b, 2^(b+1)) us, the last the rest (up to ~1 h). */
#define PFC_HIST_BUCKETS 32
#define PFC_EVENTS_BYTES (256 * 1024) /* ring buffer of pause/resume decisions, for the pause agent */

/* TCD (ternary congestion detection) port states. */
#define TCD_NONCONGESTION 0
#define TCD_CONGESTION 1
#define TCD_UNDETERMINED 2

/* Wire format: a ccemu packet is UDP whose payload starts with this magic and a type. */
#define CCEMU_MAGIC 0xCCE1
#define CCEMU_TYPE_CREDIT 2

/* struct port_config (per port) and enum port_marker: generated from ccemu/ports/fields.py. */
#include "port_config.h"

/* A packet inside a switch, by its first bytes (see RESIDENCE_KEY_BYTES). */
struct residence_key {
	__u8 bytes[RESIDENCE_KEY_BYTES];
};

/* Where a packet inside a switch came in (value of the residence map). */
struct residence_arrival {
	__u64 ns;
	__u32 ingress_port_id;      /* the switch port it arrived through */
	__u32 upstream_port_id;     /* the port at the other end of that link: the one PFC pauses */
};

/* Lossless mode, per port of the run (key: port id, shared by every namespace). A switch port
 * as an ingress holds bytes; any port as an egress may be paused by its downstream. */
struct port_pfc {
	__s64 held_bytes;           /* arrived through this port, still queued in its switch's egress queues */
	__u64 max_held_bytes;
	__u64 paused;               /* 1: this port is paused now (its downstream's ingress is over xoff);
	                             * 64-bit for BPF's compare-and-swap */
	__u64 paused_since_ns;
	__u64 resumed_ns;           /* the last resume (0: never paused) */
	__u64 pause_events;
	__u64 paused_ns;            /* time paused, over the pauses that ended */
	__u64 pause_histogram[PFC_HIST_BUCKETS];
};

/* A packet queued at a lossless switch port (key: its residence key without tos and checksum),
 * found again where it arrives at the next hop: it has left the queue, and its ingress holds less. */
struct pfc_packet {
	__u32 ingress_port_id;
	__u32 upstream_port_id;
	__u32 wire_bytes;
	__u32 pad;
};

/* A pause or resume decision, for ports/pfc.py's agent, which carries it out. */
struct pfc_event {
	__u64 ns;                   /* bpf_ktime_get_ns() of the decision */
	__u32 port_id;              /* the port to pause or resume */
	__u32 pause;                /* 1: pause, 0: resume */
};

/* Per port of the run (key: port id, shared by every namespace of the run): what has left
 * the port's queue, counted where it arrives, at the peer's ingress. */
struct port_departures {
	__u64 bytes[PORT_CLASSES];
	__u64 packets[PORT_CLASSES];
	__u64 unparsed_packets;     /* of which not IPv4 (e.g. OVS's one priming frame) */
};

struct port_class_stats {
	__u64 enqueued_packets;
	__u64 enqueued_bytes;
	__u64 dropped_packets;
	__u64 dropped_bytes;
	__u64 marked_packets;       /* CE set here: a packet that arrives already CE is not counted again */
	__u64 marked_bytes;
	__u64 ue_marked_packets;    /* TCD's UE set here (ECT(0) -> ECT(1)) */
	__u64 max_queue_bytes;
	__u64 lag_sum_bytes;        /* sum over enqueues of |real - ideal queue| */
	__u64 max_lag_bytes;
	/* Exact averages (never a histogram's midpoints). Per arrival: over the enqueued frames, the
	 * queue each joined, itself included (its mean: / enqueued_packets). Over time: the queue's
	 * integral in byte x ns, brought up to date at every enqueue and every departure (128 bits:
	 * a full 4 MB buffer would wrap 64 bits in 76 minutes). */
	__u64 queue_sum_bytes;
	__u64 queue_area_lo;
	__u64 queue_area_hi;
	__u64 queue_histogram[PORT_QUEUE_BUCKETS]; /* one count per enqueue, by queue length after it */
};

/* Time spent inside the switch by the IPv4 packets that left through this (switch) port. */
struct port_residence {
	__u64 packets;              /* with an arrival on record */
	__u64 sum_ns;
	__u64 max_ns;
	__u64 untracked_packets;    /* without one: its record was evicted (the switch held more packets
	                             * than the residence map follows); rarely, two identical datagrams
	                             * inside at once (one key), or one forwarded before its ingress
	                             * hook ran (OVS's packet socket gets it first) */
	__u64 histogram[PORT_RESIDENCE_BUCKETS];
};

struct port_state {
	struct bpf_spin_lock lock;            /* egress may run on several CPUs at once */
	__u32 pad;
	__u64 last_ns;                        /* when the fluid queues were last drained */
	__u64 queue_mbytes[PORT_CLASSES];     /* ideal (fluid) queue lengths in milli-bytes */
	__u64 tokens_mbytes[PORT_CLASSES];    /* unused drain saved up while idle, <= burst */
	__u64 admitted_bytes[PORT_CLASSES];   /* real queue = admitted - departed */
	__u32 window_credits;                 /* credits seen in the current N_cdt window */
	__u32 window_drops;                   /* of which dropped */
	__u32 mark_probability_ppm;           /* SprayPass Pd, refreshed every window */
	__u32 unparsed_packets;               /* counted into data, never marked */
	__u64 reset_residue_bytes;            /* still "queued" when an idle reset forgot them: lost after admission */
	__u32 tcd_state;                      /* TCD_* */
	__u32 tcd_decreasing;                 /* the queue shrank over the last trend sample */
	__u64 tcd_sample_ns;                  /* when the trend was last sampled */
	__u64 tcd_sample_queue;               /* the queue then */
	/* The time integrals' own queue (port_class_stats.queue_area_*): what the real queue held
	 * since integral_ns, moved at every enqueue (here) and departure (at the peer's ingress). */
	__u64 integral_ns;
	__u64 integral_queue_bytes[PORT_CLASSES];
	struct port_class_stats stats[PORT_CLASSES];
	struct port_residence residence;
};

/* The bpf datapath (fabric.datapath: bpf; switch.h): routes of every switch, written by
 * `port_loader routes` from fabric/forwarding.py's lines. */
#define SWITCH_MAX_UPLINKS 16
#define PATH_IDS 256               /* model/routing.py PATH_ID_BITS = 8 */
#define PATH_ID_PORT_BASE 0xA000   /* UDP source ports 0xA000-0xBFFF carry a path-id in their low bits */
#define PATH_ID_PORT_MASK 0xE000

/* A switch's ECMP uplinks: path-id p leaves by ifindex[(p / stride) % count]. */
struct switch_uplinks {
	__u32 stride;
	__u32 count;
	__u32 ifindex[SWITCH_MAX_UPLINKS];
};

struct host_route_key {
	__u32 switch_id;
	__u32 addr; /* IPv4, network order */
};

/* The one port toward a host; at the switch the host hangs off, its MAC is written in (hosts
 * address every packet to the gateway's MAC). */
struct host_route {
	__u32 ifindex;
	__u8 mac[6];
	__u8 rewrite_mac;
	__u8 pad;
};

#endif
