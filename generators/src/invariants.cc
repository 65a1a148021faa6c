#include "invariants.h"

#include <algorithm>
#include <map>

#include "reprise/common/error.h"
#include "reprise/comms/collective.h"

namespace reprise::gen {
namespace {

std::string describe(const Collective& c) {
  return c.name + " (" + c.dtype + ", " + std::to_string(c.in_elems) + " in, " + std::to_string(c.out_elems) + " out)";
}

// The sizes a collective needs equal on every member: the whole buffer, or each rank's chunk.
bool same_sizes(const Collective& a, const Collective& b) {
  comms::Kind k = comms::Kind::Barrier;
  comms::parse_kind(a.name, k);
  switch (k) {
    case comms::Kind::AllToAllV:
    case comms::Kind::Send:
    case comms::Kind::Recv:
      return true;  // checked pairwise, or not replayed in a group
    default:
      return a.in_elems == b.in_elems && a.out_elems == b.out_elems;
  }
}

std::string group_text(const std::vector<int64_t>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return "{" + s + (ranks.size() > 8 ? ",... (" + std::to_string(ranks.size()) + " ranks)" : "") + "}";
}

// A role's collectives by group (its member ranks), in issue order.
std::map<std::vector<int64_t>, std::vector<const Collective*>> by_group(const Trace& t, int world) {
  std::map<std::vector<int64_t>, std::vector<const Collective*>> out;
  for (const Collective& c : t.collectives)
    if (!c.is_wait && !c.p2p && c.name != "coalesced") out[group_members(t, c, world)].push_back(&c);
  return out;
}

}  // namespace

void check_ranks(const Workspace& ws) {
  const int world = ws.world_size();
  const Trace& first = ws.roles[ws.role_of_rank.at(0)];
  // Group membership is one fact of the job: every role must state it alike.
  for (const Trace& t : ws.roles)
    for (const ProcessGroup& g : t.process_groups)
      for (const ProcessGroup& h : first.process_groups)
        if (g.name == h.name && !g.ranks.empty() && !h.ranks.empty() && g.ranks != h.ranks)
          throw UserError(t.source + ": process group '" + g.name + "' has other ranks than in " + first.source);
  std::vector<std::map<std::vector<int64_t>, std::vector<const Collective*>>> roles;
  for (const Trace& t : ws.roles) roles.push_back(by_group(t, world));
  std::map<std::vector<int64_t>, bool> groups;
  for (const auto& r : roles)
    for (const auto& [members, unused] : r) groups[members] = (void(unused), true);
  static const std::vector<const Collective*> kNone;
  // Where a rank's trace is, and a collective in it: "rank 1 (b.json, node 12)".
  auto trace_of = [&](int64_t r) -> const Trace& { return ws.roles[ws.role_of_rank[static_cast<size_t>(r)]]; };
  auto where = [&](int64_t r, const Collective* c) {
    const Trace& t = trace_of(r);
    return "rank " + std::to_string(r) + " (" + t.source +
           (c ? ", node " + std::to_string(t.nodes[c->node].id) : std::string()) + ")";
  };
  for (const auto& [ranks, unused] : groups) {
    (void)unused;
    const std::string group = group_text(ranks);
    std::vector<const std::vector<const Collective*>*> seq;
    for (int64_t r : ranks) {
      if (r < 0 || r >= world) {
        std::string named_by;
        for (size_t k = 0; k < roles.size() && named_by.empty(); ++k)
          if (roles[k].count(ranks)) named_by = " (named in " + ws.roles[k].source + ")";
        throw UserError("process group " + group + " names rank " + std::to_string(r) + ", outside the world of " +
                        std::to_string(world) + named_by);
      }
      const auto& mine = roles[ws.role_of_rank[static_cast<size_t>(r)]];
      auto it = mine.find(ranks);
      seq.push_back(it == mine.end() ? &kNone : &it->second);
    }
    for (size_t k = 1; k < ranks.size(); ++k) {
      if (seq[k]->size() != seq[0]->size())
        throw UserError("process group " + group + ": " + where(ranks[k], nullptr) + " issues " +
                        std::to_string(seq[k]->size()) + " collectives in it, " + where(ranks[0], nullptr) + " " +
                        std::to_string(seq[0]->size()));
      for (size_t i = 0; i < seq[0]->size(); ++i) {
        const Collective& a = *(*seq[0])[i];
        const Collective& b = *(*seq[k])[i];
        if (a.name != b.name || a.dtype != b.dtype || !same_sizes(a, b))
          throw UserError("process group " + group + ": collective #" + std::to_string(i + 1) + " is " + describe(a) +
                          " on " + where(ranks[0], &a) + " but " + describe(b) + " on " + where(ranks[k], &b));
      }
    }
    // all_to_allv: what rank i sends to j is what j expects from i.
    const size_t g = ranks.size();
    for (size_t i = 0; i < seq[0]->size(); ++i) {
      if ((*seq[0])[i]->name != "all_to_allv") continue;
      for (size_t a = 0; a < g; ++a)
        for (size_t b = 0; b < g; ++b) {
          const Collective& x = *(*seq[a])[i];
          const Collective& y = *(*seq[b])[i];
          if (x.in_splits.size() != g || y.out_splits.size() != g) continue;
          if (x.in_splits[b] != y.out_splits[a])
            throw UserError("process group " + group + ": all_to_allv #" + std::to_string(i + 1) + ": " +
                            where(ranks[a], &x) + " sends " + std::to_string(x.in_splits[b]) + " rows to " +
                            where(ranks[b], &y) + ", which expects " + std::to_string(y.out_splits[a]));
        }
    }
  }
}

}  // namespace reprise::gen
