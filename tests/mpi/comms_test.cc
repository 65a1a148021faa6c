// The communication layer, run under mpirun with 1, 2, 4 ranks (ctest runs it each way): every collective and
// dtype with its data checked, sub-communicators, uneven all_to_allv, the descriptors (names, sizing from a trace),
// and bad arguments.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "reprise/comms/communicator.h"
#include "reprise/comms/sweep.h"

using namespace reprise::comms;

namespace {

Communicator* g_world = nullptr;

TEST(Descriptors, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(describe(Kind::AllReduce).busbw_factor(8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(describe(Kind::AllGather).busbw_factor(4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(describe(Kind::ReduceScatter).busbw_factor(4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(describe(Kind::AllToAll).busbw_factor(2), 0.5);
  EXPECT_DOUBLE_EQ(describe(Kind::Broadcast).busbw_factor(16), 1.0);
  EXPECT_DOUBLE_EQ(describe(Kind::AllReduce).busbw_factor(1), 0.0);
  EXPECT_EQ(describe(Kind::AllGather).out_elems(10, 4), 40u);
  EXPECT_EQ(describe(Kind::ReduceScatter).in_elems(10, 4), 40u);
  EXPECT_EQ(describe(Kind::AllReduce).in_elems(10, 4), 10u);
  for (Kind k : all_kinds()) {
    Kind back;
    ASSERT_TRUE(parse_kind(describe(k).name, back)) << describe(k).name;
    EXPECT_EQ(back, k);
  }
  Kind k;
  EXPECT_TRUE(parse_kind("allgather_base", k) && k == Kind::AllGather);  // every trace spelling, any case
  EXPECT_TRUE(parse_kind("alltoall", k) && k == Kind::AllToAll);
  EXPECT_TRUE(parse_kind("Reduce_Scatter_Tensor_Coalesced", k) && k == Kind::ReduceScatter);
  EXPECT_TRUE(parse_kind("recvanysource", k) && k == Kind::Recv);
  EXPECT_FALSE(parse_kind("wait", k));
  EXPECT_FALSE(parse_kind("_allgather_base", k));
  DType t;
  EXPECT_TRUE(parse_dtype("c10::BFloat16", t) && t == DType::BF16);
  EXPECT_TRUE(parse_dtype("Long", t) && t == DType::I64);
  EXPECT_FALSE(parse_dtype("complex", t));
  EXPECT_EQ(dtype_size(DType::F16), 2u);
}

// Every spelling parse_dtype accepted when it had its own table, still accepted (in any case) as the same type, and
// the names and sizes printed for each type unchanged, now that they come from reprise/common/dtype.h.
TEST(Descriptors, DtypeSpellingsNamesAndSizesAreKept) {
  const std::pair<const char*, DType> accepted[] = {
      {"float", DType::F32},         {"float32", DType::F32},   {"f32", DType::F32},
      {"double", DType::F64},        {"float64", DType::F64},   {"f64", DType::F64},
      {"half", DType::F16},          {"float16", DType::F16},   {"c10::half", DType::F16},
      {"f16", DType::F16},           {"bfloat16", DType::BF16}, {"c10::bfloat16", DType::BF16},
      {"bf16", DType::BF16},         {"char", DType::I8},       {"int8", DType::I8},
      {"signed char", DType::I8},    {"byte", DType::U8},       {"uint8", DType::U8},
      {"unsigned char", DType::U8},  {"int", DType::I32},       {"int32", DType::I32},
      {"long", DType::I64},          {"int64", DType::I64},     {"long int", DType::I64},
      {"long long int", DType::I64}, {"bool", DType::Bool},
  };
  for (const auto& [name, want] : accepted) {
    std::string upper(name);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (const std::string& spelling : {std::string(name), upper}) {
      DType t = DType::Bool == want ? DType::F32 : DType::Bool;
      EXPECT_TRUE(parse_dtype(spelling, t)) << spelling;
      EXPECT_EQ(t, want) << spelling;
    }
  }
  for (const char* unknown : {"short", "int16", "uint32", "complex", "c10::complex<float>", "Float8_e5m2", ""}) {
    DType t;
    EXPECT_FALSE(parse_dtype(unknown, t)) << unknown;
  }
  const std::tuple<DType, const char*, size_t> names[] = {
      {DType::F32, "float", 4},     {DType::F64, "double", 8}, {DType::F16, "half", 2},
      {DType::BF16, "bfloat16", 2}, {DType::I8, "int8", 1},    {DType::U8, "uint8", 1},
      {DType::I32, "int32", 4},     {DType::I64, "int64", 8},  {DType::Bool, "bool", 1},
  };
  for (const auto& [t, name, size] : names) {
    EXPECT_STREQ(dtype_name(t), name);
    EXPECT_EQ(dtype_size(t), size) << name;
    DType back;
    EXPECT_TRUE(parse_dtype(name, back) && back == t) << name;
  }
}

TEST(Descriptors, TraceSpellingsAreCaseSensitiveAndExact) {
  ASSERT_NE(find_trace_name("allgather_base"), nullptr);
  EXPECT_EQ(find_trace_name("allgather_base")->kind, Kind::AllGather);
  EXPECT_EQ(find_trace_name("all_to_allv")->kind, Kind::AllToAllV);
  EXPECT_EQ(find_trace_name("alltoall_base")->kind, Kind::AllToAllV);
  EXPECT_EQ(find_trace_name("recvAnysource")->kind, Kind::Recv);
  EXPECT_EQ(find_trace_name("recvanysource"), nullptr);
  EXPECT_EQ(find_trace_name("wait"), nullptr);
  EXPECT_EQ(find_trace_name("coalesced"), nullptr);
  for (Kind k : all_kinds()) EXPECT_EQ(find_trace_name(describe(k).name), &describe(k));
}

// Sizes one collective from a trace's counts over `g` ranks; -1 counts as not recorded.
struct Sized {
  bool ok = false;
  Args a;
  size_t in = 0, out = 0;
};
Sized size_of(Kind k, int64_t in, int64_t out, int g, std::vector<int64_t> in_splits = {},
              std::vector<int64_t> out_splits = {}) {
  Sized s;
  TraceSizes t;
  t.in_elems = in;
  t.out_elems = out;
  t.in_splits = std::move(in_splits);
  t.out_splits = std::move(out_splits);
  s.ok = size_from_trace(k, t, g, s.a, s.in, s.out);
  return s;
}

TEST(TraceSizing, WholeBufferKindsTakeTheLargerSide) {
  for (Kind k : {Kind::AllReduce, Kind::Broadcast, Kind::Reduce}) {
    Sized s = size_of(k, 100, 60, 4);
    ASSERT_TRUE(s.ok) << describe(k).name;
    EXPECT_EQ(s.a.count, 100u);
    EXPECT_EQ(s.in, 100u);
    EXPECT_EQ(s.out, 100u);
    s = size_of(k, -1, 7, 4);
    EXPECT_EQ(s.a.count, 7u);
    EXPECT_EQ(s.in, 7u);
  }
}

TEST(TraceSizing, GatherKindsUseTheInputOrTheOutputOverTheGroup) {
  for (Kind k : {Kind::AllGather, Kind::Gather}) {
    Sized s = size_of(k, 10, 40, 4);
    ASSERT_TRUE(s.ok) << describe(k).name;
    EXPECT_EQ(s.a.count, 10u);
    EXPECT_EQ(s.in, 10u);
    EXPECT_EQ(s.out, 40u);
    s = size_of(k, 0, 40, 4);  // no input recorded: out / g
    EXPECT_EQ(s.a.count, 10u);
    EXPECT_EQ(s.out, 40u);
    s = size_of(k, -1, 41, 4);
    EXPECT_EQ(s.a.count, 10u);
    EXPECT_EQ(s.out, 40u);
  }
}

TEST(TraceSizing, ScatterKindsUseTheOutputOrTheInputOverTheGroup) {
  for (Kind k : {Kind::ReduceScatter, Kind::Scatter}) {
    Sized s = size_of(k, 40, 10, 4);
    ASSERT_TRUE(s.ok) << describe(k).name;
    EXPECT_EQ(s.a.count, 10u);
    EXPECT_EQ(s.in, 40u);
    EXPECT_EQ(s.out, 10u);
    s = size_of(k, 40, 0, 4);  // no output recorded: in / g
    EXPECT_EQ(s.a.count, 10u);
    EXPECT_EQ(s.in, 40u);
  }
}

TEST(TraceSizing, AllToAllSplitsTheLargerSideEvenly) {
  Sized s = size_of(Kind::AllToAll, 30, 42, 4);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.a.count, 10u);  // 42 / 4, rounded down
  EXPECT_EQ(s.in, 40u);
  EXPECT_EQ(s.out, 40u);
}

TEST(TraceSizing, AllToAllvCountsRowsOfTheSplits) {
  // 3 peers; 6 rows in (1, 2, 3) of 4 elements each, 12 rows out (4, 4, 4) of 2 elements each.
  Sized s = size_of(Kind::AllToAllV, 24, 24, 3, {1, 2, 3}, {4, 4, 4});
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.a.in_counts, (std::vector<size_t>{4, 8, 12}));
  EXPECT_EQ(s.a.in_displs, (std::vector<size_t>{0, 4, 12}));
  EXPECT_EQ(s.a.out_counts, (std::vector<size_t>{8, 8, 8}));
  EXPECT_EQ(s.a.out_displs, (std::vector<size_t>{0, 8, 16}));
  EXPECT_EQ(s.in, 24u);
  EXPECT_EQ(s.out, 24u);
  // Splits not one per peer: even chunks of elements / g.
  s = size_of(Kind::AllToAllV, 10, 9, 3, {1, 2}, {});
  EXPECT_EQ(s.a.in_counts, (std::vector<size_t>{3, 3, 3}));
  EXPECT_EQ(s.a.in_displs, (std::vector<size_t>{0, 3, 6}));
  EXPECT_EQ(s.a.out_counts, (std::vector<size_t>{3, 3, 3}));
  EXPECT_EQ(s.in, 10u);
  EXPECT_EQ(s.out, 9u);
  // All splits zero: no rows, so nothing per peer.
  s = size_of(Kind::AllToAllV, 8, -1, 2, {0, 0}, {0, 0});
  EXPECT_EQ(s.a.in_counts, (std::vector<size_t>{0, 0}));
  EXPECT_EQ(s.a.out_counts, (std::vector<size_t>{0, 0}));
  EXPECT_EQ(s.out, 0u);
}

TEST(TraceSizing, BarrierIsEmptyAndPointToPointIsNotSized) {
  Sized s = size_of(Kind::Barrier, 5, 5, 4);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.a.count, 0u);
  EXPECT_EQ(s.in, 0u);
  EXPECT_EQ(s.out, 0u);
  EXPECT_FALSE(size_of(Kind::Send, 5, 5, 2).ok);  // the trace does not record the peer
  EXPECT_FALSE(size_of(Kind::Recv, 5, 5, 2).ok);
  EXPECT_FALSE(size_of(Kind::AllGather, 5, 5, 0).ok);
}

TEST(TraceSizing, EveryKindIsCovered) {
  for (Kind k : all_kinds()) {
    Sized s = size_of(k, 64, 64, 2);
    EXPECT_EQ(s.ok, k != Kind::Send && k != Kind::Recv) << describe(k).name;
  }
}

TEST(Collectives, EveryKindAndDtypeGivesTheExpectedData) {
  Communicator& c = *g_world;
  for (Kind k : all_kinds()) {
    if (k == Kind::Recv) continue;  // `send` runs a ring of send and recv
    for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8}) {
      SweepOptions o;
      o.kind = k;
      o.dtype = t;
      o.min_bytes = 64;
      o.max_bytes = 64 << 10;
      o.factor = 32;
      o.warmup = 0;
      o.iters = 1;
      o.root = c.size() - 1;
      for (const SweepRow& r : sweep(c, o)) {
        if (k != Kind::Barrier) {
          EXPECT_EQ(r.wrong, 0) << describe(k).name << " " << dtype_name(t) << " " << r.bytes << " B";
        }
        EXPECT_GT(r.time_us, 0);
      }
    }
  }
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod, ReduceOp::Avg}) {
    SweepOptions o;
    o.op = op;
    o.dtype = op == ReduceOp::Avg ? DType::F64 : DType::F32;
    o.max_bytes = 4096;
    o.factor = 8;
    o.iters = 1;
    for (const SweepRow& r : sweep(c, o)) EXPECT_EQ(r.wrong, 0) << reduce_op_name(op);
  }
}

