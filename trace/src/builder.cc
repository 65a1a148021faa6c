#include "reprise/trace/builder.h"

#include <algorithm>

#include "reader_internal.h"
#include "reprise/common/device_name.h"

namespace reprise {

TraceBuilder::TraceBuilder(std::string source) {
  t_.source = std::move(source);
  t_.schema = kCurrentSchema;
}

Value TraceBuilder::tensor(const TensorSpec& s) {
  Tensor x;
  x.id = s.id;
  x.storage_id = s.storage_id;
  x.offset = s.offset;
  x.itemsize = s.itemsize;
  x.has_device = true;
  x.device = t_.strings.intern(s.device);
  x.dtype = t_.strings.intern(s.dtype);
  x.rank = static_cast<uint16_t>(s.shape.size());
  x.numel = 1;
  x.dims = static_cast<uint32_t>(t_.ints.size());
  for (int64_t d : s.shape) {
    t_.ints.push_back(d);
    // saturates, so a shape past int64 stays one: tensor_extent reports it where the trace is used
    if (__builtin_mul_overflow(x.numel, d, &x.numel)) x.numel = INT64_MAX;
  }
  x.has_strides = true;
  x.strides = static_cast<uint32_t>(t_.ints.size());
  if (s.strides.size() == s.shape.size()) {
    t_.ints.insert(t_.ints.end(), s.strides.begin(), s.strides.end());
  } else {
    std::vector<int64_t> st(s.shape.size());
    int64_t acc = 1;
    for (size_t k = s.shape.size(); k-- > 0;) {
      st[k] = acc;
      if (__builtin_mul_overflow(acc, std::max<int64_t>(s.shape[k], 1), &acc)) acc = INT64_MAX;
    }
    t_.ints.insert(t_.ints.end(), st.begin(), st.end());
  }
  Value v;
  v.kind = ValueKind::Tensor;
  v.ref = static_cast<uint32_t>(t_.tensors.size());
  t_.tensors.push_back(x);
  return v;
}

Value TraceBuilder::integer(int64_t i) {
  Value v;
  v.kind = ValueKind::Int;
  v.i = i;
  return v;
}
Value TraceBuilder::real(double d) {
  Value v;
  v.kind = ValueKind::Double;
  v.d = d;
  return v;
}
Value TraceBuilder::boolean(bool b) {
  Value v;
  v.kind = ValueKind::Bool;
  v.i = b;
  return v;
}
Value TraceBuilder::string(std::string_view s) {
  Value v;
  v.kind = ValueKind::String;
  v.ref = t_.strings.intern(s);
  return v;
}
Value TraceBuilder::device(std::string_view s) {
  Value v = string(s);
  v.kind = ValueKind::Device;
  return v;
}
Value TraceBuilder::none() { return Value(); }

Value TraceBuilder::seq(ValueKind kind, const std::vector<Value>& items) {
  Value v;
  v.kind = kind;
  v.ref = static_cast<uint32_t>(t_.values.size());
  v.count = static_cast<uint32_t>(items.size());
  t_.values.insert(t_.values.end(), items.begin(), items.end());
  t_.arg_types.resize(t_.values.size());
  return v;
}
Value TraceBuilder::list(const std::vector<Value>& items) { return seq(ValueKind::List, items); }
Value TraceBuilder::tuple(const std::vector<Value>& items) { return seq(ValueKind::Tuple, items); }

uint32_t TraceBuilder::add_node(const NodeSpec& s) {
  next_id_ = std::max(next_id_, s.id + 1);
  Node n;
  n.id = s.id;
  n.parent_id = s.parent;
  n.name = t_.strings.intern(s.name);
  n.op_schema = t_.strings.intern(s.op_schema);
  n.rf_id = s.rf_id;
  n.seq_id = s.seq_id;
  n.tid = s.tid;
  n.fw_tid = s.fw_tid;
  n.fw_parent = s.fw_parent;
  n.scope = s.scope;
  n.tensor_range = t_.strings.intern(s.tensor_range);
  n.fields = kHasRfId | kHasFwParent | kHasSeqId | kHasScope | kHasTid | kHasFwTid | kHasOpSchema | kHasKernelBackend |
             kHasKernelFile | kHasTensorRange;
  auto put = [&](const std::vector<Arg>& args, uint32_t& first, uint32_t& count) {
    first = static_cast<uint32_t>(t_.values.size());
    count = static_cast<uint32_t>(args.size());
    for (const Arg& a : args) {
      t_.values.push_back(a.value);
      t_.arg_types.push_back(t_.strings.intern(a.type));
    }
  };
  put(s.inputs, n.inputs, n.num_inputs);
  put(s.outputs, n.outputs, n.num_outputs);
  n.attrs = static_cast<uint32_t>(t_.attrs.size());
  t_.nodes.push_back(n);
  return static_cast<uint32_t>(t_.nodes.size() - 1);
}

int64_t TraceBuilder::next_id() { return next_id_++; }

void TraceBuilder::set_parent(int64_t id) { parent_ = id; }

// Fills what op() and annotation() derive: the id, the parent, and the rf_id (record-function ids count up).
int64_t TraceBuilder::add_scoped(NodeSpec n, std::optional<int64_t> parent) {
  n.id = next_id();
  n.parent = parent.value_or(parent_);
  n.rf_id = static_cast<int64_t>(t_.nodes.size());
  add_node(n);
  return n.id;
}

int64_t TraceBuilder::roots() {
  int64_t root = next_id_;
  annotation("[pytorch|profiler|execution_trace|process]", root);
  parent_ = annotation("[pytorch|profiler|execution_trace|thread]", root);
  return parent_;
}

int64_t TraceBuilder::annotation(std::string_view name, std::optional<int64_t> parent,
                                 const std::vector<Value>& inputs) {
  constexpr int kUserScope = 7;  // at::RecordScope::USER_SCOPE
  NodeSpec n;
  n.name = std::string(name);
  n.scope = kUserScope;
  n.inputs = typed(inputs);
  return add_scoped(std::move(n), parent);
}

int64_t TraceBuilder::op(std::string_view schema, const std::vector<Value>& inputs, const std::vector<Value>& outputs,
                         std::optional<int64_t> parent) {
  NodeSpec n;
  n.name = std::string(schema.substr(0, schema.find_first_of(".(")));
  if (schema.find('(') != std::string_view::npos) n.op_schema = std::string(schema);
  n.inputs = typed(inputs);
  n.outputs = typed(outputs);
  return add_scoped(std::move(n), parent);
}

void TraceBuilder::set_tensor_range(std::string_view json) { t_.nodes.back().tensor_range = t_.strings.intern(json); }

std::vector<Arg> TraceBuilder::typed(const std::vector<Value>& values) const {
  std::vector<Arg> args;
  args.reserve(values.size());
  for (const Value& v : values) args.push_back({v, type_of(v)});
  return args;
}

std::string TraceBuilder::type_of(const Value& v) const {
  switch (v.kind) {
    case ValueKind::Tensor:
      return "Tensor(" + std::string(t_.str(t_.tensors[v.ref].dtype)) + ")";
    case ValueKind::List:
    case ValueKind::Tuple: {
      std::string s = v.kind == ValueKind::List ? "GenericList[" : "Tuple[";
      for (uint32_t k = 0; k < v.count; ++k) s += (k ? "," : "") + type_of(t_.values[v.ref + k]);
      return s + "]";
    }
    default:
      return value_kind_name(v.kind);  // "None", "Int", "Double", "Bool", "String", "Device"
  }
}

void TraceBuilder::add_attr(std::string_view name, std::string_view type, Value v) {
  Attr a;
  a.name = t_.strings.intern(name);
  a.type = t_.strings.intern(type);
  a.value = static_cast<uint32_t>(t_.values.size());
  t_.values.push_back(v);
  t_.arg_types.push_back(0);
  t_.attrs.push_back(a);
  Node& n = t_.nodes.back();
  if (n.num_attrs == 0) n.attrs = static_cast<uint32_t>(t_.attrs.size() - 1);
  ++n.num_attrs;
}

void TraceBuilder::set_metadata(const std::string& key, const std::string& raw) {
  for (auto& [k, v] : t_.metadata)
    if (k == key) {
      v = raw;
      return;
    }
  t_.metadata.emplace_back(key, raw);
}

Trace TraceBuilder::finish(const ReadOptions& options) {
  detail::finalize_trace(t_, options);
  return std::move(t_);
}

namespace {

// The process-group init record, as PyTorch writes it when the default group is created.
std::string process_group_json(int world_size) {
  return "[{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cpu:gloo,cuda:nccl\", "
         "\"ranks\": [], \"group_size\": " +
         std::to_string(world_size) + ", \"group_count\": 1}]";
}

// Builds the synthetic trace. Tensors and nodes take ids from one counter; where an op makes tensors, its outputs
// take theirs first, then its inputs, then the op.
class SyntheticMlp {
 public:
  explicit SyntheticMlp(const SyntheticSpec& spec) : sp_(spec), b_("synthetic-mlp") {}

