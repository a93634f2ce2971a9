//! Topologies of the simulated network, routed as the emulator's fabric is
//! (emulation/ccemu/routing.py, transport/wire-format.md "Path-id"): a switch sends a packet
//! down toward its destination when the host is below it, else up through
//! `uplinks[(path_id / stride) % uplinks]`, where stride is the product of the uplink counts of
//! the tiers below; uplink i of every switch of a tier leads to the same place, so the
//! reverse of a path is the path with the same path-id.

use std::collections::HashMap;

use crate::types::HostId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Node {
    Host(HostId),
    Switch(usize),
}

#[derive(Debug, Clone, Default)]
pub struct Switch {
    pub name: String,
    /// The neighbour toward each host below this switch.
    pub down: HashMap<HostId, Node>,
    /// Neighbours above, in uplink order.
    pub up: Vec<Node>,
    pub stride: u32,
}

#[derive(Debug, Clone)]
pub struct Topology {
    /// Hosts h1..hN.
    pub hosts: u32,
    pub switches: Vec<Switch>,
}

impl Topology {
    /// Every host on one switch.
    pub fn star(hosts: u32) -> Self {
        Self::leaf_spine(1, 0, hosts)
    }

    /// `leaves` leaf switches of `hosts_per_leaf` hosts each (numbered leaf by leaf), every
    /// leaf linked to every one of `spines` spines: one path per spine between leaves.
    pub fn leaf_spine(leaves: u32, spines: u32, hosts_per_leaf: u32) -> Self {
        let mut t = Topology { hosts: leaves * hosts_per_leaf, switches: Vec::new() };
        let spine_ids: Vec<usize> = (0..spines).map(|s| t.add(format!("s{s}"), 1)).collect();
        for leaf in 0..leaves {
            let id = t.add(format!("l{leaf}"), 1);
            for h in leaf * hosts_per_leaf + 1..=(leaf + 1) * hosts_per_leaf {
                t.switches[id].down.insert(h, Node::Host(h));
                for &spine in &spine_ids {
                    t.switches[spine].down.insert(h, Node::Switch(id));
                }
            }
            t.switches[id].up = spine_ids.iter().map(|&s| Node::Switch(s)).collect();
        }
        t
    }

    /// A k-ary fat-tree (k even): k pods of k/2 edge and k/2 aggregation switches, (k/2)^2
    /// cores, k/2 hosts per edge switch (k^3/4 hosts, numbered edge by edge). Edge e's uplink
    /// i goes to its pod's aggregation i, whose uplink j goes to core i * k/2 + j.
    pub fn fat_tree(k: u32) -> Self {
        assert!(k >= 2 && k.is_multiple_of(2), "fat-tree k must be even (got {k})");
        let half = k / 2;
        let mut t = Topology { hosts: k * k * k / 4, switches: Vec::new() };
        let cores: Vec<usize> = (0..half * half).map(|c| t.add(format!("c{c}"), half)).collect();
        let mut host = 0;
        for pod in 0..k {
            let aggs: Vec<usize> = (0..half).map(|a| t.add(format!("a{pod}_{a}"), half)).collect();
            for (i, &agg) in aggs.iter().enumerate() {
                t.switches[agg].up = (0..half).map(|j| Node::Switch(cores[i * half as usize + j as usize])).collect();
            }
            for e in 0..half {
                let edge = t.add(format!("e{pod}_{e}"), 1);
                t.switches[edge].up = aggs.iter().map(|&a| Node::Switch(a)).collect();
                for _ in 0..half {
                    host += 1;
                    t.switches[edge].down.insert(host, Node::Host(host));
                    for (i, &agg) in aggs.iter().enumerate() {
                        t.switches[agg].down.insert(host, Node::Switch(edge));
                        for j in 0..half as usize {
                            t.switches[cores[i * half as usize + j]].down.insert(host, Node::Switch(agg));
                        }
                    }
                }
            }
        }
        t
    }

    fn add(&mut self, name: String, stride: u32) -> usize {
        self.switches.push(Switch { name, stride, ..Switch::default() });
        self.switches.len() - 1
    }

    /// The switch called `name` (c0, a1_0, e2_1; s0, l3).
    pub fn switch(&self, name: &str) -> Node {
        Node::Switch(self.switches.iter().position(|s| s.name == name).unwrap_or_else(|| panic!("no switch {name}")))
    }

    /// The switch a host hangs off.
    pub fn edge_of(&self, host: HostId) -> Node {
        let edge = self.switches.iter().position(|s| s.down.get(&host) == Some(&Node::Host(host)));
        Node::Switch(edge.unwrap_or_else(|| panic!("no host h{host}")))
    }

    /// Where `switch` sends a packet for `dst` with `path_id`.
    pub fn next_hop(&self, switch: usize, dst: HostId, path_id: u8) -> Node {
        let s = &self.switches[switch];
        match s.down.get(&dst) {
            Some(&node) => node,
            None if s.up.is_empty() => panic!("{} has no route to h{dst}", s.name),
            None => s.up[(path_id as usize / s.stride as usize) % s.up.len()],
        }
    }

    /// Every link once, as (lower, upper) neighbours.
    pub fn links(&self) -> Vec<(Node, Node)> {
        let mut links = Vec::new();
        for (id, s) in self.switches.iter().enumerate() {
            links.extend(s.up.iter().map(|&up| (Node::Switch(id), up)));
            links.extend(s.down.values().filter(|n| matches!(n, Node::Host(_))).map(|&h| (h, Node::Switch(id))));
        }
        links.sort();
        links
    }

    /// The switches a packet from `src` to `dst` with `path_id` crosses.
    pub fn route(&self, src: HostId, dst: HostId, path_id: u8) -> Vec<Node> {
        let mut hops = vec![self.edge_of(src)];
        while let Some(&Node::Switch(s)) = hops.last() {
            match self.next_hop(s, dst, path_id) {
                Node::Host(_) => break,
                next => hops.push(next),
            }
        }
        hops
    }

    /// Distinct paths between two hosts over all 256 path-ids.
    pub fn paths(&self, src: HostId, dst: HostId) -> u16 {
        let routes: std::collections::HashSet<Vec<Node>> = (0..=255).map(|p| self.route(src, dst, p)).collect();
        routes.len() as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_k4_fat_tree_has_one_two_and_four_paths_under_an_edge_in_a_pod_and_across_pods() {
        let t = Topology::fat_tree(4);
        assert_eq!((t.hosts, t.switches.len(), t.links().len()), (16, 20, 48));
        assert_eq!((t.paths(1, 2), t.paths(1, 3), t.paths(1, 5)), (1, 2, 4));
        assert_eq!(t.route(1, 5, 3).len(), 5);
    }

    #[test]
    fn the_reverse_of_a_path_is_the_path_with_the_same_path_id() {
        for t in [Topology::fat_tree(4), Topology::leaf_spine(4, 3, 2)] {
            for (a, b) in [(1, 2), (1, 3), (2, 7), (8, 1)] {
                for p in 0..=255 {
                    let mut back = t.route(b, a, p);
                    back.reverse();
                    assert_eq!(t.route(a, b, p), back, "h{a} <-> h{b} path-id {p}");
                }
            }
        }
    }

    #[test]
    fn a_leaf_spine_has_one_path_per_spine_between_leaves() {
        let t = Topology::leaf_spine(4, 3, 2);
        assert_eq!((t.paths(1, 2), t.paths(1, 3)), (1, 3));
    }
}
