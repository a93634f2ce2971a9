// SPDX-License-Identifier: GPL-2.0
/* Port programs: see port.h. Attached with clsact at egress and ingress of every switch
 * port and host NIC.
 *
 * Egress decides on the real queue: admitted bytes of the class minus the bytes its peer has
 * seen arrive. A packet that would overflow its class's buffer is dropped here (the HTB leaf
 * FIFOs are sized so that they never drop first); DCTCP and SprayPass marks follow the same
 * queue; the rest is steered to its HTB class via skb->priority.
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
#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PORT_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct port_config);
} port_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PORT_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct port_state);
} port_state SEC(".maps");

/* Arrival times of the packets inside this namespace's switches (a switch's ports all live in
 * its OVS instance's namespace). LRU: a packet that never leaves (dropped inside the switch)
 * is forgotten once newer ones need the room. The loader sizes it (hosts need none). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct residence_key);
	__type(value, __u64);
} residence SEC(".maps");

/* One map for the whole run: the loaders pin it once, beside the namespaces' directories. */
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

static __always_inline void set_ce(struct __sk_buff *skb, int ip_offset, __u8 tos)
{
	__u8 marked = tos | INET_ECN_CE;
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

/* Bucket of a residence of `ns`: see port.h (log-linear, 4 buckets per doubling). */
static __always_inline __u64 residence_bucket(__u64 ns)
{
	__u64 v = ns, log2 = 0, bucket; /* 64-bit: see residence_key */

	if (ns < (1ULL << RESIDENCE_FIRST_LOG2))
		return 0;
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
	bucket = 1 + ((log2 - RESIDENCE_FIRST_LOG2) << RESIDENCE_SUB_BUCKETS_LOG2) +
		 ((ns >> (log2 - RESIDENCE_SUB_BUCKETS_LOG2)) & ((1 << RESIDENCE_SUB_BUCKETS_LOG2) - 1));
	return bucket < PORT_RESIDENCE_BUCKETS ? bucket : PORT_RESIDENCE_BUCKETS - 1;
}

static __always_inline __u64 wire_bytes(const struct __sk_buff *skb, const struct port_config *cfg)
{
	__u64 wire = skb->len + cfg->wire_overhead_bytes;

	return wire < cfg->min_wire_bytes ? cfg->min_wire_bytes : wire;
}

/* Arrival here = departure from the peer's queue. The peer's classes are this port's: every
 * port of a run has the same profile. At a switch port the arrival also starts the packet's
 * residence in the switch. */
SEC("tc")
int port_ingress(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	struct port_config *cfg = bpf_map_lookup_elem(&port_config, &ifindex);
	struct port_departures *departed;
	struct residence_key key;
	struct parsed p;
	__u64 now;
	__u32 cls;

	if (!cfg)
		return TC_ACT_OK;
	departed = bpf_map_lookup_elem(&port_departures, &cfg->peer_port_id);
	if (!departed)
		return TC_ACT_OK;
	parse(skb, &p);
	cls = class_of(&p, cfg) & 1;
	__sync_fetch_and_add(&departed->bytes[cls], wire_bytes(skb, cfg));
	__sync_fetch_and_add(&departed->packets[cls], 1);
	if (p.ip_offset < 0)
		__sync_fetch_and_add(&departed->unparsed_packets, 1);
	if (cfg->switch_port && !residence_key(skb, &p, &key)) {
		now = bpf_ktime_get_ns();
		bpf_map_update_elem(&residence, &key, &now, BPF_ANY);
	}
	return TC_ACT_OK;
}

#define RESIDENCE_UNTRACKED -1 /* no arrival on record */
#define RESIDENCE_NONE -2      /* nothing to measure: not a switch port, or not IPv4 */

/* How long the packet leaving through this switch port spent inside the switch, in ns. */
static __always_inline __s64 residence_of(struct __sk_buff *skb, const struct parsed *p,
					  const struct port_config *cfg, __u64 now)
{
	struct residence_key key;
	__u64 *arrived, since;

	if (!cfg->switch_port || residence_key(skb, p, &key))
		return RESIDENCE_NONE;
	arrived = bpf_map_lookup_elem(&residence, &key);
	if (!arrived)
		return RESIDENCE_UNTRACKED;
	since = now > *arrived ? now - *arrived : 0;
	bpf_map_delete_elem(&residence, &key);
	return since;
}

SEC("tc")
int port_egress(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	struct port_config *cfg = bpf_map_lookup_elem(&port_config, &ifindex);
	struct port_state *st = bpf_map_lookup_elem(&port_state, &ifindex);
	struct port_departures *departures;
	struct port_class_stats *stats;
	struct parsed p;
	__u64 now, elapsed, link_mb, credit_mb, credit_drained, data_mb, data_drained, wire, queue, ideal, lag;
	__u64 departed[PORT_CLASSES];
	__u32 cls, bucket, random;
	__s64 residence;
	int drop = 0, mark = 0, already_ce;

	if (!cfg || !st)
		return TC_ACT_OK; /* not a port we were configured for: fail open */
	departures = bpf_map_lookup_elem(&port_departures, &cfg->port_id);
	if (!departures)
		return TC_ACT_OK;

	parse(skb, &p);
	cls = class_of(&p, cfg) & 1;
	wire = wire_bytes(skb, cfg);
	random = bpf_get_prandom_u32() % 1000000;
	now = bpf_ktime_get_ns();
	residence = residence_of(skb, &p, cfg, now); /* map helpers are not allowed under the lock */
	already_ce = p.ip_offset >= 0 && (p.tos & INET_ECN_MASK) == INET_ECN_CE;
	departed[PORT_CLASS_DATA] = READ_ONCE(departures->bytes[PORT_CLASS_DATA]);
	departed[PORT_CLASS_CREDIT] = READ_ONCE(departures->bytes[PORT_CLASS_CREDIT]);

	bpf_spin_lock(&st->lock);
	elapsed = now > st->last_ns ? now - st->last_ns : 0;
	if (elapsed > cfg->idle_reset_ns) {
		/* Idle this long, every queue here has drained (the loader's config says how long
		 * the port's full buffers take): the real queue resyncs, forgetting any packet lost
		 * after the queue (e.g. a full backlog at the peer) but counting what it forgets,
		 * and the fluid queues restart. It also bounds elapsed * rate below 2^64. */
		elapsed = cfg->idle_reset_ns;
		if (st->admitted_bytes[PORT_CLASS_DATA] > departed[PORT_CLASS_DATA])
			st->reset_residue_bytes += st->admitted_bytes[PORT_CLASS_DATA] - departed[PORT_CLASS_DATA];
		if (st->admitted_bytes[PORT_CLASS_CREDIT] > departed[PORT_CLASS_CREDIT])
			st->reset_residue_bytes += st->admitted_bytes[PORT_CLASS_CREDIT] - departed[PORT_CLASS_CREDIT];
		st->admitted_bytes[PORT_CLASS_DATA] = departed[PORT_CLASS_DATA];
		st->admitted_bytes[PORT_CLASS_CREDIT] = departed[PORT_CLASS_CREDIT];
	}
	st->last_ns = now;
	if (residence >= 0) {
		st->residence.packets++;
		st->residence.sum_ns += residence;
		if ((__u64)residence > st->residence.max_ns)
			st->residence.max_ns = residence;
		st->residence.histogram[residence_bucket(residence)]++;
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
	if (p.ip_offset < 0) {
		st->unparsed_packets++;
	} else if (cls == PORT_CLASS_DATA && cfg->ecn_threshold_bytes) {
		/* DCTCP: an ECN-capable packet that finds more than K bytes queued on arrival. */
		mark = (p.tos & INET_ECN_MASK) && queue > cfg->ecn_threshold_bytes;
	}
	if (queue + wire > cfg->buffer_bytes[cls]) {
		drop = 1;
		mark = 0;
		stats->dropped_packets++;
		stats->dropped_bytes += wire;
	} else {
		queue += wire;
		st->admitted_bytes[cls] += wire;
		stats->enqueued_packets++;
		stats->enqueued_bytes += wire;
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
		bucket = cfg->hist_bucket_bytes[cls] ? queue / cfg->hist_bucket_bytes[cls] : 0;
		if (bucket >= PORT_HIST_BUCKETS)
			bucket = PORT_HIST_BUCKETS - 1;
		stats->queue_histogram[bucket & (PORT_HIST_BUCKETS - 1)]++;
	}
	if (p.ip_offset >= 0 && cls == PORT_CLASS_CREDIT && cfg->credit_mark_window) {
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
		stats->marked_packets++;
		stats->marked_bytes += wire;
	}
	bpf_spin_unlock(&st->lock);

	/* Dropped silently, as a switch would: TC_ACT_SHOT would fail the sender's send with
	 * ENOBUFS, and ovs-vswitchd answers that by sending the same packet again. */
	if (drop)
		return TC_ACT_STOLEN;
	if (mark)
		set_ce(skb, p.ip_offset, p.tos);
	skb->priority = cfg->classid[cls];
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
