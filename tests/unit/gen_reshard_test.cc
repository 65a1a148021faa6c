// scale: {world_size: M, tables: reshard}: a model-parallel rank's embedding tables spread over the ranks that
// replay it. The end-to-end check against real 2- and 4-rank DLRM captures is bench/truth.py --quick (a ctest).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "dlrm_trace.h"
#include "reprise/common/error.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/builder.h"
#include "transform.h"

namespace reprise {
namespace {

using Shape = std::vector<int64_t>;
using namespace test;  // dlrm_trace.h

// A 2-rank job whose ranks share the one role, scaled by `params` (YAML flow text).
gen::Workspace scaled(Trace t, const std::string& params, bool infer = true) {
  gen::YamlFile f("cfg.yaml", "scale:\n  " + params + "\n");
  gen::TransformStep step = gen::kScale.parse(f.root()["scale"], {f, "."});
  gen::Workspace ws;
  ws.roles.push_back(std::move(t));
  ws.source_rank.push_back(0);
  ws.role_of_rank = {0, 0};
  if (infer) ws.infer_shapes = replay::infer_shapes;
  step(ws);
  return ws;
}

Shape shape(const Trace& t, const Value& v) {
  return Shape(t.dims(t.tensors[v.ref]).begin(), t.dims(t.tensors[v.ref]).end());
}

std::vector<const Node*> ops(const Trace& t, std::string_view name) {
  std::vector<const Node*> out;
  for (const Node& n : t.nodes)
    if (t.name(n) == name) out.push_back(&n);
  return out;
}

bool has_note(const gen::Workspace& ws, const std::string& text) {
  for (const std::string& n : ws.notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(GenReshard, EachSliceKeepsItsTablesOverTwiceTheBatch) {
  Dlrm d = dlrm(4);
  gen::Workspace ws = scaled(std::move(d.t), "{world_size: 4, tables: reshard}");
  ASSERT_EQ(ws.roles.size(), 2u);
  EXPECT_EQ(ws.role_of_rank, (std::vector<uint32_t>{0, 1, 0, 1}));  // ranks 2j, 2j+1 share source rank j
  EXPECT_FALSE(ws.timing_valid);
  for (size_t slice = 0; slice < 2; ++slice) {
    SCOPED_TRACE("slice " + std::to_string(slice));
    const Trace& t = ws.roles[slice];
    const std::vector<const Node*> lookups = ops(t, "aten::embedding_bag");
    ASSERT_EQ(lookups.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      Span<Value> in = t.inputs(*lookups[k]);
      EXPECT_EQ(t.tensors[in[0].ref].storage_id, d.weights[2 * slice + k]);
      EXPECT_EQ(shape(t, in[1]), (Shape{2 * kLookups}));
      EXPECT_EQ(shape(t, in[2]), (Shape{2 * kBags}));
      EXPECT_EQ(shape(t, t.outputs(*lookups[k])[0]), (Shape{2 * kBags, kDim}));
    }
    const Node& stack = *ops(t, "aten::stack").at(0);
    EXPECT_EQ(t.inputs(stack)[0].count, 2u);
    EXPECT_EQ(t.str(t.input_types(stack)[0]), "GenericList[Tensor(float),Tensor(float)]");
    EXPECT_EQ(shape(t, t.outputs(stack)[0]), (Shape{2, 2 * kBags, kDim}));
    const Node& view = *ops(t, "aten::view").at(0);
    EXPECT_EQ(shape(t, t.outputs(view)[0]), (Shape{2, 4, 2, kDim}));  // [T/M, M, B, D]
    EXPECT_EQ(shape(t, t.outputs(*ops(t, "aten::clone").at(0))[0]), (Shape{4, 2, 2, kDim}));
    // The gradient's rows of the kept tables, renumbered; their results start at their new rows.
    const std::vector<const Node*> selects = ops(t, "aten::select");
    ASSERT_EQ(selects.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(t.inputs(*selects[k])[2].i, static_cast<int64_t>(1 - k));
      EXPECT_EQ(t.tensors[t.outputs(*selects[k])[0].ref].offset, static_cast<int64_t>(1 - k) * 2 * kBags * kDim);
      EXPECT_EQ(shape(t, t.outputs(*selects[k])[0]), (Shape{2 * kBags, kDim}));
    }
    EXPECT_EQ(ops(t, "aten::_embedding_bag_backward").size(), 2u);
    const std::vector<const Node*> updates = ops(t, "aten::add_");
    ASSERT_EQ(updates.size(), 2u);
    EXPECT_EQ(t.tensors[t.inputs(*updates[0])[0].ref].storage_id, d.weights[2 * slice + 1]);  // backward: last first
    EXPECT_EQ(ops(t, "aten::zero_").size(), 2u);
    EXPECT_EQ(ops(t, "aten::relu").size(), 1u);
    EXPECT_NO_THROW(replay::dry_run(t, "slice"));
  }
  EXPECT_TRUE(has_note(ws, "keeps tables 2..3 of 4"));
}

TEST(GenReshard, FourTimesTheWorldKeepsOneTablePerRank) {
  gen::Workspace ws = scaled(dlrm(4).t, "{world_size: 8, tables: reshard}");
  ASSERT_EQ(ws.roles.size(), 4u);
  for (const Trace& t : ws.roles) {
    EXPECT_EQ(ops(t, "aten::embedding_bag").size(), 1u);
    EXPECT_EQ(ops(t, "aten::select").size(), 1u);
    EXPECT_EQ(t.inputs(*ops(t, "aten::select")[0])[2].i, 0);
    EXPECT_EQ(shape(t, t.outputs(*ops(t, "aten::view")[0])[0]), (Shape{1, 8, 2, kDim}));
  }
}

// The tensors a table-batched lookup holds its tables in: dev weights (input 1) and Adagrad's state (input 20).
Shape held(const Trace& t, const Node& lookup, size_t input) { return shape(t, t.inputs(lookup)[input]); }

const char* const kLookup = "fbgemm::split_embedding_codegen_lookup_adagrad_function";

// fbgemm's lookup holds every table of the rank in one op: a world 3 times larger keeps one role, whose lookup holds
// a third of the tables' rows (whole rows, rounded up) and looks up as much as before; data-parallel tables (dense_)
// stay whole.
TEST(GenReshard, TableBatchedLookupsHoldTheirShareOfTheRows) {
  TraceBuilder b;
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#1"));
  test::split_adagrad_lookup(b, 48016);  // 3,001 rows of width 16
  b.op("fbgemm::dense_embedding_codegen_lookup_function",
       {b.tensor(dlrm_spec(b, {112})), b.tensor(dlrm_spec(b, {2}, "long int")), b.tensor(dlrm_spec(b, {3}, "long int")),
        b.integer(32), b.integer(16), b.tensor(dlrm_spec(b, {3}, "long int")), b.integer(3),
        b.tensor(dlrm_spec(b, {32}, "long int")), b.tensor(dlrm_spec(b, {33}, "long int")), b.integer(0), b.none(),
        b.none(), b.integer(0)},
       {b.tensor(dlrm_spec(b, {16, 32}))});
  gen::Workspace ws = scaled(b.finish(), "{world_size: 6, tables: reshard}");
  ASSERT_EQ(ws.roles.size(), 1u);  // the 3 slices of a rank hold as much
  EXPECT_EQ(ws.role_of_rank, (std::vector<uint32_t>(6, 0)));
  const Trace& t = ws.roles[0];
  const Node& lookup = *ops(t, kLookup).at(0);
  EXPECT_EQ(held(t, lookup, 1), (Shape{16016}));  // 1,001 rows
  EXPECT_EQ(held(t, lookup, 20), (Shape{16016}));
  EXPECT_EQ(t.tensors[t.inputs(lookup)[1].ref].numel, 16016);
  EXPECT_EQ(held(t, lookup, 11), (Shape{768}));  // indices, offsets and output as recorded
  EXPECT_EQ(held(t, lookup, 12), (Shape{385}));
  EXPECT_EQ(shape(t, t.outputs(lookup)[0]), (Shape{128, 48}));
  EXPECT_EQ(held(t, *ops(t, "fbgemm::dense_embedding_codegen_lookup_function").at(0), 0), (Shape{112}));
  EXPECT_TRUE(has_note(ws,
                       "1 table-batched lookup(s) hold 1/3 of their tables (weights and optimizer state 0.000384 "
                       "GB -> 0.000128 GB), their lookups as recorded"));

  // Beside per-table lookups, the rank's slices are cut as before and each lookup holds its share as well.
  gen::Workspace mixed = scaled(dlrm(4, 0, 1000).t, "{world_size: 4, tables: reshard}");
  ASSERT_EQ(mixed.roles.size(), 2u);
  for (const Trace& r : mixed.roles) {
    EXPECT_EQ(ops(r, "aten::embedding_bag").size(), 2u);
    EXPECT_EQ(held(r, *ops(r, kLookup).at(0), 1), (Shape{500}));
  }
}

TEST(GenReshard, MistakesAreOneLineErrorsAtTheirPlace) {
  EXPECT_NE(error_of([] {
              scaled(dlrm(4).t, "{world_size: 3, tables: reshard}");
            }).find("cfg.yaml:2:3: scale: tables: reshard: world_size 3 is not a multiple"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              scaled(dlrm(3).t, "{world_size: 4, tables: reshard}");
            }).find("its 3 embedding tables do not split into 2 equal slices"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { scaled(dlrm(4).t, "{world_size: 4, tables: reshard}", false); }).find("needs shape inference"),
      std::string::npos);
  EXPECT_NE(error_of([] { scaled(dlrm(4).t, "{world_size: 4, mode: strong, tables: reshard}"); }).find("weak scaling"),
            std::string::npos);
  EXPECT_NE(error_of([] { scaled(dlrm(4).t, "{tables: reshard}"); }).find("tables: goes with world_size"),
            std::string::npos);
  EXPECT_NE(error_of([] { scaled(dlrm(4).t, "{world_size: 4, tables: shard}"); }).find("tables"), std::string::npos);
  EXPECT_NE(error_of([] {
              TraceBuilder b;
              b.roots();
              test::split_adagrad_lookup(b, 48, false);
              scaled(b.finish(), "{world_size: 4, tables: reshard}");
            })
                .find("cfg.yaml:2:3: scale: tables: reshard: role 0 (source rank 0): node 18 "
                      "(fbgemm::split_embedding_codegen_lookup_adagrad_function): its indices are not recorded"),
            std::string::npos);
}

// The 2-rank job whose rank 0 holds all 4 tables, placed by `params` (YAML flow text).
gen::Workspace placed(const std::string& params) {
  gen::YamlFile f("cfg.yaml", "scale:\n  " + params + "\n");
  gen::TransformStep step = gen::kScale.parse(f.root()["scale"], {f, "."});
  gen::Workspace ws;
  ws.roles.push_back(dlrm(4, 4).t);
  ws.roles.push_back(no_tables(4));
  ws.source_rank = {0, 1};
  ws.role_of_rank = {0, 1};
  ws.infer_shapes = replay::infer_shapes;
  step(ws);
  return ws;
}

// The all_to_allvs of a role: (in splits, out splits, in elements, out elements), in order.
using Layout = std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t, int64_t>;
std::vector<Layout> exchanges(const Trace& t) {
  std::vector<Layout> out;
  for (const Collective& c : t.collectives)
    if (!c.is_wait) out.emplace_back(c.in_splits, c.out_splits, c.in_elems, c.out_elems);
  return out;
}

int64_t t_weight_of_first_lookup(const Trace& t) {
  return t.tensors[t.inputs(*ops(t, "aten::embedding_bag").at(0))[0].ref].storage_id;
}

TEST(GenPlaceTables, EachRankKeepsItsTablesAndTheExchangesFollowThem) {
  // Rank 0 keeps table 0, rank 1 tables 1..3: both replay rank 0 (rank 1 looks up nothing).
  gen::Workspace ws = placed("{tables: [0, 1, 1, 1]}");
  ASSERT_EQ(ws.roles.size(), 2u);
  EXPECT_EQ(ws.role_of_rank, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(ws.source_rank, (std::vector<int64_t>{0, 0}));
  const int64_t lookups[] = {1, 3};
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const Trace& t = ws.roles[r];
    EXPECT_EQ(ops(t, "aten::embedding_bag").size(), static_cast<size_t>(lookups[r]));
    EXPECT_EQ(ops(t, "aten::_embedding_bag_backward").size(), static_cast<size_t>(lookups[r]));
    EXPECT_EQ(shape(t, t.outputs(*ops(t, "aten::clone").at(0))[0]), (Shape{2, lookups[r], 2, kDim}));
    EXPECT_EQ(shape(t, t.outputs(*ops(t, "aten::empty_like").at(0))[0]), (Shape{2, lookups[r], 2, kDim}));
    EXPECT_EQ(shape(t, t.inputs(*ops(t, "aten::embedding_bag").at(0))[2]), (Shape{kBags}));  // the same batch
    EXPECT_NO_THROW(replay::dry_run(t, "placed"));
  }
  const std::vector<int64_t> weights = dlrm(4, 4).weights;  // the builder is deterministic: the same storage ids
  EXPECT_EQ(t_weight_of_first_lookup(ws.roles[0]), weights[0]);
  EXPECT_EQ(t_weight_of_first_lookup(ws.roles[1]), weights[1]);
  // Forward: each rank sends every peer its batch's rows (2) of each table it holds; backward: the reverse.
  EXPECT_EQ(exchanges(ws.roles[0]),
            (std::vector<Layout>{{{2, 2}, {2, 6}, 4 * kDim, 8 * kDim}, {{2, 6}, {2, 2}, 8 * kDim, 4 * kDim}}));
  EXPECT_EQ(exchanges(ws.roles[1]),
            (std::vector<Layout>{{{6, 6}, {2, 6}, 12 * kDim, 8 * kDim}, {{2, 6}, {6, 6}, 8 * kDim, 12 * kDim}}));
}

TEST(GenPlaceTables, ARankWithoutTablesReplaysOneThatLooksNoneUp) {
  gen::Workspace ws = placed("{tables: [0, 0, 0, 0]}");  // the job as it was
  ASSERT_EQ(ws.roles.size(), 2u);
  EXPECT_EQ(ws.source_rank, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ops(ws.roles[0], "aten::embedding_bag").size(), 4u);
  EXPECT_TRUE(ops(ws.roles[1], "aten::embedding_bag").empty());
  EXPECT_EQ(exchanges(ws.roles[0]),
            (std::vector<Layout>{{{8, 8}, {8, 0}, 16 * kDim, 8 * kDim}, {{8, 0}, {8, 8}, 8 * kDim, 16 * kDim}}));
  EXPECT_EQ(exchanges(ws.roles[1]),
            (std::vector<Layout>{{{0, 0}, {8, 0}, 0, 8 * kDim}, {{8, 0}, {0, 0}, 8 * kDim, 0}}));
}

TEST(GenPlaceTables, ALargerWorldLooksUpItsGlobalBatch) {
  gen::Workspace ws = placed("{tables: [0, 1, 2, 3], world_size: 4}");
  ASSERT_EQ(ws.roles.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const Trace& t = ws.roles[r];
    ASSERT_EQ(ops(t, "aten::embedding_bag").size(), 1u);
    EXPECT_EQ(shape(t, t.inputs(*ops(t, "aten::embedding_bag")[0])[2]), (Shape{2 * kBags}));  // 4 ranks x batch 2
    EXPECT_EQ(shape(t, t.outputs(*ops(t, "aten::clone").at(0))[0]), (Shape{4, 1, 2, kDim}));
    EXPECT_EQ(exchanges(t), (std::vector<Layout>{{{2, 2, 2, 2}, {2, 2, 2, 2}, 8 * kDim, 8 * kDim},
                                                 {{2, 2, 2, 2}, {2, 2, 2, 2}, 8 * kDim, 8 * kDim}}));
    EXPECT_EQ(t.process_groups.at(0).ranks, (std::vector<int64_t>{0, 1, 2, 3}));
  }
}

TEST(GenPlaceTables, ATableMovesInFromTheRankThatHeldIt) {
  // Ranks sharing one role of 4 tables each: tables 0..3 are rank 0's, 4..7 rank 1's. Round-robin gives rank 0 its
  // tables 0 and 2 and moves in rank 1's 0 and 2 (tables 4 and 6).
  const std::vector<int64_t> weights = dlrm(4).weights;
  gen::Workspace ws = scaled(dlrm(4).t, "{tables: [0, 1, 0, 1, 0, 1, 0, 1]}");
  ASSERT_EQ(ws.roles.size(), 2u);
  EXPECT_EQ(ws.source_rank, (std::vector<int64_t>{0, 0}));
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const Trace& t = ws.roles[r];
    const std::vector<const Node*> lookups = ops(t, "aten::embedding_bag");
    ASSERT_EQ(lookups.size(), 4u);
    // Its own tables first (their weights as recorded), then the moved ones (new tensors of the same shape).
    EXPECT_EQ(t.tensors[t.inputs(*lookups[0])[0].ref].storage_id, weights[r]);
    EXPECT_EQ(t.tensors[t.inputs(*lookups[1])[0].ref].storage_id, weights[r + 2]);
    for (size_t k = 2; k < 4; ++k) {
      EXPECT_EQ(std::count(weights.begin(), weights.end(), t.tensors[t.inputs(*lookups[k])[0].ref].storage_id), 0);
      EXPECT_EQ(shape(t, t.inputs(*lookups[k])[0]), (Shape{kRows, kDim}));
    }
    const Node& stack = *ops(t, "aten::stack").at(0);
    EXPECT_EQ(t.inputs(stack)[0].count, 4u);
    EXPECT_EQ(shape(t, t.outputs(stack)[0]), (Shape{4, kBags, kDim}));
    EXPECT_EQ(shape(t, t.outputs(*ops(t, "aten::view").at(0))[0]), (Shape{4, 2, 2, kDim}));
    // Each table's row of the gradient: the kept ones renumbered, the moved ones after them.
    std::vector<int64_t> rows;
    for (const Node* n : ops(t, "aten::select")) {
      rows.push_back(t.inputs(*n)[2].i);
      EXPECT_EQ(t.tensors[t.outputs(*n)[0].ref].offset, rows.back() * kBags * kDim);
    }
    std::sort(rows.begin(), rows.end());
    EXPECT_EQ(rows, (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(ops(t, "aten::_embedding_bag_backward").size(), 4u);
    EXPECT_EQ(ops(t, "aten::add_").size(), 4u);
    EXPECT_EQ(ops(t, "aten::zero_").size(), 4u);
    EXPECT_NO_THROW(replay::dry_run(t, "moved"));
  }
  EXPECT_TRUE(has_note(ws, "2 moved in from other ranks"));
}

TEST(GenPlaceTables, MistakesAreOneLineErrorsAtTheirPlace) {
  EXPECT_NE(error_of([] { placed("{tables: [0, 1, 1]}"); })
                .find("cfg.yaml:2:3: scale: tables: the plan places 3 tables; the job has 4 (rank 0: 0..3, rank 1: "
                      "none)"),
            std::string::npos);
  EXPECT_NE(error_of([] { placed("{tables: [0, 1, 2, 1]}"); }).find("table 2 is placed on rank 2, not a rank of the 2"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              placed("{tables: [0, 1, 1, 1], world_size: 3}");
            }).find("world_size 3 is not a multiple of the job's 2 ranks"),
            std::string::npos);
  EXPECT_NE(error_of([] { placed("{tables: [0, 1, 1, 1], world_size: 4, mode: strong}"); }).find("weak scaling"),
            std::string::npos);
  EXPECT_EQ(error_of([] { placed("{tables: []}"); }), "cfg.yaml:2:12: tables: the plan is empty: one rank per table");
  EXPECT_EQ(error_of([] { placed("{tables: [0, x, 1, 1]}"); }), "cfg.yaml:2:16: tables: expected an integer");
  EXPECT_NE(error_of([] {
              scaled(dlrm(4).t, "{tables: [0, 0, 0, 0, 1, 1, 1, 1], world_size: 4}");
            }).find("rank 2 holds no table, and every source rank looks some up"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              TraceBuilder b;
              b.roots();
              test::split_adagrad_lookup(b, 48);
              scaled(b.finish(), "{tables: [0, 1, 1]}");
            })
                .find("looks up every table in one op: a plan cannot place its tables, whose sizes the trace records "
                      "only summed (tables: reshard shards them)"),
            std::string::npos);
}

}  // namespace
}  // namespace reprise
