// Automorphisms of a cluster whose nodes are all alike that act alike on every node
// (Fabric::node_automorphism): a permutation of one node's places and of the fabric's
// vertices that keeps every link (kind, capacity, latency). Because every node is built and
// wired like node 0 (the same places, the same fabric switches), such a map of node 0 and
// the fabric is a map of the whole cluster. The search is a backtracking over the "quotient"
// graph (node 0's places and the fabric vertices, breadth first from the seeded places), each
// candidate pruned by its vertex kind, its links' labels in and out, and the links to the
// vertices already mapped; the map found is checked link by link before it is returned.
#include <algorithm>
#include <map>
#include <tuple>

#include "sim/fabric.hpp"

namespace loom::sim {

namespace {

// The quotient graph: node 0's places (0..P-1) and the fabric vertices (P..), with labelled
// directed edges.
struct Quotient {
  struct Edge {
    int to;
    int label;
  };
  std::vector<topo::VertexId> vertex;  // by index: node 0's vertex at that place, or the switch
  std::vector<std::vector<Edge>> out, in;
  std::vector<std::vector<int>> signature;  // kind, reduce, sorted out labels, -1, sorted in
  int places = 0;
};

// Backtracking search for an automorphism of `q` extending `map` (-1: unmapped).
class Search {
 public:
  explicit Search(const Quotient& q) : q_(q) {}

  bool run(std::vector<int>& map) {
    const auto n = q_.vertex.size();
    used_.assign(n, 0);
    for (int w : map)
      if (w >= 0) used_[static_cast<size_t>(w)] = 1;
    // Breadth first from the mapped vertices, then from any vertex left (another component).
    std::vector<char> seen(n, 0);
    order_.clear();
    for (size_t u = 0; u < n; ++u)
      if (map[u] >= 0) seen[u] = 1;
    std::vector<int> frontier;
    for (size_t u = 0; u < n; ++u)
      if (map[u] >= 0) frontier.push_back(static_cast<int>(u));
    for (size_t start = 0;;) {
      for (size_t i = 0; i < frontier.size(); ++i) {
        const auto u = static_cast<size_t>(frontier[i]);
        for (const auto* list : {&q_.out[u], &q_.in[u]}) {
          for (const auto& e : *list) {
            if (seen[static_cast<size_t>(e.to)]) continue;
            seen[static_cast<size_t>(e.to)] = 1;
            frontier.push_back(e.to);
            order_.push_back(e.to);
          }
        }
      }
      while (start < n && seen[start]) ++start;
      if (start == n) break;
      seen[start] = 1;
      frontier.assign(1, static_cast<int>(start));
      order_.push_back(static_cast<int>(start));
    }
    steps_ = 0;
    return assign(map, 0);
  }

 private:
  static constexpr long MAX_STEPS = 1 << 20;  // give up beyond (the map is then not found)

  // Whether u -> w agrees with the map so far: the same signature, and the same labelled
  // edges to every mapped neighbour (in both directions, counted).
  bool fits(const std::vector<int>& map, int u, int w) const {
    const auto su = static_cast<size_t>(u), sw = static_cast<size_t>(w);
    if (q_.signature[su] != q_.signature[sw]) return false;
    auto count = [](const std::vector<Quotient::Edge>& edges, int to, int label) {
      int c = 0;
      for (const auto& e : edges) c += e.to == to && e.label == label;
      return c;
    };
    for (const auto& e : q_.out[su]) {
      const int image = e.to == u ? w : map[static_cast<size_t>(e.to)];
      if (image >= 0 && count(q_.out[su], e.to, e.label) != count(q_.out[sw], image, e.label))
        return false;
    }
    for (const auto& e : q_.in[su]) {
      const int image = e.to == u ? w : map[static_cast<size_t>(e.to)];
      if (image >= 0 && count(q_.in[su], e.to, e.label) != count(q_.in[sw], image, e.label))
        return false;
    }
    return true;
  }

