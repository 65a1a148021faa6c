// Which ops of a trace go with each of its embedding tables, and cutting those of the tables a role does not keep:
// what scale's `tables: reshard` and `tables: [plan]` are made of (docs/configs.md, "scale").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise::gen {

bool embedding_op(std::string_view name);  // aten::embedding_bag, _embedding_bag, ..., aten::embedding

// A list argument losing some elements: (value index of the list, element records to drop).
struct Prune {
  uint32_t list = 0;
  std::set<uint32_t> drop;
};

// The tables of one role and the ops that go with those it does not keep, and the edits the kept ones need.
class TableCut {
 public:
  explicit TableCut(Trace& t) : t_(t) {}

  // The role's tables (the distinct weights its embedding lookups read, in order of first use); throws UserError
  // (without a place) when no embedding op reads one.
  size_t count_tables();
  // Keeps the tables `keep` says (by index in that order) and returns the number of ops removed; throws UserError
  // (without a place) for a trace it cannot cut.
  // With `apply` false the trace is left as it was and only the accessors below tell what would go.
  size_t run(const std::function<bool(size_t table)>& keep, bool apply = true);
  const std::vector<int64_t>& kept_embeddings() const { return kept_embeddings_; }  // node ids
  const std::vector<int64_t>& compacted_selects() const { return compacted_; }      // node ids
  const std::vector<uint32_t>& units() const { return units_; }                     // node indices
  const std::vector<uint32_t>& unit_of() const { return unit_of_; }                 // per node
  // Whether node `i` is a unit's op itself, not one nested in it: an op's data comes through its own arguments.
  bool unit_op(uint32_t i) const { return unit_of_[i] != kNone32 && units_[unit_of_[i]] == i; }
  bool removed(size_t unit) const { return removed_[unit]; }
  const std::map<uint32_t, Prune>& prunes() const { return prunes_; }
  // Per node: whether it goes: a node of a removed op, or an autograd wrapper whose every op went (wrappers
  // without ops stay).
  std::vector<bool> gone_nodes() const;

 private:
  void find_units();
  void taint_removed_tables(const std::function<bool(size_t)>& keep);
  void remove_tainted();
  bool remove_dead_views();
  void compact_selects();
  void apply();

  Trace& t_;
  bool counted_ = false;
  std::vector<uint32_t> units_;                 // nodes replay issues: the first below wrappers (autograd, annotations)
  std::vector<uint32_t> unit_of_;               // per node: index in units_ of its unit, kNone32 for wrappers
  std::vector<std::vector<uint32_t>> members_;  // per unit: its nodes (the op and those nested in it), in order
  std::vector<bool> removed_;                   // per unit
  std::vector<int64_t> tables_;                 // weight storages, in order of first use
  std::vector<std::pair<uint32_t, size_t>> lookups_;  // (unit, table) of each lookup
  std::vector<bool> tainted_;                         // per tensor record: holds data of removed tables
  std::map<uint32_t, Prune> prunes_;                  // by list value index
  std::vector<int64_t> compacted_;                    // node ids of the kept selects over rows some of which went
  std::vector<int64_t> kept_embeddings_;
};

// Replaces the list at value index `at` with `items` (appended to the value pool), its recorded type following.
void replace_list(Trace& t, uint32_t at, const std::vector<Value>& items);
// After shape inference: the results of the selects `ids` (node ids) start where their row does.
void place_selects(Trace& t, const std::vector<int64_t>& ids);
// The index, offset and per-sample-weight tensors of the lookups `embedding_ids` (node ids) cover a `factor` times
// larger global batch; returns how many grew. Throws UserError when an op of the trace makes the indices.
size_t grow_lookups(Trace& t, const std::vector<int64_t>& embedding_ids, int64_t factor);
size_t collective_count(const Trace& t);  // collectives, waits not counted

}  // namespace reprise::gen
