// SPDX-License-Identifier: GPL-2.0
/* Port programs: see port.h. Attached with clsact at egress and ingress of every switch
 * port and host NIC.
 *
 * Egress decides on the real queue: admitted bytes of the class minus the bytes its peer has
 * seen arrive. A packet that would overflow its class's buffer is dropped here (the HTB leaf
 * FIFOs are sized so that they never drop first); DCTCP and SprayPass marks follow the same
 * queue (the port's marker: port_config.marker); the rest is steered to its HTB class via
 * skb->priority.
 *
 * Beside it, the ideal port, a fluid model exact at every packet: the link drains R_link wire
 * bytes/s; the credit class is served first but never above R_credit; data gets the rest. Like
 * the HTB classes it models, a class that idles saves up its unused drain as tokens, up to its
 * burst, and a packet that finds tokens leaves at once. When the machine falls behind (CPU
 * stalls, hypervisor steal) the real queue grows past the ideal one: the lag counters say by
 * how much. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "port.h"

#define INET_ECN_MASK 3
#define INET_ECN_CE 3
#define INET_ECN_ECT_0 2
#define INET_ECN_ECT_1 1 /* TCD's UE (transport/wire-format.md) */
#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))

/* Every map is the run's: the programs are loaded (and verified) once per run and attached in
 * every namespace (port_loader). The loader sizes the maps for the run's ports. */

/* ifindex -> port id. ifindexes repeat across namespaces, but not those of a run's ports: the
 * fabric creates every interface with its own (ports/program.py ifindex_of), so one map serves
 * every namespace. Others (OVS's own devices) are not in it: the programs pass their packets. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PORT_MAX_FABRIC_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} port_ids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PORT_MAX_FABRIC_PORTS);
	__type(key, __u32);
	__type(value, struct port_config);
} port_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PORT_MAX_FABRIC_PORTS);
	__type(key, __u32);
	__type(value, struct port_state);
} port_state SEC(".maps");

/* Arrival times of the packets inside the switches (one packet is inside one switch at a time:
 * its egress there takes its record before the next switch's ingress makes one). LRU: a packet
 * that never leaves (dropped inside the switch) is forgotten once newer ones need the room. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct residence_key);
	__type(value, struct residence_arrival);
} residence SEC(".maps");

/* Lossless mode, shared by the run like port_departures (see port.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PORT_MAX_FABRIC_PORTS);
	__type(key, __u32);
	__type(value, struct port_pfc);
} port_pfc SEC(".maps");

/* Not an LRU: an evicted record's bytes would stay held for ever (and could keep a port paused).
 * A full map refuses the record instead, and that packet is not held. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct residence_key);
	__type(value, struct pfc_packet);
} pfc_packets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, PFC_EVENTS_BYTES);
} pfc_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PORT_MAX_FABRIC_PORTS);
	__type(key, __u32);
	__type(value, struct port_departures);
} port_departures SEC(".maps");

struct parsed {
	int ip_offset;   /* -1: not IPv4 */
	__u8 tos;
	int is_credit;
};

/* The run's id of the port the program runs at; 0 (no port) for one it was not attached for. */
static __always_inline __u32 port_of(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	__u32 *id = bpf_map_lookup_elem(&port_ids, &ifindex);

	return id ? *id : 0;
}

static __always_inline void parse(struct __sk_buff *skb, struct parsed *p)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct udphdr *udp;
	__u8 *payload;

	p->ip_offset = -1;
	p->is_credit = 0;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->ihl < 5)
		return;
	p->ip_offset = sizeof(*eth);
	p->tos = ip->tos;
	if (ip->protocol != IPPROTO_UDP || ip->ihl != 5)
		return;
	udp = (void *)(ip + 1);
	payload = (void *)(udp + 1);
	if ((void *)(payload + 3) > end)
		return;
	p->is_credit = ((payload[0] << 8) | payload[1]) == CCEMU_MAGIC && payload[2] == CCEMU_TYPE_CREDIT;
}

