// SPDX-License-Identifier: GPL-2.0
/* Loads port.bpf.o into the network namespace it runs in and attaches its programs at
 * egress and ingress of the ports named in CONFIG. Maps keyed by ifindex are pinned in
 * RUN_PIN_DIR/NODE (one set per namespace, since ifindexes repeat across namespaces); the
 * map keyed by port id is pinned once in RUN_PIN_DIR and shared by every namespace.
 *
 *   port_loader OBJ RUN_PIN_DIR NODE CONFIG   CONFIG: one port a line, see parse_line()
 *   port_loader --layout                      struct sizes and field offsets, for ccemu/ports.py's mirror
 *
 * The per-namespace maps are sized for the namespace's ports (a host has one), so a fabric
 * pays for the ports it has rather than for PORT_MAX_PORTS in every namespace.
 *
 * The tc filters outlive the loader; the namespace's removal takes them away. Exits 1 with
 * one line naming the port on any error, having attached nothing more after it. */
#include <errno.h>
#include <net/if.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "port.h"

#define CONFIG_FIELDS 29
#define MAX_LINES PORT_MAX_PORTS
#define LOAD_ATTEMPTS 3
/* Packets a switch namespace follows inside its switches, per port: ovs-vswitchd's receive
 * socket of a port holds thousands of full frames when it falls behind; past this the oldest
 * records are evicted and their packets count as untracked. */
#define RESIDENCE_ENTRIES_PER_PORT 1024
#define RESIDENCE_MAX_ENTRIES 65536
#define RESIDENCE_HOST_ENTRIES 64 /* hosts measure no residence; an LRU map needs a few per CPU */

/* Maps keyed by port id (or by packet, across switches): one per run, shared by every namespace. */
static const char *const shared_maps[] = {"port_departures", "port_pfc", "pfc_packets", "pfc_events"};

static int shared(const char *map)
{
	for (size_t i = 0; i < sizeof(shared_maps) / sizeof(shared_maps[0]); i++)
		if (!strcmp(map, shared_maps[i]))
			return 1;
	return 0;
}

#define SIZE(s) printf(#s " %zu\n", sizeof(struct s))
#define FIELD(s, f) printf(#s "." #f " %zu\n", offsetof(struct s, f))

