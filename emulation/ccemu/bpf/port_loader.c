// SPDX-License-Identifier: GPL-2.0
/* Loads port.bpf.o into the network namespace it runs in and attaches its programs at
 * egress and ingress of the ports named in CONFIG. Maps keyed by ifindex are pinned in
 * RUN_PIN_DIR/NODE (one set per namespace, since ifindexes repeat across namespaces); the
 * map keyed by port id is pinned once in RUN_PIN_DIR and shared by every namespace.
 *
 *   port_loader OBJ RUN_PIN_DIR NODE CONFIG   CONFIG: one port a line, see parse_line()
 *   port_loader --layout                      struct sizes, for ccemu/ports.py's mirror
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

#define CONFIG_FIELDS 17
#define SHARED_MAP "port_departures"
#define LOAD_ATTEMPTS 3

static int print_layout(void)
{
	printf("port_config %zu\n", sizeof(struct port_config));
	printf("port_class_stats %zu\n", sizeof(struct port_class_stats));
	printf("port_state %zu\n", sizeof(struct port_state));
	printf("port_departures %zu\n", sizeof(struct port_departures));
	return 0;
}

/* ifname link_Bps credit_Bps credit_buffer data_buffer ecn_K mark_window
 * credit_classid data_classid credit_bucket_bytes data_bucket_bytes overhead min_wire
 * credit_burst data_burst port_id peer_port_id (written by ccemu/shaping.py port_program_line) */
static int parse_line(const char *line, char *ifname, struct port_config *cfg)
{
	unsigned long long link, credit;
	unsigned int credit_buf, data_buf, k, window, credit_cls, data_cls, credit_bucket, data_bucket;
	unsigned int overhead, min_wire, credit_burst, data_burst, port_id, peer_port_id;

	memset(cfg, 0, sizeof(*cfg));
	if (sscanf(line, "%15s %llu %llu %u %u %u %u %x %x %u %u %u %u %u %u %u %u", ifname, &link, &credit,
		   &credit_buf, &data_buf, &k, &window, &credit_cls, &data_cls, &credit_bucket, &data_bucket,
		   &overhead, &min_wire, &credit_burst, &data_burst, &port_id, &peer_port_id) != CONFIG_FIELDS)
		return -1;
	if (port_id >= PORT_MAX_FABRIC_PORTS || peer_port_id >= PORT_MAX_FABRIC_PORTS)
		return -1;
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

/* Opens and loads OBJ with its maps pinned (see the top). Loaders of a run's namespaces run
 * at once: when another one pins the shared map between our look and our pin, libbpf fails
 * with EEXIST, and the next attempt finds the map and reuses it. */
static struct bpf_object *load(const char *obj_path, const char *run_pin_dir, const char *node)
{
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
			if (!strcmp(bpf_map__name(map), SHARED_MAP))
				snprintf(path, sizeof(path), "%s/%s", run_pin_dir, bpf_map__name(map));
			else
				snprintf(path, sizeof(path), "%s/%s/%s", run_pin_dir, node, bpf_map__name(map));
			bpf_map__set_pin_path(map, path);
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

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *egress, *ingress;
	char line[512], ifname[IF_NAMESIZE];
	struct port_config cfg;
	FILE *config = NULL;
	int status = 1, lineno = 0;

	if (argc == 2 && !strcmp(argv[1], "--layout"))
		return print_layout();
	if (argc != 5) {
		fprintf(stderr, "usage: port_loader OBJ RUN_PIN_DIR NODE CONFIG | port_loader --layout\n");
		return 2;
	}
	obj = load(argv[1], argv[2], argv[3]);
	if (!obj)
		return 1;
	egress = bpf_object__find_program_by_name(obj, "port_egress");
	ingress = bpf_object__find_program_by_name(obj, "port_ingress");
	config = fopen(argv[4], "r");
	if (!egress || !ingress || !config) {
		fprintf(stderr, "port_loader: %s\n", config ? "port_egress or port_ingress missing" : "cannot read the port config");
		goto out;
	}
	while (fgets(line, sizeof(line), config)) {
		lineno++;
		if (parse_line(line, ifname, &cfg)) {
			fprintf(stderr, "port_loader: %s line %d: expected %d fields, port ids < %d\n", argv[4], lineno,
				CONFIG_FIELDS, PORT_MAX_FABRIC_PORTS);
			goto out;
		}
		if (attach(bpf_program__fd(egress), bpf_program__fd(ingress),
			   bpf_map__fd(bpf_object__find_map_by_name(obj, "port_config")),
			   bpf_map__fd(bpf_object__find_map_by_name(obj, "port_state")), ifname, &cfg))
			goto out;
	}
	status = 0;
out:
	if (config)
		fclose(config);
	bpf_object__close(obj);
	return status;
}
