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
 *       named in CONFIG (one port a line of key=value pairs, see parse_line()), writes each one's config, zeroes
 *       its state and maps its ifindex (unique in the run: the fabric creates its interfaces
 *       with ifindexes of their own) to its id. Prints "attached <ifname> <ifindex>" per port.
 *       With `forward`, a switch port's ingress program also forwards (switch_ingress).
 *   port_loader check CONFIG
 *       reads CONFIG as attach would, checking every line, and prints each port's config back as
 *       the line it parsed (needs no root, no bpffs: ccemu's tests run it on the lines Python writes)
 *   port_loader --layout
 *       struct sizes and field offsets (the tables of port_config.h and port_structs.h), for
 *       ccemu/ports/layouts.py's mirror
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

#define MAX_LINE_BYTES 4096
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
#define CONFIG_FIELD(f) FIELD(port_config, f);
#define LAYOUT_SIZE(s) SIZE(s);
#define LAYOUT_FIELD(s, f) FIELD(s, f);
	SIZE(port_config);
	PORT_CONFIG_FIELDS(CONFIG_FIELD)
	PORT_STRUCTS_LAYOUT(LAYOUT_SIZE, LAYOUT_FIELD)
	return 0;
}

/* A config line's keys: struct port_config's fields (port_config.h, generated from
 * ccemu/ports/fields.py, which writes the lines too), and `port`, the interface. */
enum key_type { KEY_u32, KEY_u64, KEY_marker };

struct config_key {
	const char *name;
	size_t offset;
	enum key_type type;
	int count; /* PORT_CLASSES: comma-separated values, data first */
};

#define CONFIG_KEY(f, t, n) {#f, offsetof(struct port_config, f), KEY_##t, n},
static const struct config_key config_keys[] = {PORT_CONFIG_KEYS(CONFIG_KEY)};
#define CONFIG_KEYS (sizeof(config_keys) / sizeof(config_keys[0]))
static const char *const marker_names[PORT_MARKERS] = PORT_MARKER_NAMES;

/* Sets one key's values from `value`; -1 if it is not what the key takes. */
static int set_key(const struct config_key *key, const char *value, struct port_config *cfg)
{
	char *field = (char *)cfg + key->offset, *end;
	unsigned long long v;
	const char *at = value;

	if (key->type == KEY_marker) {
		for (__u32 m = 0; m < PORT_MARKERS; m++)
			if (!strcmp(value, marker_names[m])) {
				memcpy(field, &m, sizeof(m));
				return 0;
			}
		return -1;
	}
	for (int i = 0; i < key->count; i++) {
		if (i && *at++ != ',')
			return -1;
		if (*at < '0' || *at > '9')
			return -1;
		errno = 0;
		v = strtoull(at, &end, 10);
		if (errno || (key->type == KEY_u32 && v > 0xFFFFFFFFULL))
			return -1;
		if (key->type == KEY_u64) {
			__u64 v64 = v;
			memcpy(field + i * sizeof(v64), &v64, sizeof(v64));
		} else {
			__u32 v32 = v;
			memcpy(field + i * sizeof(v32), &v32, sizeof(v32));
		}
		at = end;
	}
	return *at ? -1 : 0;
}

/* What a port's values must be beyond their types; NULL when they are fine. */
static const char *check_config(const struct port_config *cfg)
{
	if (cfg->port_id >= PORT_MAX_FABRIC_PORTS || cfg->peer_port_id >= PORT_MAX_FABRIC_PORTS)
		return "port_id and peer_port_id must be below PORT_MAX_FABRIC_PORTS (65536)";
	if (cfg->switch_port > 1 || cfg->lossless > 1)
		return "switch_port and lossless must be 0 or 1";
	if (!cfg->idle_reset_ns)
		return "idle_reset_ns must be above 0";
	if (cfg->xon_bytes > cfg->xoff_bytes)
		return "xon_bytes must not be above xoff_bytes";
	if (cfg->marker == PORT_MARKER_DCTCP && !cfg->ecn_threshold_bytes)
		return "marker dctcp needs ecn_threshold_bytes above 0";
	if (cfg->marker == PORT_MARKER_RED && (cfg->red_kmin_bytes >= cfg->red_kmax_bytes || cfg->red_pmax_ppm > 1000000))
		return "marker red needs red_kmin_bytes below red_kmax_bytes and red_pmax_ppm at most 1000000";
	if (cfg->marker == PORT_MARKER_SPRAYPASS && (!cfg->credit_mark_window || !cfg->credit_rate_Bps))
		return "marker spraypass needs credit_mark_window and credit_rate_Bps above 0";
	return NULL;
}

/* One line of an attach config: `port=IFNAME key=value ...`, every key of config_keys once, in
 * any order (ccemu/ports/fields.py config_line writes them). On an error, says what was wrong in
 * `error` (an unknown, repeated or missing key, a bad value) and returns -1. */