/* Rewrites the packet's ECN field to `ecn` (CE, or TCD's UE). */
static __always_inline void set_ecn(struct __sk_buff *skb, int ip_offset, __u8 tos, __u8 ecn)
{
	__u8 marked = (tos & ~INET_ECN_MASK) | ecn;
	__u16 old_word, new_word;
	__u8 vihl;

	/* The header checksum sums 16-bit words; tos shares its word with version/ihl. */
	if (bpf_skb_load_bytes(skb, ip_offset, &vihl, 1))
		return;
	old_word = bpf_htons(((__u16)vihl << 8) | tos);
	new_word = bpf_htons(((__u16)vihl << 8) | marked);
	bpf_l3_csum_replace(skb, ip_offset + offsetof(struct iphdr, check), old_word, new_word, 2);
	bpf_skb_store_bytes(skb, ip_offset + offsetof(struct iphdr, tos), &marked, 1, 0);
}

static __always_inline __u64 min_u64(__u64 a, __u64 b)
{
	return a < b ? a : b;
}

static __always_inline __u32 class_of(const struct parsed *p, const struct port_config *cfg)
{
	return p->is_credit && cfg->credit_rate_Bps ? PORT_CLASS_CREDIT : PORT_CLASS_DATA;
}

/* The packet's key in the residence map: its first bytes from the IP header on, zero-padded. */
static __always_inline int residence_key(struct __sk_buff *skb, const struct parsed *p, struct residence_key *key)
{
	__u64 len = skb->len; /* 64-bit: no zero-extended copy for clang to pass in its place */

	__builtin_memset(key, 0, sizeof(*key));
	if (p->ip_offset < 0 || len < sizeof(struct ethhdr) + sizeof(struct iphdr))
		return -1;
	len -= sizeof(struct ethhdr);
	if (len > RESIDENCE_KEY_BYTES)
		len = RESIDENCE_KEY_BYTES;
	return bpf_skb_load_bytes(skb, sizeof(struct ethhdr), key->bytes, len);
}

/* The key of the lossless mode's packet record: the residence key without the bytes a port's
 * marks rewrite. */
static __always_inline int pfc_key(struct __sk_buff *skb, const struct parsed *p, struct residence_key *key)
{
	if (residence_key(skb, p, key))
		return -1;
	key->bytes[KEY_TOS_BYTE] = 0;
	key->bytes[KEY_CHECKSUM_BYTE] = 0;
	key->bytes[KEY_CHECKSUM_BYTE + 1] = 0;
	return 0;
}

static __always_inline __u64 log2_u64(__u64 v)
{
	__u64 log2 = 0;

	if (v >> 32) {
		v >>= 32;
		log2 += 32;
	}
	if (v >> 16) {
		v >>= 16;
		log2 += 16;
	}
	if (v >> 8) {
		v >>= 8;
		log2 += 8;
	}
	if (v >> 4) {
		v >>= 4;
		log2 += 4;
	}
	if (v >> 2) {
		v >>= 2;
		log2 += 2;
	}
	if (v >> 1)
		log2 += 1;
	return log2;
}

/* Bucket of `v` in a log-linear histogram whose bucket 0 holds values under 2^first_log2 and
 * whose last of `buckets` the rest (port.h). */
static __always_inline __u64 log_linear_bucket(__u64 v, __u64 first_log2, __u64 buckets)
{
	__u64 log2, bucket; /* 64-bit: see residence_key */

	if (v < (1ULL << first_log2))
		return 0;
	log2 = log2_u64(v);
	bucket = 1 + ((log2 - first_log2) << LOG_SUB_BUCKETS_LOG2) +
		 ((v >> (log2 - LOG_SUB_BUCKETS_LOG2)) & ((1 << LOG_SUB_BUCKETS_LOG2) - 1));
	return bucket < buckets ? bucket : buckets - 1;
}