static int print_layout(void)
{
	SIZE(port_config);
	FIELD(port_config, link_rate_Bps);
	FIELD(port_config, credit_rate_Bps);
	FIELD(port_config, buffer_bytes);
	FIELD(port_config, ecn_threshold_bytes);
	FIELD(port_config, credit_mark_window);
	FIELD(port_config, classid);
	FIELD(port_config, hist_bucket_bytes);
	FIELD(port_config, wire_overhead_bytes);
	FIELD(port_config, min_wire_bytes);
	FIELD(port_config, burst_bytes);
	FIELD(port_config, port_id);
	FIELD(port_config, peer_port_id);
	FIELD(port_config, switch_port);
	FIELD(port_config, pad);
	FIELD(port_config, idle_reset_ns);
	FIELD(port_config, lossless);
	FIELD(port_config, xoff_bytes);
	FIELD(port_config, xon_bytes);
	FIELD(port_config, red_kmin_bytes);
	FIELD(port_config, red_kmax_bytes);
	FIELD(port_config, red_pmax_ppm);
	FIELD(port_config, tcd);
	FIELD(port_config, tcd_threshold_bytes);
	FIELD(port_config, tcd_max_on_ns);
	FIELD(port_config, tcd_sample_ns);
	SIZE(port_departures);
	FIELD(port_departures, bytes);
	FIELD(port_departures, packets);
	FIELD(port_departures, unparsed_packets);
	SIZE(port_class_stats);
	FIELD(port_class_stats, enqueued_packets);
	FIELD(port_class_stats, enqueued_bytes);
	FIELD(port_class_stats, dropped_packets);
	FIELD(port_class_stats, dropped_bytes);
	FIELD(port_class_stats, marked_packets);
	FIELD(port_class_stats, marked_bytes);
	FIELD(port_class_stats, ue_marked_packets);
	FIELD(port_class_stats, max_queue_bytes);
	FIELD(port_class_stats, lag_sum_bytes);
	FIELD(port_class_stats, max_lag_bytes);
	FIELD(port_class_stats, queue_histogram);
	SIZE(port_residence);
	FIELD(port_residence, packets);
	FIELD(port_residence, sum_ns);
	FIELD(port_residence, max_ns);
	FIELD(port_residence, untracked_packets);
	FIELD(port_residence, histogram);
	SIZE(port_pfc);
	FIELD(port_pfc, held_bytes);
	FIELD(port_pfc, max_held_bytes);
	FIELD(port_pfc, paused);
	FIELD(port_pfc, paused_since_ns);
	FIELD(port_pfc, resumed_ns);
	FIELD(port_pfc, pause_events);
	FIELD(port_pfc, paused_ns);
	FIELD(port_pfc, pause_histogram);
	SIZE(pfc_event);
	FIELD(pfc_event, ns);
	FIELD(pfc_event, port_id);
	FIELD(pfc_event, pause);
	SIZE(port_state);
	FIELD(port_state, lock);
	FIELD(port_state, pad);
	FIELD(port_state, last_ns);
	FIELD(port_state, queue_mbytes);
	FIELD(port_state, tokens_mbytes);
	FIELD(port_state, admitted_bytes);
	FIELD(port_state, window_credits);
	FIELD(port_state, window_drops);
	FIELD(port_state, mark_probability_ppm);
	FIELD(port_state, unparsed_packets);
	FIELD(port_state, reset_residue_bytes);
	FIELD(port_state, tcd_state);
	FIELD(port_state, tcd_decreasing);
	FIELD(port_state, tcd_sample_ns);
	FIELD(port_state, tcd_sample_queue);
	FIELD(port_state, stats);
	FIELD(port_state, residence);
	return 0;
}

/* ifname link_Bps credit_Bps credit_buffer data_buffer ecn_K mark_window
 * credit_classid data_classid credit_bucket_bytes data_bucket_bytes overhead min_wire
 * credit_burst data_burst port_id peer_port_id switch_port idle_reset_ns
 * lossless xoff xon red_kmin red_kmax red_pmax_ppm tcd tcd_threshold tcd_max_on_ns tcd_sample_ns
 * (written by ccemu/shaping.py port_program_line) */
static int parse_line(const char *line, char *ifname, struct port_config *cfg)
{
	unsigned long long link, credit, idle_reset, tcd_max_on, tcd_sample;
	unsigned int lossless, xoff, xon, kmin, kmax, pmax, tcd, tcd_threshold;
	unsigned int credit_buf, data_buf, k, window, credit_cls, data_cls, credit_bucket, data_bucket;
	unsigned int overhead, min_wire, credit_burst, data_burst, port_id, peer_port_id, switch_port;

	memset(cfg, 0, sizeof(*cfg));
	if (sscanf(line, "%15s %llu %llu %u %u %u %u %x %x %u %u %u %u %u %u %u %u %u %llu %u %u %u %u %u %u %u %u %llu %llu", ifname, &link, &credit,
		   &credit_buf, &data_buf, &k, &window, &credit_cls, &data_cls, &credit_bucket, &data_bucket,
		   &overhead, &min_wire, &credit_burst, &data_burst, &port_id, &peer_port_id, &switch_port,
		   &idle_reset, &lossless, &xoff, &xon, &kmin, &kmax, &pmax, &tcd, &tcd_threshold, &tcd_max_on,
		   &tcd_sample) != CONFIG_FIELDS)
		return -1;
	if (port_id >= PORT_MAX_FABRIC_PORTS || peer_port_id >= PORT_MAX_FABRIC_PORTS || switch_port > 1 ||
	    !idle_reset || lossless > 1 || xon > xoff || (kmax && kmin >= kmax) || pmax > 1000000 || tcd > 1)
		return -1;
	cfg->lossless = lossless;
	cfg->xoff_bytes = xoff;
	cfg->xon_bytes = xon;
	cfg->red_kmin_bytes = kmin;
	cfg->red_kmax_bytes = kmax;
	cfg->red_pmax_ppm = pmax;
	cfg->tcd = tcd;
	cfg->tcd_threshold_bytes = tcd_threshold;
	cfg->tcd_max_on_ns = tcd_max_on;
	cfg->tcd_sample_ns = tcd_sample;
	cfg->link_rate_Bps = link;
	cfg->credit_rate_Bps = credit;
	cfg->buffer_bytes[PORT_CLASS_CREDIT] = credit_buf;
	cfg->buffer_bytes[PORT_CLASS_DATA] = data_buf;
	cfg->ecn_threshold_bytes = k;
	cfg->credit_mark_window = window;
	cfg->classid[PORT_CLASS_CREDIT] = credit_cls;
	cfg->classid[PORT_CLASS_DATA] = data_cls;
	cfg->hist_bucket_bytes[PORT_CLASS_CREDIT] = credit_bucket;
	cfg->hist_bucket_bytes[PORT_CLASS_DATA] = data_bucket;
	cfg->wire_overhead_bytes = overhead;
	cfg->min_wire_bytes = min_wire;
	cfg->burst_bytes[PORT_CLASS_CREDIT] = credit_burst;
	cfg->burst_bytes[PORT_CLASS_DATA] = data_burst;
	cfg->port_id = port_id;
	cfg->peer_port_id = peer_port_id;
	cfg->switch_port = switch_port;
	cfg->idle_reset_ns = idle_reset;
	return 0;
}

