// Live capture: the Session observer on small programs with known op sequences, and the built-in workloads
// captured and replayed.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "event_log.h"
#include "reprise/capture/session.h"
#include "reprise/common/clock.h"
#include "reprise/common/dtype.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/read.h"
#include "reprise/workloads/workloads.h"
#include "test_util.h"

namespace reprise {
namespace {

std::vector<uint32_t> ops_named(const Trace& t, std::string_view name) {
  std::vector<uint32_t> v;
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (t.name(t.nodes[i]) == name) v.push_back(i);
  return v;
}

const Tensor& input_tensor(const Trace& t, uint32_t node, size_t k) {
  const Value& v = t.inputs(t.nodes[node])[k];
  EXPECT_EQ(v.kind, ValueKind::Tensor);
  return t.tensors[v.ref];
}

TEST(Capture, RecordsOpsSchemasShapesAliasingAndRanges) {
  std::string dir = test::temp_dir();
  capture::SessionOptions o;
  o.path = dir + "/rank-0.json.gz";
  o.rank = 0;
  o.process_groups = R"J([{"pg_name": "0", "pg_desc": "default_pg", "ranks": [], "group_size": 1}])J";
  at::Tensor a = at::rand({4, 6});
  at::Tensor w = at::rand({10, 3});
  at::Tensor idx = at::tensor({1, 7, 3, 9}, at::kLong);
  {
    capture::Session s(o);
    s.step();
    at::Tensor v = a.view({24});           // a view: same storage as a
    v.add_(1.0);                           // in place on the view
    at::Tensor e = at::embedding(w, idx);  // integer input: its range is recorded
    at::Tensor y = at::mm(a, at::ones({6, 2}));
    (void)e;
    (void)y;
    s.stop();
  }
  ASSERT_TRUE(std::filesystem::exists(o.path));
  ASSERT_TRUE(std::filesystem::exists(dir + "/rank-0.kineto.json.gz"));
  TraceSet set = load_traces({dir});
  ASSERT_EQ(set.ranks.size(), 1u);
  const Trace& t = set.ranks[0];
  EXPECT_EQ(t.schema, "1.1.1-chakra.0.0.4");
  ASSERT_EQ(t.process_groups.size(), 1u);
  ASSERT_EQ(t.iterations.size(), 1u);
  EXPECT_EQ(t.iterations[0].name, "ProfilerStep#0");

  auto views = ops_named(t, "aten::view");
  ASSERT_EQ(views.size(), 1u);
  const Node& view = t.nodes[views[0]];
  EXPECT_EQ(t.str(view.op_schema), "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)");
  const Tensor& base = input_tensor(t, views[0], 0);
  const Tensor& out = t.tensors[t.outputs(view)[0].ref];
  EXPECT_EQ(base.storage_id, out.storage_id);
  EXPECT_NE(base.id, out.id);
  EXPECT_EQ(std::vector<int64_t>(t.dims(base).begin(), t.dims(base).end()), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(std::vector<int64_t>(t.dims(out).begin(), t.dims(out).end()), (std::vector<int64_t>{24}));

  auto adds = ops_named(t, "aten::add_");  // add_.Scalar, and the add_.Tensor it calls below it
  ASSERT_EQ(adds.size(), 2u);
  EXPECT_EQ(t.nodes[adds[1]].parent, adds[0]);
  const Tensor& self = input_tensor(t, adds[0], 0);
  const Tensor& result = t.tensors[t.outputs(t.nodes[adds[0]])[0].ref];
  EXPECT_EQ(self.id, result.id);  // in place: the same tensor comes back
  EXPECT_EQ(self.storage_id, base.storage_id);

  auto emb = ops_named(t, "aten::embedding");
  ASSERT_EQ(emb.size(), 1u);
  EXPECT_EQ(t.str(t.nodes[emb[0]].tensor_range), "{\"1\": [1, 9]}");
  EXPECT_EQ(t.str(input_tensor(t, emb[0], 1).dtype), "long int");
  // mm's children are recorded below it, and the Kineto-style host timeline linked them by rf_id.
  auto mm = ops_named(t, "aten::mm");
  ASSERT_EQ(mm.size(), 1u);
  EXPECT_GE(t.nodes[mm[0]].dur_us, 0);
  ASSERT_TRUE(t.kineto.has_value());
  EXPECT_EQ(t.kineto->link_method, "rf_id");
  EXPECT_EQ(t.kineto->producer, "capture timeline") << "replay's host time names its source";

  replay::ReplayOptions ro;
  ro.warmup = 0;
  ro.iterations = 1;
  replay::ReplayResult r = replay::replay_trace(t, ro);
  EXPECT_EQ(r.compute_replayed, r.compute_selected);
  EXPECT_EQ(r.compute_selected, 5);  // view, add_, embedding, ones, mm
}

TEST(Capture, StepWindowSkipsThenRecords) {
  std::string dir = test::temp_dir();
  capture::SessionOptions o;
  o.path = dir + "/w.json";
  o.skip_steps = 2;
  o.record_steps = 1;
  capture::Session s(o);
  at::Tensor x = at::rand({8});
  for (int k = 0; k < 4; ++k) {
    s.step();
    EXPECT_EQ(s.recording(), k == 2);
    x = at::relu(x - 0.5);
  }
  s.stop();
  auto times = s.step_times();
  ASSERT_EQ(times.size(), 4u);
  for (const capture::StepTime& st : times) EXPECT_EQ(st.recorded, st.step == 2);
  Trace t = read_et(o.path);
  ASSERT_EQ(t.iterations.size(), 1u);
  EXPECT_EQ(t.iterations[0].name, "ProfilerStep#2");
  EXPECT_EQ(ops_named(t, "aten::relu").size(), 1u);
  EXPECT_THROW(capture::Session{o}, std::logic_error);  // one open Session per process
}

// A Collective recorded by the Session reads back as the same Collective; fields left unknown come back as the
// default process group's.
TEST(Capture, RecordedCollectivesReadBackAsTheModelsCollectives) {
  std::string dir = test::temp_dir();
  capture::SessionOptions o;
  o.path = dir + "/rank-1.json";
  Collective a2a;
  a2a.name = "all_to_allv";
  a2a.raw_name = "all_to_allv";
  a2a.dtype = "Float";
  a2a.in_elems = 6;
  a2a.out_elems = 6;
  a2a.in_splits = {2, 4};
  a2a.out_splits = {3, 3};
  a2a.seq = 3;
  a2a.rank = 1;
  a2a.pg_name = "1";
  a2a.pg_desc = "ep";
  a2a.pg_size = 2;
  a2a.global_rank_start = 2;
  a2a.global_rank_stride = 2;
  Collective bcast;
  bcast.name = "broadcast";
  bcast.dtype = "Long";
  bcast.in_elems = bcast.out_elems = 4;
  at::Tensor x = at::rand({6}), y = at::empty({6}), z = at::zeros({4}, at::kLong);
  {
    capture::Session s(o);
    s.record_collective(a2a, {x}, {y});  // not recording yet: nothing
    s.step();
    s.record_collective(a2a, {x}, {y});
    const int64_t began = now_ns();
    busy_wait_ns(300000);  // the broadcast, as long as 300 us
    s.record_collective(bcast, {z}, {z}, began);
    s.stop();
  }
  TraceSet set = load_traces({o.path, dir + "/rank-1.kineto.json.gz"});  // the ET with its host timeline
  ASSERT_EQ(set.ranks.size(), 1u);
  const Trace& t = set.ranks[0];
  ASSERT_EQ(t.collectives.size(), 2u);
  // Timed from `began` on the host timeline and linked to its node by an rf_id of its own; the other untimed.
  const Node& timed = t.nodes[t.collectives[1].node];
  EXPECT_NE(timed.rf_id, 0);
  EXPECT_GE(timed.dur_us, 300);
  EXPECT_LT(t.nodes[t.collectives[0].node].dur_us, 0);
  const Collective& c = t.collectives[0];
  EXPECT_EQ(t.name(t.nodes[c.node]), "record_param_comms");
  EXPECT_EQ(t.name(t.nodes[t.nodes[c.node].parent]), "ProfilerStep#0");
  EXPECT_EQ(c.name, "all_to_allv");
  EXPECT_EQ(c.raw_name, "all_to_allv");
  EXPECT_EQ(c.dtype, "Float");
  EXPECT_EQ(c.in_elems, 6);
  EXPECT_EQ(c.out_elems, 6);
  EXPECT_EQ(c.in_splits, a2a.in_splits);
  EXPECT_EQ(c.out_splits, a2a.out_splits);
  EXPECT_EQ(c.seq, 3);
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.pg_name, "1");
  EXPECT_EQ(c.pg_desc, "ep");
  EXPECT_EQ(c.pg_size, 2);
  EXPECT_EQ(c.global_rank_start, 2);
  EXPECT_EQ(c.global_rank_stride, 2);
  const Collective& d = t.collectives[1];
  EXPECT_EQ(d.raw_name, "broadcast");  // name, when raw_name is empty
  EXPECT_EQ(d.dtype, "Long");
  EXPECT_EQ(d.in_elems, 4);
  EXPECT_EQ(d.seq, 0);
  EXPECT_EQ(d.rank, 0);
  EXPECT_EQ(d.pg_name, "0");
  EXPECT_EQ(d.pg_desc, "default_pg");
  EXPECT_EQ(d.pg_size, 1);
  EXPECT_EQ(d.global_rank_start, 0);
  EXPECT_EQ(d.global_rank_stride, 1);
}

// Point-to-point records carry PyTorch 2.x's (seq, isP2P) tuple and read back as p2p with their own counter; a
// batch's "wait" finds its "coalesced" record; collectives keep a plain int seq.
TEST(Capture, PointToPointSeqIsWrittenAsATupleAndReadBack) {
  std::string dir = test::temp_dir();
  capture::SessionOptions o;
  o.path = dir + "/p2p.json";
  auto make = [](const char* name, int64_t seq, int rank, bool p2p) {
    Collective c;
    c.name = c.raw_name = name;
    c.dtype = "Float";
    c.in_elems = c.out_elems = std::string(name) == "send" || std::string(name) == "recv" ? 4 : 0;
    c.seq = seq;
    c.rank = rank;
    c.p2p = p2p;
    c.pg_name = "3";
    c.pg_desc = "pp";
    c.pg_size = 2;
    return c;
  };
  at::Tensor x = at::rand({4}), y = at::empty({4});
  {
    capture::Session s(o);
    s.step();
    s.record_collective(make("allreduce", 7, 0, false), {x}, {x});
    s.record_collective(make("send", 2, 1, true), {x}, {x});
    s.record_collective(make("recv", 2, 1, true), {y}, {y});
    s.record_collective(make("coalesced", 2, 0, true));
    s.record_collective(make("wait", 2, 0, true));
    s.stop();
  }
  std::ifstream in(o.path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("Tuple[Int,Bool]"), std::string::npos);
  Trace t = read_et(o.path);
  ASSERT_EQ(t.collectives.size(), 5u);
  const Collective& ar = t.collectives[0];
  EXPECT_EQ(ar.name, "all_reduce");
  EXPECT_EQ(ar.seq, 7);
  EXPECT_FALSE(ar.p2p);
  for (size_t i = 1; i < 5; ++i) {
    const Collective& c = t.collectives[i];
    EXPECT_EQ(c.seq, 2) << c.raw_name;
    EXPECT_TRUE(c.p2p) << c.raw_name;
    EXPECT_EQ(c.pg_name, "3") << c.raw_name;
    EXPECT_EQ(c.pg_desc, "pp") << c.raw_name;
  }
  EXPECT_EQ(t.collectives[1].name, "send");
  EXPECT_EQ(t.collectives[1].rank, 1);  // the peer, as PyTorch records it
  EXPECT_EQ(t.collectives[1].in_elems, 4);
  EXPECT_EQ(t.collectives[2].name, "recv");
  EXPECT_EQ(t.collectives[3].raw_name, "coalesced");
  EXPECT_TRUE(t.collectives[3].is_async);
  EXPECT_TRUE(t.collectives[4].is_wait);
  EXPECT_EQ(t.collectives[4].waits_for, 3);
}

TEST(Capture, LeanCaptureKeepsOuterArgumentsOnly) {
  std::string dir = test::temp_dir();
  capture::SessionOptions o;
  o.path = dir + "/lean.json";
  o.nested_values = false;
  at::Tensor a = at::rand({4, 8}), w = at::rand({3, 8}), b = at::rand({3});
  {
    capture::Session s(o);
    s.step();
    at::Tensor y = at::linear(a, w, b);  // calls t and addmm below it
    y.mul_(2.0);
    s.stop();
  }
  Trace t = read_et(o.path);
  auto lin = ops_named(t, "aten::linear");
  auto addmm = ops_named(t, "aten::addmm");
  ASSERT_EQ(lin.size(), 1u);
  ASSERT_EQ(addmm.size(), 1u);
  EXPECT_EQ(t.nodes[lin[0]].num_inputs, 3u);
  EXPECT_EQ(t.nodes[lin[0]].num_outputs, 1u);
  EXPECT_EQ(t.nodes[addmm[0]].num_inputs, 0u);  // inner: name and schema only
  EXPECT_NE(t.nodes[addmm[0]].op_schema, 0u);
  replay::ReplayOptions ro;
  ro.warmup = 0;
  ro.iterations = 1;
  replay::ReplayResult r = replay::replay_trace(t, ro);
  EXPECT_EQ(r.compute_selected, 2);
  EXPECT_EQ(r.compute_replayed, 2);
}

TEST(Capture, BadOptionsAreClearErrors) {
  workloads::WorkloadOptions o;
  o.name = "resnet";
  try {
    workloads::capture_workload(o);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown (built in: mlp, dlrm, gpt)"), std::string::npos) << e.what();
  }
  o.name = "mlp";
  o.batch = -3;
  EXPECT_THROW(workloads::capture_workload(o), std::invalid_argument);
  o.batch = 0;
  o.device = "tpu:0";
  EXPECT_THROW(workloads::capture_workload(o), std::invalid_argument);
  o.device = "cpu";
  o.steps = 0;
  EXPECT_THROW(workloads::capture_workload(o), std::invalid_argument);
  capture::SessionOptions so;
  so.skip_steps = -1;
  EXPECT_THROW(capture::Session{so}, std::invalid_argument);
}

// Backward ops carry the forward thread (fw_tid) and what that thread had open when they started (fw_parent), as
// PyTorch's observer writes them.
TEST(Capture, BackwardOpsKnowTheirForwardThreadAndParent) {
  std::string dir = test::temp_dir();
  capture::SessionOptions o;
  o.path = dir + "/bw.json";
  at::Tensor w = at::rand({4, 4}).set_requires_grad(true);
  {
    capture::Session s(o);
    s.step();
    at::Tensor loss = at::mul(at::rand({2, 4}).matmul(w), 3.0).sum();
    {
      RECORD_USER_SCOPE("## backward ##");
      loss.backward();
    }
    s.stop();
  }
  Trace t = read_et(o.path);
  std::unordered_map<int64_t, uint32_t> by_id;
  for (uint32_t i = 0; i < t.nodes.size(); ++i) by_id[t.nodes[i].id] = i;
  auto bw = ops_named(t, "MmBackward0");
  ASSERT_EQ(bw.size(), 1u);
  const Node& n = t.nodes[bw[0]];
  EXPECT_NE(n.fw_tid, 0);
  ASSERT_TRUE(by_id.count(n.fw_parent)) << n.fw_parent;
  // The forward thread's innermost open node: the user scope around backward() when the engine runs on another
  // thread, else an enclosing node of the op itself.
  const Node& fp = t.nodes[by_id[n.fw_parent]];
  bool enclosing = false;
  for (uint32_t p = n.parent; p != kNone32; p = t.nodes[p].parent) enclosing |= t.nodes[p].id == fp.id;
  EXPECT_TRUE(enclosing || t.name(fp) == "## backward ##") << t.name(fp);
  // Forward ops have neither.
  auto mul = ops_named(t, "aten::mul");
  ASSERT_FALSE(mul.empty());
  EXPECT_EQ(t.nodes[mul[0]].fw_tid, 0);
  EXPECT_EQ(t.nodes[mul[0]].fw_parent, 0);
}

// Tensors that come back are written as references to the thread's last record of them: a tensor whose metadata
// changed in place (resize_, t_) must still be recorded as it is at each op, and hundreds of live tensors (more
// than the cache's slots) must keep their own shapes.
TEST(Capture, RecurringTensorsAreRecordedAsTheyAreAtEachOp) {
  std::string dir = test::temp_dir();
  capture::SessionOptions o;
  o.path = dir + "/recur.json";
  std::vector<std::vector<int64_t>> expected;  // the first input's shape of every aten::neg, in order
  {
    capture::Session s(o);
    s.step();
    at::Tensor x = at::zeros({4});
    for (int k = 0; k < 3; ++k) {
      x.resize_({2, 3});
      (void)at::neg(x);
      expected.push_back({2, 3});
      x.resize_({6});
      (void)at::neg(x);
      expected.push_back({6});
    }
    at::Tensor w = at::rand({3, 4});
    (void)at::neg(w);
    expected.push_back({3, 4});
    w.t_();  // in place: the same tensor object, transposed
    (void)at::neg(w);
    expected.push_back({4, 3});
    std::vector<at::Tensor> live;
    for (int k = 0; k < 600; ++k) live.push_back(at::ones({k % 7 + 1, k % 5 + 1}));
    for (int round = 0; round < 2; ++round)
      for (int k = 0; k < 600; ++k) {
        (void)at::neg(live[static_cast<size_t>(k)]);
        expected.push_back({k % 7 + 1, k % 5 + 1});
      }
    s.stop();
  }
  Trace t = read_et(o.path);
  auto negs = ops_named(t, "aten::neg");
  ASSERT_EQ(negs.size(), expected.size());
  for (size_t k = 0; k < negs.size(); ++k) {
    const Tensor& in = input_tensor(t, negs[k], 0);
    ASSERT_EQ(std::vector<int64_t>(t.dims(in).begin(), t.dims(in).end()), expected[k]) << "neg #" << k;
  }
  // The transposed w: strides follow the in-place change too.
  const Tensor& wt = input_tensor(t, negs[7], 0);
  EXPECT_EQ(t.strides(wt), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(input_tensor(t, negs[6], 0).id, wt.id);  // the same tensor object both times
}

// The hot-path log: values written across many small blocks read back in order, strings longer than a block
// included, and a reader that runs past the end says so.
TEST(EventLog, RoundTripsAcrossBlockBoundaries) {
  capture::detail::BlockPool pool(64);
  std::string long_text(300, 'x');
  for (size_t k = 0; k < long_text.size(); ++k) long_text[k] = static_cast<char>('a' + k % 26);
  std::vector<capture::detail::LogBlock> blocks;
  {
    capture::detail::LogWriter w(pool);
    for (int64_t k = 0; k < 1000; ++k) {
      w.put(static_cast<uint8_t>(k & 0xff));
      w.put(k * 1000003);
      if (k % 97 == 0) w.put_bytes(k % 2 ? long_text : std::string("short"));
      w.put(static_cast<double>(k) / 3);
    }
    blocks = w.blocks();
    EXPECT_GT(blocks.size(), 100u);
    size_t total = 0;
    for (const auto& b : blocks) {
      EXPECT_LE(b.used, 64u);
      total += b.used;
    }
    EXPECT_EQ(total, w.bytes());
    capture::detail::LogReader r(blocks);
    for (int64_t k = 0; k < 1000; ++k) {
      ASSERT_FALSE(r.at_end());
      EXPECT_EQ(r.get<uint8_t>(), static_cast<uint8_t>(k & 0xff));
      EXPECT_EQ(r.get<int64_t>(), k * 1000003);
      if (k % 97 == 0) {
        EXPECT_EQ(r.get_bytes(), k % 2 ? long_text : std::string("short"));
      }
      EXPECT_EQ(r.get<double>(), static_cast<double>(k) / 3);
    }
    EXPECT_TRUE(r.at_end());
    EXPECT_THROW(r.get<int64_t>(), std::runtime_error);
  }
  // The writer gave its blocks back: they are ready for the next log, and trim() unmaps them.
  EXPECT_EQ(pool.ready(), pool.mapped());
  pool.trim();
  EXPECT_EQ(pool.mapped(), 0u);
  pool.start_refill(4);
  EXPECT_GE(pool.ready(), 4u);
  pool.stop_refill();
}

// Ops on two threads at once, more than one log block each, and no memory reserved up front: every op is in the
// trace, under its own thread's node.
TEST(Capture, ThreadsAndLongStepsDecodeWhole) {
  std::string dir = test::temp_dir();
  capture::SessionOptions o;
  o.path = dir + "/threads.json.gz";
  o.log_reserve_mb = 0;
  const int kOps = 4000;  // about 2 MiB of log per thread
  {
    capture::Session s(o);
    s.step();
    auto work = [](at::Tensor x) {
      for (int k = 0; k < kOps; ++k) x = at::relu(at::neg(x));
    };
    std::thread other(work, at::rand({3, 5}));
    work(at::rand({7}));
    other.join();
    s.stop();
    EXPECT_GT(s.num_nodes(), static_cast<size_t>(4 * kOps));
  }
  Trace t = read_et(o.path);
  EXPECT_EQ(ops_named(t, "aten::neg").size(), static_cast<size_t>(2 * kOps));
  EXPECT_EQ(ops_named(t, "aten::relu").size(), static_cast<size_t>(2 * kOps));
  std::set<int64_t> tids, shapes;
  for (uint32_t i : ops_named(t, "aten::neg")) {
    tids.insert(t.nodes[i].tid);
    shapes.insert(input_tensor(t, i, 0).rank);
  }
  EXPECT_EQ(tids.size(), 2u);
  EXPECT_EQ(shapes, (std::set<int64_t>{1, 2}));
}

class WorkloadCapture : public ::testing::TestWithParam<std::string> {};

TEST_P(WorkloadCapture, CapturedTraceReplaysWithFullCoverage) {
  std::string dir = test::temp_dir() + "/" + GetParam();
  workloads::WorkloadOptions o;
  o.name = GetParam();
  o.out_dir = dir;
  o.warmup = 1;
  o.steps = 2;
  o.batch = 8;  // small: this checks structure; docs/performance.md has the timing comparison
  o.hidden = 64;
  if (o.name == "dlrm") o.rows = 1000;  // each workload takes only its own sizes
  if (o.name == "gpt") o.seq = 16, o.vocab = 128;
  workloads::CaptureReport rep = workloads::capture_workload(o);
  EXPECT_EQ(rep.iteration_seconds.size(), 2u);
  EXPECT_EQ(rep.recorded_iteration_seconds.size(), 1u);
  EXPECT_GT(rep.peak_memory_bytes, 0);
  TraceSet set = load_traces({dir});
  ASSERT_EQ(set.ranks.size(), 1u);
  replay::ReplayOptions ro;
  ro.warmup = 0;
  ro.iterations = 1;
  replay::ReplayResult r = replay::replay_trace(set.ranks[0], ro);
  EXPECT_GT(r.compute_selected, 20);
  EXPECT_EQ(r.compute_replayed, r.compute_selected)
      << (r.skipped.empty() ? "" : r.skipped[0].op + ": " + r.skipped[0].reason);
  std::set<std::string> ops;
  for (const Node& n : set.ranks[0].nodes) ops.insert(std::string(set.ranks[0].name(n)));
  if (GetParam() == "dlrm") {
    EXPECT_TRUE(ops.count("aten::embedding_bag"));
    EXPECT_TRUE(ops.count("aten::index_select"));
  } else if (GetParam() == "gpt") {
    EXPECT_TRUE(ops.count("aten::layer_norm"));
    EXPECT_TRUE(ops.count("aten::gelu"));
    EXPECT_TRUE(ops.count("aten::addcdiv_"));  // AdamW
  } else {
    EXPECT_TRUE(ops.count("aten::linear"));
    EXPECT_TRUE(ops.count("aten::mse_loss"));
  }
}

INSTANTIATE_TEST_SUITE_P(Builtin, WorkloadCapture, ::testing::Values("mlp", "dlrm", "gpt"));

// An anti-pattern built in: each timed step runs with it and without it (the real saving, in one process); the
// recorded step has it.
TEST(Capture, AntiPatternStepsAreTimedWithAndWithoutIt) {
  const std::string dir = test::temp_dir() + "/casts";
  workloads::WorkloadOptions o;
  o.out_dir = dir;
  o.warmup = 0;
  o.steps = 3;
  o.batch = 4;
  o.hidden = 16;
  o.layers = 3;
  o.anti_pattern = "casts";
  const workloads::CaptureReport rep = workloads::capture_workload(o);
  EXPECT_EQ(rep.iteration_seconds.size(), 3u);
  EXPECT_EQ(rep.without_anti_pattern_seconds.size(), 3u);
  EXPECT_NE(rep.description.find("anti-pattern casts"), std::string::npos) << rep.description;
  const TraceSet set = load_traces({dir});
  // Two hidden activations, there and back: four casts, and four of autograd's casts back.
  EXPECT_EQ(ops_named(set.ranks[0], "autograd::engine::evaluate_function: ToCopyBackward0").size(), 4u);
  const std::string m = workloads::manifest_json(o, {rep}, 1);
  EXPECT_NE(m.find("\"anti_pattern\": \"casts\""), std::string::npos) << m;
  EXPECT_NE(m.find("\"without_anti_pattern_seconds\": ["), std::string::npos) << m;
  // unaligned: the recorded model's hidden size is off a multiple of 8; the one timed without it is padded.
  o.anti_pattern = "unaligned";
  o.out_dir = test::temp_dir() + "/unaligned";
  const workloads::CaptureReport u = workloads::capture_workload(o);
  EXPECT_NE(u.description.find("hidden 15 (without the anti-pattern 16)"), std::string::npos) << u.description;
  EXPECT_EQ(u.without_anti_pattern_seconds.size(), 3u);
  const TraceSet us = load_traces({o.out_dir});
  const Trace& ut = us.ranks[0];
  const std::vector<uint32_t> addmm = ops_named(ut, "aten::addmm");
  ASSERT_FALSE(addmm.empty());
  for (uint32_t n : addmm) {
    const Span<int64_t> d = ut.dims(input_tensor(ut, n, 2));
    EXPECT_EQ(std::vector<int64_t>(d.begin(), d.end()), (std::vector<int64_t>{15, 15})) << n;
  }
  o.anti_pattern = "slow";
  EXPECT_THROW(workloads::check_options(o, 1), std::invalid_argument);
  // The other options capture refuses before it builds anything (reprise capture turns these into one line).
  workloads::WorkloadOptions bad;
  bad.steps = 0;
  EXPECT_THROW(workloads::check_options(bad, 1), std::invalid_argument);
  bad = {};
  bad.pp = 2;  // mlp: pipelines are gpt's
  EXPECT_THROW(workloads::check_options(bad, 2), std::invalid_argument);
  bad = {};
  bad.name = "gpt";
  bad.hidden = 100;
  bad.heads = 3;
  EXPECT_THROW(workloads::check_options(bad, 1), std::invalid_argument);
  bad.hidden = 0;
  bad.heads = 0;
  bad.pp = 2;
  bad.layers = 3;
  EXPECT_THROW(workloads::check_options(bad, 2), std::invalid_argument);
  o.anti_pattern = "sync";
  o.name = "dlrm";
  EXPECT_THROW(workloads::check_options(o, 1), std::invalid_argument);
}

// A DLRM whose tables differ (rows, pooling) and whose sharding plan places them: each table this rank holds is an
// embedding_bag over its own weight and indices; the plan and the lists are checked against the world first.
TEST(Capture, DlrmTablesOfTheirOwnSizesAndAShardingPlan) {
  const std::string dir = test::temp_dir() + "/dlrm-plan";
  workloads::WorkloadOptions o;
  o.name = "dlrm";
  o.out_dir = dir;
  o.warmup = 0;
  o.steps = 1;
  o.batch = 4;
  o.dim = 8;
  o.hidden = 16;
  o.table_rows = {300, 50, 7};
  o.table_lookups = {2, 5, 1};
  o.shards = {0, 0, 0};
  const workloads::CaptureReport rep = workloads::capture_workload(o);
  EXPECT_NE(rep.description.find("tables 3 x 7..300 x 8, 1..5 lookups"), std::string::npos) << rep.description;
  EXPECT_NE(rep.description.find("shards 0,0,0"), std::string::npos) << rep.description;
  const TraceSet set = load_traces({dir});
  std::multiset<std::pair<int64_t, int64_t>> bags;  // (weight rows, indices)
  const Trace& t = set.ranks[0];
  for (uint32_t n : ops_named(t, "aten::embedding_bag"))
    bags.emplace(t.dims(input_tensor(t, n, 0))[0], t.dims(input_tensor(t, n, 1))[0]);
  EXPECT_EQ(bags, (std::multiset<std::pair<int64_t, int64_t>>{{300, 4 * 2}, {50, 4 * 5}, {7, 4 * 1}}));
  const std::string m = workloads::manifest_json(o, {rep}, 1);
  EXPECT_NE(m.find("\"shards\": ["), std::string::npos) << m;

  auto refused = [](const workloads::WorkloadOptions& w, int world) -> std::string {
    try {
      workloads::check_options(w, world);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  workloads::WorkloadOptions bad = o;
  bad.table_lookups = {2, 5};
  EXPECT_NE(refused(bad, 1).find("--table-lookups has 2 entries for 3 tables"), std::string::npos) << refused(bad, 1);
  bad = o;
  bad.table_rows = {300, 0, 7};
  EXPECT_NE(refused(bad, 1).find("--table-rows: table 1 has 0, not a positive count"), std::string::npos);
  bad = o;
  bad.shards = {0, 2, 1};
  EXPECT_NE(refused(bad, 2).find("--shards: table 1 has 2, not a rank of the 2 launched"), std::string::npos);
  EXPECT_EQ(refused(o, 2), "");  // 3 tables over 2 ranks: a plan may place them unevenly
  bad = o;
  bad.shards.clear();
  EXPECT_NE(refused(bad, 2).find("or --shards must place each table"), std::string::npos) << refused(bad, 2);
  bad = {};
  bad.shards = {0};
  EXPECT_NE(refused(bad, 1).find("are dlrm's"), std::string::npos) << refused(bad, 1);
  // A size only another workload reads is refused, not ignored.
  bad = {};
  bad.tables = 4;  // mlp
  EXPECT_EQ(refused(bad, 1), "workload 'mlp': --tables is not one of its sizes (--batch --hidden --layers)");
  bad = o;
  bad.layers = 3;
  EXPECT_NE(refused(bad, 1).find("'dlrm': --layers is not one of its sizes"), std::string::npos) << refused(bad, 1);
  bad = {};
  bad.name = "gpt";
  bad.rows = 10;
  EXPECT_NE(refused(bad, 1).find("'gpt': --rows is not one of its sizes"), std::string::npos) << refused(bad, 1);
  bad.rows = 0;
  bad.seq = 16;
  bad.layers = 1;
  EXPECT_EQ(refused(bad, 1), "");
  bad = o;
  bad.table_lookups = {2, int64_t{1} << 62, 1};  // the indices' count would overflow
  EXPECT_NE(refused(bad, 1).find("table 1: batch 4 x 1 ranks x"), std::string::npos) << refused(bad, 1);
}

// Capture names and sizes tensors' dtypes from reprise/common/dtype.h: for every type this LibTorch has, the
// table must say what c10 itself would (the ET type string is c10's type name).
TEST(Capture, DtypeTableAgreesWithC10) {
  int checked = 0;
  for (const Dtype& d : dtypes()) {
    if (d.scalar_type >= static_cast<int>(c10::ScalarType::NumOptions)) continue;
    auto st = static_cast<c10::ScalarType>(d.scalar_type);
    auto name = c10::scalarTypeToTypeMeta(st).name();
    EXPECT_EQ(std::string(name.data(), name.size()), d.et_name) << d.name;
    EXPECT_EQ(static_cast<int>(c10::elementSize(st)), d.itemsize) << d.name;
    EXPECT_EQ(std::string_view(c10::toString(st)), d.name);
    ++checked;
  }
  EXPECT_GE(checked, 13);
}

}  // namespace
}  // namespace reprise