/* Adds q x dt to a 128-bit sum (lo, hi): q below 2^32, dt any. */
static __always_inline void add_product(__u64 *lo, __u64 *hi, __u64 q, __u64 dt)
{
	__u64 low = q * (dt & 0xffffffff), high = q * (dt >> 32), part;

	*lo += low;
	*hi += *lo < low;
	part = high << 32;
	*lo += part;
	*hi += (*lo < part) + (high >> 32);
}

/* Brings the queues' time integrals up to `now` (under the port's lock): each class's queue since
 * the last event, times the time since. An event another CPU stamped later has already done so. */
static __always_inline void integrate(struct port_state *st, __u64 now)
{
	__u64 dt, q;

	if (now <= st->integral_ns)
		return;
	dt = now - st->integral_ns;
	for (int cls = 0; cls < PORT_CLASSES; cls++) {
		q = st->integral_queue_bytes[cls];
		if (q)
			add_product(&st->stats[cls].queue_area_lo, &st->stats[cls].queue_area_hi,
				    q < 0xffffffffULL ? q : 0xffffffffULL, dt);
	}
	st->integral_ns = now;
}

/* Frames the packet leaves as. Kernel TCP hands the qdisc GSO packets (the stack always builds
 * them; a device without offloads segments them only after the qdisc), which reach the peer as
 * gso_segs frames, each with its own headers: counted as one, a queue's departures would outrun
 * its admissions and the port would think its queue shorter than it is. */
static __always_inline __u32 frames_of(const struct __sk_buff *skb)
{
	return skb->gso_segs > 1 ? skb->gso_segs : 1;
}

/* Bytes of headers each frame of a GSO packet repeats: Ethernet, IP and TCP or UDP. */
static __always_inline __u32 header_bytes(struct __sk_buff *skb, const struct parsed *p)
{
	__u8 ip[10], doff;
	__u32 ip_len;

	if (p->ip_offset < 0 || bpf_skb_load_bytes(skb, p->ip_offset, ip, sizeof(ip)))
		return sizeof(struct ethhdr);
	ip_len = (ip[0] & 0xf) * 4;
	if (ip[9] == IPPROTO_TCP && !bpf_skb_load_bytes(skb, p->ip_offset + ip_len + 12, &doff, 1))
		return sizeof(struct ethhdr) + ip_len + (doff >> 4) * 4;
	return sizeof(struct ethhdr) + ip_len + sizeof(struct udphdr);
}

static __always_inline __u64 wire_bytes(struct __sk_buff *skb, const struct parsed *p, const struct port_config *cfg)
{
	__u32 frames = frames_of(skb);
	__u64 wire = skb->len + cfg->wire_overhead_bytes;

	if (frames > 1)
		wire += (__u64)(frames - 1) * (header_bytes(skb, p) + cfg->wire_overhead_bytes);
	return wire < cfg->min_wire_bytes ? cfg->min_wire_bytes : wire;
}

/* Lossless mode: hands a pause (1) or resume (0) of `port_id` to the pause agent. */
static __always_inline void pfc_announce(__u32 port_id, __u32 pause, __u64 now)
{
	struct pfc_event *event = bpf_ringbuf_reserve(&pfc_events, sizeof(*event), 0);

	if (!event)
		return; /* ring full: the agent is gone or far behind (the counters still say what was decided) */
	event->ns = now;
	event->port_id = port_id;
	event->pause = pause;
	bpf_ringbuf_submit(event, 0);
}

/* Lossless mode, at a switch's egress: the packet joins this port's queue, and the ingress it
 * came through holds its bytes until the next hop sees it arrive (pfc_release). Past xoff, the
 * port upstream of that ingress is paused. A packet without an arrival record (see
 * port_residence.untracked_packets), or whose record collides with another's, is not held:
 * holding bytes nobody would release could pause a port for ever. */
