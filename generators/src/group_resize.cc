#include "group_resize.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "reprise/common/error.h"
#include "reprise/comms/collective.h"

namespace reprise::gen {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : a; }

comms::Kind kind_of(const Collective& c) {
  comms::Kind k = comms::Kind::Barrier;
  comms::parse_kind(c.name, k);
  return k;
}

// The per-peer row count rank j sends in its k-th all_to_all(v) of a group: what every receiver's splits need.
using ChunkKey = size_t;  // ordinal among the job's all_to_all(v)s: every group spans the world here

struct Sized {
  int64_t in = 0, out = 0;
  std::vector<int64_t> in_splits, out_splits;
};

}  // namespace

Rows rows_of(int64_t elems, const std::vector<int64_t>& splits, int64_t group) {
  Rows r;
  int64_t sum = 0;
  for (int64_t s : splits) sum += std::max<int64_t>(s, 0);
  if (static_cast<int64_t>(splits.size()) == group && sum > 0 && elems % sum == 0) {
    r.rows = sum;
    r.width = elems / sum;
  } else {
    r.rows = elems;
  }
  return r;
}

void resize_world(Workspace& ws, const std::vector<int64_t>& sources, Scaling scaling, const std::string& where) {
  const int g_old = ws.world_size();
  const int64_t g_new = static_cast<int64_t>(sources.size());
  if (g_new < 1) throw UserError(where + ": a job needs at least one rank");
  // The new rank -> role map, keeping only the roles still replayed.
  std::vector<uint32_t> role_of_rank;
  std::map<uint32_t, uint32_t> renumber;
  for (int64_t s : sources) {
    const uint32_t old = ws.role_of_rank.at(static_cast<size_t>(s));
    auto [it, fresh] = renumber.try_emplace(old, static_cast<uint32_t>(renumber.size()));
    (void)fresh;
    role_of_rank.push_back(it->second);
  }
  std::vector<Trace> roles(renumber.size());
  std::vector<int64_t> source_rank(renumber.size());
  for (auto& [old, now] : renumber) {
    roles[now] = std::move(ws.roles[old]);
    source_rank[now] = ws.source_rank[old];
  }
  ws.roles = std::move(roles);
  ws.source_rank = std::move(source_rank);
  ws.role_of_rank = role_of_rank;

  const double s = scaling == Scaling::Strong ? double(g_old) / double(g_new) : 1.0;
  // Pass 1: each role's per-peer chunk for each all_to_all(v), in group order.
  std::vector<std::map<ChunkKey, int64_t>> chunk(ws.roles.size());
  for (size_t r = 0; r < ws.roles.size(); ++r) {
    const Trace& t = ws.roles[r];
    size_t ordinal = 0;
    for (const Collective& c : t.collectives) {
      if (c.is_wait) continue;
      const int64_t g = static_cast<int64_t>(group_members(t, c, g_old).size());
      if (g != g_old && !c.p2p)
        throw UserError(where + ": " + t.source + ": collective " + c.name + " runs in group '" + c.pg_name + "' of " +
                        std::to_string(g) + " of the " + std::to_string(g_old) +
                        " ranks: only groups spanning the whole job are scaled so far");
      const comms::Kind k = kind_of(c);
      if (k != comms::Kind::AllToAll && k != comms::Kind::AllToAllV) continue;
      const Rows in = rows_of(c.in_elems, c.in_splits, g_old);
      const int64_t total = static_cast<int64_t>(std::llround(double(in.rows) * s));
      chunk[r][ordinal++] = std::max<int64_t>(ceil_div(total, g_new), 0);
    }
  }
  // Pass 2: the new sizes.
  for (size_t r = 0; r < ws.roles.size(); ++r) {
    Trace& t = ws.roles[r];
    size_t ordinal = 0;
    std::vector<std::pair<const Collective*, Sized>> changes;
    for (const Collective& c : t.collectives) {
      if (c.is_wait || c.p2p) continue;
      Sized z;
      z.in = c.in_elems;
      z.out = c.out_elems;
      switch (kind_of(c)) {
        case comms::Kind::AllGather:
        case comms::Kind::Gather: {  // the whole (output) is fixed; each rank holds its share
          const int64_t whole = c.out_elems > 0 ? c.out_elems : c.in_elems * g_old;
          z.in = ceil_div(whole, g_new);
          z.out = z.in * g_new;
          break;
        }
        case comms::Kind::ReduceScatter:
        case comms::Kind::Scatter: {
          const int64_t whole = c.in_elems > 0 ? c.in_elems : c.out_elems * g_old;
          z.out = ceil_div(whole, g_new);
          z.in = z.out * g_new;
          break;
        }
        case comms::Kind::AllToAll:
        case comms::Kind::AllToAllV: {
          const ChunkKey key = ordinal++;
          const Rows in = rows_of(c.in_elems, c.in_splits, g_old);
          const Rows out = rows_of(c.out_elems, c.out_splits, g_old);
          z.in_splits.assign(static_cast<size_t>(g_new), chunk[r].at(key));
          for (int64_t j = 0; j < g_new; ++j) {
            auto peer = chunk[ws.role_of_rank[static_cast<size_t>(j)]].find(key);
            if (peer == chunk[ws.role_of_rank[static_cast<size_t>(j)]].end())
              throw UserError(where + ": " + t.source + ": its all_to_all #" + std::to_string(key + 1) +
                              " has no match on rank " + std::to_string(j));
            z.out_splits.push_back(peer->second);
          }
          int64_t in_rows = 0, out_rows = 0;
          for (int64_t x : z.in_splits) in_rows += x;
          for (int64_t x : z.out_splits) out_rows += x;
          z.in = in_rows * in.width;
          z.out = out_rows * out.width;
          break;
        }
        default:
          break;  // every rank holds the whole buffer: unchanged
      }
      changes.push_back({&c, std::move(z)});
    }
    for (auto& [c, z] : changes) {
      set_collective_sizes(t, *c, z.in, z.out, z.in_splits, z.out_splits);
      set_attr_int(t, c->node, "pg_size", "int", g_new);
      set_attr_int(t, c->node, "global_rank_start", "int", 0);
      set_attr_int(t, c->node, "global_rank_stride", "int", 1);
    }
    // Every group spans the new world.
    std::vector<ProcessGroup> groups = t.process_groups;
    for (const Collective& c : t.collectives)
      if (!c.pg_name.empty() &&
          std::none_of(groups.begin(), groups.end(), [&](const ProcessGroup& g) { return g.name == c.pg_name; })) {
        ProcessGroup g;
        g.name = c.pg_name;
        g.desc = c.pg_desc;
        groups.push_back(g);
      }
    for (ProcessGroup& g : groups) {
      g.ranks.clear();
      for (int64_t k = 0; k < g_new; ++k) g.ranks.push_back(k);
      g.size = g_new;
    }
    set_process_groups(t, groups);
  }
}

