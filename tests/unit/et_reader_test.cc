// Schema quirks of the PyTorch ET layouts, each on a small hand-written trace.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <regex>

#include "reprise/common/dtype.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"
#include "test_util.h"

namespace reprise {
namespace {

// Flat 1.0.1 layout (PARAM's linear_et and DLRM traces use it): 5-tuple tensors without device, "<None>".
const char* kFlat = R"J({
  "schema": "1.0.1", "pid": 7, "time": "2023-09-07 16:09:59", "start_ts": 10,
  "nodes": [
    {"name": "aten::add", "id": 5, "rf_id": 3, "parent": 2, "fw_parent": 0, "seq_id": 11, "scope": 0, "tid": 1,
     "fw_tid": 0, "op_schema": "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
     "inputs": [[3,4,0,6,4],[6,7,2,6,4],1], "input_shapes": [[2,3],[2,3],[]],
     "input_types": ["Tensor(float)","Tensor(float)","Int"],
     "outputs": [[8,9,0,6,4]], "output_shapes": [[2,3]], "output_types": ["Tensor(float)"]},
    {"name": "aten::clamp", "id": 10, "rf_id": 4, "parent": 2, "fw_parent": 0, "seq_id": -1, "scope": 0, "tid": 1,
     "fw_tid": 0, "op_schema": "aten::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor",
     "inputs": [[8,9,0,6,4],"<None>","inf"], "input_shapes": [[2,3],[],[]],
     "input_types": ["Tensor(float)","None","Double"],
     "outputs": [[11,12,0,6,4]], "output_shapes": [[2,3]], "output_types": ["Tensor(float)"]},
    {"name": "[pytorch|profiler|execution_graph|thread]", "id": 2, "rf_id": 0, "parent": 1, "fw_parent": 0,
     "seq_id": -1, "scope": 7, "tid": 1, "fw_tid": 0, "op_schema": "",
     "inputs": [], "input_shapes": [], "input_types": [], "outputs": [], "output_shapes": [], "output_types": []},
    {"name": "[pytorch|profiler|execution_graph|process]", "id": 1, "rf_id": 0, "parent": 1, "fw_parent": 0,
     "seq_id": -1, "scope": 7, "tid": 0, "fw_tid": 0, "op_schema": "",
     "inputs": [], "input_shapes": [], "input_types": [], "outputs": [], "output_shapes": [], "output_types": []}
  ],
  "finish_ts": 20
})J";

TEST(EtReader, FlatLayout101) {
  Trace t = read_et_text(kFlat, "flat.json");
  EXPECT_EQ(t.schema, "1.0.1");
  ASSERT_EQ(t.nodes.size(), 4u);
  // sorted by id; parents resolved
  EXPECT_EQ(t.nodes[0].id, 1);
  EXPECT_EQ(t.nodes[0].kind, NodeKind::Root);
  EXPECT_EQ(t.nodes[1].kind, NodeKind::Thread);
  const Node& add = t.nodes[2];
  EXPECT_EQ(t.name(add), "aten::add");
  EXPECT_EQ(add.kind, NodeKind::Operator);
  EXPECT_EQ(add.parent, 1u);
  EXPECT_EQ(add.rf_id, 3);
  EXPECT_EQ(add.seq_id, 11);
  ASSERT_EQ(add.num_inputs, 3u);
  const Value& a = t.inputs(add)[0];
  ASSERT_EQ(a.kind, ValueKind::Tensor);
  const Tensor& ta = t.tensors[a.ref];
  EXPECT_FALSE(ta.has_device);  // 5-tuple
  EXPECT_FALSE(ta.has_strides);
  EXPECT_EQ(t.str(ta.dtype), "float");
  EXPECT_EQ(ta.numel, 6);
  ASSERT_EQ(ta.rank, 2);
  EXPECT_EQ(t.dims(ta)[0], 2);
  EXPECT_EQ(t.strides(ta), (std::vector<int64_t>{3, 1}));  // contiguous when not recorded
  const Tensor& tb = t.tensors[t.inputs(add)[1].ref];
  EXPECT_EQ(tb.offset, 2);
  EXPECT_EQ(t.inputs(add)[2].kind, ValueKind::Int);
  const Node& clamp = t.nodes[3];
  EXPECT_EQ(t.inputs(clamp)[1].kind, ValueKind::None);
  ASSERT_EQ(t.inputs(clamp)[2].kind, ValueKind::Double);
  EXPECT_TRUE(std::isinf(t.inputs(clamp)[2].d));
  // the output of add and the input of clamp are one tensor in the table
  EXPECT_EQ(t.outputs(add)[0].ref, t.inputs(clamp)[0].ref);
  ASSERT_EQ(t.metadata.size(), 4u);
  EXPECT_EQ(t.metadata[0].first, "pid");
}