  Trace build() {
    b_.set_metadata("pid", "1");
    b_.set_metadata("time", "\"2026-01-01 00:00:00\"");
    b_.set_metadata("start_ts", "0");
    int64_t thread = b_.roots();
    b_.annotation("## process_group:init ##", thread, {b_.string(process_group_json(sp_.world_size))});
    // parameters: weight [hidden, hidden] and bias [hidden] per layer, and their gradients
    for (int l = 0; l < sp_.layers; ++l) {
      w_store_.push_back(next_storage_++);
      b_store_.push_back(next_storage_++);
      gw_store_.push_back(next_storage_++);
      gb_store_.push_back(next_storage_++);
    }
    for (int it = 0; it < sp_.iterations; ++it) {
      int64_t step = b_.annotation("ProfilerStep#" + std::to_string(it), thread);
      forward(step);
      backward(step);
      optimizer(step);
    }
    b_.set_metadata("finish_ts", "1");
    return b_.finish();
  }

 private:
  Value tensor(int64_t storage, std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
    TensorSpec s;
    s.id = b_.next_id();
    s.storage_id = storage;
    s.device = sp_.device;
    s.shape = std::move(shape);
    s.strides = std::move(strides);
    return b_.tensor(s);
  }
  Value fresh(std::vector<int64_t> shape) { return tensor(next_storage_++, std::move(shape)); }

