// The plan compiler's private interface: one Compiler per compile_plan call, its member functions defined by
// concept in step_selection.cc, op_compiler.cc, arg_templates.cc, plan_inputs.cc, index_ranges.cc,
// comm_plan.cc and plan.cc (the driver).
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backend_ops.h"
#include "plan.h"

namespace reprise::replay::detail {

// A step of the replay: a ProfilerStep#N interval of node ids (ids are start order, and the backward pass runs
// on another thread, outside the ProfilerStep node's subtree).
struct StepRange {
  std::string name;
  uint32_t node = kNone32;
  int64_t first_id = INT64_MIN, end_id = INT64_MAX;
};

// The steps the options select: one ProfilerStep (the requested one, else the first complete one), all of
// them, or the whole trace when it has no ProfilerStep markers. Throws UserError for a step it does not have.
std::vector<StepRange> select_steps(const Trace& t, const ReplayOptions& o);

// The device most of the trace's tensors are on, other than the CPU ("cuda:0"); "cpu" when none is.
std::string trace_main_device(const Trace& t);

struct ParsedSchema {
  bool ok = false;
  std::string name, overload, reason;
};

struct Resolved {
  bool ok = false;
  std::string reason;
  uint32_t op = 0;
};

class Compiler {
 public:
  Compiler(const Trace& t, const ReplayOptions& o, Plan& p);

  void run(const std::vector<StepRange>& steps);

 private:
  // step_selection.cc
  void compile_steps(const std::vector<StepRange>& steps);
  bool over_max_ops(const Node& n, size_t step, std::vector<int64_t>& step_ops) const;
  bool compile_node(uint32_t node, uint16_t step);

  // op_compiler.cc
  void check_tensors(uint32_t node) const;
  bool compile_op(uint32_t node, uint16_t step, std::string& why);
  bool compile_table_batched_update(uint32_t node, uint16_t step, std::string& why);
  bool emit_call(uint32_t node, uint16_t step, uint32_t op, const Remap* remap, Span<Value> inputs, std::string& why);
  bool resolve_name(uint32_t node, std::string& name, std::string& overload, std::string& why);
  Resolved handle(const std::string& name, const std::string& overload);
  Resolved first_fitting_overload(const std::string& name, Span<Value> inputs);
  bool build_remapped_args(const Remap& remap, Span<Value> inputs, const c10::FunctionSchema& schema,
                           std::vector<ArgSpec>& args, std::string& why);
  bool build_recorded_args(Span<Value> inputs, const c10::FunctionSchema& schema, std::vector<ArgSpec>& args,
                           std::string& why);
  bool check_factory_arg(const std::string& name, const ArgSpec& arg, std::string& why);
  bool check_conv_arg(const std::string& name, const ArgSpec& arg, std::string& why) const;
  void emit_op(uint32_t node, uint32_t op, uint16_t step, const c10::FunctionSchema& schema,
               const std::vector<ArgSpec>& args, size_t first_ref);
  void bind_outputs(const c10::FunctionSchema& schema, const Node& n, Instr& in);

  // arg_templates.cc
  bool build_arg(const Value& v, const c10::TypePtr& type, std::vector<ArgSpec>& args, std::string& why);
  bool build_tensor_list(const Value& v, bool optional, std::vector<ArgSpec>& args, std::string& why);
  bool build_const(const Value& v, const c10::TypePtr& type, c10::IValue& out, std::string& why);
  bool build_list_const(const Value& v, const c10::TypePtr& type, c10::IValue& out, std::string& why);
  bool build_untyped_const(const Value& v, const c10::TypePtr& type, c10::IValue& out, std::string& why);
  bool tensor_ref(const Value& v, TensorRef& ref, std::string& why);
  bool undefined_tensor(const Value& v) const {
    return v.kind == ValueKind::Tensor && t_.str(t_.tensors[v.ref].dtype).substr(0, 7) == "nullptr";
  }

  // plan_inputs.cc
  uint32_t input_tensor(uint32_t tensor, std::string& why);
  uint32_t storage_group(const reprise::Tensor& x, uint32_t tensor, at::ScalarType dtype, at::Device device);

  // index_ranges.cc
  void note_ranges(const Node& n, const c10::FunctionSchema& schema, Span<Value> inputs);

  // comm_plan.cc
  void compile_comm(uint32_t node, uint16_t step);
  bool plan_collective(const Collective& c, CommSpec& s, std::string& why);
  void plan_wait(const Collective& c, CommSpec& s);
  bool plan_p2p(const Collective& c, CommSpec& s, std::string& why);
  void batch_p2p();
  uint32_t comm_group_of(const Collective& c);
  int64_t gpu_stream_of(uint32_t node) const;

  // plan.cc
  void finish();
  at::Device map_device(std::string_view dev) const;

  const Trace& t_;
  const ReplayOptions& o_;
  Plan& p_;
  std::vector<uint32_t> cur_slot_;  // trace tensor -> slot holding it now
  std::vector<uint32_t> input_of_;  // trace tensor -> index in p_.inputs
  std::vector<uint32_t> last_ref_;  // slot -> last index in p_.refs that reads it
  std::unordered_map<StrId, ParsedSchema> parsed_;
  std::unordered_map<std::string, Resolved> handles_;
  // (storage, device, dtype) -> index in p_.storage_groups
  std::map<std::tuple<int64_t, std::string, int>, uint32_t> storage_group_of_;
  std::unordered_map<int64_t, uint32_t> produced_storage_;    // storage id -> slot of its latest produced tensor
  std::unordered_map<int32_t, int32_t> comm_of_collective_;   // Trace::collectives index -> Plan::comms index
  std::unordered_map<uint32_t, int64_t> gpu_stream_of_node_;  // from the linked Kineto trace: launching node -> stream
};

}  // namespace reprise::replay::detail
