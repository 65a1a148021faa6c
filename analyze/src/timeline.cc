#include "timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "reprise/common/error.h"

namespace reprise::analyze::detail {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
bool starts(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_optimizer_name(std::string_view n) {
  if (contains(n, "zero_grad")) return false;
  return starts(n, "Optimizer.step#") || contains(lower(n), "optimizer");
}
bool is_zero_grad_name(std::string_view n) { return contains(n, "zero_grad"); }
bool is_data_name(std::string_view n) {
  const std::string l = lower(n);
  return contains(l, "dataloader") || contains(l, "load_batch") || contains(l, "wait_for_batch") ||
         contains(l, "next_data");
}

// The op name without its namespace: "aten::addmm" -> "addmm".
std::string_view bare(std::string_view n) { return op_base_name(n); }

const char* kElementwise[] = {"add",
                              "add_",
                              "sub",
                              "sub_",
                              "mul",
                              "mul_",
                              "div",
                              "div_",
                              "relu",
                              "relu_",
                              "gelu",
                              "silu",
                              "silu_",
                              "sigmoid",
                              "tanh",
                              "exp",
                              "log",
                              "pow",
                              "sqrt",
                              "rsqrt",
                              "neg",
                              "abs",
                              "clamp",
                              "clamp_",
                              "where",
                              "masked_fill",
                              "masked_fill_",
                              "addcmul_",
                              "addcdiv_",
                              "lerp_",
                              "threshold_backward",
                              "gelu_backward",
                              "silu_backward",
                              "sigmoid_backward",
                              "tanh_backward",
                              "leaky_relu"};

bool is_simt_fp32_gemm(std::string_view k) {
  if (!contains(k, "sgemm")) return false;
  return !contains(k, "tensorop") && !contains(k, "1688") && !contains(k, "tf32") && !contains(k, "xmma");
}

}  // namespace

bool is_step_name(std::string_view n) { return starts(n, "ProfilerStep#"); }

// CPU ops that mark a stretch of the program rather than do work.
bool is_scope_name(std::string_view n) {
  return starts(n, "## ") || starts(n, "Optimizer.") || is_data_name(n) || is_step_name(n);
}

std::vector<Range> merge(std::vector<Range> r) {
  std::sort(r.begin(), r.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::vector<Range> out;
  for (const Range& x : r) {
    if (x.end <= x.begin) continue;
    if (!out.empty() && x.begin <= out.back().end)
      out.back().end = std::max(out.back().end, x.end);
    else
      out.push_back(x);
  }
  return out;
}

double covered(const std::vector<Range>& u, double b, double e) {
  if (e <= b) return 0;
  auto it = std::lower_bound(u.begin(), u.end(), b, [](const Range& r, double v) { return r.end <= v; });
  double sum = 0;
  for (; it != u.end() && it->begin < e; ++it) sum += std::min(it->end, e) - std::max(it->begin, b);
  return sum;
}

std::vector<Range> holes(const std::vector<Range>& u, double b, double e) {
  std::vector<Range> out;
  double at = b;
  auto it = std::lower_bound(u.begin(), u.end(), b, [](const Range& r, double v) { return r.end <= v; });
  for (; it != u.end() && it->begin < e; ++it) {
    if (it->begin > at) out.push_back({at, it->begin});
    at = std::max(at, it->end);
  }
  if (at < e) out.push_back({at, e});
  return out;
}

bool inside(const std::vector<Range>& u, double x) {
  auto it = std::upper_bound(u.begin(), u.end(), x, [](double v, const Range& r) { return v < r.begin; });
  return it != u.begin() && std::prev(it)->end > x;
}

WorkClass classify_kernel(std::string_view k) {
  if (starts(k, "nccl") || contains(k, "ncclKernel") || contains(k, "ncclDevKernel") || starts(k, "rccl"))
    return WorkClass::Comm;
  const std::string l = lower(k);
  if (contains(l, "gemm") || contains(l, "cublas") || contains(l, "cutlass") || contains(l, "fprop") ||
      contains(l, "dgrad") || contains(l, "wgrad") || contains(l, "conv") || contains(l, "winograd"))
    return WorkClass::Gemm;
  if (contains(k, "elementwise_kernel")) return WorkClass::Elementwise;
  if (contains(k, "reduce_kernel")) return WorkClass::Reduce;
  return WorkClass::Other;
}

// The scope the autograd engine records around each backward function it runs.
constexpr std::string_view kBackwardFunction = "autograd::engine::evaluate_function:";

std::string elementwise_op_regex() {
  std::string re = "^(aten::)?(";
  for (const char* e : kElementwise) re += std::string(re.back() == '(' ? "" : "|") + e;
  return re + ")$";
}

WorkClass classify_op(std::string_view name) {
  const std::string_view b = bare(name);
  if (name == "record_param_comms" || starts(name, "c10d::") || starts(name, "nccl:") || b == "wait")
    return WorkClass::Comm;
  for (std::string_view g : {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "convolution", "conv2d"})
    if (b == g) return WorkClass::Gemm;
  for (const char* e : kElementwise)
    if (b == e) return WorkClass::Elementwise;
  for (std::string_view r : {"sum", "mean", "amax", "max", "min", "norm", "softmax", "_softmax"})
    if (b == r) return WorkClass::Reduce;
  if (b == "copy_" || b == "_to_copy") return WorkClass::Memcpy;
  if (b == "zero_" || b == "fill_") return WorkClass::Memset;
  return WorkClass::Other;
}

double unaligned_gemm_share(const Timeline& tl) { return tl.gpu ? 0.8 : 0.97; }

bool held_to_aligned_rate(const Timeline& tl, const GemmOp& g) {
  auto ref = tl.aligned_gemm_rate.find(g.dtype);
  return tl.gpu && ref != tl.aligned_gemm_rate.end() && ref->second > 0;
}

double aligned_gemm_us(const Timeline& tl, const GemmOp& g) {
  auto padded = [](int64_t d) { return double(padded_dim(d)) / double(d); };
  const double growth = padded(g.m) * padded(g.n) * padded(g.k);  // the padded GEMM's FLOPs over its own
  if (held_to_aligned_rate(tl, g)) return growth * g.flops / tl.aligned_gemm_rate.at(g.dtype);
  return growth * unaligned_gemm_share(tl) * g.device_us;
}

const char* gap_cause_name(GapCause c) {
  switch (c) {
    case GapCause::Host:
      return "host";
    case GapCause::Sync:
      return "sync";
    case GapCause::Data:
      return "data";
    case GapCause::Dependency:
      return "dependency";
  }
  return "?";
}

double WindowStats::idle_us(GapCause c) const {
  double sum = 0;
  for (const Gap& g : gaps)
    if (g.cause == c && !g.in_launch_stretch) sum += g.range.length();
  return sum;
}

Timeline build_timeline(const Trace& t, int rank) {
  if (!t.kineto || t.kineto->events.empty())
    throw UserError(t.source + ": no Kineto timeline (analyze reads a Kineto trace, or an ET with its Kineto trace)");
  Timeline tl;
  tl.trace = &t;
  tl.kineto = &*t.kineto;
  tl.rank = rank;
  const auto& ev = t.kineto->events;
  for (const KinetoEvent& e : ev)
    if (is_gpu_work(e.cat)) tl.gpu = true;
  tl.begin = INFINITY;
  tl.end = -INFINITY;
  for (int32_t i = 0; i < static_cast<int32_t>(ev.size()); ++i) {
    const KinetoEvent& e = ev[i];
    if (!(e.dur >= 0) || !std::isfinite(e.ts) || !std::isfinite(e.dur) || !std::isfinite(e.ts + e.dur)) continue;
    tl.begin = std::min(tl.begin, e.ts);
    tl.end = std::max(tl.end, e.ts + e.dur);
    const std::string_view name = t.str(e.name);
    if (e.cat == KinetoCat::CpuOp || e.cat == KinetoCat::UserAnnotation) {
      if (e.cat == KinetoCat::CpuOp) tl.cpu_ops.push_back(i);
      if (is_step_name(name))
        tl.steps.push_back({i, std::string(name), e.ts, e.ts + e.dur, e.tid});
      else if (e.cat == KinetoCat::UserAnnotation || is_scope_name(name))
        tl.scopes.push_back({i, std::string(name), e.ts, e.ts + e.dur, e.tid});
    }
    if (tl.gpu && is_gpu_work(e.cat)) {
      Work w;
      w.event = i;
      w.begin = e.ts;
      w.end = e.ts + e.dur;
      w.cls = e.cat == KinetoCat::Memcpy   ? WorkClass::Memcpy
              : e.cat == KinetoCat::Memset ? WorkClass::Memset
                                           : classify_kernel(name);
      w.stream = e.stream;
      if (e.launcher >= 0) {
        w.launch_us = ev[e.launcher].dur;
        w.launch_ts = ev[e.launcher].ts;
      }
      w.cpu_op = e.cpu_op;
      tl.work.push_back(w);
    }
    // The trace model's host syncs, less the cuda_sync events a runtime call already stands for and a stream's wait
    // on an event (device-side, cudaStreamWaitEvent), plus blocking copies.
    const bool sync =
        is_host_sync(t, e) && !(e.cat == KinetoCat::Sync && (e.launcher >= 0 || contains(name, "Wait Event")));
    if (sync || is_blocking_copy(t, e)) tl.syncs.push_back(i);
  }
  if (!std::isfinite(tl.begin)) throw UserError(t.source + ": its Kineto timeline has no timed events");
  if (!tl.gpu) {
    // No GPU work: the device is the host, and its work the CPU ops no other op encloses. An autograd engine's
    // wrapper (a backward function) is elementwise work when every op it calls is (metadata-only ones aside): a
    // chain in the backward pass; one that calls none is not work.
    std::map<int32_t, std::pair<size_t, size_t>> called;  // wrapper event -> (ops it calls, elementwise among them)
    for (int32_t i : tl.cpu_ops) {
      const std::string_view name = t.str(ev[i].name);
      if (!starts(name, "aten::")) continue;
      int32_t wrapper = -1;
      bool first_op = true;  // no aten op between it and the wrapper (ops called by ops are the caller's)
      for (int32_t p = ev[i].parent; p >= 0; p = ev[p].parent) {
        const std::string_view pn = t.str(ev[p].name);
        if (starts(pn, "aten::")) first_op = false;
        if (ev[p].cat == KinetoCat::CpuOp && starts(pn, kBackwardFunction)) wrapper = p;
      }
      if (wrapper < 0 || !first_op || is_metadata_only_op(name)) continue;  // lift_fresh, a view: not work
      auto& [ops, elementwise] = called[wrapper];
      ++ops;
      elementwise += classify_op(name) == WorkClass::Elementwise;
    }
    for (int32_t i : tl.cpu_ops) {
      const KinetoEvent& e = ev[i];
      const std::string_view name = t.str(e.name);
      if (is_scope_name(name)) continue;
      bool top = true;
      for (int32_t p = e.parent; p >= 0; p = ev[p].parent)
        if (ev[p].cat == KinetoCat::CpuOp && !is_scope_name(t.str(ev[p].name))) {
          top = false;
          break;
        }
      if (!top) continue;
      Work w;
      w.event = i;
      w.begin = e.ts;
      w.end = e.ts + e.dur;
      w.cls = classify_op(name);
      auto c = called.find(i);
      if (c != called.end() && c->second.first == c->second.second) w.cls = WorkClass::Elementwise;
      // A wrapper that calls no op (a pass-through such as AddBackward1) is no work: a chain goes past it.
      if (c == called.end() && starts(name, kBackwardFunction)) continue;
      w.stream = e.tid;
      w.cpu_op = i;
      tl.work.push_back(w);
    }
  }
  std::sort(tl.work.begin(), tl.work.end(), [](const Work& a, const Work& b) { return a.begin < b.begin; });
  std::vector<Range> all, compute, comm;
  for (const Work& w : tl.work) {
    all.push_back({w.begin, w.end});
    if (w.cls == WorkClass::Comm)
      comm.push_back({w.begin, w.end});
    else if (is_compute(w.cls))
      compute.push_back({w.begin, w.end});
  }
  tl.busy = merge(std::move(all));
  tl.compute = merge(std::move(compute));
  tl.comm = merge(std::move(comm));
  auto by_ts = [&](int32_t a, int32_t b) { return ev[a].ts < ev[b].ts; };
  std::sort(tl.syncs.begin(), tl.syncs.end(), by_ts);
  tl.syncs_by_end = tl.syncs;
  std::sort(tl.syncs_by_end.begin(), tl.syncs_by_end.end(),
            [&](int32_t a, int32_t b) { return ev[a].ts + ev[a].dur < ev[b].ts + ev[b].dur; });
  std::sort(tl.cpu_ops.begin(), tl.cpu_ops.end(), by_ts);
  auto scope_order = [](const Scope& a, const Scope& b) { return a.begin < b.begin; };
  std::sort(tl.scopes.begin(), tl.scopes.end(), scope_order);
  std::vector<Range> data;
  for (const Scope& sc : tl.scopes)
    if (is_data_name(sc.name)) data.push_back({sc.begin, sc.end});
  tl.data = merge(std::move(data));
  std::vector<Range> optimizer;
  for (const Scope& sc : tl.scopes)
    if (is_optimizer_name(sc.name)) optimizer.push_back({sc.begin, sc.end});
  tl.optimizer = merge(std::move(optimizer));
  // Steps: one per name (Kineto may repeat the marker), each to the next one's start; the last to the end of the
  // work it launched.
  std::sort(tl.steps.begin(), tl.steps.end(), scope_order);
  // Kineto may record a step's marker twice (as a CPU op and an annotation, at the same instant): one is kept. A name
  // that comes back later (a second profiling session in the file) is told apart: "ProfilerStep#5 (2)".
  tl.steps.erase(
      std::unique(tl.steps.begin(), tl.steps.end(),
                  [](const Scope& a, const Scope& b) { return a.name == b.name && std::fabs(a.begin - b.begin) < 1; }),
      tl.steps.end());
  std::map<std::string, int> seen;
  for (Scope& step : tl.steps)
    if (const int n = ++seen[step.name]; n > 1) step.name += " (" + std::to_string(n) + ")";
  for (size_t s = 0; s < tl.steps.size(); ++s) {
    Scope& step = tl.steps[s];
    if (s + 1 < tl.steps.size()) {
      step.end = tl.steps[s + 1].begin;
      continue;
    }
    const double host_end = step.end;
    for (const Work& w : tl.work) {
      const double launched = w.launch_ts >= 0 ? w.launch_ts : w.begin;
      if (launched >= step.begin && launched < host_end) step.end = std::max(step.end, w.end);
    }
  }
  return tl;
}

namespace {

// Device time of the work each CPU op launched, itself and through the ops it encloses (GPU traces), and whether
// any of it was a copy.
struct OpDevice {
  std::unordered_map<int32_t, double> us;
  std::unordered_map<int32_t, bool> copies;
};

OpDevice op_device(const Timeline& tl, size_t first, size_t last) {
  OpDevice d;
  const auto& ev = tl.kineto->events;
  for (size_t w = first; w < last; ++w) {
    const Work& x = tl.work[w];
    for (int32_t op = x.cpu_op; op >= 0; op = ev[op].parent) {
      d.us[op] += x.end - x.begin;
      if (x.cls == WorkClass::Memcpy && tl.gpu) d.copies[op] = true;  // on a CPU trace, no other device
      if (!tl.gpu) break;
    }
  }
  return d;
}

// A tensor input's sizes: Kineto's Input Dims, else the linked ET node's tensor; false when neither is known.
bool known_input_dims(const Timeline& tl, int32_t event, size_t i, std::vector<int64_t>& dims) {
  const KinetoEvent& e = tl.event(event);
  const KinetoInfo& k = *tl.kineto;
  if (i < e.num_inputs) {
    const KinetoInput& in = k.inputs[e.inputs + i];
    if (in.has_dims) {
      dims.assign(k.input_dims.begin() + in.dims, k.input_dims.begin() + in.dims + in.rank);
      return true;
    }
  }
  if (e.node != kNone32) {
    const Trace& t = *tl.trace;
    const Node& n = t.nodes[e.node];
    if (i < n.num_inputs && t.values[n.inputs + i].kind == ValueKind::Tensor) {
      const auto d = t.dims(t.tensors[t.values[n.inputs + i].ref]);
      dims.assign(d.begin(), d.end());
      return true;
    }
  }
  dims.clear();
  return false;
}

// The sizes known_input_dims finds, empty when unknown.
std::vector<int64_t> input_dims(const Timeline& tl, int32_t event, size_t i) {
  std::vector<int64_t> dims;
  known_input_dims(tl, event, i, dims);
  return dims;
}

// Whether the op's first input is known to hold one element (a 0-dim tensor: a number lifted to a tensor).
bool scalar_input(const Timeline& tl, int32_t event) {
  std::vector<int64_t> dims;
  return known_input_dims(tl, event, 0, dims) &&
         std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d == 1; });
}

std::string input_type(const Timeline& tl, int32_t event, size_t i) {
  const KinetoEvent& e = tl.event(event);
  const KinetoInfo& k = *tl.kineto;
  if (i < e.num_inputs && k.inputs[e.inputs + i].type) return std::string(tl.trace->str(k.inputs[e.inputs + i].type));
  if (e.node != kNone32) {
    const Trace& t = *tl.trace;
    const Node& n = t.nodes[e.node];
    if (i < n.num_inputs && t.values[n.inputs + i].kind == ValueKind::Tensor)
      return std::string(t.str(t.tensors[t.values[n.inputs + i].ref].dtype));
  }
  return "";
}

// The output dtype of a conversion, from the linked ET node; empty when unknown.
std::string output_type(const Timeline& tl, int32_t event) {
  const KinetoEvent& e = tl.event(event);
  if (e.node == kNone32) return "";
  const Trace& t = *tl.trace;
  const Node& n = t.nodes[e.node];
  if (n.num_outputs && t.values[n.outputs].kind == ValueKind::Tensor)
    return std::string(t.str(t.tensors[t.values[n.outputs].ref].dtype));
  return "";
}

bool gemm_shape(const Timeline& tl, int32_t event, GemmOp& g) {
  const std::string_view op = bare(tl.name(event));
  size_t a = 0;
  if (op == "addmm" || op == "baddbmm")
    a = 1;
  else if (op != "mm" && op != "bmm")
    return false;
  const std::vector<int64_t> x = input_dims(tl, event, a), y = input_dims(tl, event, a + 1);
  const bool batched = op == "bmm" || op == "baddbmm";
  const size_t rank = batched ? 3 : 2;
  if (x.size() != rank || y.size() != rank) return false;
  const int64_t batch = batched ? x[0] : 1;
  g.m = x[rank - 2];
  g.k = x[rank - 1];
  g.n = y[rank - 1];
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || batch <= 0) return false;
  g.flops = 2.0 * double(batch) * double(g.m) * double(g.n) * double(g.k);
  g.aligned = g.m % 8 == 0 && g.n % 8 == 0 && g.k % 8 == 0;
  g.dtype = input_type(tl, event, a);
  return true;
}

