// The Chakra export: node types, work and sizes, every dependency kind, file naming, and the decoder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "reprise/generators/generate.h"
#include "reprise/predict/chakra.h"
#include "reprise/predict/op_work.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/write.h"
#include "test_util.h"

namespace reprise::predict {
namespace {

using Ids = std::vector<uint64_t>;

Value tensor(TraceBuilder& b, std::vector<int64_t> shape) {
  TensorSpec s;
  s.id = b.next_id();
  s.storage_id = s.id;
  s.shape = std::move(shape);
  return b.tensor(s);
}

// record_param_comms as PyTorch 2.x writes it: [tensors, seq, (pg name, desc), rank, name, in splits, out splits,
// global rank start, stride, group size], with the 1.1.0 attrs.
void record_param_comms(TraceBuilder& b, const std::string& name, int64_t seq, const std::vector<Value>& tensors,
                        int64_t elems, int64_t parent, int64_t rank = 0, int64_t out_elems = -1) {
  std::vector<Value> in;
  if (!tensors.empty()) in.push_back(b.list(tensors));
  for (Value v : {b.integer(seq), b.tuple({b.string("0"), b.string("default_pg")}), b.integer(rank), b.string(name),
                  b.list({}), b.list({}), b.integer(0), b.integer(1), b.integer(2)})
    in.push_back(v);
  b.op("record_param_comms", in, tensors.empty() ? std::vector<Value>{} : std::vector<Value>{b.list(tensors)}, parent);
  b.add_attr("collective_name", "string", b.string(name));
  b.add_attr("dtype", "string", b.string("Float"));
  b.add_attr("in_msg_nelems", "uint64", b.integer(elems));
  b.add_attr("out_msg_nelems", "uint64", b.integer(out_elems >= 0 ? out_elems : elems));
  b.add_attr("pg_name", "string", b.string("0"));
  b.add_attr("pg_size", "uint64", b.integer(2));
}

// Each node's deps name earlier nodes of the file, at most once over data and ctrl, ascending; ids increase.
void expect_acyclic(const ChakraTrace& g) {
  std::set<uint64_t> seen;
  uint64_t last = 0;
  for (const ChakraNode& n : g.nodes) {
    EXPECT_TRUE(seen.empty() || n.id > last) << "node " << n.id << " after " << last;
    std::set<uint64_t> deps;
    for (const Ids* list : {&n.data_deps, &n.ctrl_deps}) {
      EXPECT_TRUE(std::is_sorted(list->begin(), list->end())) << "node " << n.id;
      for (uint64_t d : *list) {
        EXPECT_TRUE(seen.count(d)) << "node " << n.id << " depends on " << d << ", not an earlier node";
        EXPECT_TRUE(deps.insert(d).second) << "node " << n.id << " lists " << d << " twice";
      }
    }
    seen.insert(n.id);
    last = n.id;
  }
}

const ChakraNode& node(const ChakraTrace& g, int64_t id) {
  for (const ChakraNode& n : g.nodes)
    if (n.id == static_cast<uint64_t>(id)) return n;
  throw std::runtime_error("no node " + std::to_string(id) + " in the export");
}

// A matmul chain, its output all_reduced asynchronously and waited on, ops after the wait, and a host sync.
struct SmallStep {
  int64_t before, mm1, mm2, ar, after_wait, relu_y, item, after_item;
  Trace trace;
  SmallStep() {
    TraceBuilder b;
    b.roots();
    before = b.op("aten::zeros(int[] size) -> Tensor", {b.list({b.integer(4)})}, {tensor(b, {4})});
    b.set_parent(b.annotation("ProfilerStep#3"));
    Value x = tensor(b, {64, 128}), w1 = tensor(b, {128, 256}), h = tensor(b, {64, 256});
    Value w2 = tensor(b, {256, 32}), y = tensor(b, {64, 32});
    mm1 = b.op("aten::mm(Tensor self, Tensor mat2) -> Tensor", {x, w1}, {h});
    mm2 = b.op("aten::mm(Tensor self, Tensor mat2) -> Tensor", {h, w2}, {y});
    ar = b.op("c10d::allreduce_", {b.list({y})}, {});
    record_param_comms(b, "allreduce", 7, {y}, 64 * 32, ar);
    const int64_t wait = b.op("c10d::wait", {}, {});
    record_param_comms(b, "wait", 7, {}, 0, wait);
    Value x2 = tensor(b, {16}), r2 = tensor(b, {16});
    after_wait = b.op("aten::relu(Tensor self) -> Tensor", {x2}, {r2});
    Value r3 = tensor(b, {64, 32});
    relu_y = b.op("aten::relu(Tensor self) -> Tensor", {y}, {r3});
    item = b.op("aten::item(Tensor self) -> Scalar", {r3}, {b.real(0.5)});
    Value x4 = tensor(b, {8}), r4 = tensor(b, {8});
    after_item = b.op("aten::relu(Tensor self) -> Tensor", {x4}, {r4});
    trace = b.finish();
  }
};

TEST(ChakraExport, SmallStepNodesWorkAndDependencies) {
  SmallStep s;
  const ChakraTrace g = build_chakra(s.trace, 0);
  ASSERT_EQ(g.nodes.size(), 7u);  // the op before the step, the wait and the record_param_comms are not nodes
  for (const ChakraNode& n : g.nodes) EXPECT_NE(n.id, static_cast<uint64_t>(s.before));
  expect_acyclic(g);

  const ChakraNode& mm1 = node(g, s.mm1);
  EXPECT_EQ(mm1.name, "aten::mm");
  EXPECT_EQ(mm1.type, ChakraNodeType::Comp);
  ASSERT_TRUE(mm1.attr("num_ops"));
  EXPECT_EQ(std::get<int64_t>(*mm1.attr("num_ops")), 2 * 64 * 256 * 128);
  EXPECT_EQ(std::get<uint64_t>(*mm1.attr("tensor_size")), 4u * (64 * 128 + 128 * 256 + 64 * 256));
  EXPECT_EQ(std::get<bool>(*mm1.attr("is_cpu_op")), false);
  EXPECT_EQ(std::get<std::string>(*mm1.attr("dtype")), "Float");
  EXPECT_EQ(mm1.data_deps, Ids{});
  EXPECT_EQ(mm1.ctrl_deps, Ids{});

  const ChakraNode& mm2 = node(g, s.mm2);
  EXPECT_EQ(mm2.int_attr("num_ops"), 2 * 64 * 32 * 256);
  EXPECT_EQ(mm2.data_deps, Ids{uint64_t(s.mm1)});  // h; host order is implied, so not repeated in ctrl_deps
  EXPECT_EQ(mm2.ctrl_deps, Ids{});

  const ChakraNode& ar = node(g, s.ar);
  EXPECT_EQ(ar.name, "c10d::allreduce_");
  EXPECT_EQ(ar.type, ChakraNodeType::CommColl);
  EXPECT_EQ(std::get<int64_t>(*ar.attr("comm_type")), static_cast<int64_t>(ChakraCommType::AllReduce));
  EXPECT_EQ(std::get<int64_t>(*ar.attr("comm_size")), 64 * 32 * 4);
  EXPECT_EQ(std::get<std::string>(*ar.attr("pg_name")), "0");
  EXPECT_EQ(ar.data_deps, Ids{uint64_t(s.mm2)});  // y

  // The op right after the wait depends on the collective, though it reads nothing it wrote.
  const ChakraNode& after_wait = node(g, s.after_wait);
  EXPECT_EQ(after_wait.data_deps, Ids{uint64_t(s.ar)});
  EXPECT_EQ(after_wait.ctrl_deps, Ids{});
  const ChakraNode& relu_y = node(g, s.relu_y);
  EXPECT_EQ(relu_y.data_deps, Ids{uint64_t(s.ar)});  // y, as the all_reduce left it
  EXPECT_EQ(relu_y.ctrl_deps, Ids{uint64_t(s.after_wait)});
  EXPECT_EQ(node(g, s.item).data_deps, Ids{uint64_t(s.relu_y)});
  // A host sync holds the thread: the next op depends on it.
  EXPECT_EQ(node(g, s.after_item).data_deps, Ids{uint64_t(s.item)});
  EXPECT_EQ(node(g, s.after_item).ctrl_deps, Ids{});

  const ChakraFile f = count_chakra(g);
  EXPECT_EQ(f.comp, 6u);
  EXPECT_EQ(f.comm, 1u);
  EXPECT_EQ(f.data_deps, 6u);
  EXPECT_EQ(f.ctrl_deps, 1u);
  EXPECT_EQ(f.skipped, 0u);
}

TEST(ChakraExport, SummaryCountsTypesDepsAndCollectives) {
  SmallStep s;
  std::ostringstream out;
  print_chakra(out, build_chakra(s.trace, 0));
  const std::string text = out.str();
  EXPECT_NE(text.find("nodes       7 (COMM_COLL_NODE 1, COMP_NODE 6)"), std::string::npos) << text;
  EXPECT_NE(text.find("deps        6 data, 1 ctrl; longest chain 7 nodes"), std::string::npos) << text;
  EXPECT_NE(text.find("ALL_REDUCE x1, 8192 bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("steps = ProfilerStep#3"), std::string::npos) << text;
}

TEST(ChakraExport, CtrlAsDataMovesHostOrderIntoDataDeps) {
  SmallStep s;
  ChakraOptions o;
  o.ctrl_as_data = true;
  const ChakraTrace g = build_chakra(s.trace, 0, o);
  expect_acyclic(g);
  EXPECT_EQ(node(g, s.relu_y).data_deps, (Ids{uint64_t(s.ar), uint64_t(s.after_wait)}));
  EXPECT_EQ(node(g, s.relu_y).ctrl_deps, Ids{});
  for (const ChakraNode& n : g.nodes) EXPECT_TRUE(n.ctrl_deps.empty());
}

TEST(ChakraExport, CommSizeIsWhatTheRankPutsIn) {
  TraceBuilder b;
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#0"));
  Value chunk = tensor(b, {64}), whole = tensor(b, {128}), part = tensor(b, {64});
  // Over 2 ranks: all_gather 64 -> 128 elements, reduce_scatter 128 -> 64, all_to_all 128 -> 128.
  const int64_t ag = b.op("c10d::_allgather_base_", {whole, chunk}, {});
  record_param_comms(b, "_allgather_base", 1, {chunk}, 64, ag, 0, 128);
  const int64_t rs = b.op("c10d::_reduce_scatter_base_", {part, whole}, {});
  record_param_comms(b, "_reduce_scatter_base", 2, {whole}, 128, rs, 0, 64);
  const int64_t a2a = b.op("c10d::alltoall_base_", {whole, whole}, {});
  record_param_comms(b, "all_to_all", 3, {whole}, 128, a2a);
  const ChakraTrace g = build_chakra(b.finish(), 0);
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(node(g, ag).int_attr("comm_type"), static_cast<int64_t>(ChakraCommType::AllGather));
  EXPECT_EQ(node(g, ag).int_attr("comm_size"), 64 * 4);
  EXPECT_EQ(node(g, rs).int_attr("comm_type"), static_cast<int64_t>(ChakraCommType::ReduceScatter));
  EXPECT_EQ(node(g, rs).int_attr("comm_size"), 128 * 4);
  EXPECT_EQ(node(g, a2a).int_attr("comm_type"), static_cast<int64_t>(ChakraCommType::AllToAll));
  EXPECT_EQ(node(g, a2a).int_attr("comm_size"), 128 * 4);
}

TEST(ChakraExport, P2PSendAndRecvCarryPeersAndTags) {
  TraceBuilder b;
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#0"));
  Value a = tensor(b, {32}), c = tensor(b, {32});
  // PyTorch records the peer where collectives record the caller's rank: rank 1 sends to 3, then receives from 3.
  const int64_t send = b.op("c10d::send", {b.list({a})}, {});
  record_param_comms(b, "send", 1, {a}, 32, send, 3);
  const int64_t recv = b.op("c10d::recv_", {b.list({c})}, {});
  record_param_comms(b, "recv", 2, {c}, 32, recv, 3);
  const int64_t send2 = b.op("c10d::send", {b.list({a})}, {});
  record_param_comms(b, "send", 3, {a}, 32, send2, 3);
  const ChakraTrace g = build_chakra(b.finish(), 1);
  ASSERT_EQ(g.nodes.size(), 3u);
  const ChakraNode& s = node(g, send);
  EXPECT_EQ(s.type, ChakraNodeType::CommSend);
  EXPECT_EQ(std::get<int32_t>(*s.attr("comm_src")), 1);
  EXPECT_EQ(std::get<int32_t>(*s.attr("comm_dst")), 3);
  EXPECT_EQ(std::get<int32_t>(*s.attr("comm_tag")), 0);
  EXPECT_EQ(std::get<int64_t>(*s.attr("comm_size")), 32 * 4);
  const ChakraNode& r = node(g, recv);
  EXPECT_EQ(r.type, ChakraNodeType::CommRecv);
  EXPECT_EQ(r.int_attr("comm_src"), 3);
  EXPECT_EQ(r.int_attr("comm_dst"), 1);
  EXPECT_EQ(r.int_attr("comm_tag"), 0);
  EXPECT_EQ(node(g, send2).int_attr("comm_tag"), 1);  // the second message from 1 to 3
  EXPECT_EQ(node(g, send2).data_deps, Ids{});         // a is only read
}

TEST(ChakraExport, P2PFromBeforePyTorch2NamesThePeerOfAPair) {
  // Older versions recorded the caller's own rank (1) for a send: in a group of two the peer is the other rank.
  TraceBuilder b;
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#0"));
  Value a = tensor(b, {32});
  const int64_t send = b.op("c10d::send", {b.list({a})}, {});
  record_param_comms(b, "send", 1, {a}, 32, send, 1);
  const ChakraTrace g = build_chakra(b.finish(), 1);
  EXPECT_EQ(node(g, send).int_attr("comm_src"), 1);
  EXPECT_EQ(node(g, send).int_attr("comm_dst"), 0);
}

TEST(ChakraExport, WaitTensorWaitsForWhatWroteItsTensor) {
  TraceBuilder b;
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#0"));
  Value x = tensor(b, {128}), y = tensor(b, {128});
  const int64_t ar = b.op("_c10d_functional::all_reduce(Tensor input, str reduce_op, str group_name) -> Tensor",
                          {x, b.string("sum"), b.string("0")}, {y});
  record_param_comms(b, "allreduce", 1, {y}, 128, ar);
  b.op("_c10d_functional::wait_tensor(Tensor tensor) -> Tensor", {y}, {y});  // no record_param_comms under it
  const int64_t after = b.op("aten::relu(Tensor self) -> Tensor", {tensor(b, {4})}, {tensor(b, {4})});
  const ChakraTrace g = build_chakra(b.finish(), 0);
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(node(g, ar).int_attr("comm_type"), static_cast<int64_t>(ChakraCommType::AllReduce));
  EXPECT_EQ(node(g, after).data_deps, Ids{uint64_t(ar)});
  EXPECT_EQ(count_chakra(g).skipped, 0u);
}

TEST(ChakraExport, SameStreamOrderAndThreadsAreCtrlDeps) {
  TraceBuilder b;
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#0"));
  auto on = [&](int64_t stream) {
    const int64_t id = b.op("aten::relu(Tensor self) -> Tensor", {tensor(b, {4})}, {tensor(b, {4})});
    b.add_attr("stream", "int", b.integer(stream));
    return id;
  };
  const int64_t s7a = on(7), s9 = on(9), s7b = on(7);
  // The autograd thread: its own host order, and stream 7 like the main thread's ops.
  NodeSpec bw;
  bw.parent = b.annotation("## backward ##");
  bw.name = "aten::relu";
  bw.tid = 2;
  bw.inputs = {{tensor(b, {4}), "Tensor(float)"}};
  bw.outputs = {{tensor(b, {4}), "Tensor(float)"}};
  bw.id = b.next_id();
  b.add_node(bw);
  b.add_attr("stream", "int", b.integer(7));
  const ChakraTrace g = build_chakra(b.finish(), 0);
  ASSERT_EQ(g.nodes.size(), 4u);
  expect_acyclic(g);
  EXPECT_EQ(node(g, s9).ctrl_deps, Ids{uint64_t(s7a)});                   // host order only
  EXPECT_EQ(node(g, s7b).ctrl_deps, (Ids{uint64_t(s7a), uint64_t(s9)}));  // stream 7, and host order
  EXPECT_EQ(node(g, bw.id).ctrl_deps, Ids{uint64_t(s7b)});                // stream 7; first op of its thread
  for (const ChakraNode& n : g.nodes) EXPECT_TRUE(n.data_deps.empty()) << n.id;
}

TEST(ChakraExport, FileRoundTripKeepsEveryField) {
  if (!chakra_available()) GTEST_SKIP() << "built without protobuf";
  SmallStep s;
  const ChakraTrace g = build_chakra(s.trace, 0);
  const std::string path = test::temp_dir() + "/small.0.et";
  write_chakra_file(g, path);
  const ChakraTrace back = read_chakra(path);
  EXPECT_EQ(back.version, "0.0.4");
  EXPECT_EQ(std::get<int64_t>(back.metadata.at("rank")), 0);
  EXPECT_EQ(std::get<std::string>(back.metadata.at("steps")), "ProfilerStep#3");
  ASSERT_EQ(back.nodes.size(), g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    EXPECT_EQ(back.nodes[i].id, g.nodes[i].id);
    EXPECT_EQ(back.nodes[i].name, g.nodes[i].name);
    EXPECT_EQ(back.nodes[i].type, g.nodes[i].type);
    EXPECT_EQ(back.nodes[i].data_deps, g.nodes[i].data_deps);
    EXPECT_EQ(back.nodes[i].ctrl_deps, g.nodes[i].ctrl_deps);
    EXPECT_EQ(back.nodes[i].attrs, g.nodes[i].attrs) << "node " << g.nodes[i].id;
  }
}

TEST(ChakraExport, TwoRanksToPerRankFiles) {
  if (!chakra_available()) GTEST_SKIP() << "built without protobuf";
  TraceSet set;
  for (int r = 0; r < 2; ++r) {
    SyntheticSpec sp;
    sp.world_size = 2;
    sp.rank = r;
    set.ranks.push_back(synthetic_trace(sp));
  }
  const std::string dir = test::temp_dir() + "/chakra-2";
  ChakraOptions all;
  all.all_steps = true;
  const std::vector<ChakraFile> files = convert_to_chakra(set, dir, "rank", all);
  ASSERT_EQ(files.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const std::string path = dir + "/rank." + std::to_string(r) + ".et";
    EXPECT_EQ(files[r].path, path);
    ASSERT_TRUE(std::filesystem::exists(path));
    const ChakraTrace g = read_chakra(path);
    expect_acyclic(g);
    EXPECT_EQ(std::get<int64_t>(g.metadata.at("rank")), r);
    // 2 steps x 4 layers of gradient all_reduce, each of a 256x256 float gradient
    size_t comm = 0;
    for (const ChakraNode& n : g.nodes) {
      if (n.type == ChakraNodeType::CommColl) {
        ++comm;
        EXPECT_EQ(n.int_attr("comm_type"), static_cast<int64_t>(ChakraCommType::AllReduce));
        EXPECT_EQ(n.int_attr("comm_size"), 256 * 256 * 4);
        ASSERT_FALSE(n.data_deps.empty()) << "an all_reduce waits for its gradient";
      } else {
        ASSERT_EQ(n.type, ChakraNodeType::Comp);
        const uint32_t i = set.ranks[r].find(static_cast<int64_t>(n.id));
        ASSERT_NE(i, kNone32);
        EXPECT_EQ(n.int_attr("num_ops"), static_cast<int64_t>(op_work(set.ranks[r], i).flops)) << n.name;
      }
    }
    EXPECT_EQ(comm, 8u);
    EXPECT_EQ(files[r].comm, 8u);
    EXPECT_EQ(files[r].nodes, g.nodes.size());
  }
  // The default is the first complete step only.
  const std::vector<ChakraFile> one = convert_to_chakra(set, dir, "one");
  EXPECT_EQ(one[0].comm, 4u);
  EXPECT_EQ(read_chakra(dir + "/one.1.et").nodes.size(), one[1].nodes);
}

TEST(ChakraExport, BundleGivesEveryWorldRankItsFile) {
  if (!chakra_available()) GTEST_SKIP() << "built without protobuf";
  const std::string job = test::temp_dir() + "/chakra-job";
  std::filesystem::create_directories(job);
  for (int r = 0; r < 4; ++r) {
    SyntheticSpec sp;
    sp.world_size = 4;
    sp.rank = r;
    sp.layers = 2;
    write_et(synthetic_trace(sp), job + "/rank-" + std::to_string(r) + ".et.json.gz");
  }
  gen::GenerateOptions go;
  go.out = test::temp_dir() + "/chakra-bundle";
  const gen::GenerateReport rep = gen::generate_from_trace(job, go);
  ASSERT_EQ(rep.bundle.roles.size(), 1u) << "four data-parallel ranks share one role";
  const std::string out = test::temp_dir() + "/chakra-bundle-et";
  const std::vector<ChakraFile> files = convert_to_chakra(go.out, out, "dp");
  ASSERT_EQ(files.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    const ChakraTrace g = read_chakra(out + "/dp." + std::to_string(r) + ".et");
    EXPECT_EQ(std::get<int64_t>(g.metadata.at("rank")), r);
    EXPECT_EQ(files[r].comm, 2u);  // one all_reduce per layer in the first step
    EXPECT_EQ(g.nodes.size(), files[r].nodes);
  }
  // The synthetic trace's default group lists no ranks: it spans the world.
  std::ifstream groups(out + "/dp.json");
  ASSERT_TRUE(groups) << "no communicator group file";
  std::stringstream text;
  text << groups.rdbuf();
  EXPECT_EQ(nlohmann::json::parse(text.str()), nlohmann::json::parse(R"({"0": [0, 1, 2, 3]})"));
}

TEST(ChakraExport, SharedResnetHasACommNodePerCollective) {
  if (!chakra_available()) GTEST_SKIP() << "built without protobuf";
  REPRISE_NEED_SHARED(path, "param/resnet_et.json.gz");
  const TraceSet set = load_traces({path});
  ASSERT_EQ(set.ranks.size(), 1u);
  const Trace& t = set.ranks[0];
  ChakraOptions all;
  all.all_steps = true;
  const std::string out = test::temp_dir() + "/chakra-resnet";
  const std::vector<ChakraFile> files = convert_to_chakra(set, out, "resnet", all);
  ASSERT_EQ(files.size(), 1u);
  const ChakraTrace g = read_chakra(files[0].path);
  expect_acyclic(g);
  size_t collectives = 0;
  int64_t coll_bytes = 0;
  for (const Collective& c : t.collectives)
    if (!c.is_wait) {
      ++collectives;
      coll_bytes += c.in_bytes();
    }
  size_t comm = 0;
  int64_t comm_bytes = 0;
  for (const ChakraNode& n : g.nodes)
    if (n.type == ChakraNodeType::CommColl) {
      ++comm;
      comm_bytes += n.int_attr("comm_size");
    }
  EXPECT_EQ(collectives, 21u);
  EXPECT_EQ(comm, collectives);
  EXPECT_EQ(comm_bytes, coll_bytes);
  EXPECT_GT(files[0].data_deps, files[0].nodes / 2) << "a real model's ops read what earlier ops wrote";
}

TEST(ChakraExport, BadOutputFolderNamesThePath) {
  TraceSet set;
  set.ranks.push_back(synthetic_trace({}));
  const std::string file = test::write_file(test::temp_dir() + "/not-a-folder", "x");
  const std::string out = file + "/et";
  try {
    convert_to_chakra(set, out, "workload");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(out), std::string::npos) << e.what();
  }
}

TEST(ChakraExport, WithoutProtobufFilesFailWithAClearError) {
  if (chakra_available()) GTEST_SKIP() << "built with protobuf";
  SmallStep s;
  const std::string path = test::temp_dir() + "/np.0.et";
  try {
    write_chakra(s.trace, 0, path);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": cannot write a Chakra trace: Reprise was built without protobuf"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(read_chakra(path), UserError);
}

TEST(ChakraExport, DecoderRejectsWhatIsNotChakra) {
  if (!chakra_available()) GTEST_SKIP() << "built without protobuf";
  const std::string path = test::write_file(test::temp_dir() + "/junk.et", "hello, this is text");
  try {
    read_chakra(path);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_chakra(test::temp_dir() + "/missing.et"), UserError);

  // A node whose name is not UTF-8: one line saying so, and nothing of protobuf's own on stderr.
  const std::string bad = test::write_file(test::temp_dir() + "/bad.et", std::string("\x03\x0a\x01"
                                                                                     "1"
                                                                                     "\x03\x12\x01\xff",
                                                                                     8));
  testing::internal::CaptureStderr();
  const std::string e = test::user_error([&] { read_chakra(bad); });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(e.find(bad + ": byte 5: not a Chakra Node message (String field 'reprise.chakra.Node.name' contains "
                         "invalid UTF-8 data)"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_EQ(err, "");
}

}  // namespace
}  // namespace reprise::predict
