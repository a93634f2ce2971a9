/* The bpf datapath (fabric.datapath: bpf): the switches forward in the kernel, in the ingress
 * program of the port a packet arrives at, which redirects it to the egress of the port its
 * switch's routes name. The packet then crosses that port exactly as under OVS: its clsact
 * egress program (port_egress: the queue, drops and marks) and its HTB tree. What OVS does with
 * its flow tables (fabric/openflow.py), done here with the same routes (fabric/forwarding.py):
 *
 * - the path-id: the low bits of the UDP source port for a ccemu path-id port, otherwise a
 *   symmetric hash of addresses, protocol and ports. Deliberately not OVS's symmetric_l3l4 hash
 *   (its value is not part of any contract: only that A->B and B->A get the same path);
 * - a host route by destination address (at the host's own switch, its MAC written in), else
 *   the uplink the switch's tier picks for the path-id (model/routing.py SwitchRoutes);
 * - everything that is not IPv4 is dropped (hosts use static ARP and have IPv6 off).
 *
 * Why: userspace OVS spent ~17 us of CPU per packet per switch hop here, mostly in system
 * calls, copies and malloc (emulation/README.md "Where forwarding time goes"); this path costs ~6, with no
 * thread to wake, so the switches hold packets for no time of their own. Included by
 * port.bpf.c: one object, one load, the port maps shared. */
#ifndef CCEMU_SWITCH_H
#define CCEMU_SWITCH_H

/* Switch port id -> its switch's id (0: not a switch port of a bpf-datapath run). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PORT_MAX_FABRIC_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} port_switch SEC(".maps");

/* Switch id -> its uplinks (switch ids are fewer than port ids: the loader sizes both alike). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PORT_MAX_FABRIC_PORTS);
	__type(key, __u32);
	__type(value, struct switch_uplinks);
} switch_uplinks SEC(".maps");

/* (switch, destination) -> port; sized by the loader for the run's routes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct host_route_key);
	__type(value, struct host_route);
} host_routes SEC(".maps");

static __always_inline __u32 path_id_of(struct __sk_buff *skb, const struct iphdr *ip, int ip_offset)
{
	__u16 ports[2] = {0, 0};
	__u32 hash, sport, dport;

	if ((ip->protocol == IPPROTO_UDP || ip->protocol == IPPROTO_TCP) && !(ip->frag_off & bpf_htons(0x3fff)))
		bpf_skb_load_bytes(skb, ip_offset + ip->ihl * 4, ports, sizeof(ports));
	sport = bpf_ntohs(ports[0]);
	dport = bpf_ntohs(ports[1]);
	if (ip->protocol == IPPROTO_UDP && (sport & PATH_ID_PORT_MASK) == PATH_ID_PORT_BASE)
		return sport & (PATH_IDS - 1);
	/* XOR first: symmetric in (source, destination); then murmur3's finalizer spreads it. */
	hash = ip->saddr ^ ip->daddr ^ (sport ^ dport) ^ ip->protocol;
	hash ^= hash >> 16;
	hash *= 0x85ebca6b;
	hash ^= hash >> 13;
	hash *= 0xc2b2ae35;
	hash ^= hash >> 16;
	return hash & (PATH_IDS - 1);
}

/* The verdict for a packet that arrived at switch port `port_id`: a redirect, or a drop. */
static __always_inline int forward(struct __sk_buff *skb, const struct parsed *p, __u32 port_id)
{
	struct host_route_key key = {};
	struct switch_uplinks *uplinks;
	struct host_route *route;
	struct iphdr ip;
	__u32 *switch_id, pick;

	switch_id = bpf_map_lookup_elem(&port_switch, &port_id);
	if (!switch_id || !*switch_id)
		return TC_ACT_OK; /* a port the routes do not name: to its namespace, which has no address for it */
	if (p->ip_offset < 0 || bpf_skb_load_bytes(skb, p->ip_offset, &ip, sizeof(ip)))
		return TC_ACT_SHOT;
	key.switch_id = *switch_id;
	key.addr = ip.daddr;
	route = bpf_map_lookup_elem(&host_routes, &key);
	if (route) {
		if (route->rewrite_mac)
			bpf_skb_store_bytes(skb, offsetof(struct ethhdr, h_dest), route->mac, ETH_ALEN, 0);
		return bpf_redirect(route->ifindex, 0);
	}
	uplinks = bpf_map_lookup_elem(&switch_uplinks, switch_id);
	if (!uplinks || !uplinks->count || uplinks->count > SWITCH_MAX_UPLINKS || !uplinks->stride)
		return TC_ACT_SHOT; /* no route: OVS's table 1 drops too */
	pick = path_id_of(skb, &ip, p->ip_offset) / uplinks->stride % uplinks->count;
	return bpf_redirect(uplinks->ifindex[pick & (SWITCH_MAX_UPLINKS - 1)], 0);
}

#endif