// The CPU ops starting in [begin, end): dtype conversions (aten::_to_copy that changes the dtype; a copy to another
// device is not one), when `conversions` is given, and matmul-like ops with shapes. `first`, `last`: the work in it.
void scan_ops(const Timeline& tl, double begin, double end, size_t first, size_t last,
              std::vector<Conversion>* conversions, std::vector<GemmOp>& gemms) {
  const auto& ev = tl.kineto->events;
  const Trace& t = *tl.trace;
  const OpDevice device = op_device(tl, first, last);
  auto device_us = [&](int32_t op) {
    auto d = device.us.find(op);
    return tl.gpu ? (d == device.us.end() ? 0 : d->second) : ev[op].dur;
  };
  auto it =
      std::lower_bound(tl.cpu_ops.begin(), tl.cpu_ops.end(), begin, [&](int32_t e, double v) { return ev[e].ts < v; });
  for (; it != tl.cpu_ops.end() && ev[*it].ts < end; ++it) {
    if (conversions && t.str(ev[*it].name) == "aten::_to_copy" && !device.copies.count(*it)) {
      Conversion c;
      c.event = *it;
      c.from = input_type(tl, *it, 0);
      const std::string to = output_type(tl, *it);
      // A scalar's cast (a number lifted to a 0-dim tensor and cast to the tensors' dtype) is not churn.
      if ((to.empty() || to != c.from) && !scalar_input(tl, *it)) {
        c.begin = ev[*it].ts;
        c.end = ev[*it].ts + ev[*it].dur;
        c.device_us = device_us(*it);
        conversions->push_back(c);
      }
    }
    GemmOp g;
    if (gemm_shape(tl, *it, g)) {
      g.event = *it;
      g.device_us = device_us(*it);
      if (g.device_us > 0) gemms.push_back(g);
    }
  }
}

}  // namespace