// 1.1.1 layout with strides, attrs, nested lists, tuples, devices, and a strides list shorter than the values.
const char* kAttrs = R"J({
  "schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "x", "start_ts": 0,
  "nodes": [
    {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1,
     "inputs": {"values": [], "shapes": [], "types": [], "strides": []},
     "outputs": {"values": [], "shapes": [], "types": [], "strides": []}, "attrs": []},
    {"id": 4, "name": "aten::cat", "ctrl_deps": 1,
     "inputs": {"values": [[[10,20,0,4,2,"cuda:0"],[11,21,4,4,2,"cuda:0"]], 0, "cuda:0", [[1,2],[3]], ["a","b"]],
                "shapes": [[[2,2],[2,2]], [], [], [[[],[]],[[]]], [[],[]]],
                "types": ["GenericList[Tensor(c10::Half),Tensor(c10::Half)]", "Int", "Device",
                          "GenericList[GenericList[Int,Int],GenericList[Int]]", "Tuple[String,String]"],
                "strides": [[[1,2],[2,1]]]},
     "outputs": {"values": [[12,22,0,8,2,"cuda:0"]], "shapes": [[4,2]], "types": ["Tensor(c10::Half)"],
                 "strides": [[2,1]]},
     "attrs": [{"name": "rf_id", "type": "uint64", "value": 9}, {"name": "seq_id", "type": "int64", "value": -1},
               {"name": "op_schema", "type": "string", "value": "aten::cat(Tensor[] tensors, int dim=0) -> Tensor"},
               {"name": "tensor_range", "type": "string", "value": "{\"5\":[0,9]}"},
               {"name": "custom", "type": "string", "value": "kept"}]}
  ]
})J";

TEST(EtReader, AttrsLayoutWithStridesListsTuples) {
  Trace t = read_et_text(kAttrs, "attrs.json");
  ASSERT_EQ(t.nodes.size(), 2u);
  const Node& cat = t.nodes[1];
  EXPECT_EQ(cat.rf_id, 9);
  EXPECT_TRUE(cat.fields & kHasOpSchema);
  EXPECT_FALSE(cat.fields & kHasScope);
  EXPECT_EQ(t.str(cat.tensor_range), "{\"5\":[0,9]}");
  ASSERT_NE(t.attr(cat, "custom"), nullptr);
  EXPECT_EQ(t.str(t.attr(cat, "custom")->ref), "kept");
  auto in = t.inputs(cat);
  ASSERT_EQ(in.size(), 5u);
  ASSERT_EQ(in[0].kind, ValueKind::List);
  auto ts = t.items(in[0]);
  ASSERT_EQ(ts.size(), 2u);
  const Tensor& t0 = t.tensors[ts[0].ref];
  const Tensor& t1 = t.tensors[ts[1].ref];
  EXPECT_EQ(t.str(t0.dtype), "c10::Half");
  EXPECT_EQ(t.str(t0.device), "cuda:0");
  EXPECT_TRUE(t0.has_strides);
  EXPECT_EQ(t.strides(t0), (std::vector<int64_t>{1, 2}));  // a transposed view
  EXPECT_EQ(t1.offset, 4);
  EXPECT_EQ(in[2].kind, ValueKind::Device);
  ASSERT_EQ(in[3].kind, ValueKind::List);
  EXPECT_EQ(t.items(in[3])[0].kind, ValueKind::List);
  EXPECT_EQ(t.items(t.items(in[3])[0])[1].i, 2);
  EXPECT_EQ(in[4].kind, ValueKind::Tuple);
  EXPECT_EQ(t.str(t.input_types(cat)[4]), "Tuple[String,String]");
}