TEST(Collectives, UnevenAllToAllv) {
  Communicator& c = *g_world;
  const int n = c.size(), me = c.rank();
  // Rank r sends (r + p + 1) elements to rank p, each = 1000 * r + p.
  std::vector<size_t> in_counts, in_displs, out_counts, out_displs;
  size_t in_total = 0, out_total = 0;
  for (int p = 0; p < n; ++p) {
    in_counts.push_back(size_t(me + p + 1));
    in_displs.push_back(in_total);
    in_total += in_counts.back();
    out_counts.push_back(size_t(p + me + 1));
    out_displs.push_back(out_total);
    out_total += out_counts.back();
  }
  std::vector<int64_t> in(in_total), out(out_total, -1);
  for (int p = 0; p < n; ++p)
    for (size_t k = 0; k < in_counts[p]; ++k) in[in_displs[p] + k] = 1000 * me + p;
  Args a;
  a.kind = Kind::AllToAllV;
  a.dtype = DType::I64;
  a.in = in.data();
  a.out = out.data();
  a.in_counts = in_counts;
  a.in_displs = in_displs;
  a.out_counts = out_counts;
  a.out_displs = out_displs;
  c.run(a);
  for (int p = 0; p < n; ++p)
    for (size_t k = 0; k < out_counts[p]; ++k) EXPECT_EQ(out[out_displs[p] + k], 1000 * p + me);
}