  bool assign(std::vector<int>& map, size_t i) {
    if (i == order_.size()) return true;
    const int u = order_[i];
    if (map[static_cast<size_t>(u)] >= 0) return assign(map, i + 1);
    // Candidates: u itself first (most maps fix most of the cluster), then the others.
    const auto n = static_cast<int>(q_.vertex.size());
    for (int k = -1; k < n; ++k) {
      const int w = k < 0 ? u : k;
      if (k == u || used_[static_cast<size_t>(w)] || ++steps_ > MAX_STEPS) continue;
      if (!fits(map, u, w)) continue;
      map[static_cast<size_t>(u)] = w;
      used_[static_cast<size_t>(w)] = 1;
      if (assign(map, i + 1)) return true;
      map[static_cast<size_t>(u)] = -1;
      used_[static_cast<size_t>(w)] = 0;
    }
    return false;
  }

  const Quotient& q_;
  std::vector<int> order_;
  std::vector<char> used_;
  long steps_ = 0;
};

}  // namespace

const std::optional<Fabric::NodeMap>& Fabric::node_automorphism(
    const std::vector<std::pair<int, int>>& seed) {
  auto it = automorphisms_.find(seed);
  if (it != automorphisms_.end()) return it->second;
  std::optional<NodeMap>& found = automorphisms_[seed];
  const topo::Cluster& c = *cluster_;
  const auto& v0 = node_vertices(0);
  if (all_alike_ < 0) {
    all_alike_ = !v0.empty();
    for (size_t x = 1; all_alike_ && x < node_vertices_.size(); ++x)
      all_alike_ = !compare_nodes(0, static_cast<int>(x));
  }
  if (!all_alike_) return found;
  // The quotient graph, its edge labels (kind, capacity, latency) numbered as met.
  Quotient q;
  q.vertex = v0;
  q.places = static_cast<int>(v0.size());
  std::unordered_map<topo::VertexId, int> index;  // lookup only
  for (size_t v = 0; v < c.vertices().size(); ++v) {
    if (c.vertex(static_cast<topo::VertexId>(v)).node >= 0) continue;
    index.emplace(static_cast<topo::VertexId>(v), static_cast<int>(q.vertex.size()));
    q.vertex.push_back(static_cast<topo::VertexId>(v));
  }
  const size_t n = q.vertex.size();
  q.out.resize(n);
  q.in.resize(n);
  std::map<std::tuple<int, double, SimTime>, int> labels;
  auto label = [&](topo::LinkId l) {
    const auto key =
        std::make_tuple(static_cast<int>(c.link(l).kind), capacity_Bpps(l), latency(l));
    return labels.emplace(key, static_cast<int>(labels.size())).first->second;
  };
  for (size_t u = 0; u < n; ++u) {
    for (topo::LinkId l : c.out_links(q.vertex[u])) {
      const topo::VertexId t = c.link(l).to;
      const int node = node_of(t);
      int to;
      if (node == 0) {
        to = node_position(t);
      } else if (node < 0) {
        to = index.at(t);
      } else {
        continue;  // a fabric switch's link to another node: like its link to node 0
      }
      const int lab = label(l);
      q.out[u].push_back({to, lab});
      q.in[static_cast<size_t>(to)].push_back({static_cast<int>(u), lab});
    }
  }
  q.signature.resize(n);
  for (size_t u = 0; u < n; ++u) {
    const topo::Vertex& v = c.vertex(q.vertex[u]);
    auto& sig = q.signature[u];
    sig = {u < v0.size() ? 0 : 1, static_cast<int>(v.kind), v.in_switch_reduce ? 1 : 0};
    std::vector<int> outs, ins;
    for (const auto& e : q.out[u]) outs.push_back(e.label);
    for (const auto& e : q.in[u]) ins.push_back(e.label);
    std::sort(outs.begin(), outs.end());
    std::sort(ins.begin(), ins.end());
    sig.insert(sig.end(), outs.begin(), outs.end());
    sig.push_back(-1);
    sig.insert(sig.end(), ins.begin(), ins.end());
  }
  std::vector<int> map(n, -1);
  for (const auto& [a, b] : seed) {
    if (a < 0 || b < 0 || a >= q.places || b >= q.places) return found;
    if (map[static_cast<size_t>(a)] >= 0 && map[static_cast<size_t>(a)] != b) return found;
    map[static_cast<size_t>(a)] = b;
  }
  std::vector<int> check(map);
  std::sort(check.begin(), check.end());
  if (std::adjacent_find(check.begin(), check.end(),
                         [](int x, int y) { return x >= 0 && x == y; }) != check.end())
    return found;  // two places onto one
  if (!Search(q).run(map)) return found;
  // Every edge onto an edge of its label, as many (the search checked each edge once both
  // its ends were mapped; checked again here whole).
  for (size_t u = 0; u < n; ++u) {
    for (const auto& e : q.out[u]) {
      auto count = [&](size_t from, int to) {
        return std::count_if(q.out[from].begin(), q.out[from].end(),
                             [&](const auto& f) { return f.to == to && f.label == e.label; });
      };
      if (count(u, e.to) != count(static_cast<size_t>(map[u]), map[static_cast<size_t>(e.to)]))
        return found;
    }
  }
  NodeMap m;
  m.place.assign(map.begin(), map.begin() + q.places);
  for (size_t u = v0.size(); u < n; ++u)
    m.fabric.emplace(q.vertex[u], q.vertex[static_cast<size_t>(map[u])]);
  found = std::move(m);
  return found;
}

topo::VertexId Fabric::image(const NodeMap& m, topo::VertexId v) {
  const int node = node_of(v);
  if (node < 0) return m.fabric.at(v);
  return node_vertices(node)[static_cast<size_t>(m.place[static_cast<size_t>(node_position(v))])];
}

topo::LinkId Fabric::image_link(const NodeMap& m, topo::LinkId l) {
  const topo::Link& link = cluster_->link(l);
  // From a fabric switch into a node: the other way of the node's own link (a switch has a
  // link to every node; a node vertex a few).
  if (node_of(link.from) < 0 && node_of(link.to) >= 0) {
    const topo::LinkId back = image_link(m, l ^ 1);
    return back < 0 ? -1 : (back ^ 1);
  }
  const topo::VertexId from = image(m, link.from), to = image(m, link.to);
  auto like = [&](topo::LinkId k) {
    const topo::Link& other = cluster_->link(k);
    return other.to == to && other.kind == link.kind && capacity_Bpps(k) == capacity_Bpps(l) &&
           latency(k) == latency(l);
  };
  topo::LinkId found = -1;
  auto consider = [&](topo::LinkId k) {
    if (!like(k)) return true;
    if (found >= 0) return false;  // parallel like links: which one is not determined
    found = k;
    return true;
  };
  if (node_of(link.from) < 0) {  // between two switches: through the switch pairs' table
    if (fabric_links_.empty()) {
      for (size_t v = 0; v < cluster_->vertices().size(); ++v) {
        if (node_of(static_cast<topo::VertexId>(v)) >= 0) continue;
        for (topo::LinkId k : cluster_->out_links(static_cast<topo::VertexId>(v)))
          if (node_of(cluster_->link(k).to) < 0)
            fabric_links_[pair_key(static_cast<topo::VertexId>(v), cluster_->link(k).to)].push_back(
                k);
      }
      fabric_links_[pair_key(-1, -1)];  // built (even without such links)
    }
    const auto it = fabric_links_.find(pair_key(from, to));
    if (it == fabric_links_.end()) return -1;
    for (topo::LinkId k : it->second)
      if (!consider(k)) return -1;
    return found;
  }
  for (topo::LinkId k : cluster_->out_links(from))
    if (!consider(k)) return -1;
  return found;
}

}  // namespace loom::sim
