from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataclasses

from ccemu.model.routing import PATH_IDS, Routing, asymmetric_paths, prove_symmetric, symmetry_problems
from ccemu.model.topology import TopologyError, dumbbell, fat_tree, leaf_spine, star

ROUTINGS = {k: Routing(fat_tree(k)) for k in (4, 6, 8)}


def all_shortest_paths(topo, src, dst):
    """Independent of routing.py: every shortest switch sequence, by breadth-first search."""
    start, _ = topo.attachment(src)
    goal, _ = topo.attachment(dst)
    paths, best = [], None
    queue = deque([(start,)])
    while queue:
        path = queue.popleft()
        if best is not None and len(path) > best:
            break
        if path[-1] == goal:
            best = len(path)
            paths.append(path)
            continue
        for peer, _ in topo.ports(path[-1]).values():
            if not topo.is_host(peer) and peer not in path:
                queue.append(path + (peer,))
    return set(paths)


def test_fat_tree_k4_has_20_switches_16_hosts_48_links():
    topo = fat_tree(4)
    assert (len(topo.switches), len(topo.hosts), len(topo.links)) == (20, 16, 48)


def test_fat_tree_k8_has_80_switches_128_hosts():
    topo = fat_tree(8)
    assert (len(topo.switches), len(topo.hosts), len(topo.links)) == (80, 128, 384)


def test_the_expresspass_papers_fat_tree_has_8_cores_16_aggregations_32_tors_and_192_hosts():
    """Seed 000: "8 core switches, 16 aggregator switches, 32 top-of-rack (ToR) switches, and 192
    nodes", 3:1 at the ToR."""
    topo = fat_tree(8, hosts_per_edge=6, uplinks=2)
    kinds = [s.name[0] for s in topo.switches]
    assert (kinds.count("c"), kinds.count("a"), kinds.count("e"), len(topo.hosts)) == (8, 16, 32, 192)
    e1 = topo.ports("e1").values()
    assert sum(topo.is_host(peer) for peer, _ in e1) == 6 and sum(not topo.is_host(peer) for peer, _ in e1) == 2
    assert all(len(topo.ports(s.name)) == 8 for s in topo.switches if s.name[0] in "ac")


