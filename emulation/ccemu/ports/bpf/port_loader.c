// SPDX-License-Identifier: GPL-2.0
/* Loads port.bpf.o once per run and attaches its programs in every namespace of the run.
 *
 *   port_loader load OBJ PIN_DIR PORT_IDS SWITCH_PORTS HOST_ROUTES
 *       loads (the kernel verifies the programs: ~0.2 s) with the maps sized for port ids
 *       0..PORT_IDS-1, the residences of SWITCH_PORTS switch ports and HOST_ROUTES host routes
 *       (0 when OVS forwards); pins the maps and the programs in PIN_DIR (the run's private bpffs).
 *   port_loader routes PIN_DIR ROUTES
 *       writes the switches' routes (the bpf datapath, switch.h) from ROUTES, one a line (see
 *       write_route()), checking every line before it writes any.
 *   port_loader attach PIN_DIR CONFIG [forward]
 *       run inside a namespace: attaches the pinned programs at egress and ingress of the ports
 *       named in CONFIG (one port a line, see parse_line()), writes each one's config, zeroes
 *       its state and maps its ifindex (unique in the run: the fabric creates its interfaces
 *       with ifindexes of their own) to its id. Prints "attached <ifname> <ifindex>" per port.
 *       With `forward`, a switch port's ingress program also forwards (switch_ingress).
 *   port_loader --layout
 *       struct sizes and field offsets, for ccemu/ports/maps.py's mirror
 *
 * One load for the run, not one per namespace: the verifier's ~0.2 s per load made a k=8
 * fat-tree's 144 namespaces take ~12 s of CPU. The tc filters outlive the loader; the
 * namespace's removal takes them away, and the run's bpffs the pins. Exits 1 with one line
 * naming the port on any error, having attached nothing more after it. */
#include <arpa/inet.h>
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
/* Packets the switches follow inside them, per switch port: ovs-vswitchd's receive socket of a
 * port holds thousands of full frames when it falls behind; past this the oldest records are
 * evicted and their packets count as untracked. */
#define RESIDENCE_ENTRIES_PER_PORT 1024
#define RESIDENCE_MAX_ENTRIES 1048576
#define RESIDENCE_MIN_ENTRIES 64 /* an LRU map needs a few per CPU */
#define MAX_HOST_ROUTES (1 << 22) /* a k=32 fat-tree: 1280 switches x 8192 hosts would be 10 M */

static const char *const programs[] = {"port_egress", "port_ingress", "switch_ingress"};

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

/* The maps an attach writes. */
struct port_maps {
	int ids, config, state;
};

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

static int attach(int egress_fd, int ingress_fd, const struct port_maps *maps, const char *ifname,
		  const struct port_config *cfg)
{
	struct port_state zero;
	__u32 id = cfg->port_id, ifindex = if_nametoindex(ifname);

	if (!ifindex) {
		fprintf(stderr, "port_loader: %s: no such interface in this namespace\n", ifname);
		return -1;
	}
	memset(&zero, 0, sizeof(zero));
	if (bpf_map_update_elem(maps->config, &id, cfg, BPF_ANY) || bpf_map_update_elem(maps->state, &id, &zero, BPF_ANY) ||
	    bpf_map_update_elem(maps->ids, &ifindex, &id, BPF_NOEXIST)) {
		fprintf(stderr, "port_loader: %s: writing its maps (port id %u, ifindex %u%s): %s\n", ifname, id, ifindex,
			errno == EEXIST ? ", which another port of the run has" : "", strerror(errno));
		return -1;
	}
	if (attach_at(ingress_fd, ifindex, BPF_TC_INGRESS, ifname) || attach_at(egress_fd, ifindex, BPF_TC_EGRESS, ifname))
		return -1;
	printf("attached %s %u\n", ifname, ifindex);
	return 0;
}

static int pin_path(char *path, size_t size, const char *pin_dir, const char *name)
{
	if ((size_t)snprintf(path, size, "%s/%s", pin_dir, name) >= size) {
		fprintf(stderr, "port_loader: pin path %s/%s too long\n", pin_dir, name);
		return -1;
	}
	return 0;
}

