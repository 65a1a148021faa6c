// The Session: opens and closes the recording window around steps, marks each recorded step, records collectives,
// and when the window closes turns the logs into the ET (and the host timeline beside it).
#include "reprise/capture/session.h"

#include <ATen/ATen.h>

#include <ctime>
#include <mutex>
#include <stdexcept>

#include "decoder.h"
#include "host_timeline.h"
#include "observer.h"
#include "recording.h"
#include "reprise/common/clock.h"
#include "reprise/common/error.h"
#include "reprise/trace/write.h"
#include "trace_from_log.h"

namespace reprise::capture {
namespace {

// Fields the model leaves unknown (-1, "") are recorded as PyTorch records the default process group's.
Collective as_recorded(Collective c) {
  if (c.raw_name.empty()) c.raw_name = c.name;
  if (c.pg_name.empty()) c.pg_name = "0";
  if (c.pg_desc.empty()) c.pg_desc = "default_pg";
  if (c.seq < 0) c.seq = 0;
  if (c.rank < 0) c.rank = 0;
  if (c.global_rank_start < 0) c.global_rank_start = 0;
  if (c.global_rank_stride < 0) c.global_rank_stride = 1;
  if (c.pg_size < 0) c.pg_size = 1;
  return c;
}

c10::IValue tensor_list(const std::vector<at::Tensor>& v) {
  c10::List<at::Tensor> l;
  for (const at::Tensor& t : v) l.push_back(t);
  return c10::IValue(l);
}

c10::IValue int_list(const std::vector<int64_t>& v) {
  c10::List<int64_t> l;
  for (int64_t x : v) l.push_back(x);
  return c10::IValue(l);
}

// The positional layout PyTorch writes: [tensors, seq, (pg_name, pg_desc), rank, name, in_splits, out_splits,
// global_rank_start, global_rank_stride, pg_size]. PyTorch 2.x writes seq as (seq, isP2P); point-to-point
// operations (send, recv and the records of their batches) are written that way, so that their seq reads back as
// the p2p counter it is, and collectives as a plain int, as before.
std::vector<c10::IValue> comms_inputs(const Collective& c, const std::vector<at::Tensor>& tensors) {
  c10::IValue seq =
      c.p2p ? c10::IValue(c10::ivalue::Tuple::create({c10::IValue(c.seq), c10::IValue(true)})) : c10::IValue(c.seq);
  return {tensor_list(tensors),
          seq,
          c10::IValue(c10::ivalue::Tuple::create({c10::IValue(c.pg_name), c10::IValue(c.pg_desc)})),
          c10::IValue(c.rank),
          c10::IValue(c.raw_name),
          int_list(c.in_splits),
          int_list(c.out_splits),
          c10::IValue(c.global_rank_start),
          c10::IValue(c.global_rank_stride),
          c10::IValue(c.pg_size)};
}

std::string local_time_now() {
  std::time_t now = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return buf;
}

}  // namespace

struct Session::Impl {
  SessionOptions o;
  int64_t current_step = -1;
  bool window_open = false, done = false;
  at::CallbackHandle handle = 0;
  double step_start = 0;
  std::vector<StepTime> times;
  detail::ThreadLog* step_log = nullptr;  // the log holding the open ProfilerStep node
  std::mutex coll_mu;
  std::vector<Collective> collectives;  // as recorded, indexed by the nodes' `collective`
  std::string start_time;
  size_t recorded_nodes = 0;  // once the window closed