TEST(EtReader, ReusedTensorIdsWithOtherShapesAreDistinct) {
  std::string j = R"J({"schema": "1.0.3-chakra.0.0.4", "nodes": [
    {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1, "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []},
    {"id": 2, "name": "aten::relu", "ctrl_deps": 1, "inputs": {"values": [[5,6,0,4,4,"cpu"]], "shapes": [[4]], "types": ["Tensor(float)"]}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []},
    {"id": 3, "name": "aten::relu", "ctrl_deps": 1, "inputs": {"values": [[5,6,0,4,4,"cpu"]], "shapes": [[2,2]], "types": ["Tensor(float)"]}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []},
    {"id": 4, "name": "aten::relu", "ctrl_deps": 1, "inputs": {"values": [[5,6,0,4,4,"cpu"]], "shapes": [[4]], "types": ["Tensor(float)"]}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []}
  ]})J";
  Trace t = read_et_text(j, "reuse.json");
  ASSERT_EQ(t.tensors.size(), 2u);
  EXPECT_EQ(t.inputs(t.nodes[1])[0].ref, t.inputs(t.nodes[3])[0].ref);
  EXPECT_NE(t.inputs(t.nodes[1])[0].ref, t.inputs(t.nodes[2])[0].ref);
}

// record_param_comms across schemas: positional (1.0.1 with backend id, waits without a group),
// [seq, isP2P] tuples, and the 1.1.0 attrs.
TEST(EtReader, CollectivesAndWaits) {
  std::string j = R"J({"schema": "1.0.1", "nodes": [
    {"name": "[pytorch|profiler|execution_graph|process]", "id": 1, "parent": 1, "inputs": [], "input_types": [], "input_shapes": [], "outputs": [], "output_types": [], "output_shapes": []},
    {"name": "record_param_comms", "id": 2, "parent": 1,
     "inputs": [[10,11,0,6144,4,"cuda:0"], 147, 9459, 0, "all_to_allv", [768,768], [700,836]],
     "input_shapes": [[6144],[],[],[],[],[[],[]],[[],[]]],
     "input_types": ["Tensor(float)","Int","Int","Int","String","GenericList[Int,Int]","GenericList[Int,Int]"],
     "outputs": [[12,13,0,6144,4,"cuda:0"]], "output_shapes": [[6144]], "output_types": ["Tensor(float)"]},
    {"name": "record_param_comms", "id": 3, "parent": 1, "inputs": [147, 0, 0, "wait", [], []],
     "input_shapes": [[],[],[],[],[],[]], "input_types": ["Int","Int","Int","String","GenericList[]","GenericList[]"],
     "outputs": [], "output_shapes": [], "output_types": []},
    {"name": "record_param_comms", "id": 4, "parent": 1,
     "inputs": [[[20,21,0,8,8,"cuda:0"]], [5, true], ["1", "pp_group"], 1, "send", [], [], 0, 1, 2],
     "input_shapes": [[[8]],[[],[]],[[],[]],[],[],[],[],[],[],[]],
     "input_types": ["GenericList[Tensor(long int)]","Tuple[Int,Bool]","Tuple[String,String]","Int","String","GenericList[]","GenericList[]","Int","Int","Int"],
     "outputs": [], "output_shapes": [], "output_types": []}
  ]})J";
  Trace t = read_et_text(j, "comms.json");
  ASSERT_EQ(t.collectives.size(), 3u);
  const Collective& a2a = t.collectives[0];
  EXPECT_EQ(a2a.name, "all_to_allv");
  EXPECT_EQ(a2a.seq, 147);
  EXPECT_EQ(a2a.pg_name, "9459");
  EXPECT_EQ(a2a.dtype, "Float");
  EXPECT_EQ(a2a.in_elems, 6144);
  EXPECT_EQ(a2a.in_splits, (std::vector<int64_t>{768, 768}));
  EXPECT_EQ(a2a.out_splits, (std::vector<int64_t>{700, 836}));
  EXPECT_TRUE(a2a.is_async);
  const Collective& w = t.collectives[1];
  EXPECT_TRUE(w.is_wait);
  EXPECT_EQ(t.nodes[2].kind, NodeKind::Wait);
  EXPECT_TRUE(w.pg_name.empty());
  EXPECT_EQ(w.waits_for, 0);
  const Collective& send = t.collectives[2];
  EXPECT_EQ(send.name, "send");
  EXPECT_TRUE(send.p2p);
  EXPECT_EQ(send.seq, 5);
  EXPECT_EQ(send.pg_name, "1");
  EXPECT_EQ(send.pg_desc, "pp_group");
  EXPECT_EQ(send.pg_size, 2);
  EXPECT_EQ(send.global_rank_stride, 1);
  EXPECT_EQ(send.dtype, "Long");
  EXPECT_EQ(send.itemsize, 8);
}

