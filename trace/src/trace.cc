#include "reprise/trace/trace.h"

#include <algorithm>

#include "reprise/common/dtype.h"

namespace reprise {

const std::vector<std::string_view>& metadata_only_ops() {
  static const std::vector<std::string_view> ops = {"view",
                                                    "_unsafe_view",
                                                    "_reshape_alias",
                                                    "as_strided",
                                                    "t",
                                                    "transpose",
                                                    "permute",
                                                    "expand",
                                                    "expand_as",
                                                    "squeeze",
                                                    "unsqueeze",
                                                    "slice",
                                                    "select",
                                                    "narrow",
                                                    "detach",
                                                    "alias",
                                                    "split",
                                                    "split_with_sizes",
                                                    "unsafe_split",
                                                    "chunk",
                                                    "unbind",
                                                    "unflatten",
                                                    "view_as",
                                                    "empty",
                                                    "empty_like",
                                                    "empty_strided",
                                                    "new_empty",
                                                    "new_empty_strided",
                                                    "lift_fresh",
                                                    "resolve_conj",
                                                    "resolve_neg",
                                                    "numpy_T",
                                                    "size",
                                                    "stride",
                                                    "record_stream",
                                                    "as_strided_",
                                                    "squeeze_",
                                                    "unsqueeze_",
                                                    "t_",
                                                    "transpose_",
                                                    "detach_",
                                                    "diagonal",
                                                    "unfold",
                                                    "movedim",
                                                    "swapaxes",
                                                    "view_as_real",
                                                    "view_as_complex",
                                                    "_conj",
                                                    "conj",
                                                    "real",
                                                    "imag",
                                                    "set_",
                                                    "is_same_size",
                                                    "_has_compatible_shallow_copy_type",
                                                    "result_type",
                                                    "broadcast_tensors"};
  return ops;
}

std::vector<std::string> schema_argument_names(std::string_view schema) {
  std::vector<std::string> names;
  size_t open = schema.find('(');
  if (open == std::string_view::npos) return names;
  int depth = 0;
  std::string cur;
  auto flush = [&] {
    std::string a = cur;
    cur.clear();
    const size_t eq = a.find('=');
    if (eq != std::string::npos) a = a.substr(0, eq);
    while (!a.empty() && a.back() == ' ') a.pop_back();
    const size_t sp = a.rfind(' ');
    std::string name = sp == std::string::npos ? a : a.substr(sp + 1);
    if (!name.empty() && name != "*") names.push_back(name);
  };
  for (size_t i = open + 1; i < schema.size(); ++i) {
    const char ch = schema[i];
    if (depth == 0 && ch == ')') {
      flush();
      break;
    }
    if (ch == '(' || ch == '[') ++depth;
    if (ch == ')' || ch == ']') --depth;
    if (depth == 0 && ch == ',') {
      flush();
      continue;
    }
    cur += ch;
  }
  return names;
}

std::string_view op_base_name(std::string_view name) {
  const size_t p = name.rfind("::");
  return p == std::string_view::npos ? name : name.substr(p + 2);
}

bool is_metadata_only_op(std::string_view name) {
  const auto& ops = metadata_only_ops();
  return std::find(ops.begin(), ops.end(), op_base_name(name)) != ops.end();
}

const char* node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::Root:
      return "root";
    case NodeKind::Thread:
      return "thread";
    case NodeKind::Operator:
      return "operator";
    case NodeKind::Collective:
      return "collective";
    case NodeKind::Wait:
      return "wait";
    case NodeKind::CommOp:
      return "comm_op";
    case NodeKind::Annotation:
      return "annotation";
    case NodeKind::Autograd:
      return "autograd";
    case NodeKind::TritonKernel:
      return "triton_kernel";
    case NodeKind::Other:
      return "other";
  }
  return "other";
}

const char* value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::None:
      return "None";
    case ValueKind::Int:
      return "Int";
    case ValueKind::Double:
      return "Double";
    case ValueKind::Bool:
      return "Bool";
    case ValueKind::String:
      return "String";
    case ValueKind::Device:
      return "Device";
    case ValueKind::Tensor:
      return "Tensor";
    case ValueKind::List:
      return "List";
    case ValueKind::Tuple:
      return "Tuple";
  }
  return "?";
}

bool is_host_sync(const Trace& t, const KinetoEvent& e) {
  if (e.cat == KinetoCat::Sync) return true;
  return (e.cat == KinetoCat::Runtime || e.cat == KinetoCat::Driver) &&
         t.str(e.name).find("Synchronize") != std::string_view::npos;
}

bool is_blocking_copy(const Trace& t, const KinetoEvent& e) {
  if (e.cat != KinetoCat::Runtime && e.cat != KinetoCat::Driver) return false;
  const std::string_view name = t.str(e.name);
  return name == "cudaMemcpy" || name == "hipMemcpy";
}