TEST(Collectives, SubCommunicatorsOfEvenAndOddRanks) {
  Communicator& c = *g_world;
  std::vector<int> even, odd;
  for (int r = 0; r < c.size(); ++r) (r % 2 ? odd : even).push_back(r);
  auto e = c.split(even);
  auto o = c.split(odd);
  Communicator* mine = c.rank() % 2 ? o.get() : e.get();
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(c.rank() % 2 ? e.get() : o.get(), nullptr);
  EXPECT_EQ(mine->size(), static_cast<int>((c.rank() % 2 ? odd : even).size()));
  double x = c.rank(), sum = 0;
  Args a;
  a.in = &x;
  a.out = &sum;
  a.count = 1;
  a.dtype = DType::F64;
  mine->run(a);
  double want = 0;
  for (int r : (c.rank() % 2 ? odd : even)) want += r;
  EXPECT_DOUBLE_EQ(sum, want);
  std::vector<std::string> names = c.exchange("rank" + std::to_string(c.rank()));
  ASSERT_EQ(names.size(), size_t(c.size()));
  for (int r = 0; r < c.size(); ++r) EXPECT_EQ(names[r], "rank" + std::to_string(r));
}

TEST(Bootstrap, ExchangeCarriesEveryRanksBytes) {
  Communicator& c = *g_world;
  std::string mine(static_cast<size_t>(c.rank()) * 1000 + 1, static_cast<char>('a' + c.rank()));
  std::vector<std::string> all = c.exchange(mine);
  ASSERT_EQ(all.size(), size_t(c.size()));
  for (int r = 0; r < c.size(); ++r)
    EXPECT_EQ(all[r], std::string(static_cast<size_t>(r) * 1000 + 1, static_cast<char>('a' + r)));
  EXPECT_EQ(c.exchange("").size(), size_t(c.size()));
}