TEST(EtReader, ProcessGroupsAndIterations) {
  std::string j = R"J({"schema": "1.1.0-chakra.0.0.4", "nodes": [
    {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1, "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []},
    {"id": 2, "name": "## process_group:init ##", "ctrl_deps": 1,
     "inputs": {"values": ["[{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cuda:nccl\", \"ranks\": [], \"group_size\": 4, \"group_count\": 2}, {\"pg_name\": \"1\", \"pg_desc\": \"tp\", \"backend_config\": \"cuda:nccl\", \"ranks\": [0, 1], \"group_size\": 2, \"group_count\": 2}]"], "shapes": [[]], "types": ["String"]},
     "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []},
    {"id": 3, "name": "ProfilerStep#12", "ctrl_deps": 1, "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": [{"name": "scope", "type": "uint64", "value": 7}]},
    {"id": 4, "name": "## forward ##", "ctrl_deps": 3, "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []}
  ]})J";
  Trace t = read_et_text(j, "pg.json");
  ASSERT_EQ(t.process_groups.size(), 2u);
  EXPECT_EQ(t.process_groups[1].desc, "tp");
  EXPECT_EQ(t.process_groups[1].ranks, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(t.process_groups[0].size, 4);
  ASSERT_EQ(t.iterations.size(), 2u);
  EXPECT_TRUE(t.iterations[0].profiler_step);
  EXPECT_EQ(t.iterations[0].step, 12);
  EXPECT_EQ(t.iterations[1].name, "## forward ##");
  EXPECT_EQ(t.nodes[2].kind, NodeKind::Annotation);
  ASSERT_EQ(t.children(t.nodes[2]).size(), 1u);
}

// A group no launch could have made is refused where the trace describes it, in one line naming the node.
TEST(EtReader, ImpossibleProcessGroupsAreRefused) {
  auto read_groups = [](const std::string& groups) {
    const std::string escaped = std::regex_replace(groups, std::regex("\""), "\\\"");
    read_et_text(
        R"J({"schema": "1.1.0-chakra.0.0.4", "nodes": [
      {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1, "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []},
      {"id": 2, "name": "## process_group:init ##", "ctrl_deps": 1, "inputs": {"values": [")J" +
            escaped +
            R"J("], "shapes": [[]], "types": ["String"]}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []}]})J",
        "pg.json");
  };
  EXPECT_NO_THROW(read_groups(R"([{"pg_name": "1", "ranks": [2, 0], "group_size": 2}])"));
  const std::pair<const char*, const char*> cases[] = {
      {R"([{"pg_name": "1", "ranks": [0, 1, 0], "group_size": 3}])",
       "pg.json: node 2: process group '1': rank 0 is "
       "listed twice"},
      {R"([{"pg_name": "0", "ranks": [], "group_size": -3}])", "process group '0': group_size -3 is negative"},
      {R"([{"pg_name": "2", "ranks": [-1, 0], "group_size": 2}])", "process group '2': rank -1 is negative"},
      {R"([{"pg_name": "3", "ranks": [0, 1], "group_size": 4}])", "group_size 4 but 2 ranks listed"},
  };
  for (const auto& [groups, says] : cases) {
    try {
      read_groups(groups);
      ADD_FAILURE() << groups << " was read";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

TEST(EtReader, UntaggedAndUnknownSchemas) {
  std::string untagged =
      R"J({"nodes": [{"name": "[pytorch|profiler|execution_graph|process]", "id": 1, "parent": 1, "inputs": [], "outputs": []}]})J";
  Trace t = read_et_text(untagged, "old.json");
  EXPECT_EQ(t.schema, "");
  EXPECT_EQ(t.nodes.size(), 1u);
  std::string future =
      R"J({"schema": "2.0.0", "nodes": [{"id": 1, "name": "x", "ctrl_deps": 1, "inputs": {"values": [1], "shapes": [[]], "types": ["Int"]}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []}]})J";
  std::vector<std::string> warnings;
  ReadOptions o;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  Trace f = read_et_text(future, "future.json", o);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("unknown ET schema \"2.0.0\""), std::string::npos);
  EXPECT_EQ(f.inputs(f.nodes[0])[0].i, 1);
}

// Reading in tiny pieces (every node boundary a cut) gives the same model as one piece.
TEST(EtReader, ChunkedParsingMatchesWhole) {
  ReadOptions tiny;
  tiny.chunk_bytes = 1;
  for (const char* text : {kFlat, kAttrs}) {
    Trace a = read_et_text(text, "a.json");
    Trace b = read_et_text(text, "b.json", tiny);
    EXPECT_EQ(test::model_difference(a, b), "");
  }
}

TEST(EtReader, KeysInAnyOrderAndUnicode) {
  std::string j = R"J({"nodes": [{"outputs": {"types": [], "values": [], "shapes": []}, "ctrl_deps": 1, "attrs": [],
    "inputs": {"types": ["String"], "shapes": [[]], "values": ["caf\u00e9 \"q\""]}, "name": "n\u00e4me", "id": 1}],
    "schema": "1.0.2-chakra.0.0.4"})J";
  Trace t = read_et_text(j, "order.json");
  EXPECT_EQ(t.schema, "1.0.2-chakra.0.0.4");
  EXPECT_EQ(t.name(t.nodes[0]), "n\xc3\xa4me");
  EXPECT_EQ(t.str(t.inputs(t.nodes[0])[0].ref), "caf\xc3\xa9 \"q\"");
  // and it survives a write and a read
  Trace back = read_et_text(et_json(t), "back.json");
  EXPECT_EQ(test::model_difference(t, back), "");
}