static __always_inline void pfc_hold(struct __sk_buff *skb, const struct parsed *p, const struct port_config *cfg,
				     const struct residence_arrival *arrival, __u64 wire, __u64 now)
{
	struct pfc_packet record = {
		.ingress_port_id = arrival->ingress_port_id,
		.upstream_port_id = arrival->upstream_port_id,
		.wire_bytes = wire,
	};
	struct residence_key key;
	struct port_pfc *in, *up;
	__s64 held;

	if (pfc_key(skb, p, &key))
		return;
	in = bpf_map_lookup_elem(&port_pfc, &record.ingress_port_id);
	up = bpf_map_lookup_elem(&port_pfc, &record.upstream_port_id);
	if (!in || !up || bpf_map_update_elem(&pfc_packets, &key, &record, BPF_NOEXIST))
		return;
	held = __sync_fetch_and_add(&in->held_bytes, wire) + wire;
	if (held > 0 && (__u64)held > in->max_held_bytes)
		in->max_held_bytes = held; /* a racing update may lose a new maximum by a packet */
	if (held > cfg->xoff_bytes && __sync_val_compare_and_swap(&up->paused, 0, 1) == 0) {
		/* Releases on other CPUs may have brought it down to Xon meanwhile, failing their
		 * resume while the flag was still 0: then no release might come to resume it. */
		if (READ_ONCE(in->held_bytes) <= (__s64)cfg->xon_bytes &&
		    __sync_val_compare_and_swap(&up->paused, 1, 0) == 1)
			return;
		up->paused_since_ns = now;
		__sync_fetch_and_add(&up->pause_events, 1);
		pfc_announce(record.upstream_port_id, 1, now);
	}
}

/* Lossless mode, at any port's ingress: a packet held by the switch upstream has left that
 * switch's queue. Down to xon, the port upstream of its ingress there resumes. */
static __always_inline void pfc_release(struct __sk_buff *skb, const struct parsed *p, const struct port_config *cfg,
					__u64 now)
{
	struct residence_key key;
	struct pfc_packet *record;
	struct port_pfc *in, *up;
	__u32 ingress, upstream;
	__u64 wire, paused_for, bucket, since;
	__s64 held;

	if (pfc_key(skb, p, &key))
		return;
	record = bpf_map_lookup_elem(&pfc_packets, &key);
	if (!record)
		return;
	ingress = record->ingress_port_id;
	upstream = record->upstream_port_id;
	wire = record->wire_bytes;
	if (bpf_map_delete_elem(&pfc_packets, &key))
		return; /* another CPU released it */
	in = bpf_map_lookup_elem(&port_pfc, &ingress);
	up = bpf_map_lookup_elem(&port_pfc, &upstream);
	if (!in || !up)
		return;
	held = __sync_fetch_and_add(&in->held_bytes, -wire) - wire;
	if (held <= (__s64)cfg->xon_bytes && __sync_val_compare_and_swap(&up->paused, 1, 0) == 1) {
		/* A pause whose start the pausing CPU has not written yet shows the previous one's,
		 * older than the last resume: it counts as lasting no time, not since then. */
		since = READ_ONCE(up->paused_since_ns);
		paused_for = now > since && since >= READ_ONCE(up->resumed_ns) ? now - since : 0;
		__sync_fetch_and_add(&up->paused_ns, paused_for);
		up->resumed_ns = now;
		bucket = paused_for < 2000 ? 0 : log2_u64(paused_for / 1000);
		if (bucket >= PFC_HIST_BUCKETS)
			bucket = PFC_HIST_BUCKETS - 1;
		__sync_fetch_and_add(&up->pause_histogram[bucket & (PFC_HIST_BUCKETS - 1)], 1);
		pfc_announce(upstream, 0, now);
	}
}

#include "switch.h"

/* Arrival here = departure from the peer's queue. The peer's classes are this port's: every
 * port of a run has the same profile. At a switch port the arrival also starts the packet's
 * residence in the switch. Returns the port's id (0: not a port of the run). */