std::vector<Chain> elementwise_chains(const Timeline& tl, size_t first, size_t last) {
  std::vector<Chain> chains;
  std::map<int64_t, Chain> open;
  auto close_chain = [&](Chain& c) {
    if (c.members.size() >= kMinChain) chains.push_back(c);
    c = Chain{};
  };
  for (size_t w = first; w < last; ++w) {
    const Work& x = tl.work[w];
    Chain& c = open[x.stream];
    // A copy (a conversion's kernel) is not arithmetic to fuse, and an optimizer step's kernels are the optimizer's
    // (single_tensor_optimizer): both end a chain.
    const std::string_view op = x.cpu_op >= 0 ? tl.name(x.cpu_op) : std::string_view();
    const double launched = x.launch_ts >= 0 ? x.launch_ts : x.begin;
    if (x.cls != WorkClass::Elementwise || op == "aten::copy_" || op == "aten::_to_copy" ||
        inside(tl.optimizer, launched)) {
      close_chain(c);
      continue;
    }
    if (c.members.empty()) {
      c.begin = x.begin;
      c.end = x.end;
    }
    c.members.push_back(w);
    c.end = std::max(c.end, x.end);
    c.busy_us += x.end - x.begin;
    c.longest_us = std::max(c.longest_us, x.end - x.begin);
  }
  for (auto& [stream, c] : open) close_chain(c);
  std::sort(chains.begin(), chains.end(), [](const Chain& a, const Chain& b) { return a.begin < b.begin; });
  return chains;
}