TEST(EtReader, RankFromName) {
  EXPECT_EQ(rank_from_name("dir/rank-3.json.gz"), 3);
  EXPECT_EQ(rank_from_name("rank_12.json"), 12);
  EXPECT_EQ(rank_from_name("a.tgz:dlrm_eg_5.json"), 5);
  EXPECT_EQ(rank_from_name("worker7_step_12.1694128201553.pt.trace.json"), 7);
  EXPECT_EQ(rank_from_name("resnet_et.json.gz"), -1);
}

// The four dtype tables (trace, comms, replay, capture) became reprise/common/dtype.h: every spelling each one
// accepted keeps its size.
TEST(Dtype, TraceSpellingsKeepTheirSizes) {
  const std::pair<const char*, int> trace_table[] = {
      {"float", 4},
      {"Float", 4},
      {"double", 8},
      {"Double", 8},
      {"c10::Half", 2},
      {"Half", 2},
      {"c10::BFloat16", 2},
      {"BFloat16", 2},
      {"long int", 8},
      {"long", 8},
      {"Long", 8},
      {"int", 4},
      {"Int", 4},
      {"short int", 2},
      {"short", 2},
      {"Short", 2},
      {"signed char", 1},
      {"Char", 1},
      {"unsigned char", 1},
      {"Byte", 1},
      {"bool", 1},
      {"Bool", 1},
      {"c10::complex<float>", 8},
      {"ComplexFloat", 8},
      {"c10::complex<double>", 16},
      {"ComplexDouble", 16},
      {"c10::Float8_e4m3fn", 1},
      {"Float8_e4m3fn", 1},
      {"c10::Float8_e5m2", 1},
      {"Float8_e5m2", 1},
      {"unsigned int", 4},
      {"UInt32", 4},
      {"unsigned long", 8},
      {"UInt64", 8},
  };
  for (auto [name, size] : trace_table) EXPECT_EQ(dtype_itemsize(name), size) << name;
  EXPECT_EQ(dtype_itemsize("nullptr (uninitialized)"), 0);
  EXPECT_EQ(dtype_itemsize(""), 0);
}

