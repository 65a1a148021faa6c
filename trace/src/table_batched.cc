#include "reprise/trace/table_batched.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

namespace reprise {
namespace {

int64_t int_at(const Trace& t, const Node& n, int i, int64_t fallback) {
  const Value v = table_batched_value(t, n, TableBatchedArg{i});
  return v.kind == ValueKind::Int || v.kind == ValueKind::Bool ? v.i : fallback;
}

bool same_shape(const Trace& t, const Tensor& a, const Tensor& b) {
  const Span<int64_t> x = t.dims(a), y = t.dims(b);
  return std::equal(x.begin(), x.end(), y.begin(), y.end());
}

}  // namespace

bool is_table_batched_lookup(std::string_view name) {
  const std::string_view base = op_base_name(name);
  return (base.substr(0, 31) == "split_embedding_codegen_lookup_" ||
          base.substr(0, 29) == "ssd_embedding_codegen_lookup_" || base == "dense_embedding_codegen_lookup_function") &&
         base.find("_function") != std::string_view::npos;
}

std::string_view table_batched_backward_optimizer(std::string_view name) {
  if (name.find("evaluate_function") != std::string_view::npos) return {};
  const size_t at = name.find("LookupFunction_");
  if (at == std::string_view::npos || name.find("CppNode<") == std::string_view::npos) return {};
  const size_t from = at + 15, end = name.find("_Op", from);
  return end == std::string_view::npos ? std::string_view{} : name.substr(from, end - from);
}

bool table_batched_dense(std::string_view optimizer) { return optimizer == "Dense" || optimizer == "dense"; }

TableBatchedArg table_batched_larger(const Trace& t, const Node& n, const TableBatchedArg& a,
                                     const TableBatchedArg& b) {
  const Tensor* x = table_batched_tensor(t, n, a);
  const Tensor* y = table_batched_tensor(t, n, b);
  return y && (!x || y->numel > x->numel) ? b : a;
}

const Tensor* table_batched_tensor(const Trace& t, const Node& n, const TableBatchedArg& a) {
  const Value v = table_batched_value(t, n, a);
  return v.kind == ValueKind::Tensor ? &t.tensors[v.ref] : nullptr;
}

Value table_batched_value(const Trace& t, const Node& n, const TableBatchedArg& a) {
  if (a.input < 0 || static_cast<uint32_t>(a.input) >= n.num_inputs) return Value{};
  const Value& v = t.values[n.inputs + static_cast<uint32_t>(a.input)];
  if (a.element < 0) return v;
  if (v.kind != ValueKind::List && v.kind != ValueKind::Tuple) return Value{};
  Span<Value> items = t.items(v);
  return static_cast<size_t>(a.element) < items.size() ? items[static_cast<size_t>(a.element)] : Value{};
}

bool read_table_batched_lookup(const Trace& t, uint32_t node, TableBatchedLookup& out, std::string* why) {
  const Node& n = t.nodes[node];
  auto refuse = [&](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  if (!is_table_batched_lookup(t.name(n))) return refuse("not a table-batched lookup");
  const bool dense = op_base_name(t.name(n)) == "dense_embedding_codegen_lookup_function";
  std::vector<std::string> names;
  if (n.op_schema != 0) names = schema_argument_names(t.str(n.op_schema));
  // Without a schema: split_ has a placeholder tensor first, dense_ starts at dev_weights (no UVM, no optimizer).
  auto at = [&](std::initializer_list<std::string_view> any, int split_pos, int dense_pos) {
    if (names.empty()) return dense ? dense_pos : split_pos;
    for (std::string_view name : any)
      for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == name) return static_cast<int>(i);
    return -1;
  };
  auto arg = [](int input, int element = -1) { return TableBatchedArg{input, input >= 0 ? element : -1}; };
  TableBatchedLookup l;
  l.dev_weights = arg(at({"dev_weights", "host_weights"}, 1, 0));
  l.uvm_weights = arg(at({"uvm_weights"}, 2, -1));
  l.momentum1_dev = arg(at({"momentum1_dev", "momentum1_host"}, 20, -1));
  l.momentum1_uvm = arg(at({"momentum1_uvm"}, 21, -1));
  if (!l.dev_weights.found()) {  // _pt2: the halves as elements of one list each
    const int weights = at({"weights"}, -1, -1), momentum1 = at({"momentum1"}, -1, -1);
    l.dev_weights = arg(weights, 0), l.uvm_weights = arg(weights, 1);
    l.momentum1_dev = arg(momentum1, 0), l.momentum1_uvm = arg(momentum1, 1);
  }
  l.indices = arg(at({"indices"}, 11, 7));
  l.offsets = arg(at({"offsets"}, 12, 8));
  l.total_dim = int_at(t, n, at({"total_D"}, 7, 3), 0);
  if (const Tensor* d = table_batched_tensor(t, n, TableBatchedArg{at({"D_offsets"}, 6, 2)})) l.tables = d->numel - 1;
  if (l.tables < 1) {  // nobag's one row width D, no D_offsets
    l.total_dim = int_at(t, n, at({"D"}, -1, -1), 0);
    l.tables = 1;
  }
  l.pooling_mode = int_at(t, n, at({"pooling_mode"}, 13, 9), 0);
  for (TableBatchedArg* w : {&l.dev_weights, &l.uvm_weights, &l.momentum1_dev, &l.momentum1_uvm})
    if (!table_batched_tensor(t, n, *w)) *w = TableBatchedArg{};
  for (const TableBatchedArg& w : {l.dev_weights, l.uvm_weights})
    if (const Tensor* x = table_batched_tensor(t, n, w)) l.table_bytes += static_cast<double>(x->numel) * x->itemsize;
  const Tensor* indices = table_batched_tensor(t, n, l.indices);
  const Tensor* offsets = table_batched_tensor(t, n, l.offsets);
  if (!indices) return refuse("its indices are not recorded");
  if (!offsets) return refuse("its offsets are not recorded");
  if (l.total_dim <= 0) return refuse("its width (total_D, or D without bags) is not recorded");
  if (indices->numel <= 0 || offsets->numel <= 1) return refuse("it looks nothing up (no indices, or no bag)");
  out = l;
  return true;
}

uint32_t table_batched_forward_of(const Trace& t, uint32_t backward) {
  const Node& b = t.nodes[backward];
  const std::string_view opt = table_batched_backward_optimizer(t.name(b));
  const Tensor* grad = table_batched_tensor(t, b, TableBatchedArg{0});
  if (opt.empty() || !grad) return kNone32;
  const bool dense = table_batched_dense(opt);
  const std::string want =
      dense ? "dense_embedding_codegen_lookup_function" : "_codegen_lookup_" + std::string(opt) + "_function";
  // What a node's name makes it, decided once per name (the scan below may pass most of the trace):
  // 1 a lookup of this optimizer, 2 a backward node of it, 3 neither.
  std::vector<uint8_t> name_kind(t.strings.size(), 0);
  auto kind_of = [&](const Node& x) {
    uint8_t& k = name_kind[x.name];
    if (k == 0) {
      const std::string_view name = t.name(x), base = op_base_name(name);
      if (is_table_batched_lookup(base) && base.find(want) != std::string_view::npos &&
          (dense || base.substr(0, 5) != "dense"))
        k = 1;
      else
        k = table_batched_backward_optimizer(name) == opt ? 2 : 3;
    }
    return k;
  };
  auto lookup = [&](const Node& f) {
    if (kind_of(f) != 1 || f.kind != NodeKind::Operator || f.num_outputs == 0) return false;
    const Value& o = t.values[f.outputs];
    return o.kind == ValueKind::Tensor && same_shape(t, t.tensors[o.ref], *grad);
  };
  auto same_backward = [&](const Node& x) {
    if (kind_of(x) != 2) return false;
    const Tensor* g = table_batched_tensor(t, x, TableBatchedArg{0});
    return g && same_shape(t, *g, *grad);
  };
  // The stack's top at `backward`, found from `backward` back: lookups and backward nodes nest as parentheses, so
  // the lookup that closes no later backward node is the one still open. A scan from the trace's start would be the
  // same answer in time quadratic in the trace's length (one scan per backward node: minutes on a bundle of a few
  // hundred steps); from the back it ends at the backward's own step. With no lookup open (more backward nodes than
  // lookups), the nearest lookup before it.
  uint32_t nearest = kNone32;
  int64_t closed = 0;  // backward nodes between here and `backward` not yet matched to a lookup
  for (uint32_t k = backward; k-- > 0;) {
    const Node& x = t.nodes[k];
    if (lookup(x)) {
      if (nearest == kNone32) nearest = k;
      if (closed == 0) return k;
      --closed;
    } else if (same_backward(x)) {
      ++closed;
    }
  }
  return nearest;
}

}  // namespace reprise