WindowStats window_stats(const Timeline& tl, double begin, double end) {
  WindowStats s;
  s.tl = &tl;
  s.begin = begin;
  s.end = end;
  const auto& ev = tl.kineto->events;
  const Trace& t = *tl.trace;
  s.busy_us = covered(tl.busy, begin, end);
  s.compute_us = covered(tl.compute, begin, end);
  s.comm_us = covered(tl.comm, begin, end);
  double overlapped = 0;
  for (auto r =
           std::lower_bound(tl.comm.begin(), tl.comm.end(), begin, [](const Range&x, double v) { return x.end <= v; });
       r != tl.comm.end() && r->begin < end; ++r)
    overlapped += covered(tl.compute, std::max(r->begin, begin), std::min(r->end, end));
  s.comm_exposed_us = std::max(0.0, s.comm_us - overlapped);

  auto work_at = [&](double ts) {
    return static_cast<size_t>(
        std::lower_bound(tl.work.begin(), tl.work.end(), ts, [](const Work& w, double v) { return w.begin < v; }) -
        tl.work.begin());
  };
  const size_t first = work_at(begin), last = work_at(end);

  // Kernels, launches, launch-bound stretches, copies, memsets, GEMMs.
  Stretch run;
  auto close_run = [&] {
    if (run.kernels >= kMinStretch) s.stretches.push_back(run);
    run = Stretch{};
  };
  for (size_t w = first; w < last; ++w) {
    const Work& x = tl.work[w];
    const double dur = x.end - x.begin;
    const std::string_view name = tl.name(x.event);
    if (x.cls == WorkClass::Memcpy && tl.gpu) {
      const double bytes = std::max<int64_t>(0, ev[x.event].bytes);
      if (contains(name, "HtoD")) {
        ++s.h2d;
        s.h2d_bytes += bytes;
        if (contains(name, "Pageable")) {
          ++s.h2d_pageable;
          s.h2d_pageable_us += dur;
          s.pageable_copies.push_back(w);
        }
      } else if (contains(name, "DtoH")) {
        ++s.d2h;
        s.d2h_bytes += bytes;
      } else if (contains(name, "DtoD")) {
        ++s.d2d;
      }
      close_run();
      continue;
    }
    if (x.cls == WorkClass::Memset && tl.gpu) {
      ++s.memsets;
      s.memset_bytes += std::max<int64_t>(0, ev[x.event].bytes);
      close_run();
      continue;
    }
    ++s.kernels;
    s.kernel_us += dur;
    s.launch_us += x.launch_us;
    if (x.cls == WorkClass::Gemm && tl.gpu) {
      s.gemm_us += dur;
      if (is_simt_fp32_gemm(name)) {
        s.gemm_fp32_us += dur;
        s.fp32_gemms.push_back(w);
      }
    }
    if (x.launch_us > 0 && dur < x.launch_us) {
      ++s.short_kernels;
      if (run.kernels == 0) {
        run.begin = x.begin;
        run.end = x.end;
      }
      ++run.kernels;
      run.end = std::max(run.end, x.end);
      run.kernel_us += dur;
      run.launch_us += x.launch_us;
    } else {
      close_run();
    }
  }
  close_run();

  // GPU idle gaps and their causes.
  if (tl.gpu) {
    const std::vector<int32_t>& syncs_by_end = tl.syncs_by_end;
    size_t stretch = 0;  // gaps and stretches are both in time order
    for (const Range& h : holes(tl.busy, begin, end)) {
      if (h.length() < kMinGapUs) continue;
      Gap g;
      g.range = h;
      g.cause = GapCause::Host;
      const size_t next = work_at(h.end);
      g.next = next < tl.work.size() ? static_cast<int32_t>(next) : -1;
      // A sync drained the GPU when the host was already waiting in it as the GPU ran dry, and it returned
      // during the gap; a sync that starts on an idle GPU returns at once and causes nothing.
      for (auto it = std::lower_bound(syncs_by_end.begin(), syncs_by_end.end(), h.begin - 2,
                                      [&](int32_t e, double v) { return ev[e].ts + ev[e].dur < v; });
           it != syncs_by_end.end() && ev[*it].ts + ev[*it].dur <= h.end; ++it)
        if (ev[*it].ts <= h.begin + 1) {
          g.cause = GapCause::Sync;
          g.sync = *it;
          break;
        }
      if (g.cause != GapCause::Sync) {
        if (covered(tl.data, h.begin, h.end) >= 0.5 * h.length())
          g.cause = GapCause::Data;
        else if (g.next >= 0 && tl.work[next].launch_ts >= 0 && tl.work[next].launch_ts < h.begin - 1)
          g.cause = GapCause::Dependency;
        else
          g.cause = GapCause::Host;
      }
      while (stretch < s.stretches.size() && s.stretches[stretch].end < h.end) ++stretch;
      g.in_launch_stretch =
          stretch < s.stretches.size() && h.begin >= s.stretches[stretch].begin && h.end <= s.stretches[stretch].end;
      s.gaps.push_back(g);
    }
  }

  // Host syncs.
  for (auto it =
           std::lower_bound(tl.syncs.begin(), tl.syncs.end(), begin, [&](int32_t e, double v) { return ev[e].ts < v; });
       it != tl.syncs.end() && ev[*it].ts < end; ++it) {
    const int32_t e = *it;
    s.syncs.push_back(e);
    s.sync_us += ev[e].dur;
  }

  // Conversions and GEMMs with shapes, among the CPU ops.
  scan_ops(tl, begin, end, first, last, &s.conversions, s.gemm_ops);

  s.chains = elementwise_chains(tl, first, last);

  // Optimizer, zero_grad and data loader calls that start inside the window.
  auto op_at = [&](double ts) {
    return std::lower_bound(tl.cpu_ops.begin(), tl.cpu_ops.end(), ts,
                            [&](int32_t e, double v) { return ev[e].ts < v; });
  };
  for (auto sit = std::lower_bound(tl.scopes.begin(), tl.scopes.end(), begin,
                                   [](const Scope&sc, double v) { return sc.begin < v; });
       sit != tl.scopes.end() && sit->begin < end; ++sit) {
    const Scope& sc = *sit;
    const bool opt = is_optimizer_name(sc.name), zero = is_zero_grad_name(sc.name), data = is_data_name(sc.name);
    if (!opt && !zero && !data) continue;
    // A call inside one of its own kind ("Optimizer.step#..." under "## optimizer ##") is counted with it.
    std::vector<ScopeUse>& kind = opt ? s.optimizer : zero ? s.zero_grad : s.data;
    if (!kind.empty() && sc.begin >= kind.back().scope->begin && sc.end <= kind.back().scope->end) continue;
    ScopeUse u;
    u.scope = &sc;
    std::map<std::string_view, size_t> names;
    for (auto it = op_at(sc.begin); it != tl.cpu_ops.end() && ev[*it].ts < sc.end; ++it) {
      if (*it == sc.event || ev[*it].tid != sc.tid) continue;
      const std::string_view n = t.str(ev[*it].name);
      if (is_scope_name(n)) continue;
      ++names[n];
      if (contains(n, "_foreach_") || contains(n, "_fused_")) u.multi_tensor = true;
      const int32_t parent = ev[*it].parent;
      const bool under_zero = parent >= 0 && t.str(ev[parent].name) == "aten::zero_";
      if ((n == "aten::zero_" || n == "aten::fill_") && !under_zero) ++u.zero_ops;
    }
    // Work launched inside the call starts at or after its beginning; the queue may hold it a while after its end.
    size_t after = 0;
    for (size_t w = work_at(sc.begin); w < tl.work.size() && after < 64; ++w) {
      const Work& x = tl.work[w];
      const double launched = x.launch_ts >= 0 ? x.launch_ts : x.begin;
      after = launched >= sc.end ? after + 1 : 0;
      if (launched < sc.begin || launched >= sc.end) continue;
      ++u.work;
      u.work_us += x.end - x.begin;
      const std::string_view kn = tl.name(x.event);
      if (contains(kn, "multi_tensor_apply") || contains(kn, "fused")) u.multi_tensor = true;
      if (x.cls == WorkClass::Memset && tl.gpu) {
        ++u.memsets;
        u.zero_bytes += std::max<int64_t>(0, ev[x.event].bytes);
      }
    }
    const double dur = sc.end - sc.begin;
    u.idle_us = tl.gpu ? dur - covered(tl.busy, sc.begin, sc.end) : dur;
    std::vector<std::pair<size_t, std::string_view>> ranked;
    for (auto& [n, c] : names) ranked.push_back({c, n});
    std::sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (size_t i = 0; i < ranked.size() && i < 3; ++i)
      u.top.push_back(std::string(ranked[i].second) + " x" + std::to_string(ranked[i].first));
    kind.push_back(std::move(u));
  }
  return s;
}