static int parse_line(const char *line, char *ifname, struct port_config *cfg, char *error, size_t error_size)
{
	char copy[MAX_LINE_BYTES], *token, *save, *value;
	int seen[CONFIG_KEYS] = {0}, have_port = 0;
	size_t used;

	memset(cfg, 0, sizeof(*cfg));
	snprintf(copy, sizeof(copy), "%s", line);
	for (token = strtok_r(copy, " \t\r\n", &save); token; token = strtok_r(NULL, " \t\r\n", &save)) {
		size_t k;

		value = strchr(token, '=');
		if (!value) {
			snprintf(error, error_size, "'%s' is not key=value", token);
			return -1;
		}
		*value++ = '\0';
		if (!strcmp(token, "port")) {
			if (have_port || !*value || strlen(value) >= IF_NAMESIZE) {
				snprintf(error, error_size, have_port ? "key 'port' given twice" :
					 "bad value for port: '%s' (an interface name, 1-%d characters)", value,
					 IF_NAMESIZE - 1);
				return -1;
			}
			strcpy(ifname, value);
			have_port = 1;
			continue;
		}
		for (k = 0; k < CONFIG_KEYS && strcmp(token, config_keys[k].name); k++)
			;
		if (k == CONFIG_KEYS) {
			snprintf(error, error_size, "unknown key '%s'", token);
			return -1;
		}
		if (seen[k]++) {
			snprintf(error, error_size, "key '%s' given twice", token);
			return -1;
		}
		if (set_key(&config_keys[k], value, cfg)) {
			snprintf(error, error_size, "bad value for %s: '%s' (%s)", token, value,
				 config_keys[k].type == KEY_marker ? "a marker name of port_config.h" :
				 config_keys[k].count > 1 ? "comma-separated integers, data then credit" :
				 config_keys[k].type == KEY_u64 ? "an integer below 2^64" : "an integer below 2^32");
			return -1;
		}
	}
	used = snprintf(error, error_size, "missing keys:");
	if (!have_port)
		used += snprintf(error + used, used < error_size ? error_size - used : 0, " port");
	for (size_t k = 0; k < CONFIG_KEYS; k++)
		if (!seen[k])
			used += snprintf(error + used, used < error_size ? error_size - used : 0, " %s", config_keys[k].name);
	if (used > strlen("missing keys:"))
		return -1;
	value = (char *)check_config(cfg);
	if (value) {
		snprintf(error, error_size, "%s", value);
		return -1;
	}
	return 0;
}

/* A parsed line as the line it would have been (`check`): the keys in config_keys' order. */
static void print_line(const char *ifname, const struct port_config *cfg)
{
	printf("port=%s", ifname);
	for (size_t k = 0; k < CONFIG_KEYS; k++) {
		const struct config_key *key = &config_keys[k];
		const char *field = (const char *)cfg + key->offset;

		printf(" %s=", key->name);
		for (int i = 0; i < key->count; i++) {
			__u64 v64;
			__u32 v32;

			if (key->type == KEY_u64) {
				memcpy(&v64, field + i * sizeof(v64), sizeof(v64));
				printf("%s%llu", i ? "," : "", (unsigned long long)v64);
			} else {
				memcpy(&v32, field + i * sizeof(v32), sizeof(v32));
				if (key->type == KEY_marker)
					printf("%s", v32 < PORT_MARKERS ? marker_names[v32] : "?");
				else
					printf("%s%u", i ? "," : "", v32);
			}
		}
	}
	printf("\n");
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
	char line[MAX_LINE_BYTES], error[1024];
	FILE *config = fopen(path, "r");
	int ports = 0;

	if (!config) {
		fprintf(stderr, "port_loader: cannot read the port config %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), config)) {
		int bad = 1;

		if (ports == MAX_LINES)
			snprintf(error, sizeof(error), "more than %d ports", MAX_LINES);
		else if (!strchr(line, '\n') && !feof(config))
			snprintf(error, sizeof(error), "longer than %d bytes", MAX_LINE_BYTES - 2);
		else
			bad = parse_line(line, ifnames[ports], &cfgs[ports], error, sizeof(error));
		if (bad) {
			fprintf(stderr, "port_loader: %s line %d: %s\n", path, ports + 1, error);
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

static int check_all(const char *config_path)
{
	int ports = read_config(config_path, ifnames, cfgs);

	if (ports < 0)
		return 1;
	for (int i = 0; i < ports; i++)
		print_line(ifnames[i], &cfgs[i]);
	return 0;
}

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
	if (argc == 3 && !strcmp(argv[1], "check"))
		return check_all(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "routes"))
		return write_routes(argv[2], argv[3]);
	if ((argc == 4 || (argc == 5 && !strcmp(argv[4], "forward"))) && !strcmp(argv[1], "attach"))
		return attach_all(argv[2], argv[3], argc == 5);
	fprintf(stderr, "usage: port_loader load OBJ PIN_DIR PORT_IDS SWITCH_PORTS HOST_ROUTES | port_loader routes PIN_DIR "
		"ROUTES | port_loader attach PIN_DIR CONFIG [forward] | port_loader check CONFIG | port_loader --layout\n");
	return 2;
}