  void forward(int64_t step) {
    const int64_t H = sp_.hidden, B = sp_.batch;
    b_.set_parent(b_.annotation("## forward ##", step));
    acts_ = {fresh({B, H})};
    for (int l = 0; l < sp_.layers; ++l) {
      Value w = tensor(w_store_[l], {H, H});
      Value bias = tensor(b_store_[l], {H});
      Value y = fresh({B, H});
      int64_t lin =
          b_.op("aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", {acts_.back(), w, bias}, {y});
      Value wt = tensor(w_store_[l], {H, H}, {1, H});
      b_.op("aten::t(Tensor(a) self) -> Tensor(a)", {w}, {wt}, lin);
      b_.op("aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
            {bias, acts_.back(), wt, b_.integer(1), b_.integer(1)}, {y}, lin);
      Value r = fresh({B, H});
      b_.op("aten::relu(Tensor self) -> Tensor", {y}, {r});
      acts_.push_back(r);
    }
    Value loss = fresh({});
    b_.op("aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", {acts_.back(), b_.none()}, {loss});
  }

  void backward(int64_t step) {
    const int64_t H = sp_.hidden, B = sp_.batch;
    b_.set_parent(b_.annotation("## backward ##", step));
    Value grad = fresh({B, H});
    for (int l = sp_.layers - 1; l >= 0; --l) {
      Value gin = fresh({B, H});
      b_.op("aten::threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor",
            {grad, acts_[l + 1], b_.integer(0)}, {gin});
      Value gw = tensor(gw_store_[l], {H, H});
      Value act_t = tensor(next_storage_++, {H, B}, {1, H});
      b_.op("aten::mm(Tensor self, Tensor mat2) -> Tensor", {act_t, acts_[l]}, {gw});
      Value gb = tensor(gb_store_[l], {H});
      b_.op("aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
            {gin, b_.list({b_.integer(0)}), b_.boolean(false), b_.none()}, {gb});
      Value gx = fresh({B, H});
      Value w = tensor(w_store_[l], {H, H});
      b_.op("aten::mm(Tensor self, Tensor mat2) -> Tensor", {gin, w}, {gx});
      grad = gx;
      all_reduce(gw);
    }
  }

