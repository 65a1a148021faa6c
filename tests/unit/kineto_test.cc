// Kineto reading and the ET link, on small hand-written traces.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "reprise/trace/link.h"
#include "reprise/trace/read.h"
#include "test_util.h"

namespace reprise {
namespace {

const char* kEt = R"J({"schema": "1.1.1-chakra.0.0.4", "nodes": [
  {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1, "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": [{"name": "rf_id", "type": "uint64", "value": 0}]},
  {"id": 2, "name": "aten::linear", "ctrl_deps": 1, "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": [{"name": "rf_id", "type": "uint64", "value": 40}]},
  {"id": 3, "name": "aten::addmm", "ctrl_deps": 2, "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": [{"name": "rf_id", "type": "uint64", "value": 41}]},
  {"id": 4, "name": "aten::relu", "ctrl_deps": 1, "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": [{"name": "rf_id", "type": "uint64", "value": 42}]}
]})J";

// linear encloses addmm, which launches a GEMM; relu launches a kernel and a memset on another stream.
const char* kKineto = R"J({"schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85000000000, "numSms": 132, "computeMajor": 9, "computeMinor": 0}],
  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
  "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 100, "dur": 50, "args": {"External id": 7, "Record function id": 40}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 110, "dur": 30, "args": {"External id": 8, "Record function id": 41}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 120, "dur": 5, "args": {"External id": 8, "correlation": 500}},
  {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 130, "dur": 12.5, "args": {"External id": 8, "correlation": 500, "stream": 7, "device": 0}},
  {"ph": "s", "id": 500, "pid": 1, "tid": 1, "ts": 120, "cat": "ac2g", "name": "ac2g"},
  {"ph": "f", "id": 500, "pid": 0, "tid": 7, "ts": 130, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 200, "dur": 20, "args": {"External id": 9, "Record function id": 42}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 205, "dur": 4, "args": {"correlation": 501}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemsetAsync", "pid": 1, "tid": 1, "ts": 210, "dur": 4, "args": {"correlation": 502}},
  {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 9, "ts": 230, "dur": 3, "args": {"correlation": 501, "stream": 9, "device": 0}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 9, "ts": 240, "dur": 1, "args": {"correlation": 502, "stream": 9, "device": 0, "bytes": 512}},
  {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
  {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 0, "dur": 300}
]})J";

TEST(Kineto, ReadsEventsDevicesAndDistributedInfo) {
  Trace t;
  read_kineto_text(kKineto, "k.json", t);
  ASSERT_TRUE(t.kineto);
  const KinetoInfo& k = *t.kineto;
  EXPECT_EQ(k.events.size(), 9u);  // X events of known categories
  EXPECT_EQ(k.flows.size(), 2u);
  ASSERT_EQ(k.devices.size(), 1u);
  EXPECT_EQ(k.devices[0].num_sms, 132);
  EXPECT_EQ(k.dist_rank, 3);
  EXPECT_EQ(k.dist_world_size, 8);
  // no ET: nodes come from the CPU ops, nested by time
  EXPECT_TRUE(t.from_kineto_only);
  uint32_t addmm = kNone32;
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (t.name(t.nodes[i]) == "aten::addmm") addmm = i;
  ASSERT_NE(addmm, kNone32);
  EXPECT_EQ(t.name(t.nodes[t.nodes[addmm].parent]), "aten::linear");
  EXPECT_DOUBLE_EQ(t.nodes[addmm].gpu_us, 12.5);
}

TEST(Kineto, LinksToEtByRecordFunctionId) {
  Trace t = read_et_text(kEt, "et.json");
  read_kineto_text(kKineto, "k.json", t);
  const KinetoInfo& k = *t.kineto;
  EXPECT_EQ(k.link_method, "rf_id");
  EXPECT_EQ(k.linked_ops, 3u);
  const Node& linear = t.nodes[t.find(2)];
  const Node& addmm = t.nodes[t.find(3)];
  const Node& relu = t.nodes[t.find(4)];
  EXPECT_DOUBLE_EQ(linear.ts_us, 100);
  EXPECT_DOUBLE_EQ(linear.dur_us, 50);
  // the GEMM belongs to addmm (innermost), not to linear
  EXPECT_DOUBLE_EQ(addmm.gpu_us, 12.5);
  EXPECT_EQ(addmm.num_gpu_events, 1u);
  EXPECT_DOUBLE_EQ(linear.gpu_us, 0);
  EXPECT_DOUBLE_EQ(relu.gpu_us, 4);
  EXPECT_EQ(relu.num_gpu_events, 2u);
  for (const KinetoEvent& e : k.events)
    if (e.cat == KinetoCat::Kernel && t.str(e.name) == "relu_kernel") {
      EXPECT_EQ(e.stream, 9);
    }
}

