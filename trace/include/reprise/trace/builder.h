// Building a trace in code: synthetic traces for tests, demos and benchmarks, and live capture.
//
//   TraceBuilder b;
//   b.roots();                                   // process and thread nodes; later nodes go under the thread
//   b.set_parent(b.annotation("ProfilerStep#1"));
//   TensorSpec s;
//   s.id = b.next_id();
//   s.shape = {4};
//   Value x = b.tensor(s), y = ...;
//   b.op("aten::relu(Tensor self) -> Tensor", {x}, {y});  // name, types ("Tensor(float)"), id and parent derived
//   Trace t = b.finish();
#pragma once

#include <optional>
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

  // A fresh id: past every node id added and every id handed out before. Tensors may take theirs from it too.
  int64_t next_id();
  // The parent of nodes that op() and annotation() add without naming one.
  void set_parent(int64_t id);
  // Adds the two nodes a PyTorch ET begins with, the process root (its own parent, as PyTorch writes it) and its
  // thread, and makes the thread the parent of what follows. Returns the thread's id.
  int64_t roots();
  // Adds a node outside the dispatcher (ProfilerStep#N, "## forward ##") in RecordScope USER_SCOPE. Returns its id.
  int64_t annotation(std::string_view name, std::optional<int64_t> parent = std::nullopt,
                     const std::vector<Value>& inputs = {});
  // Adds an operator node from its schema: the name is the schema's up to its overload ("aten::add.Tensor(Tensor
  // self, ...) -> Tensor" gives "aten::add"); a bare name ("record_param_comms") adds an op without a schema, as
  // PyTorch records those. Each argument's type string is type_of its value. The node gets next_id(), `parent`
  // or set_parent's, and its position as rf_id. Returns its id.
  int64_t op(std::string_view schema, const std::vector<Value>& inputs, const std::vector<Value>& outputs,
             std::optional<int64_t> parent = std::nullopt);
  // Sets the tensor_range of the node added last ({"<input position>": [min, max], ...}).
  void set_tensor_range(std::string_view json);
  // A value's ET type string, as PyTorch writes it: "Tensor(float)" (its TensorSpec's dtype), "Int", "Double",
  // "Bool", "String", "Device", "None", "GenericList[Int,Int]", "Tuple[String,String]".
  std::string type_of(const Value& v) const;

  // Adds an extra attribute (communication attrs, ...) to the node added last.
  void add_attr(std::string_view name, std::string_view type, Value v);
  void set_metadata(const std::string& key, const std::string& raw_json);

  // Resolves parents, kinds, collectives and process groups; the builder is spent afterwards.
  Trace finish(const ReadOptions& options = {});

 private:
  Value seq(ValueKind kind, const std::vector<Value>& items);
  std::vector<Arg> typed(const std::vector<Value>& values) const;
  int64_t add_scoped(NodeSpec n, std::optional<int64_t> parent);
  Trace t_;
  int64_t next_id_ = 1;
  int64_t parent_ = 0;
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
// Throws UserError naming the first field of `spec` out of range: every shape's bytes must fit int64, and the trace
// its model's pools.
void check_synthetic_spec(const SyntheticSpec& spec);
Trace synthetic_trace(const SyntheticSpec& spec);

}  // namespace reprise