/* Opens OBJ, sizes its maps, loads it with every map pinned in PIN_DIR, and pins the programs. */
static int load(const char *obj_path, const char *pin_dir, long port_ids, long switch_ports, long host_routes)
{
	long residence_entries = switch_ports * RESIDENCE_ENTRIES_PER_PORT;
	struct bpf_object *obj;
	struct bpf_map *map;
	char path[4096];
	int err, status = 1;

	if (port_ids < 2 || port_ids > PORT_MAX_FABRIC_PORTS || switch_ports < 0 || host_routes < 0 ||
	    host_routes > MAX_HOST_ROUTES) {
		fprintf(stderr, "port_loader: %ld port ids, %ld switch ports, %ld host routes: ids run 1..%d, routes "
			"0..%d\n", port_ids, switch_ports, host_routes, PORT_MAX_FABRIC_PORTS - 1, MAX_HOST_ROUTES);
		return 1;
	}
	if (residence_entries > RESIDENCE_MAX_ENTRIES)
		residence_entries = RESIDENCE_MAX_ENTRIES;
	if (residence_entries < RESIDENCE_MIN_ENTRIES)
		residence_entries = RESIDENCE_MIN_ENTRIES;
	obj = bpf_object__open_file(obj_path, NULL);
	if (!obj) {
		fprintf(stderr, "port_loader: cannot open %s: %s\n", obj_path, strerror(errno));
		return 1;
	}
	bpf_object__for_each_map(map, obj) {
		if (pin_path(path, sizeof(path), pin_dir, bpf_map__name(map)) || bpf_map__set_pin_path(map, path))
			goto out;
	}
	if (bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "port_ids"), port_ids) ||
	    bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "port_config"), port_ids) ||
	    bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "port_state"), port_ids) ||
	    bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "residence"), residence_entries) ||
	    bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "port_switch"), port_ids) ||
	    bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "switch_uplinks"), port_ids) ||
	    bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "host_routes"), host_routes ? host_routes : 1)) {
		fprintf(stderr, "port_loader: sizing the maps of %s: %s\n", obj_path, strerror(errno));
		goto out;
	}
	err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "port_loader: loading %s (maps pinned in %s) failed: %s\n", obj_path, pin_dir,
			strerror(-err));
		goto out;
	}
	for (size_t i = 0; i < sizeof(programs) / sizeof(programs[0]); i++) {
		struct bpf_program *prog = bpf_object__find_program_by_name(obj, programs[i]);

		if (!prog || pin_path(path, sizeof(path), pin_dir, programs[i]) || bpf_program__pin(prog, path)) {
			fprintf(stderr, "port_loader: pinning %s in %s failed: %s\n", programs[i], pin_dir, strerror(errno));
			goto out;
		}
	}
	status = 0;
out:
	bpf_object__close(obj);
	return status;
}

/* Reads CONFIG whole, checking every line before anything is attached. */
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

static int open_pinned(const char *pin_dir, const char *name)
{
	char path[4096];
	int fd;

	if (pin_path(path, sizeof(path), pin_dir, name))
		return -1;
	fd = bpf_obj_get(path);
	if (fd < 0)
		fprintf(stderr, "port_loader: opening %s: %s (was `port_loader load` run for this run?)\n", path,
			strerror(errno));
	return fd;
}

static char ifnames[MAX_LINES][IF_NAMESIZE];
static struct port_config cfgs[MAX_LINES];

static int attach_all(const char *pin_dir, const char *config_path, int forward)
{
	struct port_maps maps;
	int egress, ingress, switch_ingress, ports = read_config(config_path, ifnames, cfgs);

	if (ports < 0)
		return 1;
	egress = open_pinned(pin_dir, "port_egress");
	ingress = open_pinned(pin_dir, "port_ingress");
	switch_ingress = forward ? open_pinned(pin_dir, "switch_ingress") : ingress;
	maps.ids = open_pinned(pin_dir, "port_ids");
	maps.config = open_pinned(pin_dir, "port_config");
	maps.state = open_pinned(pin_dir, "port_state");
	if (egress < 0 || ingress < 0 || switch_ingress < 0 || maps.ids < 0 || maps.config < 0 || maps.state < 0)
		return 1; /* the descriptors close with the process */
	for (int i = 0; i < ports; i++)
		if (attach(egress, cfgs[i].switch_port ? switch_ingress : ingress, &maps, ifnames[i], &cfgs[i]))
			return 1;
	return 0;
}

/* One line of ROUTES (written by ccemu/fabric/forwarding.py route_lines):
 *   port PORT_ID SWITCH_ID                       the switch a port belongs to
 *   uplinks SWITCH_ID STRIDE IFINDEX...          its ECMP uplinks, in order
 *   host SWITCH_ID ADDRESS IFINDEX MAC|-         the port toward a host; MAC: write it in
 * With maps NULL, only checks the line. */
struct route_maps {
	int port_switch, uplinks, hosts;
};