TEST(Kineto, FallsBackToNameOrder) {
  std::string kin = kKineto;
  // drop the record function ids and scramble external ids: only the op order remains
  for (const char* from :
       {", \"Record function id\": 40", ", \"Record function id\": 41", ", \"Record function id\": 42"}) {
    size_t p = kin.find(from);
    ASSERT_NE(p, std::string::npos);
    kin.erase(p, std::strlen(from));
  }
  Trace t = read_et_text(kEt, "et.json");
  read_kineto_text(kin, "k.json", t);
  EXPECT_EQ(t.kineto->link_method, "order");
  EXPECT_EQ(t.kineto->linked_ops, 3u);
  EXPECT_DOUBLE_EQ(t.nodes[t.find(3)].gpu_us, 12.5);
}

TEST(Kineto, ChromeArrayFormAndErrors) {
  Trace t;
  read_kineto_text(R"J([{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}])J",
                   "a.json", t);
  EXPECT_EQ(t.kineto->events.size(), 1u);
  Trace bad;
  try {
    read_kineto_text(R"J({"traceEvents": [{"ph": "X", "ts": }]})J", "bad.json", bad);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: byte "), std::string::npos) << e.what();
  }
  // A value of the wrong type names its field, at the byte of its event (the second, at byte 95).
  const std::string first = R"J({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 2}, )J";
  for (const auto& [event, says] :
       {std::pair<std::string, std::string>{R"J({"ph": "X", "ts": 1, "dur": "2"})J", "an event's \"dur\" is not"},
        {R"J({"ph": "X", "ts": [1], "dur": 2})J", "an event's \"ts\" is not"},
        {R"J({"ph": "X", "name": 5})J", "an event's \"name\" is not"},
        // A malformed literal is not a type error, though simdjson says the same of it.
        {R"J({"ph": "X", "dur": tru})J", "invalid Kineto JSON"}}) {
    Trace typed;
    try {
      read_kineto_text(first + event + "]}", "typed.json", typed);
      ADD_FAILURE() << event;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("typed.json: byte "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      if (says != "invalid Kineto JSON") {
        EXPECT_NE(std::string(e.what()).find("typed.json: byte " + std::to_string(first.size()) + ": " + says),
                  std::string::npos)
            << e.what();
      }
    }
  }
  // An event that ends before it starts (a kernel, a CPU op) is left out and said, with the byte of the first.
  const std::string head = R"J({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 2}, )J";
  for (const char* event : {R"J({"ph": "X", "cat": "kernel", "name": "k", "ts": 5, "dur": -3})J",
                            R"J({"ph": "X", "cat": "cpu_op", "name": "k", "ts": 5, "dur": -0.5})J"}) {
    Trace negative;
    std::vector<std::string> warnings;
    ReadOptions o;
    o.warn = [&](const std::string& w) { warnings.push_back(w); };
    read_kineto_text(head + event + "]}", "neg.json", negative, o);
    EXPECT_EQ(negative.kineto->events.size(), 1u) << event;
    ASSERT_EQ(warnings.size(), 1u) << event;
    EXPECT_EQ(warnings[0].find("neg.json: 1 event(s) with a negative duration left out (the first: byte " +
                               std::to_string(head.size()) + ": 'k'"),
              0u)
        << warnings[0];
  }
  EXPECT_EQ(detect_format(R"J({"schemaVersion": 1, "traceEvents": [)J", "x.json"), TraceFormat::Kineto);
  EXPECT_EQ(detect_format(R"J({"schema": "1.0.1", "nodes": [)J", "x.json"), TraceFormat::ExecutionTrace);
  EXPECT_EQ(detect_format(R"J({"a": 1})J", "x.json"), TraceFormat::Unknown);
}

}  // namespace
}  // namespace reprise