static int attach_at(int prog_fd, __u32 ifindex, enum bpf_tc_attach_point point, const char *ifname)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = point);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 1, .priority = 1, .prog_fd = prog_fd, .flags = BPF_TC_F_REPLACE);
	const char *where = point == BPF_TC_EGRESS ? "egress" : "ingress";
	int err;

	/* One clsact serves both hooks: the second create finds it. */
	err = bpf_tc_hook_create(&hook);
	if (err && err != -EEXIST) {
		fprintf(stderr, "port_loader: %s: creating clsact: %s\n", ifname, strerror(-err));
		return -1;
	}
	err = bpf_tc_attach(&hook, &opts);
	if (err) {
		fprintf(stderr, "port_loader: %s: attaching at %s: %s\n", ifname, where, strerror(-err));
		return -1;
	}
	return 0;
}

static int attach(int egress_fd, int ingress_fd, int config_fd, int state_fd, const char *ifname,
		  const struct port_config *cfg)
{
	struct port_state zero;
	__u32 ifindex = if_nametoindex(ifname);

	if (!ifindex) {
		fprintf(stderr, "port_loader: %s: no such interface in this namespace\n", ifname);
		return -1;
	}
	memset(&zero, 0, sizeof(zero));
	if (bpf_map_update_elem(config_fd, &ifindex, cfg, BPF_ANY) ||
	    bpf_map_update_elem(state_fd, &ifindex, &zero, BPF_ANY)) {
		fprintf(stderr, "port_loader: %s: writing its maps: %s\n", ifname, strerror(errno));
		return -1;
	}
	if (attach_at(ingress_fd, ifindex, BPF_TC_INGRESS, ifname) ||
	    attach_at(egress_fd, ifindex, BPF_TC_EGRESS, ifname))
		return -1;
	printf("attached %s %u\n", ifname, ifindex);
	return 0;
}

/* Opens and loads OBJ with its maps pinned (see the top) and sized for `ports` ports, of a
 * switch namespace or not. Loaders of a run's namespaces run at once: when another one pins
 * the shared map between our look and our pin, libbpf fails with EEXIST, and the next attempt
 * finds the map and reuses it. */
