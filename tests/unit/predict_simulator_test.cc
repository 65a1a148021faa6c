// The simulator on small programs whose timing is worked out by hand: overlap, exposed communication, stragglers,
// pipelines, cross-stream dependencies, and mismatched collectives.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "reprise/common/error.h"
#include "reprise/predict/simulator.h"
#include "test_util.h"

namespace reprise::predict {
namespace {

using K = SimOp::Kind;

struct Prog {
  SimProgram p;
  explicit Prog(bool cpu) { p.host_runs_ops = cpu, p.name = "test"; }
  Prog& compute(double host, double device, uint16_t stream = 0, std::vector<uint32_t> deps = {}) {
    SimOp o;
    o.kind = K::Compute, o.host = host, o.device = device, o.stream = stream;
    o.node = static_cast<uint32_t>(p.ops.size());
    o.deps = static_cast<uint32_t>(p.deps.size()), o.num_deps = static_cast<uint32_t>(deps.size());
    p.deps.insert(p.deps.end(), deps.begin(), deps.end());
    p.ops.push_back(o);
    return *this;
  }
  // A collective on `group` taking `seconds`; waited by a later wait(coll) when `waited`.
  Prog& issue(int32_t group, int64_t seq, double seconds, bool waited, double host = 0) {
    p.collectives.push_back({group, seq, seconds, waited});
    SimOp o;
    o.kind = K::Issue, o.host = host, o.coll = static_cast<int32_t>(p.collectives.size() - 1);
    o.node = static_cast<uint32_t>(p.ops.size());
    p.ops.push_back(o);
    return *this;
  }
  // A send to (or receive from) global rank `peer` on `group`, its `seq`-th in that direction.
  Prog& p2p(int32_t group, bool send, int64_t peer, int64_t seq, double seconds, bool waited) {
    SimCollective c{group, seq, seconds, waited};
    c.peer = peer, c.send = send;
    p.collectives.push_back(c);
    SimOp o;
    o.kind = K::Issue, o.coll = static_cast<int32_t>(p.collectives.size() - 1);
    o.node = static_cast<uint32_t>(p.ops.size());
    p.ops.push_back(o);
    return *this;
  }
  Prog& wait(int32_t coll) {
    SimOp o;
    o.kind = K::Wait, o.coll = coll, o.node = static_cast<uint32_t>(p.ops.size());
    p.ops.push_back(o);
    return *this;
  }
  Prog& end() {
    SimOp o;
    o.kind = K::StepEnd, o.node = static_cast<uint32_t>(p.ops.size());
    p.ops.push_back(o);
    return *this;
  }
};

TEST(Simulator, CommunicationOverlapsComputeUntilItsWait) {
  // A: launch 1, kernel 10; all_reduce issued after A (5 on the wire); B: launch 1, kernel 10; wait; D.
  Prog g(false);
  g.compute(1, 10).issue(0, 0, 5, true, 1).compute(1, 10).wait(0).compute(1, 2).end();
  SimInput in;
  in.programs = {&g.p};
  in.groups = {{"world", {0}}};
  SimResult r = simulate(in);
  ASSERT_EQ(r.ranks[0].step_seconds.size(), 1u);
  EXPECT_DOUBLE_EQ(r.ranks[0].step_seconds[0], 23);  // kernels 1-11, 11-21, 21-23; the collective 11-16 is hidden
  EXPECT_DOUBLE_EQ(r.ranks[0].exposed_comm, 0);
  EXPECT_DOUBLE_EQ(r.ranks[0].compute_busy, 22);
  EXPECT_DOUBLE_EQ(r.ranks[0].comm_busy, 5);

  // Waiting right away exposes it: A 1-11, collective 11-16, B 16-26, D 26-28.
  Prog s(false);
  s.compute(1, 10).issue(0, 0, 5, true, 1).wait(0).compute(1, 10).compute(1, 2).end();
  in.programs = {&s.p};
  r = simulate(in);
  EXPECT_DOUBLE_EQ(r.ranks[0].step_seconds[0], 28);
  EXPECT_DOUBLE_EQ(r.ranks[0].exposed_comm, 5);
  // The critical path: A's launch, A's kernel, the collective, B's and D's kernels.
  ASSERT_GE(r.critical_path.size(), 4u);
  EXPECT_EQ(r.critical_path.back().resource, "stream 0");
  EXPECT_DOUBLE_EQ(r.critical_path.back().end, 28);
  bool via_comm = false;
  for (const SimEvent& e : r.critical_path) via_comm = via_comm || e.resource == "comm world";
  EXPECT_TRUE(via_comm);
}

TEST(Simulator, AStragglerDelaysTheWholeGroup) {
  // CPU: rank 0 computes 10, rank 1 computes 20, then a synchronous all_reduce of 5: both end at 25.
  Prog fast(true), slow(true);
  fast.compute(10, 0).issue(0, 0, 5, false).compute(1, 0).end();
  slow.compute(20, 0).issue(0, 0, 5, false).compute(1, 0).end();
  SimInput in;
  in.programs = {&fast.p, &slow.p};
  in.groups = {{"world", {0, 1}}};
  SimResult r = simulate(in);
  EXPECT_DOUBLE_EQ(r.ranks[0].step_seconds[0], 26);
  EXPECT_DOUBLE_EQ(r.ranks[1].step_seconds[0], 26);
  EXPECT_DOUBLE_EQ(r.ranks[0].exposed_comm, 15);  // rank 0 waited 10 for rank 1, then 5 on the wire
  ASSERT_FALSE(r.critical_path.empty());
  EXPECT_EQ(r.critical_path.front().rank, 1);  // the path starts in the straggler's compute
  EXPECT_DOUBLE_EQ(r.critical_path.front().end, 20);
}

TEST(Simulator, AsynchronousCollectivesOnCpuProgressInTheirWaits) {
  // CPU, MPI without a progress thread: the all_reduce issued at 1 moves data only once both ranks wait (at 11).
  Prog a(true), b(true);
  a.issue(0, 0, 4, true, 1).compute(10, 0).wait(0).end();
  b.issue(0, 0, 4, true, 1).compute(10, 0).wait(0).end();
  SimInput in;
  in.programs = {&a.p, &b.p};
  in.groups = {{"world", {0, 1}}};
  SimResult r = simulate(in);
  EXPECT_DOUBLE_EQ(r.ranks[0].step_seconds[0], 15);
}

TEST(Simulator, PipelineStagesHandOffThroughPointToPoint) {
  // Two stages, two micro-batches of 10 each, a 1-second transfer between them.
  Prog s0(true), s1(true);
  s0.compute(10, 0).issue(0, 0, 1, false).compute(10, 0).issue(0, 1, 1, false).end();
  s1.issue(0, 0, 1, false).compute(10, 0).issue(0, 1, 1, false).compute(10, 0).end();
  SimInput in;
  in.programs = {&s0.p, &s1.p};
  in.groups = {{"pp", {0, 1}}};
  SimResult r = simulate(in);
  EXPECT_DOUBLE_EQ(r.ranks[0].end, 22);  // 0-10, send 10-11, 11-21, send 21-22
  EXPECT_DOUBLE_EQ(r.ranks[1].end, 32);  // recv 10-11, 11-21, recv 21-22, 22-32
  EXPECT_DOUBLE_EQ(r.makespan, 32);
  EXPECT_EQ(r.critical_path.back().rank, 1);
  EXPECT_EQ(r.critical_path.front().rank, 0);  // it starts in stage 0's first micro-batch
}

TEST(Simulator, PointToPointPairsOnlyTheTwoRanksOfALargerGroup) {
  // Four stages on one group of four: each receives from the stage before, computes 10, sends 1 second onward. A
  // send waits for its receiver alone, not for the whole group.
  std::vector<Prog> s(4, Prog(true));
  for (int64_t k = 0; k < 4; ++k) {
    if (k > 0) s[k].p2p(0, false, k - 1, 0, 1, false);
    s[k].compute(10, 0);
    if (k < 3) s[k].p2p(0, true, k + 1, 0, 1, false);
    s[k].end();
  }
  SimInput in;
  for (const Prog& g : s) in.programs.push_back(&g.p);
  in.groups = {{"pp", {0, 1, 2, 3}}};
  in.timeline_ranks = {1};
  SimResult r = simulate(in);
  EXPECT_DOUBLE_EQ(r.ranks[0].end, 11);  // 0-10, send 10-11
  EXPECT_DOUBLE_EQ(r.ranks[1].end, 22);  // recv 10-11, 11-21, send 21-22
  EXPECT_DOUBLE_EQ(r.ranks[2].end, 33);
  EXPECT_DOUBLE_EQ(r.ranks[3].end, 43);  // recv 32-33, 33-43
  std::set<std::string> resources;
  for (const SimEvent& e : r.timeline) resources.insert(e.resource);
  EXPECT_TRUE(resources.count("p2p 0->1 pp")) << *resources.begin();
  EXPECT_TRUE(resources.count("p2p 1->2 pp"));
  EXPECT_EQ(r.critical_path.front().rank, 0);
  EXPECT_EQ(r.critical_path.back().rank, 3);
}

TEST(Simulator, ABatchedExchangeRunsBothDirectionsAtOnce) {
  // Two ranks each post a send and a receive of 2 seconds to the other, then wait for both (batch_isend_irecv):
  // on MPI the four requests are matched once posted, and the two directions do not queue behind each other.
  Prog a(true), b(true);
  a.compute(1, 0).p2p(0, true, 1, 0, 2, true).p2p(0, false, 1, 0, 2, true).wait(0).wait(1).end();
  b.compute(3, 0).p2p(0, true, 0, 0, 2, true).p2p(0, false, 0, 0, 2, true).wait(0).wait(1).end();
  SimInput in;
  in.programs = {&a.p, &b.p};
  in.groups = {{"pp", {0, 1}}};
  SimResult r = simulate(in);
  EXPECT_DOUBLE_EQ(r.ranks[0].end, 5);  // both start when rank 1 posts at 3
  EXPECT_DOUBLE_EQ(r.ranks[1].end, 5);
  // The same on a GPU: the host goes on past the issues, the stream waits for the exchange.
  Prog ga(false), gb(false);
  ga.compute(1, 1).p2p(0, true, 1, 0, 2, true).p2p(0, false, 1, 0, 2, true).wait(0).wait(1).compute(1, 1).end();
  gb.compute(1, 1).p2p(0, false, 0, 0, 2, true).p2p(0, true, 0, 0, 2, true).wait(1).wait(0).compute(1, 1).end();
  in.programs = {&ga.p, &gb.p};
  r = simulate(in);
  EXPECT_DOUBLE_EQ(r.ranks[0].end, 5);  // kernel 1-2, exchange 2-4, kernel 4-5
  EXPECT_DOUBLE_EQ(r.ranks[1].end, 5);
}

TEST(Simulator, UnmatchedSendsAreReportedNotHung) {
  Prog a(true), b(true), c(true);
  a.compute(1, 0).p2p(0, true, 1, 0, 1, false).end();
  b.compute(1, 0).end();
  c.compute(1, 0).end();
  SimInput in;
  in.programs = {&a.p, &b.p, &c.p};
  in.groups = {{"pp", {0, 1, 2}}};
  const std::string e = test::user_error([&] { simulate(in); });
  EXPECT_NE(e.find("rank 0 waits at node 1 for its send #0 to rank 1 on group pp, which rank 1 never receives"),
            std::string::npos)
      << e;
  Prog self(true);
  self.p2p(0, true, 0, 0, 1, false).end();
  in.programs = {&self.p, &b.p, &c.p};
  EXPECT_NE(test::user_error([&] { simulate(in); }).find("sends to rank 0 on group pp, which is not another member"),
            std::string::npos);
  in.groups = {{"pp", {0, 1}}, {"world", {0, 1, 2}}};
  Prog outside(true);
  outside.p2p(0, false, 2, 0, 1, false).end();
  in.programs = {&outside.p, &b.p, &c.p};
  EXPECT_NE(test::user_error([&] { simulate(in); }).find("receives from rank 2 on group pp"), std::string::npos);
}

TEST(Simulator, CrossStreamWorkWaitsForWhatItReads) {
  // Op 1 on stream 1 reads op 0's output (stream 0): it starts when op 0 ends, not at its launch.
  Prog g(false);
  g.compute(1, 10, 0).compute(1, 3, 1, {0}).end();
  SimInput in;
  in.programs = {&g.p};
  SimResult r = simulate(in);
  EXPECT_DOUBLE_EQ(r.ranks[0].end, 14);
  Prog free_(false);
  free_.compute(1, 10, 0).compute(1, 3, 1).end();
  in.programs = {&free_.p};
  EXPECT_DOUBLE_EQ(simulate(in).ranks[0].end, 11);  // independent: the two streams overlap
}

TEST(Simulator, MismatchedCollectivesAreReportedNotHung) {
  Prog a(true), b(true);
  a.compute(1, 0).issue(0, 0, 1, false).end();
  b.compute(1, 0).end();
  SimInput in;
  in.programs = {&a.p, &b.p};
  in.groups = {{"world", {0, 1}}};
  try {
    simulate(in);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) 1 never issue"), std::string::npos) << e.what();
  }
  in.groups = {{"world", {1}}};
  EXPECT_THROW(simulate(in), UserError);  // rank 0 is not a member
}

}  // namespace
}  // namespace reprise::predict
