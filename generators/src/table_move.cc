#include "table_move.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "reprise/common/error.h"
#include "splice_graph.h"

namespace reprise::gen {
namespace {

// A node's subtree in id order (execution order).
std::vector<uint32_t> subtree_nodes(const Trace& t, uint32_t root) {
  std::vector<uint32_t> nodes;
  std::vector<int> parent;
  subtree(t, root, nodes, parent);
  return nodes;
}

// The tensors a node writes (outputs, list elements included), in order.
std::vector<uint32_t> written(const Trace& t, const Node& n) {
  std::vector<uint32_t> out;
  each_arg_tensor(t, n, true, [&](uint32_t r) { out.push_back(r); });
  return out;
}

}  // namespace

// A role's units that go with no single table (the dense ops and the junctions where the tables meet: stack,
// unbind, the exchanges), as node ids in order. With one table its lists would go whole and take the junctions
// along, so it needs two or more.
std::vector<int64_t> skeleton_of(const Trace& role, size_t tables) {
  std::vector<uint32_t> units;
  std::vector<bool> in_chain;
  for (size_t h = 0; h < tables; ++h) {
    Trace c = clone(role);
    TableCut cut(c);
    cut.run([h](size_t x) { return x != h; }, false);
    if (units.empty()) {
      units = cut.units();
      in_chain.assign(units.size(), false);
    }
    for (size_t u = 0; u < units.size(); ++u) in_chain[u] = in_chain[u] || cut.removed(u);
  }
  std::vector<int64_t> ids;
  for (size_t u = 0; u < units.size(); ++u)
    if (!in_chain[u]) ids.push_back(role.nodes[units[u]].id);
  return ids;
}

// The donor's copy with the table's ops found, for one add().
struct Transplant::Donor {
  Donor(const Trace& donor, const std::vector<int64_t>& skeleton, size_t which)
      : c(clone(donor)), cut(c), table(which) {
    cut.run([this](size_t x) { return x != table; }, false);
    gone = cut.gone_nodes();
    skel_of_unit.assign(cut.units().size(), -1);
    std::map<int64_t, int> ordinal;
    for (size_t o = 0; o < skeleton.size(); ++o) ordinal[skeleton[o]] = static_cast<int>(o);
    for (size_t u = 0; u < cut.units().size(); ++u) {
      auto it = ordinal.find(c.nodes[cut.units()[u]].id);
      if (it != ordinal.end()) skel_of_unit[u] = it->second;
    }
    map.assign(c.tensors.size(), kNone32);
    mapped.assign(c.tensors.size(), false);
  }
  std::string what() const { return "table " + std::to_string(table); }

