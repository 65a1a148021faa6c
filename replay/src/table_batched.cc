#include "table_batched.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <tuple>

#include "plan.h"

namespace reprise::replay::detail {
namespace {

// Optimizer kinds of the update: what state it reads and writes per row touched.
enum Update : int64_t { kPlain = 0, kPerElement = 1, kRowwise = 2, kDenseGradient = 3 };

int64_t update_kind(std::string_view opt) {
  if (table_batched_dense(opt)) return kDenseGradient;
  if (opt.find("rowwise") != std::string_view::npos && opt.find("partial") == std::string_view::npos) return kRowwise;
  if (opt.find("adagrad") != std::string_view::npos || opt.find("adam") != std::string_view::npos ||
      opt.find("lamb") != std::string_view::npos)
    return kPerElement;
  return kPlain;  // sgd, approx_sgd, lars_sgd, none
}

// The tables as rows of width d (the larger of the device and UVM halves: a module's tables sit in one), the indices
// as rows that exist and the offsets as bags over them.
struct Tables {
  at::Tensor rows, indices, offsets;
  int64_t d = 1, bags = 0;
};

Tables tables_of(const c10::optional<at::Tensor>& dev, const c10::optional<at::Tensor>& uvm, const at::Tensor& indices,
                 const at::Tensor& offsets, int64_t total_d, int64_t tables) {
  Tables x;
  auto numel = [](const c10::optional<at::Tensor>& w) { return w && w->defined() ? w->numel() : int64_t(-1); };
  if (numel(dev) < 0 && numel(uvm) < 0) return x;
  const at::Tensor& w = numel(uvm) > numel(dev) ? *uvm : *dev;
  x.d = std::max<int64_t>(1, total_d / std::max<int64_t>(1, tables));
  const int64_t rows = w.numel() / x.d, lookups = indices.numel();
  x.bags = std::max<int64_t>(0, offsets.numel() - 1);
  if (rows == 0 || w.is_meta()) return x;
  x.rows = w.reshape({-1}).narrow(0, 0, rows * x.d).view({rows, x.d});
  x.indices = indices.to(at::kLong).remainder(rows);
  at::Tensor off = offsets.to(at::kLong).clamp(0, lookups);
  off = std::get<0>(off.cummax(0));
  if (off.numel() > 0) {
    off.select(0, 0).fill_(0);
    off.select(0, -1).fill_(lookups);
  }
  x.offsets = off;
  return x;
}

// Rows laid out table-major ([tables x batch, d]) as the lookup's [batch, tables x d]; anything else flattened into
// the recorded size (zeros past what there is).
at::Tensor as_output(const at::Tensor& rows, int64_t tables, at::IntArrayRef size) {
  const int64_t n = rows.size(0), d = rows.size(1);
  if (size.size() == 2 && tables > 0 && n % tables == 0 && size[0] == n / tables && size[1] == tables * d)
    return rows.view({tables, n / tables, d}).permute({1, 0, 2}).reshape(size);
  at::Tensor out = at::zeros(size, rows.options());
  const int64_t k = std::min(out.numel(), rows.numel());
  out.view({-1}).narrow(0, 0, k).copy_(rows.reshape({-1}).narrow(0, 0, k));
  return out;
}

at::Tensor table_batched_lookup(const c10::optional<at::Tensor>& dev, const c10::optional<at::Tensor>& uvm,
                                const at::Tensor& indices, const at::Tensor& offsets, int64_t total_d, int64_t tables,
                                int64_t pooling_mode, at::IntArrayRef output_size, int64_t output_dtype) {
  const auto dtype = static_cast<at::ScalarType>(output_dtype);
  Tables x = tables_of(dev, uvm, indices, offsets, total_d, tables);
  if (!x.rows.defined()) return at::zeros(output_size, indices.options().dtype(dtype));  // meta, or no tables
  if (pooling_mode == 2) return as_output(x.rows.index_select(0, x.indices), 1, output_size).to(dtype);  // no pooling
  at::Tensor table = x.rows, rows = x.indices;
  const at::ScalarType w = table.scalar_type();
  if (w != at::kFloat && w != at::kHalf && w != at::kDouble) {
    // Tables embedding_bag does not pool everywhere (bf16, fbgemm's int8 rows): the rows looked up, pooled in fp32.
    table = table.index_select(0, rows).to(at::kFloat);
    rows = at::arange(rows.numel(), rows.options());
  }
  at::Tensor pooled = std::get<0>(
      at::embedding_bag(table, rows, x.offsets, false, pooling_mode == 1 ? 1 : 0, false, c10::nullopt, true));
  return as_output(pooled, tables, output_size).to(dtype);
}

void table_batched_update(const at::Tensor& grad, const c10::optional<at::Tensor>& dev,
                          const c10::optional<at::Tensor>& uvm, const at::Tensor& indices, const at::Tensor& offsets,
                          const c10::optional<at::Tensor>& state, int64_t total_d, int64_t tables, int64_t pooling_mode,
                          int64_t kind) {
  Tables x = tables_of(dev, uvm, indices, offsets, total_d, tables);
  if (!x.rows.defined() || grad.is_meta()) return;
  constexpr double lr = 1e-3, eps = 1e-8;
  const int64_t lookups = x.indices.numel();
  // Each lookup's gradient row: its bag's (pooled), or its own (no pooling).
  at::Tensor g;
  if (pooling_mode == 2) {
    g = grad.reshape({-1}).narrow(0, 0, std::min(grad.numel(), lookups * x.d));
  } else {
    const int64_t batch = tables > 0 ? x.bags / tables : 0;
    at::Tensor per_bag =
        batch * tables == x.bags && grad.numel() == x.bags * x.d && grad.dim() == 2 && grad.size(0) == batch
            ? grad.reshape({batch, tables, x.d}).permute({1, 0, 2}).reshape({x.bags, x.d})
            : grad.reshape({-1}).narrow(0, 0, std::min(grad.numel(), x.bags * x.d));
    if (per_bag.numel() < x.bags * x.d)
      per_bag = at::constant_pad_nd(per_bag.reshape({-1}), {0, x.bags * x.d - per_bag.numel()});
    const at::Tensor counts = x.offsets.narrow(0, 1, x.bags) - x.offsets.narrow(0, 0, x.bags);
    g = per_bag.reshape({x.bags, x.d})
            .index_select(0, at::repeat_interleave(at::arange(x.bags, counts.options()), counts));
  }
  if (g.numel() < lookups * x.d) g = at::constant_pad_nd(g.reshape({-1}), {0, lookups * x.d - g.numel()});
  // The step in the tables' dtype (fp16 tables take fp32 gradients), in fp32 for integer tables.
  const at::ScalarType w = x.rows.scalar_type(), math = at::isFloatingType(w) ? w : at::kFloat;
  g = g.reshape({lookups, x.d}).to(math);
  // Sorted by row, as the fused kernels do before they update each row once.
  at::Tensor row, order;
  std::tie(row, order) = x.indices.sort();
  g = g.index_select(0, order);
  const bool has_state = state && state->defined();
  if (kind == kDenseGradient) {
    // The tables' gradient, which an optimizer outside then applies.
    at::zeros(x.rows.sizes(), g.options()).index_add_(0, row, g);
    return;
  }
  if (kind == kPerElement && has_state && state->numel() >= x.rows.numel()) {
    at::Tensor s = state->reshape({-1}).narrow(0, 0, x.rows.numel()).view_as(x.rows);
    s.index_add_(0, row, (g * g).to(s.scalar_type()));
    g = (g / (s.index_select(0, row).sqrt() + eps)).to(math);
  } else if (kind == kRowwise && has_state && state->numel() >= x.rows.size(0)) {
    at::Tensor s = state->reshape({-1}).narrow(0, 0, x.rows.size(0));
    s.index_add_(0, row, (g * g).mean(1).to(s.scalar_type()));
    g = (g / (s.index_select(0, row).sqrt() + eps).unsqueeze(1)).to(math);
  }
  if (math != w)  // integer tables take an integer alpha only: the step scaled first
    x.rows.index_add_(0, row, (g * -lr).to(w));
  else
    x.rows.index_add_(0, row, g, -lr);
}

c10::IValue ints(at::IntArrayRef v) { return c10::IValue(c10::List<int64_t>(v.vec())); }

}  // namespace

void define_table_batched_ops(torch::Library& lib) {
  lib.def(
      "table_batched_lookup(Tensor? dev_weights, Tensor? uvm_weights, Tensor indices, Tensor offsets, int total_D, "
      "int tables, int pooling_mode, int[] output_size, int output_dtype) -> Tensor",
      table_batched_lookup);
  lib.def(
      "table_batched_update(Tensor grad_output, Tensor(a!)? dev_weights, Tensor(b!)? uvm_weights, Tensor indices, "
      "Tensor offsets, Tensor(c!)? state, int total_D, int tables, int pooling_mode, int kind) -> ()",
      table_batched_update);
}

Remap table_batched_lookup_remap(const Trace& t, uint32_t node, const TableBatchedLookup& l,
                                 std::vector<Value>& values) {
  const Node& n = t.nodes[node];
  std::vector<int64_t> size;
  int64_t dtype = static_cast<int64_t>(at::kFloat);
  if (n.num_outputs > 0 && t.values[n.outputs].kind == ValueKind::Tensor) {
    const reprise::Tensor& out = t.tensors[t.values[n.outputs].ref];
    Span<int64_t> d = t.dims(out);
    size.assign(d.begin(), d.end());
    at::ScalarType s;
    if (scalar_type_of(t.str(out.dtype), s)) dtype = static_cast<int64_t>(s);
  }
  values = {table_batched_value(t, n, l.dev_weights), table_batched_value(t, n, l.uvm_weights),
            table_batched_value(t, n, l.indices), table_batched_value(t, n, l.offsets)};
  return {
      "reprise::table_batched_lookup",
      "",
      {remap_source(0), remap_source(1), remap_source(2), remap_source(3), remap_constant(l.total_dim),
       remap_constant(l.tables), remap_constant(l.pooling_mode), remap_constant(ints(size)), remap_constant(dtype)}};
}

Remap table_batched_update_remap(const Trace& t, uint32_t node, uint32_t forward, const TableBatchedLookup& l,
                                 std::vector<Value>& values) {
  const Node& b = t.nodes[node];
  const Node& f = t.nodes[forward];
  // The optimizer's first state: whichever half holds it, as the weights.
  const TableBatchedArg state = table_batched_larger(t, f, l.momentum1_dev, l.momentum1_uvm);
  values = {t.inputs(b)[0],
            table_batched_value(t, f, l.dev_weights),
            table_batched_value(t, f, l.uvm_weights),
            table_batched_value(t, f, l.indices),
            table_batched_value(t, f, l.offsets),
            table_batched_value(t, f, state)};
  const int64_t kind = update_kind(table_batched_backward_optimizer(t.name(b)));
  return {
      "reprise::table_batched_update",
      "",
      {remap_source(0), remap_source(1), remap_source(2), remap_source(3), remap_source(4), remap_source(5),
       remap_constant(l.total_dim), remap_constant(l.tables), remap_constant(l.pooling_mode), remap_constant(kind)}};
}

}  // namespace reprise::replay::detail