const char* kineto_cat_name(KinetoCat c) {
  switch (c) {
    case KinetoCat::CpuOp:
      return "cpu_op";
    case KinetoCat::UserAnnotation:
      return "user_annotation";
    case KinetoCat::GpuUserAnnotation:
      return "gpu_user_annotation";
    case KinetoCat::Runtime:
      return "cuda_runtime";
    case KinetoCat::Driver:
      return "cuda_driver";
    case KinetoCat::Kernel:
      return "kernel";
    case KinetoCat::Memcpy:
      return "gpu_memcpy";
    case KinetoCat::Memset:
      return "gpu_memset";
    case KinetoCat::Sync:
      return "cuda_sync";
    case KinetoCat::Other:
      return "other";
  }
  return "other";
}

std::vector<int64_t> Trace::strides(const Tensor& t) const {
  std::vector<int64_t> s(t.rank);
  if (t.has_strides) {
    for (uint16_t k = 0; k < t.rank; ++k) s[k] = ints[t.strides + k];
    return s;
  }
  int64_t acc = 1;
  for (int k = t.rank - 1; k >= 0; --k) {
    s[k] = acc;
    // saturates: tensor_extent reports such a shape, and nothing may overflow on the way there
    if (__builtin_mul_overflow(acc, std::max<int64_t>(ints[t.dims + k], 1), &acc)) acc = INT64_MAX;
  }
  return s;
}

namespace {

std::string int_list_text(Span<int64_t> v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + std::to_string(v[k]);
  return s + "]";
}

}  // namespace

TensorExtent tensor_extent(const Trace& t, const Tensor& x) {
  TensorExtent e;
  Span<int64_t> dims = t.dims(x);
  auto fail = [&](const std::string& why) {
    e.problem = "tensor of sizes " + int_list_text(dims) + ": " + why;
    return e;
  };
  auto strides_text = [&] {
    return x.has_strides ? int_list_text({t.ints.data() + x.strides, x.rank}) : std::string("(contiguous)");
  };
  int64_t numel = 1;
  for (int64_t d : dims) {
    if (d < 0) return fail("size " + std::to_string(d) + " is negative");
    if (__builtin_mul_overflow(numel, d, &numel)) return fail("its element count is past int64");
  }
  if (x.numel < 0) return fail("element count " + std::to_string(x.numel) + " is negative");
  if (x.offset < 0) return fail("storage offset " + std::to_string(x.offset) + " is negative");
  if (x.itemsize < 0) return fail("item size " + std::to_string(x.itemsize) + " is negative");
  // the last element's index past the first; contiguous strides (none recorded) are the later sizes' product. An
  // empty tensor's other dims must reach within int64 too: LibTorch sums them before it meets the empty one
  int64_t reach = 0, contiguous = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    const int64_t stride = x.has_strides ? t.ints[x.strides + k] : contiguous;
    if (!x.has_strides && __builtin_mul_overflow(contiguous, std::max<int64_t>(dims[k], 1), &contiguous))
      contiguous = INT64_MAX;  // past an empty dim: the strides reach nothing
    if (stride < 0) return fail("stride " + std::to_string(stride) + " in strides " + strides_text() + " is negative");
    int64_t step = 0;
    if (dims[k] > 0 &&
        (__builtin_mul_overflow(dims[k] - 1, stride, &step) || __builtin_add_overflow(reach, step, &reach)))
      return fail("strides " + strides_text() + " reach past int64 elements");
  }
  // an empty tensor reaches its offset still: replay makes its storage that long
  int64_t span = 0;
  if (__builtin_add_overflow(reach, 1, &span) || __builtin_add_overflow(x.offset, numel > 0 ? span : 0, &e.elements))
    return fail("storage offset " + std::to_string(x.offset) + " and strides reach past int64 elements");
  int64_t unused = 0;
  if (__builtin_mul_overflow(x.numel, static_cast<int64_t>(x.itemsize), &unused))
    return fail(std::to_string(x.numel) + " elements of " + std::to_string(x.itemsize) + " bytes are past int64 bytes");
  if (__builtin_mul_overflow(e.elements, static_cast<int64_t>(x.itemsize), &e.bytes))
    return fail("its storage of " + std::to_string(e.elements) + " elements of " + std::to_string(x.itemsize) +
                " bytes is past int64 bytes");
  return e;
}

uint32_t Trace::find(int64_t id) const {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), id, [](const Node& n, int64_t v) { return n.id < v; });
  if (it == nodes.end() || it->id != id) return kNone32;
  return static_cast<uint32_t>(it - nodes.begin());
}

