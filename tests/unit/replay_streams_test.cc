// Compute on several GPU streams, planned on the CPU: streams from a linked Kineto trace, events only where data
// crosses streams, each stream pair waiting once per producer.
#include <gtest/gtest.h>

#include "plan.h"
#include "reprise/trace/builder.h"

namespace reprise::replay {
namespace {

using detail::Instr;
using detail::Plan;

struct Built {
  Trace trace;
  std::vector<int64_t> ids;  // the ops' node ids, in order
};

// A chain of ops (relu of the previous output, or of the first tensor when `from_first`), each launching a kernel
// on the stream given (-1: none, as a view).
Built streams_trace(const std::vector<std::pair<int64_t, bool>>& ops) {
  TraceBuilder b;
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#1"));
  int64_t storage = 100;
  auto tensor = [&] {
    TensorSpec s;
    s.id = b.next_id();
    s.storage_id = storage++;
    s.shape = {8};
    s.device = "cuda:0";
    return b.tensor(s);
  };
  Value first = tensor(), prev = first;
  Built out;
  for (const auto& op : ops) {
    Value y = tensor();
    out.ids.push_back(b.op("aten::relu(Tensor self) -> Tensor", {op.second ? first : prev}, {y}));
    prev = y;
  }
  out.trace = b.finish();
  out.trace.kineto.emplace();
  for (size_t k = 0; k < ops.size(); ++k)
    if (ops[k].first >= 0) {
      KinetoEvent e;
      e.cat = KinetoCat::Kernel;
      e.stream = ops[k].first;
      e.node = out.trace.find(out.ids[k]);
      out.trace.kineto->events.push_back(e);
    }
  return out;
}

Plan planned(const Trace& t) {
  ReplayOptions o;
  o.device = "meta";
  Plan p = detail::compile_plan(t, o);
  detail::assign_compute_streams(t, p);
  return p;
}

std::vector<uint32_t> waits_of(const Plan& p, const Instr& in) {
  return {p.stream_waits.begin() + in.waits, p.stream_waits.begin() + in.waits + in.num_waits};
}

TEST(ReplayStreams, OpsRunOnTheirKernelsStreamsAndWaitOnlyWhereDataCrosses) {
  // 0: stream 7 (x0 = relu(first)); 1: stream 20 reads x0; 2: stream 20 reads x1; 3: stream 7 reads x2;
  // 4: no kernel (stays on stream 7) reads x3; 5: stream 7 reads x4. Stream 7 does most: it is [0].
  Built b = streams_trace({{7, false}, {20, false}, {20, false}, {7, false}, {-1, false}, {7, false}});
  Plan p = planned(b.trace);
  ASSERT_EQ(p.streams, (std::vector<int64_t>{7, 20}));
  ASSERT_EQ(p.instrs.size(), 6u);
  std::vector<int16_t> streams;
  for (const Instr& in : p.instrs) streams.push_back(in.stream);
  EXPECT_EQ(streams, (std::vector<int16_t>{0, 1, 1, 0, 0, 0}));
  // 1 waits for 0's event; 3 waits for 2's; nobody else waits.
  EXPECT_EQ(p.instrs[1].num_waits, 1u);
  EXPECT_EQ(p.instrs[3].num_waits, 1u);
  EXPECT_EQ(p.cross_stream_waits, 2u);
  EXPECT_EQ(waits_of(p, p.instrs[1]), std::vector<uint32_t>{static_cast<uint32_t>(p.instrs[0].event)});
  EXPECT_EQ(waits_of(p, p.instrs[3]), std::vector<uint32_t>{static_cast<uint32_t>(p.instrs[2].event)});
  EXPECT_EQ(p.instrs[1].event, -1);
  ASSERT_EQ(p.event_streams.size(), 2u);
  EXPECT_EQ(p.event_streams[static_cast<size_t>(p.instrs[0].event)], uint64_t{1} << 1);  // stream 20 uses x0
  EXPECT_EQ(p.event_streams[static_cast<size_t>(p.instrs[2].event)], uint64_t{1} << 0);
}

TEST(ReplayStreams, AStreamWaitsOncePerProducerItHasNotYetWaitedFor) {
  // 0 and 1 on stream 7; 2 on stream 20 reads x1 (made on 7): one wait. 3 on stream 20 reads the trace's input,
  // which no instruction produced: none. 4 on stream 7 reads x3 (made on 20): one wait.
  Built b = streams_trace({{7, false}, {7, false}, {20, false}, {20, true}, {7, false}});
  Plan p = planned(b.trace);
  EXPECT_EQ(p.instrs[2].num_waits, 1u);
  EXPECT_EQ(p.instrs[3].num_waits, 0u);
  EXPECT_EQ(p.instrs[4].num_waits, 1u);
  EXPECT_EQ(p.cross_stream_waits, 2u);
}

TEST(ReplayStreams, OneStreamOrNoKinetoPlansNothing) {
  Built one = streams_trace({{7, false}, {7, false}});
  Plan p = planned(one.trace);
  EXPECT_TRUE(p.streams.empty());
  for (const Instr& in : p.instrs) EXPECT_EQ(in.stream, -1);
  Built none = streams_trace({{-1, false}});
  none.trace.kineto.reset();
  EXPECT_TRUE(planned(none.trace).streams.empty());
}

}  // namespace
}  // namespace reprise::replay