static __always_inline __u32 arrive(struct __sk_buff *skb, struct parsed *p)
{
	__u32 id = port_of(skb);
	struct port_config *cfg = id ? bpf_map_lookup_elem(&port_config, &id) : NULL;
	struct port_departures *departed;
	struct residence_arrival arrival;
	struct port_state *peer;
	struct residence_key key;
	__u64 wire, now;
	__u32 cls;

	parse(skb, p);
	if (!cfg)
		return 0;
	departed = bpf_map_lookup_elem(&port_departures, &cfg->peer_port_id);
	if (!departed)
		return 0;
	cls = class_of(p, cfg) & 1;
	wire = wire_bytes(skb, p, cfg);
	__sync_fetch_and_add(&departed->bytes[cls], wire);
	__sync_fetch_and_add(&departed->packets[cls], frames_of(skb));
	/* The departure moves the peer's time integrals too: its queue shrinks now. */
	peer = bpf_map_lookup_elem(&port_state, &cfg->peer_port_id);
	if (peer) {
		now = bpf_ktime_get_ns();
		bpf_spin_lock(&peer->lock);
		integrate(peer, now);
		peer->integral_queue_bytes[cls] -= min_u64(peer->integral_queue_bytes[cls], wire);
		bpf_spin_unlock(&peer->lock);
	}
	if (p->ip_offset < 0)
		__sync_fetch_and_add(&departed->unparsed_packets, 1);
	if (cfg->lossless)
		pfc_release(skb, p, cfg, bpf_ktime_get_ns());
	if (cfg->switch_port && !residence_key(skb, p, &key)) {
		arrival.ns = bpf_ktime_get_ns();
		arrival.ingress_port_id = cfg->port_id;
		arrival.upstream_port_id = cfg->peer_port_id;
		bpf_map_update_elem(&residence, &key, &arrival, BPF_ANY);
	}
	return id;
}

SEC("tc")
int port_ingress(struct __sk_buff *skb)
{
	struct parsed p;

	arrive(skb, &p);
	/* No verdict: the packet goes on as with TC_ACT_OK, through any later filter first (a cut
	 * link's wire end hands it to its tunnel so: fabric/tunnels.py). */
	return TC_ACT_UNSPEC;
}

/* A switch port's ingress when the switches forward in the kernel (switch.h). */
SEC("tc")
int switch_ingress(struct __sk_buff *skb)
{
	struct parsed p;
	__u32 id = arrive(skb, &p);

	return id ? forward(skb, &p, id) : TC_ACT_OK;
}

#define RESIDENCE_UNTRACKED -1 /* no arrival on record */
#define RESIDENCE_NONE -2      /* nothing to measure: not a switch port, or not IPv4 */

/* How long the packet leaving through this switch port spent inside the switch, in ns, and where
 * it came in (`arrival`, when the result is >= 0). */
static __always_inline __s64 residence_of(struct __sk_buff *skb, const struct parsed *p,
					  const struct port_config *cfg, __u64 now, struct residence_arrival *arrival)
{
	struct residence_arrival *arrived;
	struct residence_key key;

	if (!cfg->switch_port || residence_key(skb, p, &key))
		return RESIDENCE_NONE;
	arrived = bpf_map_lookup_elem(&residence, &key);
	if (!arrived)
		return RESIDENCE_UNTRACKED;
	*arrival = *arrived;
	bpf_map_delete_elem(&residence, &key);
	return now > arrival->ns ? now - arrival->ns : 0;
}

/* DCQCN's CP marking (see port_config.red_*): the chance, in ppm, of marking a packet that
 * finds `queue` bytes queued. */
static __always_inline __u64 red_probability_ppm(const struct port_config *cfg, __u64 queue)
{
	if (queue <= cfg->red_kmin_bytes)
		return 0;
	if (queue > cfg->red_kmax_bytes)
		return 1000000;
	return (__u64)cfg->red_pmax_ppm * (queue - cfg->red_kmin_bytes) / (cfg->red_kmax_bytes - cfg->red_kmin_bytes);
}

/* TCD: the port's state for a packet that finds `queue` bytes queued. The port is ON once it
 * has sent for longer than max(T_on) since its last resume; shorter ON periods are what PFC's
 * pause and resume alone make. States and moves follow github.com/HYLZ-2019/TCD-on-ns3
 * (lossless-queue-disc.cc, getCurrentTCD; the one public implementation, not the authors'), with
 * one difference that seed 004's 5.1.2 asks for: a port released from the undetermined state
 * starts non-congested, with its queue's trend measured afresh from the release, and turns
 * congested only if its queue, above the threshold, did not shrink over a whole sample period
 * (where that code decides at once, on a trend sampled before the release). */
