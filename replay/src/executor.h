// Runs a compiled plan: fills tensor slots, pushes the pre-built arguments and calls the dispatcher.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm_runtime.h"
#include "plan.h"
#include "stream_set.h"

namespace reprise::replay::detail {

class Executor {
 public:
  // `inputs`: the plan's input tensors (create_input_tensors).
  Executor(const Trace& trace, Plan& plan, std::vector<at::Tensor> inputs);
  ~Executor();

  // Runs the instructions of step `s`, each after the host time it re-spends (--host-time). An op that throws is marked
  // failed (with the reason) and its recorded outputs are bound to tensors made from the trace's metadata, so its
  // consumers still run.
  void run_step(size_t s);
  // The same, calling `report` with the ops done in the pass (the instruction index reached) about every 0.1 s:
  // for the untimed first pass, which on a trace of one long step would otherwise show nothing until it ends.
  // Timed runs call run_step, whose loop stays bare.
  void run_step_reporting(size_t s, const std::function<void(uint32_t)>& report);
  // The same, timing each op (device synchronized after each) into `spans`, relative to `origin`; no host time is
  // re-spent between them.
  void run_step_per_op(size_t s, std::vector<OpSpan>& spans, double origin);
  // Runs instruction `i` alone, and reads a slot after it: shape inference (shape_inference.cc) steps through a
  // plan on `meta` this way, between instructions.
  void run_instr(uint32_t i);
  const at::Tensor& slot(uint32_t s) const { return slots_[s]; }
  // Releases every tensor produced in the iteration (inputs stay).
  void end_iteration();
  // Ops that failed after the first pass (their earlier calls had succeeded).
  size_t late_failures() const { return late_failures_; }
  // An op that throws throws on out of run_step, unmarked and without fallbacks (made by launching kernels), instead
  // of being marked failed: what a CUDA graph's capture needs (step_graphs.cc).
  bool rethrow_failures = false;
  bool first_pass_done = false;
  // Collectives run through this (nullptr: the plan has none).
  void set_comm(CommRuntime* c) { comm_ = c; }

 private:
  void exec(Instr& in);
  void exec_held(Instr& in);
  void exec_on_stream(Instr& in);
  void end_step();
  void fail(Instr& in, const char* what);
  void make_fallbacks(Instr& in);
  void bind_fallbacks(Instr& in);
  at::Tensor fetch(const TensorRef& r);

  const Trace& trace_;
  Plan& plan_;
  std::vector<at::Tensor> inputs_;
  std::vector<at::Tensor> slots_;
  std::vector<c10::IValue> stack_;
  size_t late_failures_ = 0;
  CommRuntime* comm_ = nullptr;
  std::unique_ptr<StreamSet> streams_;  // CUDA builds, plans with several compute streams
};

}  // namespace reprise::replay::detail
