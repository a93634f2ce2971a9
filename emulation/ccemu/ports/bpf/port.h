/* Shared by port.bpf.c (kernel side) and port_loader.c. The structs Python reads too are generated
 * from ccemu/ports/ (port_config.h from fields.py, port_structs.h from structs.py), which also
 * gives Python their layouts; `port_loader --layout` prints the C ones for a test to compare.
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
/* The structs of the maps Python reads besides port_config (port_departures, port_class_stats,
 * port_residence, port_pfc, pfc_event, port_state): generated from ccemu/ports/structs.py. */
#include "port_structs.h"

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

/* A packet queued at a lossless switch port (key: its residence key without tos and checksum),
 * found again where it arrives at the next hop: it has left the queue, and its ingress holds less. */
struct pfc_packet {
	__u32 ingress_port_id;
	__u32 upstream_port_id;
	__u32 wire_bytes;
	__u32 pad;
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
