// Point-to-point replay across ranks, under mpirun -np 4: a pipeline's sends and receives (lone and batched, a
// pair exchanging large messages both ways at once) replayed over MPI, and traces whose pairs disagree ending every
// rank with one line before anything runs. Also the workloads' uneven all_to_all_v, checked row by row.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>

#include "../common/p2p_trace.h"
#include "reprise/comms/communicator.h"
#include "reprise/replay/replay.h"
#include "reprise/workloads/workloads.h"

namespace reprise::replay {
namespace {

using test::p2p_trace;
using test::P2pOp;

comms::Communicator* g_world = nullptr;
const std::vector<int> kGroup = {0, 1, 2, 3};

ReplayResult replay_on_world(const Trace& t) {
  ReplayOptions o;
  o.device = "cpu";
  o.comm = g_world;
  o.warmup = 1;
  o.iterations = 2;
  o.time_limit.seconds = 120;
  return replay_trace(t, o);
}

#define NEED_FOUR_RANKS() \
  if (g_world->size() != 4) GTEST_SKIP() << "needs mpirun -np 4"

// Rank r of a 4-stage pipeline: the forward activations go down the stages one at a time; the gradients come back
// in batches (a middle stage sends back and receives from ahead in one batch_isend_irecv); then stages 1 and 2 trade
// 4 MiB both ways at once, which would deadlock past MPI's eager limit if each send waited for its receive alone.
std::vector<P2pOp> pipeline(int r, int64_t n) {
  std::vector<P2pOp> ops;
  if (r > 0) ops.push_back({"recv", r - 1, n, 0});
  if (r < 3) ops.push_back({"send", r + 1, n, r > 0 ? 1 : 0});
  const int64_t b = 2;  // the backward batch's sequence number
  if (r > 0) ops.push_back({"send", r - 1, n, b});
  if (r < 3) ops.push_back({"recv", r + 1, n, b});
  ops.push_back({"coalesced", -1, 0, b});
  ops.push_back({"wait", -1, 0, b});
  if (r == 1 || r == 2) {
    const int other = r == 1 ? 2 : 1;
    ops.push_back({"send", other, 1 << 20, 3});
    ops.push_back({"recv", other, 1 << 20, 3});
    ops.push_back({"coalesced", -1, 0, 3});
    ops.push_back({"wait", -1, 0, 3});
  }
  return ops;
}

TEST(ReplayP2pMpi, APipelineReplaysEverySendAndReceive) {
  NEED_FOUR_RANKS();
  const int r = g_world->rank();
  ReplayResult res = replay_on_world(p2p_trace(r, kGroup, pipeline(r, 4096)));
  const int64_t expect = static_cast<int64_t>((r > 0) + (r < 3)) * 2 + (r == 1 || r == 2 ? 2 : 0);
  EXPECT_EQ(res.p2p_selected, expect);
  EXPECT_EQ(res.p2p_replayed, expect);
  EXPECT_EQ(res.coverage, 1.0);
  bool saw = false;
  for (const CollectiveTiming& c : res.collective_timing)
    if (c.name == (r < 3 ? "send" : "recv") && c.peer == (r < 3 ? r + 1 : r - 1) && c.bytes == 4096 * 4) {
      saw = true;
      EXPECT_GT(c.seconds, 0);
      EXPECT_EQ(c.calls, 1);
    }
  EXPECT_TRUE(saw) << "no timing row for the forward send/recv";
}

std::string failure_of(const Trace& t) {
  try {
    replay_on_world(t);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(ReplayP2pMpi, SizesThatDisagreeEndEveryRankWithTheFirstDifference) {
  NEED_FOUR_RANKS();
  const int r = g_world->rank();
  std::vector<P2pOp> ops = pipeline(r, 64);
  if (r == 1) ops[0].count = 128;  // rank 1 receives 128 where rank 0 sends 64
  const std::string msg = failure_of(p2p_trace(r, kGroup, ops, "rank-" + std::to_string(r) + ".json"));
  EXPECT_NE(msg.find("point-to-point from rank 0 to rank 1 on group [0,1,2,3], operation 0: rank 0 sends 64 float "
                     "elements (node "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("of rank-0.json), but rank 1 receives 128 float elements (node "), std::string::npos) << msg;
  EXPECT_NE(msg.find(": the traces do not belong to one run"), std::string::npos) << msg;
}

TEST(ReplayP2pMpi, AReceiveWithNoSendIsAHangFoundBeforeItHappens) {
  NEED_FOUR_RANKS();
  const int r = g_world->rank();
  std::vector<P2pOp> ops = pipeline(r, 64);
  if (r == 2) ops.erase(ops.begin() + 1);  // stage 2 forgets its forward send: stage 3 would wait forever
  const std::string msg = failure_of(p2p_trace(r, kGroup, ops, "rank-" + std::to_string(r) + ".json"));
  EXPECT_NE(msg.find("point-to-point from rank 2 to rank 3 on group [0,1,2,3], operation 0: rank 3 receives 64 float "
                     "elements (node "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("but rank 2 sends nothing to match it (its 0 send(s) to rank 3 on the group end there, in "
                     "rank-2.json): the pipeline would hang"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace reprise::replay

namespace reprise::replay {
namespace {

// The workloads' all_to_all_v (what a DLRM's uneven sharding plan exchanges by): rank s sends s + d + 1 rows to rank
// d (rank 0 none to rank 3), each row tagged with its sender, receiver, index and column; every row arrives where the
// splits say, in rank order.
TEST(WorkloadsMpi, AllToAllVPutsEveryRowWhereItsSplitsSay) {
  NEED_FOUR_RANKS();
  std::unique_ptr<workloads::Collectives> c = workloads::make_collectives(*g_world, at::Device(at::kCPU));
  const int r = c->rank();
  const int64_t width = 3;
  auto rows = [](int from, int to) -> int64_t { return from == 0 && to == 3 ? 0 : from + to + 1; };
  auto tag = [](int from, int to, int64_t i, int64_t w) { return float(1000 * from + 100 * to + 10 * i + w); };
  std::vector<int64_t> in_splits, out_splits;
  for (int p = 0; p < 4; ++p) in_splits.push_back(rows(r, p)), out_splits.push_back(rows(p, r));
  at::Tensor in = at::empty({std::accumulate(in_splits.begin(), in_splits.end(), int64_t{0}), width});
  at::Tensor out = at::full({std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0}), width}, -1.0);
  int64_t k = 0;
  for (int d = 0; d < 4; ++d)
    for (int64_t i = 0; i < rows(r, d); ++i, ++k)
      for (int64_t w = 0; w < width; ++w) in[k][w] = tag(r, d, i, w);
  c->all_to_all_v(out, in, out_splits, in_splits);
  k = 0;
  for (int s = 0; s < 4; ++s)
    for (int64_t i = 0; i < rows(s, r); ++i, ++k)
      for (int64_t w = 0; w < width; ++w)
        ASSERT_EQ(out[k][w].item<float>(), tag(s, r, i, w)) << "row " << k << " from rank " << s;
  // Splits not one per rank are refused on every rank before anything is sent.
  EXPECT_THROW(c->all_to_all_v(out, in, out_splits, std::vector<int64_t>(3, 1)), std::invalid_argument);
}

}  // namespace
}  // namespace reprise::replay

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = reprise::comms::make_mpi_world();
  reprise::replay::g_world = world.get();
  if (world->rank() != 0 && !std::getenv("REPRISE_TEST_ALL_RANKS")) {  // rank 0 reports; every rank runs every test
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  for (const std::string& s : world->exchange(std::to_string(rc))) rc |= std::stoi(s);
  world.reset();
  reprise::comms::finalize();
  return rc;
}
