// SPDX-License-Identifier: GPL-2.0
/* Loads port.bpf.o into the network namespace it runs in and attaches it at egress of the
 * ports named in CONFIG, with the maps pinned in PIN_DIR (a bpffs directory of the run:
 * one per namespace, since ifindexes repeat across namespaces).
 *
 *   port_loader OBJ PIN_DIR CONFIG   CONFIG: one port a line, see parse_line()
 *   port_loader --layout             struct sizes and offsets, for ccemu/ports.py's mirror
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

static int print_layout(void)
{
	printf("port_config %zu\n", sizeof(struct port_config));
	printf("port_class_stats %zu\n", sizeof(struct port_class_stats));
	printf("port_state %zu\n", sizeof(struct port_state));
	return 0;
}

/* ifname link_Bps credit_Bps credit_buffer data_buffer ecn_K mark_window
 * credit_classid data_classid credit_bucket_bytes data_bucket_bytes overhead min_wire
 * credit_burst data_burst (written by ccemu/shaping.py port_program_line) */
static int parse_line(const char *line, char *ifname, struct port_config *cfg)
{
	unsigned long long link, credit;
	unsigned int credit_buf, data_buf, k, window, credit_cls, data_cls, credit_bucket, data_bucket;
	unsigned int overhead, min_wire, credit_burst, data_burst;

	memset(cfg, 0, sizeof(*cfg));
	if (sscanf(line, "%15s %llu %llu %u %u %u %u %x %x %u %u %u %u %u %u", ifname, &link, &credit, &credit_buf,
		   &data_buf, &k, &window, &credit_cls, &data_cls, &credit_bucket, &data_bucket, &overhead,
		   &min_wire, &credit_burst, &data_burst) != 15)
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
	return 0;
}

static int attach(int prog_fd, int config_fd, int state_fd, const char *ifname, const struct port_config *cfg)
{
	struct port_state zero;
	__u32 ifindex = if_nametoindex(ifname);
	int err;

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
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 1, .priority = 1, .prog_fd = prog_fd,
		    .flags = BPF_TC_F_REPLACE);
	err = bpf_tc_hook_create(&hook);
	if (err && err != -EEXIST) {
		fprintf(stderr, "port_loader: %s: creating clsact: %s\n", ifname, strerror(-err));
		return -1;
	}
	err = bpf_tc_attach(&hook, &opts);
	if (err) {
		fprintf(stderr, "port_loader: %s: attaching at egress: %s\n", ifname, strerror(-err));
		return -1;
	}
	printf("attached %s %u\n", ifname, ifindex);
	return 0;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj = NULL;
	struct bpf_program *prog;
	struct bpf_map *map;
	char path[4096], line[512], ifname[IF_NAMESIZE];
	struct port_config cfg;
	FILE *config = NULL;
	int status = 1, lineno = 0;

	if (argc == 2 && !strcmp(argv[1], "--layout"))
		return print_layout();
	if (argc != 4) {
		fprintf(stderr, "usage: port_loader OBJ PIN_DIR CONFIG | port_loader --layout\n");
		return 2;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "port_loader: cannot open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	bpf_object__for_each_map(map, obj) {
		snprintf(path, sizeof(path), "%s/%s", argv[2], bpf_map__name(map));
		bpf_map__set_pin_path(map, path);
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "port_loader: loading %s (maps pinned in %s) failed: %s\n", argv[1], argv[2],
			strerror(errno));
		goto out;
	}
	prog = bpf_object__find_program_by_name(obj, "port_egress");
	config = fopen(argv[3], "r");
	if (!prog || !config) {
		fprintf(stderr, "port_loader: %s\n", prog ? "cannot read the port config" : "no port_egress program");
		goto out;
	}
	while (fgets(line, sizeof(line), config)) {
		lineno++;
		if (parse_line(line, ifname, &cfg)) {
			fprintf(stderr, "port_loader: %s line %d: expected 15 fields\n", argv[3], lineno);
			goto out;
		}
		if (attach(bpf_program__fd(prog), bpf_map__fd(bpf_object__find_map_by_name(obj, "port_config")),
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
