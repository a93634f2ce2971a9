/* Test-only: drops 1 in 100 (at random) of the VXLAN packets leaving the device it is attached to,
 * the loss a network between machines may have (tests/live/test_across_machines_live.py). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int drop_vxlan(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);

	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->protocol != IPPROTO_UDP ||
	    ip->ihl != 5 || udp->dest != bpf_htons(4789))
		return TC_ACT_OK;
	return bpf_get_prandom_u32() % 100 == 0 ? TC_ACT_SHOT : TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
