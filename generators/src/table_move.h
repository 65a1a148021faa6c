// Moving an embedding table between ranks: its ops transplanted from the rank that holds it into the role of the
// rank that gets it, for scale's `tables: [plan]` (docs/configs.md, "tables: a sharding plan").
#pragma once

#include <cstdint>
#include <vector>

#include "perturb_edit.h"
#include "reprise/trace/trace.h"
#include "splice_graph.h"
#include "table_cut.h"

namespace reprise::gen {

// A role's units that go with no single table (the dense ops and the junctions where the tables meet: stack,
// unbind, the exchanges), as node ids in order. With one table its lists would go whole and take the junctions
// along, so it needs two or more.
std::vector<int64_t> skeleton_of(const Trace& role, size_t tables);

// One donor rank's table moved into a placed role: its ops (with their autograd wrappers) copied from the donor
// into `into` next to the shared ops they ran between there, its elements appended to the shared lists (the
// pooled embeddings' stack), its row of a shared result selected where it sits now (the gradient's), and what it read
// of the shared ops' results taken from the placed role's. Both roles run the same shared ops (`skeleton`, node ids:
// the donor's and the placed role's).
class Transplant {
 public:
  Transplant(Trace& into, const std::vector<int64_t>& into_skeleton) : to_(into), to_skel_(into_skeleton) {}

  // Queues table `table` (by index among the donor's) as the `position`-th table of the placed role, its autograd
  // sequence numbers shifted by `seq_shift`. Throws UserError without a place.
  void add(const Trace& donor, const std::vector<int64_t>& donor_skeleton, size_t table, size_t position,
           int64_t seq_shift);
  // Inserts every queued table's ops and appends the ids of their lookups and of the selects whose row was set to
  // `lookups` and `selects`, whose ids of the role's own nodes it renumbers as the insertion shifts them.
  void finish(std::vector<int64_t>& lookups, std::vector<int64_t>& selects);

 private:
  struct Donor;
  uint32_t counterpart(const Donor& d, uint32_t node) const;
  uint32_t counterpart_any(const Donor& d, uint32_t node) const;
  void check_shared(const Trace& donor, const std::vector<int64_t>& donor_skeleton) const;
  void map_shared_reads(Donor& d) const;
  void extend_lists(const Donor& d, NodeImporter& imp);
  bool place(const Donor& d, uint32_t i, Insertion& in) const;
  void queue(Insertion in, std::vector<bool> rows);

  Trace& to_;
  const std::vector<int64_t>& to_skel_;
  std::vector<Insertion> ins_;
  std::vector<std::vector<bool>> select_rows_;  // per insertion, per node: a select whose row was set
};

}  // namespace reprise::gen
