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

#define NSEC_PER_SEC 1000000000ULL
/* Beyond a second idle every queue here is empty: the fluid queues restart, and so does the
 * real one, forgetting any packet lost after the queue (e.g. a full backlog at the peer). */
#define MAX_IDLE_NS NSEC_PER_SEC
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

static __always_inline __u64 wire_bytes(const struct __sk_buff *skb, const struct port_config *cfg)
{
	__u64 wire = skb->len + cfg->wire_overhead_bytes;

	return wire < cfg->min_wire_bytes ? cfg->min_wire_bytes : wire;
}

/* Arrival here = departure from the peer's queue. The peer's classes are this port's: every
 * port of a run has the same profile. */
SEC("tc")
int port_ingress(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	struct port_config *cfg = bpf_map_lookup_elem(&port_config, &ifindex);
	struct port_departures *departed;
	struct parsed p;
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
	return TC_ACT_OK;
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
	int drop = 0, mark = 0;

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
	departed[PORT_CLASS_DATA] = READ_ONCE(departures->bytes[PORT_CLASS_DATA]);
	departed[PORT_CLASS_CREDIT] = READ_ONCE(departures->bytes[PORT_CLASS_CREDIT]);

	bpf_spin_lock(&st->lock);
	elapsed = now > st->last_ns ? now - st->last_ns : 0;
	if (elapsed > MAX_IDLE_NS) {
		elapsed = MAX_IDLE_NS;
		st->admitted_bytes[PORT_CLASS_DATA] = departed[PORT_CLASS_DATA];
		st->admitted_bytes[PORT_CLASS_CREDIT] = departed[PORT_CLASS_CREDIT];
	}
	st->last_ns = now;
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
	 * for long, but a read may catch them a packet ahead. */
	queue = st->admitted_bytes[cls] > departed[cls] ? st->admitted_bytes[cls] - departed[cls] : 0;
	if (queue + wire > cfg->buffer_bytes[cls]) {
		drop = 1;
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
	if (p.ip_offset < 0) {
		st->unparsed_packets++;
	} else if (cls == PORT_CLASS_CREDIT && cfg->credit_mark_window) {
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
	} else if (cls == PORT_CLASS_DATA && cfg->ecn_threshold_bytes) {
		/* DCTCP: ECN-capable packets that find the queue above K are marked. */
		mark = !drop && (p.tos & INET_ECN_MASK) && queue > cfg->ecn_threshold_bytes;
	}
	if (mark) {
		stats->marked_packets++;
		stats->marked_bytes += wire;
	}
	bpf_spin_unlock(&st->lock);

	/* Dropped silently, as a switch would: TC_ACT_SHOT would fail the sender's send with
	 * ENOBUFS, and ovs-vswitchd answers that by sending the same packet again. */
	if (drop)
		return TC_ACT_STOLEN;
	if (mark && (p.tos & INET_ECN_MASK) != INET_ECN_CE)
		set_ce(skb, p.ip_offset, p.tos);
	skb->priority = cfg->classid[cls];
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
