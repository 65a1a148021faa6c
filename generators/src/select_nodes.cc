#include "select_nodes.h"

#include <algorithm>
#include <unordered_set>

#include "reprise/common/error.h"

namespace reprise::gen {
namespace {

bool structural(NodeKind k) { return k == NodeKind::Root || k == NodeKind::Thread || k == NodeKind::Annotation; }
bool comm_kind(NodeKind k) { return k == NodeKind::Collective || k == NodeKind::Wait || k == NodeKind::CommOp; }

}  // namespace

void mark_with_ancestors(const Trace& t, uint32_t node, std::vector<bool>& mask) {
  for (uint32_t p = node; p != kNone32 && !mask[p]; p = t.nodes[p].parent) mask[p] = true;
}

void mark_subtree(const Trace& t, uint32_t node, std::vector<bool>& mask) {
  std::vector<uint32_t> stack{node};
  while (!stack.empty()) {
    uint32_t i = stack.back();
    stack.pop_back();
    mask[i] = true;
    for (uint32_t c : t.children(t.nodes[i])) stack.push_back(c);
  }
}

namespace {

std::vector<uint32_t> ops_below_structure(const Trace& t, bool autograd_transparent) {
  std::vector<uint32_t> out;
  std::vector<uint32_t> stack;
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (t.nodes[i].parent == kNone32) stack.push_back(i);
  while (!stack.empty()) {
    uint32_t i = stack.back();
    stack.pop_back();
    const NodeKind k = t.nodes[i].kind;
    if (!structural(k) && !(autograd_transparent && k == NodeKind::Autograd)) {
      out.push_back(i);
      continue;
    }
    for (uint32_t c : t.children(t.nodes[i])) stack.push_back(c);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<uint32_t> outermost_ops(const Trace& t) { return ops_below_structure(t, false); }
std::vector<uint32_t> replayed_ops(const Trace& t) { return ops_below_structure(t, true); }

std::vector<bool> comm_ops(const Trace& t, const std::vector<uint32_t>& outer) {
  std::vector<bool> comm(t.nodes.size(), false);
  for (uint32_t i : outer) {
    std::vector<uint32_t> stack{i};
    while (!stack.empty() && !comm[i]) {
      uint32_t k = stack.back();
      stack.pop_back();
      if (comm_kind(t.nodes[k].kind)) comm[i] = true;
      for (uint32_t c : t.children(t.nodes[k])) stack.push_back(c);
    }
  }
  return comm;
}

std::vector<bool> nodes_in_iterations(const Trace& t, const std::vector<int64_t>& steps, const std::string& where) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  const std::vector<StepSpan> have = profiler_steps(t);
  for (int64_t s : steps) {
    auto k = std::find_if(have.begin(), have.end(), [&](const StepSpan& h) { return h.step->step == s; });
    if (k == have.end()) {
      std::string list;
      for (const StepSpan& h : have) list += (list.empty() ? "" : ", ") + h.step->name;
      throw UserError(where + ": iterations: " + t.source + " has no ProfilerStep#" + std::to_string(s) +
                      (have.empty() ? " (it has no ProfilerStep at all)" : " (it has " + list + ")"));
    }
    ranges.push_back({k->first_id, k->end_id == INT64_MAX ? INT64_MAX : k->end_id - 1});
  }
  return nodes_in_id_ranges(t, ranges);
}

std::vector<bool> nodes_in_id_ranges(const Trace& t, const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  std::vector<bool> mask(t.nodes.size(), false);
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const int64_t id = t.nodes[i].id;
    for (const auto& [a, b] : ranges)
      if (id >= a && id <= b) {
        mark_with_ancestors(t, i, mask);
        break;
      }
  }
  return mask;
}

std::vector<bool> nodes_in_scopes(const Trace& t, const std::vector<uint32_t>& scopes, bool backward) {
  std::vector<bool> inside(t.nodes.size(), false);
  for (uint32_t s : scopes) mark_subtree(t, s, inside);
  std::vector<bool> mask(t.nodes.size(), false);
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (inside[i]) mark_with_ancestors(t, i, mask);
  if (!backward) return mask;
  std::unordered_set<int64_t> seqs, ids;
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (inside[i]) {
      if (t.nodes[i].seq_id >= 0) seqs.insert(t.nodes[i].seq_id);
      ids.insert(t.nodes[i].id);
    }
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (inside[i] || !(n.kind == NodeKind::Autograd || n.scope == kScopeBackwardFunction)) continue;
    const bool by_seq = n.seq_id >= 0 && seqs.count(n.seq_id) > 0;
    const bool by_parent = (n.fields & kHasFwParent) && n.fw_parent != 0 && ids.count(n.fw_parent) > 0;
    if (!by_seq && !by_parent) continue;
    // Ancestors first: mark_with_ancestors stops at a marked node, taking its ancestors as marked.
    if (n.parent != kNone32) mark_with_ancestors(t, n.parent, mask);
    mark_subtree(t, i, mask);
  }
  return mask;
}

void keep_structure(const Trace& t, std::vector<bool>& keep) {
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (n.kind == NodeKind::Root || n.kind == NodeKind::Thread || t.name(n) == "## process_group:init ##")
      keep[i] = true;
  }
}

}  // namespace reprise::gen