void set_gemm_rates(Timeline& tl) {
  std::vector<GemmOp> gemms;
  scan_ops(tl, tl.begin, tl.end + 1, 0, tl.work.size(), nullptr, gemms);
  std::map<std::string, std::vector<double>> rates;
  for (const GemmOp& g : gemms)
    if (g.aligned && g.device_us > 0) rates[g.dtype].push_back(g.flops / g.device_us);
  for (auto& [dtype, r] : rates) {
    std::nth_element(r.begin(), r.begin() + r.size() / 2, r.end());
    tl.aligned_gemm_rate[dtype] = r[r.size() / 2];
  }
}

namespace {
std::vector<std::string> top_names(const Timeline& tl, const std::vector<size_t>& work, size_t n, bool ops) {
  std::map<std::string_view, double> by;
  for (size_t w : work) {
    const Work& x = tl.work[w];
    int32_t e = ops ? x.cpu_op : x.event;
    if (e < 0) continue;
    by[tl.name(e)] += x.end - x.begin;
  }
  std::vector<std::pair<double, std::string_view>> ranked;
  for (auto& [name, us] : by) ranked.push_back({us, name});
  std::sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < ranked.size() && i < n; ++i) out.emplace_back(ranked[i].second);
  return out;
}
}  // namespace

std::vector<std::string> top_ops(const Timeline& tl, const std::vector<size_t>& work, size_t n) {
  return top_names(tl, work, n, true);
}
std::vector<std::string> top_kernels(const Timeline& tl, const std::vector<size_t>& work, size_t n) {
  return tl.gpu ? top_names(tl, work, n, false) : std::vector<std::string>{};
}

std::string time_text(double us) {
  char buf[32];
  if (std::fabs(us) >= 1000)
    std::snprintf(buf, sizeof buf, "%.2f ms", us / 1000);
  else
    std::snprintf(buf, sizeof buf, "%.0f us", us);
  return buf;
}

}  // namespace reprise::analyze::detail
