// Point-to-point planning on traces built in code: peers mapped through the group, the older convention, batches
// of sends and receives, their markers and waits. The multi-rank runs are in tests/mpi/replay_p2p_mpi_test.cc.
#include <gtest/gtest.h>

#include "../common/p2p_trace.h"
#include "plan.h"
#include "reprise/comms/communicator.h"
#include "reprise/replay/replay.h"

namespace reprise::replay {
namespace {

using test::p2p_trace;
using test::P2pOp;

using detail::CommSpec;
using detail::Plan;

Plan plan_of(const Trace& t, comms::Communicator& self) {
  ReplayOptions o;
  o.device = "cpu";
  o.comm = &self;
  return detail::compile_plan(t, o);
}

std::vector<const CommSpec*> p2p_specs(const Plan& p) {
  std::vector<const CommSpec*> out;
  for (const CommSpec& s : p.comms)
    if (s.p2p) out.push_back(&s);
  return out;
}

TEST(ReplayP2p, ThePeerIsTheRecordedGroupRankMappedToItsGlobalRank) {
  auto self = comms::make_self();
  // Global rank 5 in the group [2, 5, 7]: sends to group rank 2 (global 7), receives from group rank 0 (global 2).
  Trace t = p2p_trace(5, {2, 5, 7}, {{"send", 2, 64, 0}, {"recv", 0, 32, 1}});
  Plan p = plan_of(t, *self);
  auto s = p2p_specs(p);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0]->args.kind, comms::Kind::Send);
  EXPECT_EQ(s[0]->args.peer, 2);
  EXPECT_EQ(s[0]->peer, 7);
  EXPECT_EQ(s[0]->args.count, 64u);
  EXPECT_EQ(s[0]->in_elems, 64u);
  EXPECT_EQ(s[0]->out_elems, 0u);
  EXPECT_EQ(s[0]->bytes, 64 * 4);
  EXPECT_EQ(s[1]->args.kind, comms::Kind::Recv);
  EXPECT_EQ(s[1]->args.peer, 0);
  EXPECT_EQ(s[1]->peer, 2);
  EXPECT_EQ(s[1]->out_elems, 32u);
  EXPECT_TRUE(p.comm_skips.empty());
  // Different sequence numbers, no waits: two lone operations, each completed where it is issued.
  EXPECT_EQ(s[0]->batch_size, 1u);
  EXPECT_EQ(s[1]->batch_size, 1u);
  EXPECT_FALSE(s[0]->async);
}

TEST(ReplayP2p, TheCallersOwnRankMeansTheOtherRankOfAPairAndIsASkipInALargerGroup) {
  auto self = comms::make_self();
  Plan pair = plan_of(p2p_trace(1, {0, 1}, {{"send", 1, 8, 0}}), *self);  // older PyTorch: its own group rank
  ASSERT_EQ(p2p_specs(pair).size(), 1u);
  EXPECT_EQ(p2p_specs(pair)[0]->peer, 0);

  Plan three = plan_of(p2p_trace(1, {0, 1, 2}, {{"send", 1, 8, 0}}), *self);
  EXPECT_TRUE(p2p_specs(three).empty());
  ASSERT_EQ(three.comm_skips.size(), 1u);
  EXPECT_NE(three.comm_skips[0].reason.find("the peer is unknown"), std::string::npos) << three.comm_skips[0].reason;

  Plan outside = plan_of(p2p_trace(0, {0, 1}, {{"recv", 5, 8, 0}}), *self);
  ASSERT_EQ(outside.comm_skips.size(), 1u);
  EXPECT_NE(outside.comm_skips[0].reason.find("not a rank of its group of 2"), std::string::npos);
}

TEST(ReplayP2p, ACoalescedBatchIsIssuedTogetherAndItsWaitCompletesIt) {
  auto self = comms::make_self();
  // A 1F1B steady state on a middle stage: send forward, receive from behind, one batch, then its wait.
  Trace t =
      p2p_trace(1, {0, 1, 2}, {{"send", 2, 64, 3}, {"recv", 0, 64, 3}, {"coalesced", -1, 0, 3}, {"wait", -1, 0, 3}});
  Plan p = plan_of(t, *self);
  ASSERT_EQ(p.comms.size(), 4u);
  const CommSpec& first = p.comms[0];
  EXPECT_EQ(first.batch, 0);
  EXPECT_EQ(first.batch_size, 2u);
  EXPECT_TRUE(first.async);  // the wait names the batch (through its coalesced record)
  EXPECT_EQ(p.comms[1].batch, 0);
  EXPECT_TRUE(p.comms[2].marker);
  EXPECT_EQ(p.comms[2].batch, 0);
  EXPECT_TRUE(p.comms[3].is_wait);
  EXPECT_EQ(p.comms[3].waits_for, 2);  // the marker, whose batch it completes
  EXPECT_TRUE(p.comm_skips.empty());
}

TEST(ReplayP2p, BackToBackAsyncSendsAndReceivesFormABatchWithoutACoalescedRecord) {
  auto self = comms::make_self();
  // batch_isend_irecv without coalescing: each op its own sequence number and its own wait, issued back to back.
  Trace t = p2p_trace(1, {0, 1, 2}, {{"send", 2, 16, 4}, {"recv", 0, 16, 5}, {"wait", -1, 0, 4}, {"wait", -1, 0, 5}});
  Plan p = plan_of(t, *self);
  ASSERT_EQ(p2p_specs(p).size(), 2u);
  EXPECT_EQ(p.comms[0].batch_size, 2u);
  EXPECT_EQ(p.comms[1].batch, 0);
  // A collective's wait with the same number does not take a p2p op: PyTorch 2.x numbers them separately.
  Trace mixed = p2p_trace(0, {0, 1}, {{"all_reduce", 0, 16, 4, false}, {"send", 1, 16, 4}, {"wait", -1, 0, 4, false}});
  Plan q = plan_of(mixed, *self);
  ASSERT_EQ(q.comms.size(), 3u);
  EXPECT_EQ(q.comms[2].waits_for, 0);
  EXPECT_TRUE(q.comms[0].async);
  EXPECT_FALSE(q.comms[1].async);
}

TEST(ReplayP2p, ResultsCountP2pAndLeaveTheMarkerOut) {
  auto self = comms::make_self();
  Trace t =
      p2p_trace(1, {0, 1, 2}, {{"send", 2, 64, 3}, {"recv", 0, 64, 3}, {"coalesced", -1, 0, 3}, {"wait", -1, 0, 3}});
  ReplayOptions o;
  o.device = "meta";
  o.comm = nullptr;  // without a communicator every collective is a skip, p2p counted among them
  ReplayResult r = replay_trace(t, o);
  EXPECT_EQ(r.p2p_selected, 2);
  EXPECT_EQ(r.p2p_replayed, 0);
}

}  // namespace
}  // namespace reprise::replay