void keep_ranks(Workspace& ws, const std::vector<int64_t>& ranks) {
  resize_world(ws, ranks, Scaling::Weak, "select: ranks");
}

void scale_messages(Workspace& ws, double factor, const std::string& only) {
  for (Trace& t : ws.roles) {
    std::vector<std::pair<const Collective*, Sized>> changes;
    for (const Collective& c : t.collectives) {
      if (c.is_wait || (!only.empty() && c.name != only)) continue;
      auto grow = [&](int64_t x) { return static_cast<int64_t>(std::ceil(double(x) * factor)); };
      Sized z;
      // Splits are rows: scale the rows, and the elements with them, so both ends of every pair agree.
      const Rows in = rows_of(c.in_elems, c.in_splits, static_cast<int64_t>(c.in_splits.size()));
      const Rows out = rows_of(c.out_elems, c.out_splits, static_cast<int64_t>(c.out_splits.size()));
      int64_t in_rows = 0, out_rows = 0;
      for (int64_t x : c.in_splits) in_rows += (z.in_splits.emplace_back(grow(x)), z.in_splits.back());
      for (int64_t x : c.out_splits) out_rows += (z.out_splits.emplace_back(grow(x)), z.out_splits.back());
      z.in = c.in_splits.empty() ? grow(c.in_elems) : in_rows * in.width;
      z.out = c.out_splits.empty() ? grow(c.out_elems) : out_rows * out.width;
      changes.push_back({&c, std::move(z)});
    }
    for (auto& [c, z] : changes) set_collective_sizes(t, *c, z.in, z.out, z.in_splits, z.out_splits);
    reindex(t);
    ws.note("scale: messages x" + std::to_string(factor) + " on " + std::to_string(changes.size()) +
            " collectives of " + t.source);
  }
}

}  // namespace reprise::gen