  // A data-parallel gradient all_reduce, as DDP issues it: c10d's op around record_param_comms.
  void all_reduce(Value grad) {
    const int64_t H = sp_.hidden;
    int64_t c10d = b_.op("c10d::allreduce_", {b_.list({grad})}, {});
    b_.op("record_param_comms",
          {b_.list({grad}), b_.integer(seq_), b_.tuple({b_.string("0"), b_.string("default_pg")}), b_.integer(sp_.rank),
           b_.string("allreduce"), b_.list({}), b_.list({}), b_.integer(0), b_.integer(1), b_.integer(sp_.world_size)},
          {b_.list({grad})}, c10d);
    b_.add_attr("collective_name", "string", b_.string("allreduce"));
    b_.add_attr("dtype", "string", b_.string("Float"));
    b_.add_attr("in_msg_nelems", "uint64", b_.integer(H * H));
    b_.add_attr("out_msg_nelems", "uint64", b_.integer(H * H));
    b_.add_attr("in_split_size", "string", b_.string("[]"));
    b_.add_attr("out_split_size", "string", b_.string("[]"));
    b_.add_attr("global_rank_start", "uint64", b_.integer(0));
    b_.add_attr("global_rank_stride", "uint64", b_.integer(1));
    b_.add_attr("pg_name", "string", b_.string("0"));
    b_.add_attr("pg_desc", "string", b_.string("default_pg"));
    b_.add_attr("pg_size", "uint64", b_.integer(sp_.world_size));
    ++seq_;
  }

  void optimizer(int64_t step) {
    const int64_t H = sp_.hidden;
    b_.set_parent(b_.annotation("## optimizer ##", step));
    for (int l = 0; l < sp_.layers; ++l) {
      Value w_out = tensor(w_store_[l], {H, H});
      Value w = tensor(w_store_[l], {H, H});
      Value gw = tensor(gw_store_[l], {H, H});
      b_.op("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
            {w, gw, b_.real(-0.01)}, {w_out});
    }
  }

  const SyntheticSpec& sp_;
  TraceBuilder b_;
  int64_t next_storage_ = 1000000;
  int64_t seq_ = 0;
  std::vector<int64_t> w_store_, b_store_, gw_store_, gb_store_;
  std::vector<Value> acts_;  // the forward activations, read by the backward
};

}  // namespace

void check_synthetic_spec(const SyntheticSpec& s) {
  auto range = [](const char* what, int64_t v, int64_t lo, int64_t hi, const char* why) {
    if (v < lo || v > hi)
      throw UserError("synthetic trace: " + std::string(what) + " " + std::to_string(v) + " is out of range " +
                      std::to_string(lo) + " .. " + std::to_string(hi) + " (" + why + ")");
  };
  // 2^30 each: a [hidden, hidden] or [batch, hidden] float tensor then holds at most 2^62 bytes, within int64
  range("hidden", s.hidden, 1, int64_t{1} << 30, "a hidden x hidden float weight must fit int64 bytes");
  range("batch", s.batch, 1, int64_t{1} << 30, "a batch x hidden float activation must fit int64 bytes");
  // about 12 nodes and 80 values per layer and iteration: keeps the model's 32-bit pool indices in range
  range("layers", s.layers, 1, 100000, "the trace's node count");
  range("iterations", s.iterations, 1, 1000000, "the trace's node count");
  range("layers x iterations", int64_t{s.layers} * s.iterations, 1, 10000000, "the trace's node count");
  range("world size", s.world_size, 1, 1 << 20, "ranks of one process group");
  range("rank", s.rank, 0, s.world_size - 1, "a rank of the world size");
  // The device its tensors record, as PyTorch writes one: cpu, cuda or cuda:N (meta: shapes only).
  if (!is_device_name(s.device, true))
    throw UserError("synthetic trace: device '" + s.device + "' is not one (cpu, cuda, cuda:N or meta)");
}

Trace synthetic_trace(const SyntheticSpec& spec) {
  check_synthetic_spec(spec);
  return SyntheticMlp(spec).build();
}

}  // namespace reprise