static struct bpf_object *load(const char *obj_path, const char *run_pin_dir, const char *node, int ports,
			       int switches)
{
	int residence_entries = RESIDENCE_HOST_ENTRIES;

	char path[4096];
	struct bpf_object *obj;
	struct bpf_map *map;
	int err = 0;

	for (int attempt = 0; attempt < LOAD_ATTEMPTS; attempt++) {
		obj = bpf_object__open_file(obj_path, NULL);
		if (!obj) {
			fprintf(stderr, "port_loader: cannot open %s: %s\n", obj_path, strerror(errno));
			return NULL;
		}
		bpf_object__for_each_map(map, obj) {
			if (shared(bpf_map__name(map)))
				snprintf(path, sizeof(path), "%s/%s", run_pin_dir, bpf_map__name(map));
			else
				snprintf(path, sizeof(path), "%s/%s/%s", run_pin_dir, node, bpf_map__name(map));
			bpf_map__set_pin_path(map, path);
		}
		if (switches) {
			residence_entries = ports * RESIDENCE_ENTRIES_PER_PORT;
			if (residence_entries > RESIDENCE_MAX_ENTRIES)
				residence_entries = RESIDENCE_MAX_ENTRIES;
		}
		if (bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "port_config"), ports) ||
		    bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "port_state"), ports) ||
		    bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "residence"), residence_entries)) {
			fprintf(stderr, "port_loader: sizing the maps of %s: %s\n", obj_path, strerror(errno));
			bpf_object__close(obj);
			return NULL;
		}
		err = bpf_object__load(obj);
		if (!err)
			return obj;
		bpf_object__close(obj);
		if (err != -EEXIST)
			break;
	}
	fprintf(stderr, "port_loader: loading %s (maps pinned in %s/%s) failed: %s\n", obj_path, run_pin_dir, node,
		strerror(-err));
	return NULL;
}

/* Reads CONFIG whole: the maps are sized by its ports before anything is loaded. */
static int read_config(const char *path, char (*ifnames)[IF_NAMESIZE], struct port_config *cfgs)
{
	char line[512];
	FILE *config = fopen(path, "r");
	int ports = 0;

	if (!config) {
		fprintf(stderr, "port_loader: cannot read the port config %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), config)) {
		if (ports == MAX_LINES || parse_line(line, ifnames[ports], &cfgs[ports])) {
			fprintf(stderr, "port_loader: %s line %d: expected %d fields, port ids < %d, at most %d ports\n",
				path, ports + 1, CONFIG_FIELDS, PORT_MAX_FABRIC_PORTS, MAX_LINES);
			fclose(config);
			return -1;
		}
		ports++;
	}
	fclose(config);
	if (!ports)
		fprintf(stderr, "port_loader: %s names no port\n", path);
	return ports ? ports : -1;
}

static char ifnames[MAX_LINES][IF_NAMESIZE];
static struct port_config cfgs[MAX_LINES];

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *egress, *ingress;
	int status = 1, ports, switches = 0;

	if (argc == 2 && !strcmp(argv[1], "--layout"))
		return print_layout();
	if (argc != 5) {
		fprintf(stderr, "usage: port_loader OBJ RUN_PIN_DIR NODE CONFIG | port_loader --layout\n");
		return 2;
	}
	ports = read_config(argv[4], ifnames, cfgs);
	if (ports < 0)
		return 1;
	for (int i = 0; i < ports; i++)
		switches |= cfgs[i].switch_port;
	obj = load(argv[1], argv[2], argv[3], ports, switches);
	if (!obj)
		return 1;
	egress = bpf_object__find_program_by_name(obj, "port_egress");
	ingress = bpf_object__find_program_by_name(obj, "port_ingress");
	if (!egress || !ingress) {
		fprintf(stderr, "port_loader: port_egress or port_ingress missing from %s\n", argv[1]);
		goto out;
	}
	for (int i = 0; i < ports; i++) {
		if (attach(bpf_program__fd(egress), bpf_program__fd(ingress),
			   bpf_map__fd(bpf_object__find_map_by_name(obj, "port_config")),
			   bpf_map__fd(bpf_object__find_map_by_name(obj, "port_state")), ifnames[i], &cfgs[i]))
			goto out;
	}
	status = 0;
out:
	bpf_object__close(obj);
	return status;
}