static int write_route(const char *line, const struct route_maps *maps)
{
	char kind[16], address[16], mac[18];
	unsigned int port, switch_id;
	int used;

	if (sscanf(line, "%15s", kind) != 1)
		return -1;
	if (!strcmp(kind, "port")) {
		if (sscanf(line, "port %u %u", &port, &switch_id) != 2 || !switch_id || port >= PORT_MAX_FABRIC_PORTS)
			return -1;
		return maps ? bpf_map_update_elem(maps->port_switch, &port, &switch_id, BPF_ANY) : 0;
	}
	if (!strcmp(kind, "uplinks")) {
		struct switch_uplinks uplinks;
		const char *rest;

		memset(&uplinks, 0, sizeof(uplinks));
		if (sscanf(line, "uplinks %u %u%n", &switch_id, &uplinks.stride, &used) != 2 || !switch_id ||
		    !uplinks.stride)
			return -1;
		for (rest = line + used; uplinks.count < SWITCH_MAX_UPLINKS; rest += used)
			if (sscanf(rest, "%u%n", &uplinks.ifindex[uplinks.count], &used) == 1)
				uplinks.count++;
			else
				break;
		if (!uplinks.count || sscanf(rest, "%15s", kind) == 1) /* none, or more than SWITCH_MAX_UPLINKS */
			return -1;
		return maps ? bpf_map_update_elem(maps->uplinks, &switch_id, &uplinks, BPF_ANY) : 0;
	}
	if (!strcmp(kind, "host")) {
		struct host_route_key key = {0};
		struct host_route route;
		struct in_addr addr;
		unsigned int b[6];

		memset(&route, 0, sizeof(route));
		if (sscanf(line, "host %u %15s %u %17s", &switch_id, address, &route.ifindex, mac) != 4 || !switch_id ||
		    inet_pton(AF_INET, address, &addr) != 1)
			return -1;
		if (strcmp(mac, "-")) {
			if (sscanf(mac, "%2x:%2x:%2x:%2x:%2x:%2x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
				return -1;
			for (int i = 0; i < 6; i++)
				route.mac[i] = b[i];
			route.rewrite_mac = 1;
		}
		key.switch_id = switch_id;
		key.addr = addr.s_addr;
		return maps ? bpf_map_update_elem(maps->hosts, &key, &route, BPF_ANY) : 0;
	}
	return -1;
}

static int write_routes(const char *pin_dir, const char *routes_path)
{
	struct route_maps maps;
	char line[512];
	int number = 0;
	FILE *routes = fopen(routes_path, "r");

	if (!routes) {
		fprintf(stderr, "port_loader: cannot read the routes %s: %s\n", routes_path, strerror(errno));
		return 1;
	}
	while (fgets(line, sizeof(line), routes)) { /* every line checked before any is written */
		number++;
		if (write_route(line, NULL)) {
			fprintf(stderr, "port_loader: %s line %d: not a route: %s", routes_path, number, line);
			fclose(routes);
			return 1;
		}
	}
	maps.port_switch = open_pinned(pin_dir, "port_switch");
	maps.uplinks = open_pinned(pin_dir, "switch_uplinks");
	maps.hosts = open_pinned(pin_dir, "host_routes");
	if (maps.port_switch < 0 || maps.uplinks < 0 || maps.hosts < 0) {
		fclose(routes);
		return 1;
	}
	rewind(routes);
	for (number = 1; fgets(line, sizeof(line), routes); number++)
		if (write_route(line, &maps)) {
			fprintf(stderr, "port_loader: %s line %d: writing it: %s (are the maps sized for the run's routes?)\n",
				routes_path, number, strerror(errno));
			fclose(routes);
			return 1;
		}
	fclose(routes);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--layout"))
		return print_layout();
	if (argc == 7 && !strcmp(argv[1], "load"))
		return load(argv[2], argv[3], strtol(argv[4], NULL, 10), strtol(argv[5], NULL, 10),
			    strtol(argv[6], NULL, 10));
	if (argc == 4 && !strcmp(argv[1], "routes"))
		return write_routes(argv[2], argv[3]);
	if ((argc == 4 || (argc == 5 && !strcmp(argv[4], "forward"))) && !strcmp(argv[1], "attach"))
		return attach_all(argv[2], argv[3], argc == 5);
	fprintf(stderr, "usage: port_loader load OBJ PIN_DIR PORT_IDS SWITCH_PORTS HOST_ROUTES | port_loader routes PIN_DIR "
		"ROUTES | port_loader attach PIN_DIR CONFIG [forward] | port_loader --layout\n");
	return 2;
}
