#include "reprise/trace/builder.h"

#include "reader_internal.h"

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
    x.numel *= d;
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
      acc *= std::max<int64_t>(s.shape[k], 1);
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

Trace synthetic_trace(const SyntheticSpec& sp) {
  TraceBuilder b("synthetic-mlp");
  b.set_metadata("pid", "1");
  b.set_metadata("time", "\"2026-01-01 00:00:00\"");
  b.set_metadata("start_ts", "0");
  int64_t next_id = 3;
  int64_t rf = 0;
  int64_t next_storage = 1000000;
  const std::string dev = sp.device;
  auto tensor = [&](int64_t storage, std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
    TensorSpec s;
    s.id = next_id++;
    s.storage_id = storage;
    s.device = dev;
    s.shape = std::move(shape);
    s.strides = std::move(strides);
    return b.tensor(s);
  };
  auto node = [&](int64_t id, const std::string& name, int64_t parent, const std::string& schema, std::vector<Arg> in,
                  std::vector<Arg> out, int scope = 0) {
    NodeSpec n;
    n.id = id;
    n.name = name;
    n.parent = parent;
    n.op_schema = schema;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.rf_id = rf++;
    n.scope = scope;
    b.add_node(n);
  };
  const std::string T = "Tensor(float)";
  node(1, "[pytorch|profiler|execution_trace|process]", 1, "", {}, {}, 7);
  node(2, "[pytorch|profiler|execution_trace|thread]", 1, "", {}, {}, 7);
  std::string pgs =
      "[{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cpu:gloo,cuda:nccl\", "
      "\"ranks\": [], \"group_size\": " +
      std::to_string(sp.world_size) + ", \"group_count\": 1}]";
  node(next_id++, "## process_group:init ##", 2, "", {{b.string(pgs), "String"}}, {}, 7);
  // parameters: weight [hidden, hidden] and bias [hidden] per layer, and their gradients
  std::vector<int64_t> w_store, b_store, gw_store, gb_store;
  for (int l = 0; l < sp.layers; ++l) {
    w_store.push_back(next_storage++);
    b_store.push_back(next_storage++);
    gw_store.push_back(next_storage++);
    gb_store.push_back(next_storage++);
  }
  const int64_t H = sp.hidden, B = sp.batch;
  int64_t seq = 0;
  for (int it = 0; it < sp.iterations; ++it) {
    int64_t step = next_id++;
    node(step, "ProfilerStep#" + std::to_string(it), 2, "", {}, {}, 7);
    int64_t fwd = next_id++;
    node(fwd, "## forward ##", step, "", {}, {}, 7);
    Value x = tensor(next_storage++, {B, H});
    std::vector<Value> acts{x};
    for (int l = 0; l < sp.layers; ++l) {
      int64_t lin = next_id++;
      Value w = tensor(w_store[l], {H, H});
      Value bias = tensor(b_store[l], {H});
      Value y = tensor(next_storage++, {B, H});
      node(lin, "aten::linear", fwd, "aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
           {{acts.back(), T}, {w, T}, {bias, T}}, {{y, T}});
      Value wt = tensor(w_store[l], {H, H}, {1, H});
      node(next_id++, "aten::t", lin, "aten::t(Tensor(a) self) -> Tensor(a)", {{w, T}}, {{wt, T}});
      node(next_id++, "aten::addmm", lin,
           "aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
           {{bias, T}, {acts.back(), T}, {wt, T}, {b.integer(1), "Int"}, {b.integer(1), "Int"}}, {{y, T}});
      Value r = tensor(next_storage++, {B, H});
      node(next_id++, "aten::relu", fwd, "aten::relu(Tensor self) -> Tensor", {{y, T}}, {{r, T}});
      acts.push_back(r);
    }
    Value loss = tensor(next_storage++, {});
    node(next_id++, "aten::sum", fwd, "aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor",
         {{acts.back(), T}, {b.none(), "None"}}, {{loss, T}});
    int64_t bwd = next_id++;
    node(bwd, "## backward ##", step, "", {}, {}, 7);
    Value grad = tensor(next_storage++, {B, H});
    for (int l = sp.layers - 1; l >= 0; --l) {
      Value gin = tensor(next_storage++, {B, H});
      node(next_id++, "aten::threshold_backward", bwd,
           "aten::threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor",
           {{grad, T}, {acts[l + 1], T}, {b.integer(0), "Int"}}, {{gin, T}});
      Value gw = tensor(gw_store[l], {H, H});
      node(next_id++, "aten::mm", bwd, "aten::mm(Tensor self, Tensor mat2) -> Tensor",
           {{tensor(next_storage++, {H, B}, {1, H}), T}, {acts[l], T}}, {{gw, T}});
      Value gb = tensor(gb_store[l], {H});
      node(next_id++, "aten::sum", bwd,
           "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
           {{gin, T}, {b.list({b.integer(0)}), "GenericList[Int]"}, {b.boolean(false), "Bool"}, {b.none(), "None"}},
           {{gb, T}});
      Value gx = tensor(next_storage++, {B, H});
      node(next_id++, "aten::mm", bwd, "aten::mm(Tensor self, Tensor mat2) -> Tensor",
           {{gin, T}, {tensor(w_store[l], {H, H}), T}}, {{gx, T}});
      grad = gx;
      // data-parallel gradient all_reduce, as DDP issues it
      int64_t c10d = next_id++;
      node(c10d, "c10d::allreduce_", bwd, "", {{b.list({gw}), "GenericList[Tensor(float)]"}}, {});
      node(next_id++, "record_param_comms", c10d, "",
           {{b.list({gw}), "GenericList[Tensor(float)]"},
            {b.integer(seq), "Int"},
            {b.tuple({b.string("0"), b.string("default_pg")}), "Tuple[String,String]"},
            {b.integer(sp.rank), "Int"},
            {b.string("allreduce"), "String"},
            {b.list({}), "GenericList[]"},
            {b.list({}), "GenericList[]"},
            {b.integer(0), "Int"},
            {b.integer(1), "Int"},
            {b.integer(sp.world_size), "Int"}},
           {{b.list({gw}), "GenericList[Tensor(float)]"}});
      b.add_attr("collective_name", "string", b.string("allreduce"));
      b.add_attr("dtype", "string", b.string("Float"));
      b.add_attr("in_msg_nelems", "uint64", b.integer(H * H));
      b.add_attr("out_msg_nelems", "uint64", b.integer(H * H));
      b.add_attr("in_split_size", "string", b.string("[]"));
      b.add_attr("out_split_size", "string", b.string("[]"));
      b.add_attr("global_rank_start", "uint64", b.integer(0));
      b.add_attr("global_rank_stride", "uint64", b.integer(1));
      b.add_attr("pg_name", "string", b.string("0"));
      b.add_attr("pg_desc", "string", b.string("default_pg"));
      b.add_attr("pg_size", "uint64", b.integer(sp.world_size));
      ++seq;
    }
    int64_t opt = next_id++;
    node(opt, "## optimizer ##", step, "", {}, {}, 7);
    for (int l = 0; l < sp.layers; ++l) {
      node(next_id++, "aten::add_", opt,
           "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
           {{tensor(w_store[l], {H, H}), T}, {tensor(gw_store[l], {H, H}), T}, {b.real(-0.01), "Double"}},
           {{tensor(w_store[l], {H, H}), T}});
    }
  }
  b.set_metadata("finish_ts", "1");
  return b.finish();
}

}  // namespace reprise
