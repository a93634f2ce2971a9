/* Generated from ccemu/ports/fields.py (python -m ccemu.ports.fields > port_config.h): edit the table
 * there, not this file; tests/unit/test_port_fields.py fails when the two differ. */
#ifndef CCEMU_PORT_CONFIG_H
#define CCEMU_PORT_CONFIG_H

/* How a port marks the packets it admits (port_config.marker). */
enum port_marker {
	PORT_MARKER_NONE = 0, /* no marking */
	PORT_MARKER_DCTCP = 1, /* DCTCP: an ECN-capable data packet that finds more than ecn_threshold_bytes queued gets CE */
	PORT_MARKER_RED = 2, /* DCQCN's CP (switch ports only): CE with probability 0 at or below red_kmin_bytes, rising to red_pmax_ppm at red_kmax_bytes, 1 above */
	PORT_MARKER_SPRAYPASS = 3, /* SprayPass: departing credits get CE with Pd = dropped / injected credits of the last credit_mark_window credits */
	PORT_MARKER_TCD = 4, /* TCD (switch ports only): congestion -> CE, undetermined -> UE, non-congestion -> no mark */
};
#define PORT_MARKERS 5

/* Per port (key: its id in the run; the programs find it by ifindex: see port_ids). */
struct port_config {
	__u64 link_rate_Bps; /* wire bytes per second of the whole port */
	__u64 credit_rate_Bps; /* cap of the credit class (0: no credit class) */
	__u32 buffer_bytes[PORT_CLASSES]; /* virtual queue limits (tail drop) */
	__u32 ecn_threshold_bytes; /* marker dctcp: K on the data queue */
	__u32 credit_mark_window; /* marker spraypass: N_cdt credits per Pd refresh */
	__u32 classid[PORT_CLASSES]; /* HTB class each class's packets are steered to */
	__u32 wire_overhead_bytes; /* preamble + SFD + FCS + IFG added to skb->len */
	__u32 min_wire_bytes; /* a minimum frame on the wire */
	__u32 burst_bytes[PORT_CLASSES]; /* the HTB classes' burst: what they send at once after idling */
	__u32 port_id; /* this port in the run's port_departures map */
	__u32 peer_port_id; /* the port at the other end of the link (whose packets arrive here) */
	__u32 switch_port; /* 1: a switch's port (residences start at its ingress, end at its egress) */
	__u32 pad;
	__u64 idle_reset_ns; /* idle longer than this, every queue of the port has surely drained */
	__u32 lossless; /* 1: PFC: never drop; when the bytes that arrived through one ingress port of a switch and still sit in its egress queues exceed xoff, the port upstream of that ingress is paused, and resumed once they fall to xon (ports/pfc.py pauses) */
	__u32 xoff_bytes; /* lossless: pause above */
	__u32 xon_bytes; /* lossless: resume at or below */
	__u32 red_kmin_bytes; /* marker red: no mark at or below */
	__u32 red_kmax_bytes; /* marker red: always mark above */
	__u32 red_pmax_ppm; /* marker red: marking probability at kmax, in ppm */
	__u32 marker; /* how the port marks (enum port_marker) */
	__u32 tcd_threshold_bytes; /* marker tcd: the queue above which a port that is ON is congested */
	__u64 tcd_max_on_ns; /* marker tcd: max(T_on) */
	__u64 tcd_sample_ns; /* marker tcd: how often the queue's trend (decreasing or not) is sampled */
};

/* The loader's keys: X(field, type, count) for every field a config line sets; type is u32, u64
 * or marker (a name of PORT_MARKER_NAMES). */
#define PORT_CONFIG_KEYS(X) \
	X(link_rate_Bps, u64, 1) \
	X(credit_rate_Bps, u64, 1) \
	X(buffer_bytes, u32, 2) \
	X(ecn_threshold_bytes, u32, 1) \
	X(credit_mark_window, u32, 1) \
	X(classid, u32, 2) \
	X(wire_overhead_bytes, u32, 1) \
	X(min_wire_bytes, u32, 1) \
	X(burst_bytes, u32, 2) \
	X(port_id, u32, 1) \
	X(peer_port_id, u32, 1) \
	X(switch_port, u32, 1) \
	X(idle_reset_ns, u64, 1) \
	X(lossless, u32, 1) \
	X(xoff_bytes, u32, 1) \
	X(xon_bytes, u32, 1) \
	X(red_kmin_bytes, u32, 1) \
	X(red_kmax_bytes, u32, 1) \
	X(red_pmax_ppm, u32, 1) \
	X(marker, marker, 1) \
	X(tcd_threshold_bytes, u32, 1) \
	X(tcd_max_on_ns, u64, 1) \
	X(tcd_sample_ns, u64, 1) \

/* Every field, padding too: X(field), for the loader's --layout. */
#define PORT_CONFIG_FIELDS(X) \
	X(link_rate_Bps) \
	X(credit_rate_Bps) \
	X(buffer_bytes) \
	X(ecn_threshold_bytes) \
	X(credit_mark_window) \
	X(classid) \
	X(wire_overhead_bytes) \
	X(min_wire_bytes) \
	X(burst_bytes) \
	X(port_id) \
	X(peer_port_id) \
	X(switch_port) \
	X(pad) \
	X(idle_reset_ns) \
	X(lossless) \
	X(xoff_bytes) \
	X(xon_bytes) \
	X(red_kmin_bytes) \
	X(red_kmax_bytes) \
	X(red_pmax_ppm) \
	X(marker) \
	X(tcd_threshold_bytes) \
	X(tcd_max_on_ns) \
	X(tcd_sample_ns) \

#define PORT_MARKER_NAMES {"none", "dctcp", "red", "spraypass", "tcd"}

#endif