  void open_window();
  void reset_state();
  void write_process_groups();
  void close_window();
  void write_trace();
  void open_step();
  void close_step();
};

// Everything the last window left is dropped and this window's options take effect.
void Session::Impl::reset_state() {
  detail::RecordingState& S = detail::state();
  {
    std::lock_guard<std::mutex> lock(S.mu);
    S.forget_logs();
    S.strings = StringTable();
  }
  // The logs' first blocks are faulted in now, before the step is timed, and refilled in the background.
  detail::block_pool().start_refill((o.log_reserve_mb << 20) / detail::block_pool().block_bytes());
  S.next_id = 2;  // 1 is the process root
  S.tensor_ranges = o.tensor_ranges;
  S.nested_values = o.nested_values;
  S.host_times = o.host_timeline && !o.path.empty();
  S.origin_ns = now_ns();
  S.generation.fetch_add(1, std::memory_order_acq_rel);
}

void Session::Impl::write_process_groups() {
  if (o.process_groups.empty()) return;
  detail::write_leaf(detail::thread_log(), detail::intern("## process_group:init ##"), -1,
                     {c10::IValue(o.process_groups)}, {});
}

void Session::Impl::open_window() {
  reset_state();
  start_time = local_time_now();
  write_process_groups();
  detail::state().active.store(this, std::memory_order_release);
  handle = detail::add_observer();
  window_open = true;
}

void Session::Impl::close_window() {
  if (!window_open) return;
  close_step();
  at::removeCallback(handle);
  detail::state().active.store(nullptr, std::memory_order_release);
  detail::block_pool().stop_refill();
  window_open = false;
  recorded_nodes = detail::recorded_so_far();
  // The logs' memory goes back however writing ends.
  struct Release {
    ~Release() {
      {
        std::lock_guard<std::mutex> lock(detail::state().mu);
        detail::state().forget_logs();
      }
      detail::block_pool().trim();
    }
  } release;
  if (!o.path.empty()) write_trace();
}

void Session::Impl::write_trace() {
  std::vector<detail::Decoded> logs;
  Trace trace;
  try {
    logs = detail::decode_logs();
    trace = detail::build_trace(logs, {o.path, start_time, o.rank}, collectives);
  } catch (const std::exception& e) {
    throw UserError(o.path + ": the recording could not be turned into a trace: " + e.what());
  }
  write_et(trace, o.path);
  if (o.host_timeline) detail::write_host_timeline(logs, o.rank, detail::timeline_path_for(o.path));
}

void Session::Impl::open_step() {
  detail::ThreadLog& L = detail::thread_log();
  detail::open_step_marker(L, detail::intern("ProfilerStep#" + std::to_string(current_step)));
  step_log = &L;
}

void Session::Impl::close_step() {
  if (!step_log) return;
  detail::close_step_marker(*step_log);
  step_log = nullptr;
}

Session::Session(SessionOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->o = std::move(options);
  if (impl_->o.skip_steps < 0 || impl_->o.record_steps < 0)
    throw std::invalid_argument("capture: skip_steps and record_steps must not be negative");
  detail::RecordingState& S = detail::state();
  std::lock_guard<std::mutex> lock(S.mu);
  if (S.session) throw std::logic_error("capture: another Session is already open in this process");
  S.session = this;
}

Session::~Session() {
  try {
    stop();
  } catch (...) {
    // A destructor must not throw; call stop() to see write errors.
  }
  detail::RecordingState& S = detail::state();
  std::lock_guard<std::mutex> lock(S.mu);
  if (S.session == this) S.session = nullptr;
}

void Session::step() {
  Impl& s = *impl_;
  if (s.done) return;
  double now = now_seconds();
  if (s.current_step >= 0) s.times.push_back({s.current_step, now - s.step_start, s.window_open});
  ++s.current_step;
  bool record =
      s.current_step >= s.o.skip_steps && (s.o.record_steps == 0 || s.current_step < s.o.skip_steps + s.o.record_steps);
  if (s.window_open) s.close_step();
  if (!record && s.window_open) s.close_window();
  if (record && !s.window_open) s.open_window();
  if (s.window_open) s.open_step();
  s.step_start = now_seconds();
}

void Session::stop() {
  Impl& s = *impl_;
  if (s.done) return;
  s.done = true;
  if (s.current_step >= 0) s.times.push_back({s.current_step, now_seconds() - s.step_start, s.window_open});
  s.close_window();
}

bool Session::recording() const { return impl_->window_open; }

std::vector<StepTime> Session::step_times() const { return impl_->times; }

size_t Session::num_nodes() const { return impl_->window_open ? detail::recorded_so_far() : impl_->recorded_nodes; }

Session* Session::active() {
  detail::RecordingState& S = detail::state();
  std::lock_guard<std::mutex> lock(S.mu);
  return S.session && S.session->recording() ? S.session : nullptr;
}

void Session::record_collective(const Collective& collective, const std::vector<at::Tensor>& inputs,
                                const std::vector<at::Tensor>& outputs, int64_t began_ns) {
  Impl& s = *impl_;
  if (!s.window_open) return;
  detail::ThreadLog& L = detail::thread_log();
  Collective c = as_recorded(collective);
  std::vector<c10::IValue> in = comms_inputs(c, inputs);
  int32_t index;
  {
    std::lock_guard<std::mutex> lock(s.coll_mu);
    index = static_cast<int32_t>(s.collectives.size());
    s.collectives.push_back(std::move(c));
  }
  detail::write_leaf(L, detail::intern("record_param_comms"), index, in, {tensor_list(outputs)}, began_ns);
}

}  // namespace reprise::capture