static __always_inline __u32 tcd_state(struct port_state *st, const struct port_config *cfg, __u64 queue,
				       __u64 now, __u64 paused, __u64 resumed_ns)
{
	/* Signed: another CPU may have written a resume later than our `now`. */
	int on = !paused && (__s64)(now - resumed_ns) > (__s64)cfg->tcd_max_on_ns;
	int long_queue = queue > cfg->tcd_threshold_bytes;

	if (!on) {
		st->tcd_state = TCD_UNDETERMINED;
		return st->tcd_state;
	}
	if (st->tcd_state == TCD_UNDETERMINED) {
		st->tcd_state = TCD_NONCONGESTION;
		st->tcd_decreasing = 1;
		st->tcd_sample_queue = queue;
		st->tcd_sample_ns = now;
	} else if (now - st->tcd_sample_ns >= cfg->tcd_sample_ns) {
		st->tcd_decreasing = queue < st->tcd_sample_queue;
		st->tcd_sample_queue = queue;
		st->tcd_sample_ns = now;
	}
	if (st->tcd_state == TCD_CONGESTION)
		st->tcd_state = long_queue ? TCD_CONGESTION : TCD_NONCONGESTION;
	else
		st->tcd_state = long_queue && !st->tcd_decreasing ? TCD_CONGESTION : TCD_NONCONGESTION;
	return st->tcd_state;
}