TEST(Collectives, BadArgumentsAreErrorsNotHangs) {
  Communicator& c = *g_world;
  float x = 0;
  Args a;
  a.kind = Kind::Broadcast;
  a.in = a.out = &x;
  a.count = 1;
  a.root = c.size();
  EXPECT_THROW(c.start(a), CommError);
  a.kind = Kind::Send;
  a.peer = -1;
  EXPECT_THROW(c.start(a), CommError);
  a.kind = Kind::AllToAllV;
  a.in_counts = {1};  // one count, for any number of ranks but one
  if (c.size() > 1) {
    EXPECT_THROW(c.start(a), CommError);
  }
  SweepOptions o;
  o.factor = 1;
  EXPECT_THROW(sweep(c, o), CommError);
  EXPECT_THROW(sweep(c, o), reprise::UserError);  // the command line reports it as bad input
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = make_world();
  // A torchrun-style world carries no CPU collectives: only its bootstrap is tested.
  if (world->backend() == "tcp") ::testing::GTEST_FLAG(filter) = "Bootstrap.*:Descriptors.*:TraceSizing.*";
  g_world = world.get();
  // Only rank 0 reports; every rank runs every test (collectives need them all).
  if (world->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  // A failure on any rank fails the run.
  std::vector<std::string> all = world->exchange(std::to_string(rc));
  for (const std::string& s : all) rc |= std::stoi(s);
  world.reset();
  finalize();
  return rc;
}
