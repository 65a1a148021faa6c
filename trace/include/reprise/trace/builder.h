// Building a trace in code: synthetic traces for tests, demos and benchmarks, and live capture.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "reprise/trace/read.h"
#include "reprise/trace/trace.h"
#include "reprise/trace/write.h"

namespace reprise {

struct TensorSpec {
  int64_t id = 0, storage_id = 0, offset = 0;
  std::string dtype = "float";  // as ET type strings write it
  int itemsize = 4;
  std::string device = "cpu";
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // empty: contiguous
};

struct Arg {
  Value value;
  std::string type;  // "Tensor(float)", "Int", "GenericList[Int,Int]", ...
};

struct NodeSpec {
  int64_t id = 0;
  std::string name;
  int64_t parent = 0;
  std::string op_schema;
  std::vector<Arg> inputs, outputs;
  int64_t rf_id = 0, seq_id = -1, tid = 1, fw_tid = 0, fw_parent = 0;
  int scope = 0;
  std::string tensor_range;
};

class TraceBuilder {
 public:
  explicit TraceBuilder(std::string source = "<built>");

  Value tensor(const TensorSpec& t);
  Value integer(int64_t v);
  Value real(double v);
  Value boolean(bool v);
  Value string(std::string_view s);
  Value device(std::string_view s);
  Value none();
  Value list(const std::vector<Value>& items);
  Value tuple(const std::vector<Value>& items);

  // Adds a node; returns its index in insertion order.
  uint32_t add_node(const NodeSpec& n);
  // Adds an extra attribute (communication attrs, ...) to the node added last.
  void add_attr(std::string_view name, std::string_view type, Value v);
  void set_metadata(const std::string& key, const std::string& raw_json);

  // Resolves parents, kinds, collectives and process groups; the builder is spent afterwards.
  Trace finish(const ReadOptions& options = {});

 private:
  Value seq(ValueKind kind, const std::vector<Value>& items);
  Trace t_;
  std::vector<std::pair<Attr, bool>> pending_;
};

// A synthetic data-parallel MLP training trace (forward, backward, gradient all_reduce, optimizer) in the
// current ET schema: for demos, tests and ingest benchmarks at any size.
struct SyntheticSpec {
  int iterations = 2;
  int layers = 4;
  int64_t batch = 64;
  int64_t hidden = 256;
  int world_size = 2;
  int rank = 0;
  std::string device = "cpu";
};
Trace synthetic_trace(const SyntheticSpec& spec);

}  // namespace reprise