const Value* Trace::attr(const Node& n, std::string_view name) const {
  for (const Attr& a : node_attrs(n))
    if (str(a.name) == name) return &values[a.value];
  return nullptr;
}

bool Trace::in_subtree(uint32_t node, uint32_t ancestor) const {
  for (uint32_t p = node; p != kNone32; p = nodes[p].parent)
    if (p == ancestor) return true;
  return false;
}

std::vector<StepSpan> profiler_steps(const Trace& t) {
  std::vector<StepSpan> out;
  for (const Iteration& it : t.iterations) {
    if (!it.profiler_step) continue;
    if (!out.empty()) out.back().end_id = t.nodes[it.node].id;
    out.push_back({&it, t.nodes[it.node].id, INT64_MAX});
  }
  return out;
}

size_t first_complete_step(const Trace& t, const std::vector<StepSpan>& steps) {
  for (size_t k = 0; k < steps.size(); ++k)
    for (uint32_t c : t.children(t.nodes[steps[k].step->node]))
      if (t.nodes[c].kind == NodeKind::Operator || t.nodes[c].num_children > 0) return k;
  return 0;
}

int32_t collective_of(const Trace& t, uint32_t node) {
  const Node& n = t.nodes[node];
  if (n.collective >= 0) return n.collective;
  for (uint32_t c : t.children(n))
    if (t.nodes[c].collective >= 0) return t.nodes[c].collective;
  return -1;
}

std::string collective_label(const Trace& t, uint32_t node) {
  const int32_t k = collective_of(t, node);
  std::string label(t.name(t.nodes[node]));
  if (k >= 0) label = (t.collectives[k].is_wait ? std::string("wait") : t.collectives[k].name) + " (" + label + ")";
  return label;
}

int trace_world_size(const Trace& t, int rank_files) {
  int64_t world = std::max(1, rank_files);
  for (const ProcessGroup& pg : t.process_groups) {
    world = std::max<int64_t>(world, std::max<int64_t>(pg.size, static_cast<int64_t>(pg.ranks.size())));
    for (int64_t r : pg.ranks) world = std::max<int64_t>(world, r + 1);
  }
  for (const Collective& c : t.collectives) world = std::max<int64_t>(world, c.pg_size);
  check_world(world, t.source);
  return static_cast<int>(world);
}

void check_world(int64_t ranks, const std::string& where) {
  if (ranks > kMaxWorldSize)
    throw UserError(where + ": a process group of " + std::to_string(ranks) + " ranks, more than Reprise handles (" +
                    std::to_string(kMaxWorldSize) + ")");
}

const ProcessGroup* find_process_group(const std::vector<ProcessGroup>& groups, std::string_view name) {
  for (const ProcessGroup& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}

std::vector<int64_t> collective_group_ranks(const Collective& c, const ProcessGroup* pg, int world) {
  check_world(std::max<int64_t>(c.pg_size, pg ? pg->size : 0), "a collective");
  std::vector<int64_t> ranks;
  if (pg && !pg->ranks.empty()) {
    ranks = pg->ranks;
  } else if (c.global_rank_start >= 0 && c.pg_size > 0 && c.pg_size < world) {
    for (int64_t k = 0; k < c.pg_size; ++k)
      ranks.push_back(c.global_rank_start + k * std::max<int64_t>(c.global_rank_stride, 1));
  } else {
    const int64_t n = pg && pg->size > 0 ? pg->size : (c.pg_size > 0 ? c.pg_size : world);
    for (int64_t r = 0; r < n; ++r) ranks.push_back(r);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

size_t Trace::memory_bytes() const {
  size_t b = strings.bytes();
  b += nodes.capacity() * sizeof(Node) + values.capacity() * sizeof(Value) + arg_types.capacity() * sizeof(StrId);
  b += tensors.capacity() * sizeof(Tensor) + ints.capacity() * sizeof(int64_t) + attrs.capacity() * sizeof(Attr);
  b += child_index.capacity() * sizeof(uint32_t) + collectives.capacity() * sizeof(Collective);
  if (kineto)
    b += kineto->events.capacity() * sizeof(KinetoEvent) + kineto->flows.capacity() * sizeof(KinetoFlow) +
         kineto->inputs.capacity() * sizeof(KinetoInput) + kineto->input_dims.capacity() * sizeof(int64_t);
  return b;
}

std::string_view tensor_dtype_of(std::string_view type) {
  if (type.rfind("Tensor(", 0) != 0 || type.back() != ')') return {};
  return type.substr(7, type.size() - 8);
}

int dtype_itemsize(std::string_view d) {
  const Dtype* x = find_dtype(d);
  return x ? x->itemsize : 0;
}

}  // namespace reprise
