import re

from ccemu.fabric.openflow import switch_flows, uplink_rules
from ccemu.model.routing import PATH_IDS, Routing
from ccemu.model.topology import fat_tree


def chosen_port(rules, pid):
    """Evaluate masked `reg0=value/mask` rules the way OVS matches them."""
    for rule in rules:
        match = re.search(r"reg0=(\w+)(?:/(\w+))?,actions=output:(\d+)", rule)
        value, mask = int(match[1], 0), int(match[2], 0) if match[2] else 0xFFFFFFFF
        if pid & mask == value & mask:
            return int(match[3])
    return None


def test_uplink_rules_pick_the_routing_uplink_for_every_path_id():
    for k in (4, 6, 8):
        routing = Routing(fat_tree(k))
        for routes in routing.tables.values():
            rules = uplink_rules(routes)
            for pid in range(PATH_IDS):
                expected = routes.uplink_for(pid) if routes.uplinks else None
                assert chosen_port(rules, pid) == expected, (k, routes.switch, pid)


def test_power_of_two_fan_out_needs_one_masked_rule_per_uplink():
    routes = Routing(fat_tree(8)).tables["a1"]
    assert len(uplink_rules(routes)) == 4


def test_other_fan_outs_get_one_rule_per_path_id():
    routes = Routing(fat_tree(6)).tables["e1"]
    assert len(uplink_rules(routes)) == PATH_IDS


def test_core_switch_has_a_host_route_per_host_and_no_uplink_rules():
    topo = fat_tree(4)
    flows = switch_flows(topo, Routing(topo).tables["c1"])
    assert sum("nw_dst=" in f for f in flows) == 16
    assert not any("reg0=" in f for f in flows)


def test_udp_path_id_comes_from_the_source_port_and_other_ip_from_a_symmetric_hash():
    topo = fat_tree(4)
    flows = "\n".join(switch_flows(topo, Routing(topo).tables["e1"]))
    assert "udp,tp_src=0xa000/0xe000,actions=move:NXM_OF_UDP_SRC[0..7]->NXM_NX_REG0[0..7]" in flows
    assert "multipath(symmetric_l3l4+udp," in flows


def test_only_udp_from_ccemus_path_id_ports_is_routed_by_its_source_port():
    topo = fat_tree(4)
    (rule,) = [f for f in switch_flows(topo, Routing(topo).tables["e1"]) if "udp,tp_src=" in f]
    value, mask = (int(x, 0) for x in re.search(r"tp_src=(\w+)/(\w+)", rule).groups())
    by_path_id = [port for port in (5201, 0x9FFF, 0xA000, 0xA0FF, 0xB000, 0xBFFF, 0xC000, 60999)
                  if port & mask == value]
    assert by_path_id == [0xA000, 0xA0FF, 0xB000, 0xBFFF]


def test_only_the_switch_a_host_hangs_off_writes_that_hosts_mac_over_the_gateways():
    topo = fat_tree(4)
    routing = Routing(topo)
    rewrites = {switch: [f for f in switch_flows(topo, routing.tables[switch]) if "mod_dl_dst" in f]
                for switch in topo.switch_names}
    assert rewrites["e1"] == ["table=1,priority=200,ip,nw_dst=10.0.0.1,actions=mod_dl_dst:02:00:00:00:00:01,output:1",
                              "table=1,priority=200,ip,nw_dst=10.0.0.2,actions=mod_dl_dst:02:00:00:00:00:02,output:2"]
    assert sum(map(len, rewrites.values())) == len(topo.hosts)
    assert all(not flows for switch, flows in rewrites.items() if not switch.startswith("e"))