TEST(Dtype, CommsSpellingsKeepTheirSizes) {
  // comms matched these lower-cased (nccl-tests names and trace spellings)
  const std::pair<const char*, int> comms_table[] = {
      {"float", 4},         {"float32", 4}, {"f32", 4},       {"double", 8},      {"float64", 8},  {"f64", 8},
      {"half", 2},          {"float16", 2}, {"c10::half", 2}, {"f16", 2},         {"bfloat16", 2}, {"c10::bfloat16", 2},
      {"bf16", 2},          {"char", 1},    {"int8", 1},      {"signed char", 1}, {"byte", 1},     {"uint8", 1},
      {"unsigned char", 1}, {"int", 4},     {"int32", 4},     {"long", 8},        {"int64", 8},    {"long int", 8},
      {"long long int", 8}, {"bool", 1},    {"FLOAT", 4},     {"Half", 2},
  };
  for (auto [name, size] : comms_table) {
    const Dtype* d = find_dtype_ignoring_case(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_EQ(d->itemsize, size) << name;
  }
}

TEST(Dtype, ReplaySpellingsKeepTheirScalarTypes) {
  // replay's names, with the c10::ScalarType each gave
  const std::pair<const char*, int> replay_table[] = {
      {"float", 6},
      {"Float", 6},
      {"double", 7},
      {"Double", 7},
      {"c10::Half", 5},
      {"Half", 5},
      {"c10::BFloat16", 15},
      {"BFloat16", 15},
      {"long int", 4},
      {"long", 4},
      {"long long int", 4},
      {"int64_t", 4},
      {"Long", 4},
      {"int", 3},
      {"Int", 3},
      {"short int", 2},
      {"short", 2},
      {"Short", 2},
      {"signed char", 1},
      {"Char", 1},
      {"unsigned char", 0},
      {"Byte", 0},
      {"bool", 11},
      {"Bool", 11},
      {"c10::complex<float>", 9},
      {"c10::complex<double>", 10},
      {"c10::complex<c10::Half>", 8},
  };
  for (auto [name, st] : replay_table) {
    const Dtype* d = find_dtype(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_EQ(d->scalar_type, st) << name;
  }
}

TEST(Dtype, CaptureNamesAndEveryEntryRoundTrip) {
  // capture wrote c10's type names (LibTorch 1.13, GCC) for each ScalarType
  const std::pair<int, const char*> capture_names[] = {
      {0, "unsigned char"},
      {1, "signed char"},
      {2, "short int"},
      {3, "int"},
      {4, "long int"},
      {5, "c10::Half"},
      {6, "float"},
      {7, "double"},
      {8, "c10::complex<c10::Half>"},
      {9, "c10::complex<float>"},
      {10, "c10::complex<double>"},
      {11, "bool"},
      {15, "c10::BFloat16"},
  };
  for (auto [st, name] : capture_names) {
    const Dtype* d = dtype_of_scalar_type(st);
    ASSERT_NE(d, nullptr) << st;
    EXPECT_EQ(d->et_name, name);
    EXPECT_EQ(find_dtype(name), d);
  }
  for (const Dtype& d : dtypes()) {
    EXPECT_EQ(find_dtype(d.name), &d);
    EXPECT_EQ(find_dtype(d.et_name), &d);
    if (!d.comm_name.empty()) {
      EXPECT_EQ(find_dtype(d.comm_name), &d);
    }
  }
}

}  // namespace
}  // namespace reprise