@pytest.mark.parametrize("shape", [(8, 6, 2), (4, 1, 3), (6, 5, 1)], ids=str)
def test_an_oversubscribed_fat_tree_routes_every_shortest_path_symmetrically(shape):
    routing = Routing(fat_tree(*shape))
    # One uplink makes every route a single next hop, which the structural proof does not cover: walked.
    assert symmetry_problems(routing)[1] == [] and asymmetric_paths(routing) == []
    a, b = routing.topo.host_names[0], routing.topo.host_names[-1]
    assert set(routing.paths(a, b)) == all_shortest_paths(routing.topo, a, b)
    assert len(routing.paths(a, b)) == shape[2] * (shape[0] // 2)


@pytest.mark.parametrize("bad", [{"hosts_per_edge": 0}, {"uplinks": -1}])
def test_a_fat_tree_refuses_an_edge_without_hosts_or_uplinks(bad):
    with pytest.raises(TopologyError, match="must be >= 1"):
        fat_tree(4, **bad)


def test_hosts_in_different_pods_of_k4_have_four_distinct_equal_cost_paths():
    routing = ROUTINGS[4]
    paths = routing.paths("h1", "h16")
    assert len(paths) == 4
    assert set(paths) == all_shortest_paths(routing.topo, "h1", "h16")


def test_hosts_in_one_pod_have_k_over_2_paths_and_under_one_edge_a_single_path():
    routing = ROUTINGS[4]
    assert set(routing.paths("h1", "h3")) == all_shortest_paths(routing.topo, "h1", "h3")
    assert len(routing.paths("h1", "h3")) == 2
    assert routing.paths("h1", "h2") == [("e1",)]


@pytest.mark.parametrize("k", [4, 6, 8])
def test_path_ids_enumerate_exactly_the_shortest_paths_of_a_cross_pod_pair(k):
    routing = ROUTINGS[k]
    last = routing.topo.host_names[-1]
    assert len(routing.paths("h1", last)) == (k // 2) ** 2
    assert set(routing.paths("h1", last)) == all_shortest_paths(routing.topo, "h1", last)


def test_every_pair_and_path_id_of_k4_takes_the_reverse_path_back():
    assert asymmetric_paths(ROUTINGS[4]) == []


@pytest.mark.parametrize("k", [4, 6, 8, 16])
def test_the_structural_proof_holds_for_fat_trees_up_to_k16(k):
    routing = ROUTINGS.get(k) or Routing(fat_tree(k))
    assert prove_symmetric(routing) == []
    assert symmetry_problems(routing) == ("proved from the tables' structure", [])


@pytest.mark.parametrize("switch", ["e1", "a1", "a8"])
def test_uplinks_in_another_order_on_one_switch_fail_the_proof_and_the_walk_finds_asymmetric_paths(switch):
    routing = Routing(fat_tree(4))
    tables = routing.tables[switch]
    routing.tables[switch] = dataclasses.replace(tables, uplinks=tables.uplinks[::-1])
    proof = prove_symmetric(routing)
    assert proof and all(p.startswith("rule 4: edge switches reach") for p in proof)
    assert asymmetric_paths(routing)
    how, problems = symmetry_problems(routing)
    assert how == "every pair and path-id walked" and problems == asymmetric_paths(routing)


def test_a_down_route_that_does_not_retrace_the_climb_fails_rule_5():
    routing = Routing(fat_tree(4))
    core = routing.tables["c1"]  # its host route to e1's hosts goes to a1; send h1 and h2 to a3's pod instead
    wrong = {h: (port if h not in ("h1", "h2") else core.host_ports["h5"]) for h, port in core.host_ports.items()}
    routing.tables["c1"] = dataclasses.replace(core, host_ports=wrong)
    assert any(p.startswith("rule 5: c1 routes the hosts of e1") for p in prove_symmetric(routing))
    with pytest.raises(TopologyError, match="forwarding loop"):  # what the tables really do
        asymmetric_paths(routing)


def test_hosts_of_one_edge_routed_apart_fail_rule_1():
    routing = Routing(fat_tree(4))
    core = routing.tables["c1"]
    split = {**core.host_ports, "h2": core.host_ports["h5"]}
    routing.tables["c1"] = dataclasses.replace(core, host_ports=split)
    assert "rule 1: c1 routes the hosts of e1 differently" in prove_symmetric(routing)


@settings(max_examples=400, deadline=None)
@given(k=st.sampled_from([4, 6, 8]), data=st.data())
def test_reverse_path_is_the_forward_path_reversed(k, data):
    routing = ROUTINGS[k]
    hosts = routing.topo.host_names
    a = data.draw(st.sampled_from(hosts))
    b = data.draw(st.sampled_from([h for h in hosts if h != a]))
    pid = data.draw(st.integers(0, PATH_IDS - 1))
    assert routing.path(b, a, pid) == routing.path(a, b, pid)[::-1]


@settings(max_examples=200, deadline=None)
@given(k=st.sampled_from([4, 6, 8]), data=st.data())
def test_path_id_p_and_p_mod_n_paths_take_the_same_path(k, data):
    routing = ROUTINGS[k]
    hosts = routing.topo.host_names
    a, b = data.draw(st.sampled_from(hosts)), data.draw(st.sampled_from(hosts))
    if a == b:
        return
    pid = data.draw(st.integers(0, PATH_IDS - 1))
    assert routing.path(a, b, pid) == routing.path(a, b, pid % routing.n_paths(a, b))


@pytest.mark.parametrize("topo", [leaf_spine(3, 4, 2), dumbbell(3), star(5)], ids=lambda t: t.kind)
def test_other_topologies_route_symmetrically_over_all_shortest_paths(topo):
    routing = Routing(topo)
    assert asymmetric_paths(routing) == []
    assert symmetry_problems(routing)[1] == []
    a, b = topo.host_names[0], topo.host_names[-1]
    assert set(routing.paths(a, b)) == all_shortest_paths(topo, a, b)


def test_leaf_spine_spreads_path_ids_over_every_spine():
    routing = Routing(leaf_spine(2, 4, 1))
    assert [p[1] for p in routing.paths("h1", "h2")] == ["s1", "s2", "s3", "s4"]


def test_interface_names_fit_linux_limit_up_to_k16():
    topo = fat_tree(16)
    assert max(len(name) for link in topo.links for name in link.interface_names()) <= 15


@pytest.mark.parametrize("k", [0, 3, 7, -2])
def test_fat_tree_rejects_odd_or_small_k(k):
    with pytest.raises(TopologyError, match="even and >= 2"):
        fat_tree(k)


def test_host_addresses_are_unique_and_in_10_slash_8():
    topo = fat_tree(8)
    assert len({h.ip for h in topo.hosts}) == len({h.mac for h in topo.hosts}) == 128
    assert all(h.ip.startswith("10.") for h in topo.hosts)