SEC("tc")
int port_egress(struct __sk_buff *skb)
{
	__u32 id = port_of(skb);
	struct port_config *cfg = id ? bpf_map_lookup_elem(&port_config, &id) : NULL;
	struct port_state *st = id ? bpf_map_lookup_elem(&port_state, &id) : NULL;
	struct port_departures *departures;
	struct port_class_stats *stats;
	struct residence_arrival arrival = {};
	struct port_pfc *pfc = NULL;
	struct parsed p;
	__u64 now, elapsed, link_mb, credit_mb, credit_drained, data_mb, data_drained, wire, queue, ideal, lag;
	__u64 departed[PORT_CLASSES];
	__u64 resumed_ns = 0;
	__u64 paused = 0;
	__u32 cls, random, frames, tcd = TCD_NONCONGESTION;
	__s64 residence;
	int drop = 0, mark = 0, ue = 0, already_ce, ect0, idle;

	if (!cfg || !st)
		return TC_ACT_OK; /* not a port we were configured for: fail open */
	departures = bpf_map_lookup_elem(&port_departures, &cfg->port_id);
	if (!departures)
		return TC_ACT_OK;

	parse(skb, &p);
	cls = class_of(&p, cfg) & 1;
	wire = wire_bytes(skb, &p, cfg);
	frames = frames_of(skb);
	random = bpf_get_prandom_u32() % 1000000;
	now = bpf_ktime_get_ns();
	residence = residence_of(skb, &p, cfg, now, &arrival); /* map helpers are not allowed under the lock */
	if (cfg->lossless) {
		pfc = bpf_map_lookup_elem(&port_pfc, &cfg->port_id);
		if (pfc) {
			paused = READ_ONCE(pfc->paused);
			resumed_ns = READ_ONCE(pfc->resumed_ns);
		}
	}
	already_ce = p.ip_offset >= 0 && (p.tos & INET_ECN_MASK) == INET_ECN_CE;
	ect0 = p.ip_offset >= 0 && (p.tos & INET_ECN_MASK) == INET_ECN_ECT_0;
	departed[PORT_CLASS_DATA] = READ_ONCE(departures->bytes[PORT_CLASS_DATA]);
	departed[PORT_CLASS_CREDIT] = READ_ONCE(departures->bytes[PORT_CLASS_CREDIT]);

	bpf_spin_lock(&st->lock);
	elapsed = now > st->last_ns ? now - st->last_ns : 0;
	idle = elapsed > cfg->idle_reset_ns;
	if (idle) {
		/* Idle this long, every queue here has drained (the loader's config says how long
		 * the port's full buffers take): the real queue resyncs, forgetting any packet lost
		 * after the queue (e.g. a full backlog at the peer) but counting what it forgets,
		 * and the fluid queues restart. It also bounds elapsed * rate below 2^64. Not so
		 * for a port PFC holds paused: nothing of its queue has left. */
		elapsed = cfg->idle_reset_ns;
	}
	if (idle && !paused) {
		if (st->admitted_bytes[PORT_CLASS_DATA] > departed[PORT_CLASS_DATA])
			st->reset_residue_bytes += st->admitted_bytes[PORT_CLASS_DATA] - departed[PORT_CLASS_DATA];
		if (st->admitted_bytes[PORT_CLASS_CREDIT] > departed[PORT_CLASS_CREDIT])
			st->reset_residue_bytes += st->admitted_bytes[PORT_CLASS_CREDIT] - departed[PORT_CLASS_CREDIT];
		st->admitted_bytes[PORT_CLASS_DATA] = departed[PORT_CLASS_DATA];
		st->admitted_bytes[PORT_CLASS_CREDIT] = departed[PORT_CLASS_CREDIT];
		/* What the integrals still held was lost, not queued: nothing is added for the idle time. */
		st->integral_queue_bytes[PORT_CLASS_DATA] = 0;
		st->integral_queue_bytes[PORT_CLASS_CREDIT] = 0;
		st->integral_ns = now;
	}
	integrate(st, now);
	st->last_ns = now;
	if (residence >= 0) {
		st->residence.packets++;
		st->residence.sum_ns += residence;
		if ((__u64)residence > st->residence.max_ns)
			st->residence.max_ns = residence;
		st->residence.histogram[log_linear_bucket(residence, RESIDENCE_FIRST_LOG2, PORT_RESIDENCE_BUCKETS)]++;
	} else if (residence == RESIDENCE_UNTRACKED) {
		st->residence.untracked_packets++;
	}
	/* milli-bytes drained in `elapsed`: credits first (capped), data gets the rest. */
	link_mb = elapsed * cfg->link_rate_Bps / 1000000;
	credit_mb = elapsed * cfg->credit_rate_Bps / 1000000;
	credit_mb = min_u64(credit_mb, link_mb);
	credit_drained = min_u64(st->queue_mbytes[PORT_CLASS_CREDIT], credit_mb);
	st->queue_mbytes[PORT_CLASS_CREDIT] -= credit_drained;
	st->tokens_mbytes[PORT_CLASS_CREDIT] = min_u64(st->tokens_mbytes[PORT_CLASS_CREDIT] + credit_mb - credit_drained,
						       (__u64)cfg->burst_bytes[PORT_CLASS_CREDIT] * 1000);
	data_mb = link_mb - credit_drained;
	data_drained = min_u64(st->queue_mbytes[PORT_CLASS_DATA], data_mb);
	st->queue_mbytes[PORT_CLASS_DATA] -= data_drained;
	st->tokens_mbytes[PORT_CLASS_DATA] = min_u64(st->tokens_mbytes[PORT_CLASS_DATA] + data_mb - data_drained,
						     (__u64)cfg->burst_bytes[PORT_CLASS_DATA] * 1000);

	stats = &st->stats[cls];
	/* Departures are counted by another CPU without this lock: never ahead of admissions
	 * for long, but a read may catch them a packet ahead. `queue` is what the packet finds. */
	queue = st->admitted_bytes[cls] > departed[cls] ? st->admitted_bytes[cls] - departed[cls] : 0;
	if (p.ip_offset < 0)
		st->unparsed_packets++;
	/* The markers that judge the data queue the packet finds (port_config.h enum port_marker;
	 * SprayPass judges a credit by its own fate, below, once it is admitted or dropped). */
	if (p.ip_offset >= 0 && cls == PORT_CLASS_DATA) {
		switch (cfg->marker) {
		case PORT_MARKER_DCTCP:
			/* DCTCP: an ECN-capable packet that finds more than K bytes queued on arrival. */
			mark = (p.tos & INET_ECN_MASK) && queue > cfg->ecn_threshold_bytes;
			break;
		case PORT_MARKER_RED:
			/* DCQCN's CP is the switch (DCQCN 3.1); a host NIC's queue is its own sender's pacing. */
			if (cfg->switch_port)
				mark = (p.tos & INET_ECN_MASK) && random < red_probability_ppm(cfg, queue);
			break;
		case PORT_MARKER_TCD:
			if (cfg->switch_port) {
				tcd = tcd_state(st, cfg, queue, now, paused, resumed_ns);
				mark = tcd == TCD_CONGESTION && (p.tos & INET_ECN_MASK);
				ue = tcd == TCD_UNDETERMINED && ect0; /* UE never overwrites CE (nor ECT(1): marked already) */
			}
			break;
		default:
			break;
		}
	}
	/* A lossless port drops too if its buffer overflows: PFC's thresholds are meant to make that
	 * never happen (model/config/ports.py: the buffer holds xoff + headroom from every ingress), and a drop
	 * here, counted, says they did not. */
	if (queue + wire > cfg->buffer_bytes[cls]) {
		drop = 1;
		mark = 0;
		stats->dropped_packets += frames;
		stats->dropped_bytes += wire;
	} else {
		queue += wire;
		st->admitted_bytes[cls] += wire;
		st->integral_queue_bytes[cls] += wire;
		stats->enqueued_packets += frames;
		stats->enqueued_bytes += wire;
		stats->queue_sum_bytes += queue * frames;
		if (st->tokens_mbytes[cls] >= wire * 1000)
			st->tokens_mbytes[cls] -= wire * 1000; /* leaves at once: the ideal queue stays */
		else
			st->queue_mbytes[cls] += wire * 1000;
		ideal = st->queue_mbytes[cls] / 1000;
		lag = queue > ideal ? queue - ideal : ideal - queue;
		stats->lag_sum_bytes += lag;
		if (lag > stats->max_lag_bytes)
			stats->max_lag_bytes = lag;
		if (queue > stats->max_queue_bytes)
			stats->max_queue_bytes = queue;
		stats->queue_histogram[log_linear_bucket(queue, QUEUE_FIRST_LOG2, PORT_QUEUE_BUCKETS)]++;
	}
	if (p.ip_offset >= 0 && cls == PORT_CLASS_CREDIT && cfg->marker == PORT_MARKER_SPRAYPASS) {
		/* SprayPass: departing credits carry CE with Pd = dropped / injected credits of
		 * the last N_cdt credits. */
		st->window_credits++;
		st->window_drops += drop;
		if (st->window_credits >= cfg->credit_mark_window) {
			st->mark_probability_ppm = (__u64)st->window_drops * 1000000 / st->window_credits;
			st->window_credits = 0;
			st->window_drops = 0;
		}
		mark = !drop && random < st->mark_probability_ppm;
	}
	mark = mark && !already_ce; /* counted once, by the port that marked it first */
	if (mark) {
		stats->marked_packets += frames;
		stats->marked_bytes += wire;
	} else if (ue && !drop) {
		stats->ue_marked_packets++;
	}
	bpf_spin_unlock(&st->lock);

	/* Dropped silently, as a switch would: TC_ACT_SHOT would fail the sender's send with
	 * ENOBUFS, and ovs-vswitchd answers that by sending the same packet again. */
	if (drop)
		return TC_ACT_STOLEN;
	if (mark)
		set_ecn(skb, p.ip_offset, p.tos, INET_ECN_CE);
	else if (ue)
		set_ecn(skb, p.ip_offset, p.tos, INET_ECN_ECT_1);
	if (cfg->lossless && residence >= 0 && arrival.ingress_port_id)
		pfc_hold(skb, &p, cfg, &arrival, wire, now);
	skb->priority = cfg->classid[cls];
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