  Trace c;
  TableCut cut;
  size_t table;
  std::vector<bool> gone;         // per node: the table's
  std::vector<int> skel_of_unit;  // per unit: its place among the shared ones, -1 for a table's
  std::vector<uint32_t> map;      // per tensor: the placed role's tensor it reads instead (kNone32: a new one)
  std::vector<bool> mapped;       // per tensor: a shared result the table's ops read
};

// The placed role's node that plays donor node `node` (a node of a shared unit): the node at the same place in the
// subtree of the same shared unit.
uint32_t Transplant::counterpart(const Donor& d, uint32_t node) const {
  const uint32_t u = d.cut.unit_of()[node];
  if (u == kNone32 || d.skel_of_unit[u] < 0) return kNone32;
  const uint32_t there = to_.find(to_skel_[static_cast<size_t>(d.skel_of_unit[u])]);
  const std::vector<uint32_t> a = subtree_nodes(d.c, d.cut.units()[u]), b = subtree_nodes(to_, there);
  const size_t k = static_cast<size_t>(std::find(a.begin(), a.end(), node) - a.begin());
  if (a.size() != b.size() || k >= a.size() || d.c.name(d.c.nodes[a[k]]) != to_.name(to_.nodes[b[k]])) return kNone32;
  return b[k];
}

// Any donor node's counterpart: through its shared unit, else the first node of the same name and depth between the
// counterparts of the shared units around it.
uint32_t Transplant::counterpart_any(const Donor& d, uint32_t node) const {
  const uint32_t direct = counterpart(d, node);
  if (direct != kNone32) return direct;
  auto depth = [](const Trace& t, uint32_t x) {
    int k = 0;
    for (; t.nodes[x].parent != kNone32 && t.nodes[x].parent != x; x = t.nodes[x].parent) ++k;
    return k;
  };
  int before = -1, after = -1;  // shared ordinals around it
  for (size_t u = 0; u < d.cut.units().size(); ++u) {
    if (d.skel_of_unit[u] < 0) continue;
    if (d.cut.units()[u] < node) before = d.skel_of_unit[u];
    if (d.cut.units()[u] > node && after < 0) after = d.skel_of_unit[u];
  }
  const uint32_t lo = before < 0 ? 0 : to_.find(to_skel_[static_cast<size_t>(before)]);
  const uint32_t hi =
      after < 0 ? static_cast<uint32_t>(to_.nodes.size()) : to_.find(to_skel_[static_cast<size_t>(after)]);
  if (lo == kNone32 || hi == kNone32) return kNone32;
  const int want = depth(d.c, node);
  for (uint32_t x = lo; x < hi; ++x)
    if (to_.name(to_.nodes[x]) == d.c.name(d.c.nodes[node]) && depth(to_, x) == want) return x;
  return kNone32;
}

void Transplant::check_shared(const Trace& donor, const std::vector<int64_t>& donor_skeleton) const {
  if (donor_skeleton.size() != to_skel_.size())
    throw UserError("the ranks do not run the same shared ops (" + std::to_string(donor_skeleton.size()) + " against " +
                    std::to_string(to_skel_.size()) + "): tables move only between ranks of one program");
  for (size_t o = 0; o < to_skel_.size(); ++o) {
    const uint32_t a = donor.find(donor_skeleton[o]), b = to_.find(to_skel_[o]);
    if (a == kNone32 || b == kNone32 || donor.name(donor.nodes[a]) != to_.name(to_.nodes[b]))
      throw UserError("the ranks' shared ops differ at node " + std::to_string(donor_skeleton[o]) +
                      ": tables move only between ranks of one program");
  }
}

// What the table's ops read of the shared ops' results: the placed role's results at the same place. List elements
// (the table's own rows of a shared list) are not: they are added to the placed role's lists.
void Transplant::map_shared_reads(Donor& d) const {
  const Trace& c = d.c;
  std::set<uint32_t> appended;
  for (const auto& [list, p] : d.cut.prunes()) appended.insert(p.drop.begin(), p.drop.end());
  std::vector<uint32_t> writer(c.tensors.size(), kNone32);  // the last one so far: records are reused after frees
  for (uint32_t i = 0; i < c.nodes.size(); ++i) {
    // An op's own reads (and its wrappers'), not those nested in it: they read its arguments or its temporaries.
    if (d.gone[i] && (d.cut.unit_of()[i] == kNone32 || d.cut.unit_op(i)))
      each_arg_tensor(c, c.nodes[i], false, [&](uint32_t r) {
        const uint32_t p = writer[r];
        if (p == kNone32 || d.gone[p] || appended.count(r) || d.map[r] != kNone32) return;
        const uint32_t there = counterpart(d, p);
        if (there == kNone32)
          throw UserError(d.what() + "'s ops read what node " + std::to_string(c.nodes[p].id) + " (" +
                          std::string(c.name(c.nodes[p])) + ") computes, which is not shared by the ranks");
        const std::vector<uint32_t> mine = written(c, c.nodes[p]), theirs = written(to_, to_.nodes[there]);
        const size_t k = static_cast<size_t>(std::find(mine.begin(), mine.end(), r) - mine.begin());
        if (k >= theirs.size())
          throw UserError("node " + std::to_string(to_.nodes[there].id) + " returns fewer tensors than the donor's");
        d.map[r] = theirs[k];
        d.mapped[r] = true;
      });
    each_arg_tensor(c, c.nodes[i], true, [&](uint32_t r) { writer[r] = i; });
  }
}

// The shared lists gain the table's elements, in the donor's order.
void Transplant::extend_lists(const Donor& d, NodeImporter& imp) {
  const Trace& c = d.c;
  for (const auto& [list, p] : d.cut.prunes()) {
    uint32_t owner = kNone32, slot = 0;
    bool output = false;
    for (uint32_t i = 0; i < c.nodes.size() && owner == kNone32; ++i) {
      const Node& n = c.nodes[i];
      if (list >= n.inputs && list < n.inputs + n.num_inputs)
        owner = i, slot = list - n.inputs;
      else if (list >= n.outputs && list < n.outputs + n.num_outputs)
        owner = i, slot = list - n.outputs, output = true;
    }
    const uint32_t there = owner == kNone32 ? kNone32 : counterpart(d, owner);
    if (there == kNone32)
      throw UserError(d.what() + "'s list elements are in node " +
                      (owner == kNone32 ? std::string("?") : std::to_string(c.nodes[owner].id)) +
                      ", which is not shared by the ranks");
    const Node& tn = to_.nodes[there];
    const uint32_t at = (output ? tn.outputs : tn.inputs) + slot;
    if (slot >= (output ? tn.num_outputs : tn.num_inputs) || to_.values[at].kind != ValueKind::List)
      throw UserError("node " + std::to_string(tn.id) + " has no list where the donor's has one");
    std::vector<Value> items(to_.items(to_.values[at]).begin(), to_.items(to_.values[at]).end());
    for (const Value& e : c.items(c.values[list]))
      if (e.kind == ValueKind::Tensor && p.drop.count(e.ref)) {
        Value v = e;
        v.ref = imp.tensor(e.ref);
        items.push_back(v);
      }
    replace_list(to_, at, items);
  }
}

// Where the table's outermost op `i` goes: before the counterpart of the next sibling holding a shared op, else after
// the previous one's; among siblings that are all table ops, last under the parent's counterpart.
bool Transplant::place(const Donor& d, uint32_t i, Insertion& in) const {
  const Trace& c = d.c;
  const uint32_t parent = c.nodes[i].parent;
  if (parent == kNone32 || parent == i) return false;
  // The shared unit a sibling holds (its first, or its last), and how far below the sibling it is.
  auto shared_in = [&](uint32_t sibling, bool last) -> std::pair<uint32_t, int> {
    std::pair<uint32_t, int> found{kNone32, 0};
    for (uint32_t x : subtree_nodes(c, sibling)) {
      const uint32_t u = d.cut.unit_of()[x];
      if (u == kNone32 || d.cut.units()[u] != x || d.skel_of_unit[u] < 0) continue;
      int depth = 0;
      for (uint32_t y = x; y != sibling; y = c.nodes[y].parent) ++depth;
      found = {x, depth};
      if (!last) break;
    }
    return found;
  };
  std::vector<uint32_t> order(c.children(c.nodes[parent]).begin(), c.children(c.nodes[parent]).end());
  std::sort(order.begin(), order.end());
  for (int pass = 0; pass < 2; ++pass) {  // the next sibling holding a shared op, else the previous
    if (pass == 1) std::reverse(order.begin(), order.end());
    for (uint32_t sib : order) {
      if ((pass == 0 ? sib <= i : sib >= i) || d.gone[sib]) continue;
      const auto [x, depth] = shared_in(sib, pass == 1);
      if (x == kNone32) continue;
      uint32_t there = to_.find(to_skel_[static_cast<size_t>(d.skel_of_unit[d.cut.unit_of()[x]])]);
      for (int k = 0; k < depth && there != kNone32; ++k) there = to_.nodes[there].parent;
      if (there == kNone32 || to_.name(to_.nodes[there]) != c.name(c.nodes[sib])) break;
      in.anchor = there;
      in.before = pass == 0;
      return true;
    }
  }
  // Its siblings are other tables' (the selects of StackBackward0).
  const uint32_t there = counterpart_any(d, parent);
  if (there == kNone32 || to_.nodes[there].num_children == 0) return false;
  const Span<uint32_t> kids = to_.children(to_.nodes[there]);
  in.anchor = *std::max_element(kids.begin(), kids.end());
  in.before = false;
  return true;
}

void Transplant::add(const Trace& donor, const std::vector<int64_t>& donor_skeleton, size_t table, size_t position,
                     int64_t seq_shift) {
  check_shared(donor, donor_skeleton);
  Donor d(donor, donor_skeleton, table);
  for (uint32_t i = 0; i < d.c.nodes.size(); ++i)
    if (d.gone[i] && d.c.nodes[i].collective >= 0)
      throw UserError(d.what() + "'s ops run a collective of their own: it is not moved");
  map_shared_reads(d);
  NodeImporter imp(to_, d.c, d.map, seq_shift);
  extend_lists(d, imp);
  // The table's ops, each outermost one with its subtree.
  for (uint32_t i = 0; i < d.c.nodes.size(); ++i) {
    const uint32_t parent = d.c.nodes[i].parent;
    if (!d.gone[i] || (parent != kNone32 && parent != i && d.gone[parent])) continue;
    Insertion in;
    if (!place(d, i, in))
      throw UserError(d.what() + "'s node " + std::to_string(d.c.nodes[i].id) + " (" +
                      std::string(d.c.name(d.c.nodes[i])) + ") has no shared op beside it to be placed by");
    std::vector<uint32_t> nodes;
    std::vector<bool> rows;
    subtree(d.c, i, nodes, in.parent);
    for (uint32_t x : nodes) {
      const Node& was = d.c.nodes[x];
      Node n = imp.node(x);
      // A select of a shared result's rows (the gradient's) takes the table's row in the placed role.
      const bool row = d.c.name(was) == "aten::select" && n.num_inputs >= 3 &&
                       d.c.values[was.inputs].kind == ValueKind::Tensor && d.mapped[d.c.values[was.inputs].ref] &&
                       to_.values[n.inputs + 2].kind == ValueKind::Int;
      if (row) to_.values[n.inputs + 2].i = static_cast<int64_t>(position);
      rows.push_back(row);
      in.nodes.push_back(n);
    }
    queue(std::move(in), std::move(rows));
  }
}

// Consecutive ops at the same place stay one insertion, in order.
void Transplant::queue(Insertion in, std::vector<bool> rows) {
  if (!ins_.empty() && ins_.back().anchor == in.anchor && ins_.back().before == in.before) {
    const int base = static_cast<int>(ins_.back().nodes.size());
    for (size_t k = 0; k < in.nodes.size(); ++k) {
      ins_.back().nodes.push_back(in.nodes[k]);
      ins_.back().parent.push_back(in.parent[k] < 0 ? -1 : in.parent[k] + base);
    }
    select_rows_.back().insert(select_rows_.back().end(), rows.begin(), rows.end());
    return;
  }
  ins_.push_back(std::move(in));
  select_rows_.push_back(std::move(rows));
}

void Transplant::finish(std::vector<int64_t>& lookups, std::vector<int64_t>& selects) {
  if (ins_.empty()) return;
  std::vector<std::string> names;
  for (const Insertion& in : ins_)
    for (const Node& n : in.nodes) names.emplace_back(to_.str(n.name));
  std::unordered_map<int64_t, int64_t> renumbered;  // `lookups` and `selects` hold ids of the role's own nodes
  const std::vector<std::vector<int64_t>> ids = insert_nodes(to_, std::move(ins_), &renumbered);
  for (std::vector<int64_t>* list : {&lookups, &selects})
    for (int64_t& id : *list) {
      const auto it = renumbered.find(id);
      if (it != renumbered.end()) id = it->second;
    }
  size_t k = 0;
  for (size_t g = 0; g < ids.size(); ++g)
    for (size_t j = 0; j < ids[g].size(); ++j, ++k) {
      if (embedding_op(names[k])) lookups.push_back(ids[g][j]);
      if (select_rows_[g][j]) selects.push_back(ids[g][j]);
    }
  ins_.clear();
  select_rows_.clear();
}

}  // namespace reprise::gen
