#include "executor.h"

#include <string_view>

#include "reprise/common/clock.h"
#include "reprise/device/device.h"

namespace reprise::replay::detail {

Executor::Executor(const Trace& trace, Plan& plan, std::vector<at::Tensor> inputs)
    : trace_(trace), plan_(plan), inputs_(std::move(inputs)), slots_(plan.num_slots) {
  stack_.reserve(plan.max_stack + 4);
#ifdef REPRISE_TORCH_CUDA
  if (plan.device.is_cuda() && plan.streams.size() > 1) streams_ = std::make_unique<StreamSet>(plan);
#endif
}

Executor::~Executor() = default;

inline at::Tensor Executor::fetch(const TensorRef& r) {
  if (r.kind == TensorRef::Input) return inputs_[r.index];
  if (r.kind == TensorRef::Alias) {
    const AliasSpec& a = plan_.aliases[r.index];
    const at::Tensor& base = slots_[a.slot];
    if (!base.defined()) return base;
    at::Tensor v = at::empty({0}, base.options().dtype(a.dtype));
    v.set_(base.storage(), a.offset, a.sizes, a.strides);
    if (r.move) slots_[a.slot].reset();
    return v;
  }
  if (r.move) return std::move(slots_[r.index]);
  return slots_[r.index];
}

inline void Executor::exec(Instr& in) {
#ifdef REPRISE_TORCH_CUDA
  if (streams_) {
    streams_->before(in);
    exec_on_stream(in);
    streams_->after(in, slots_);
    return;
  }
#endif
  exec_on_stream(in);
}

inline void Executor::exec_on_stream(Instr& in) {
  if (in.comm >= 0) {
    comm_->run(static_cast<uint32_t>(in.comm));
    return;
  }
  if (in.failed) {
    bind_fallbacks(in);
    return;
  }
  stack_.clear();
  try {
    const ArgSpec* a = plan_.args.data() + in.args;
    const TensorRef* refs = plan_.refs.data();
    for (uint32_t k = 0; k < in.num_args; ++k, ++a) {
      switch (a->kind) {
        case ArgSpec::Const:
          stack_.push_back(plan_.constants[a->index]);
          break;
        case ArgSpec::Tensor:
          stack_.emplace_back(fetch(refs[a->index]));
          break;
        case ArgSpec::TensorList: {
          c10::List<at::Tensor> l;
          l.reserve(a->count);
          for (uint32_t e = 0; e < a->count; ++e) l.push_back(fetch(refs[a->index + e]));
          stack_.emplace_back(std::move(l));
          break;
        }
        case ArgSpec::OptTensorList: {
          c10::List<c10::optional<at::Tensor>> l;
          l.reserve(a->count);
          for (uint32_t e = 0; e < a->count; ++e) {
            const TensorRef& r = refs[a->index + e];
            if (r.kind == TensorRef::None)
              l.push_back(c10::nullopt);
            else
              l.push_back(fetch(r));
          }
          stack_.emplace_back(std::move(l));
          break;
        }
      }
    }
    plan_.ops[in.op].callBoxed(&stack_);
  } catch (const std::exception& e) {
    if (rethrow_failures) {  // a CUDA graph's capture: nothing may be launched, or marked, on its behalf
      stack_.clear();
      throw;
    }
    fail(in, e.what());
    return;
  }
  const OutSpec* o = plan_.outs.data() + in.outs;
  for (uint32_t k = 0; k < in.num_outs; ++k, ++o) {
    if (o->position >= stack_.size()) break;
    c10::IValue& v = stack_[o->position];
    if (o->kind == OutSpec::Tensor) {
      uint32_t s = plan_.out_slots[o->first];
      if (s != kNoSlot && v.isTensor()) slots_[s] = std::move(v).toTensor();
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> l = std::move(v).toTensorList();
      size_t n = std::min<size_t>(o->count, l.size());
      for (size_t e = 0; e < n; ++e) {
        uint32_t s = plan_.out_slots[o->first + e];
        if (s != kNoSlot) slots_[s] = l.get(e);
      }
    }
  }
  stack_.clear();
}

namespace {

// One line per failure cause, so equal causes group in the results.
std::string short_reason(std::string msg, at::Device device) {
  // LibTorch 1.13 has no meta kernel for convolutions: its fallback says "convolution_overrideable not implemented".
  if (msg.rfind("Could not run '", 0) == 0 ||
      msg.find("with Meta tensors, but there was no fake impl") != std::string::npos ||
      (device.is_meta() && msg.find("_overrideable not implemented") != std::string::npos))
    return "no " + std::string(device.is_meta() ? "meta" : device.str()) + " kernel in this LibTorch";
  size_t nl = msg.find('\n');
  if (nl != std::string::npos) msg.resize(nl);
  // Drop LibTorch's source-location suffix, which differs per call site.
  size_t at = msg.find(" (Triggered internally at");
  if (at != std::string::npos) msg.resize(at);
  if (msg.size() > 160) msg = msg.substr(0, 157) + "...";
  return "call failed: " + msg;
}

// Would every call of the op fail as this one did? On meta every argument is on meta (and strided: a sparse one
// would say 'SparseMeta'), so an op without a meta kernel has none for any call.
bool no_kernel_for_any_call(const std::string& reason, std::string_view what, at::Device device) {
  return device.is_meta() && reason.rfind("no ", 0) == 0 &&
         (what.find("from the 'Meta' backend") != std::string_view::npos ||
          what.find("with Meta tensors") != std::string_view::npos ||
          what.find("_overrideable not implemented") != std::string_view::npos);
}

}  // namespace

void Executor::fail(Instr& in, const char* what) {
  stack_.clear();
  std::string reason = short_reason(what, plan_.device);
  auto it = std::find(plan_.reasons.begin(), plan_.reasons.end(), reason);
  in.reason = static_cast<uint32_t>(it - plan_.reasons.begin());
  if (it == plan_.reasons.end()) plan_.reasons.push_back(reason);
  in.failed = true;
  if (first_pass_done) ++late_failures_;
  make_fallbacks(in);
  bind_fallbacks(in);
  // The op's other calls fail the same way: they take the failed path at once, without calling LibTorch, which
  // builds a stack trace for each error (1.13's embedding lookups on meta made most of a large DLRM's generate).
  if (no_kernel_for_any_call(reason, what, plan_.device))
    for (Instr& j : plan_.instrs)
      if (j.comm < 0 && j.op == in.op && !j.failed) {
        j.failed = true;
        j.reason = in.reason;
        j.fallback = kFallbackPending;
      }
}

// Outputs for the consumers of a failed op, made from the recorded metadata.
void Executor::make_fallbacks(Instr& in) {
  const Node& n = trace_.nodes[in.node];
  Span<Value> outs = trace_.outputs(n);
  in.fallback = static_cast<uint32_t>(plan_.fallbacks.size());
  const OutSpec* o = plan_.outs.data() + in.outs;
  for (uint32_t k = 0; k < in.num_outs; ++k, ++o) {
    for (uint32_t e = 0; e < o->count; ++e) {
      at::Tensor x;
      const Value* v = o->position < outs.size() ? &outs[o->position] : nullptr;
      if (v && o->kind == OutSpec::TensorList) v = e < trace_.items(*v).size() ? &trace_.items(*v)[e] : nullptr;
      if (v && v->kind == ValueKind::Tensor && plan_.out_slots[o->first + e] != kNoSlot) {
        const reprise::Tensor& t = trace_.tensors[v->ref];
        bool cpu = t.has_device && trace_.str(t.device) == "cpu" && !plan_.device.is_meta();
        x = make_tensor_like(trace_, t, cpu ? at::Device(at::kCPU) : plan_.device);
      }
      plan_.fallbacks.push_back(std::move(x));
    }
  }
}

void Executor::bind_fallbacks(Instr& in) {
  if (in.fallback == kFallbackPending) make_fallbacks(in);
  uint32_t f = in.fallback;
  const OutSpec* o = plan_.outs.data() + in.outs;
  for (uint32_t k = 0; k < in.num_outs; ++k, ++o)
    for (uint32_t e = 0; e < o->count; ++e, ++f) {
      uint32_t s = plan_.out_slots[o->first + e];
      if (s != kNoSlot) slots_[s] = plan_.fallbacks[f];
    }
}

// The original's host time before an op (--host-time), re-spent: one number per instruction, 0 when none.
inline void respend_host_time(int64_t ns) {
  if (ns > 0) busy_wait_ns(ns);
}

// An instruction held to its floor (Instr::floor_ns): the call, then a busy wait for what it took less.
inline void Executor::exec_held(Instr& in) {
  const int64_t until = in.floor_ns > 0 ? now_ns() + in.floor_ns : 0;
  exec(in);
  if (until > 0)
    while (now_ns() < until) {
    }
}

void Executor::run_step(size_t s) {
  Instr* in = plan_.instrs.data();
  for (uint32_t i = plan_.step_begin[s], end = plan_.step_begin[s + 1]; i < end; ++i) {
    respend_host_time(in[i].host_ns);
    exec_held(in[i]);
  }
  respend_host_time(plan_.step_tail_ns[s]);
  end_step();
}

void Executor::run_step_reporting(size_t s, const std::function<void(uint32_t)>& report) {
  constexpr double kInterval = 0.1;  // seconds: a terminal redraws four times a second
  Instr* in = plan_.instrs.data();
  double next = now_seconds() + kInterval;
  for (uint32_t i = plan_.step_begin[s], end = plan_.step_begin[s + 1]; i < end; ++i) {
    respend_host_time(in[i].host_ns);
    exec_held(in[i]);
    double now = now_seconds();
    if (now < next) continue;
    report(i + 1);
    next = now + kInterval;
  }
  respend_host_time(plan_.step_tail_ns[s]);
  end_step();
}

void Executor::run_step_per_op(size_t s, std::vector<OpSpan>& spans, double origin) {
  Instr* in = plan_.instrs.data();
  const bool gpu = !plan_.device.is_cpu() && !plan_.device.is_meta();
  for (uint32_t i = plan_.step_begin[s], end = plan_.step_begin[s + 1]; i < end; ++i) {
    double t0 = now_seconds();
    exec(in[i]);
    const double returned = gpu ? now_seconds() : 0;  // a CPU's call is all host: one clock read less
    device::synchronize(plan_.device);
    double t1 = now_seconds();
    spans.push_back({in[i].node, (t0 - origin) * 1e6, (t1 - t0) * 1e6, gpu ? (returned - t0) * 1e6 : -1});
  }
  end_step();
}

void Executor::run_instr(uint32_t i) { exec(plan_.instrs[i]); }

void Executor::end_step() {
  if (comm_) comm_->end_step();
#ifdef REPRISE_TORCH_CUDA
  if (streams_) streams_->join();
#endif
}

void Executor::end_iteration() {
  for (at::Tensor& t : slots_) t.reset();
}

}  // namespace reprise::replay::detail
