// The rewrites perturb is made of, one function per variant; each edits one trace in place, reindexes, and returns
// what it did as one line for the notes. perturb.cc parses the config into these specs (docs/configs.md).
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "reprise/common/dtype.h"
#include "reprise/trace/trace.h"

namespace reprise::gen {

// A regular expression with its config text and YAML place, for "matches nothing" errors.
struct OpPattern {
  std::regex re;
  std::string text, where;
  bool matches(std::string_view name) const { return std::regex_search(name.begin(), name.end(), re); }
};

// dtype: every `from` tensor, type string, dtype argument and collective of the trace becomes `to`.
std::string change_dtype(Trace& t, const Dtype& from, const Dtype& to);
// dtype with ops: the matching ops compute in `to`, casts (aten::to.dtype) at every seam with the rest.
std::string convert_ops(Trace& t, const Dtype& from, const Dtype& to, const OpPattern& ops);

struct JitterSpec {
  uint64_t seed = 0;
  double fraction = 0.1;
  bool m = true, n = true, k = true, messages = true;  // which sizes move
};
std::string jitter_sizes(Trace& t, const JitterSpec& s);

struct InsertSpec {
  bool gemm = false;  // else a host delay
  int64_t m = 0, n = 0, k = 0;
  const Dtype* dtype = nullptr;
  int64_t delay_us = 0;
  bool has_after = false;  // without: at the end of each iteration
  OpPattern after;
  int64_t every = 1;
  std::string where;  // the insert's YAML place
};
std::string insert_ops(Trace& t, const InsertSpec& s);

// all_reduce -> reduce_scatter + all_gather of the same total size, over a group of `world` ranks at most.
std::string split_all_reduces(Trace& t, int world, const std::string& where);

std::string move_to_stream(Trace& t, const OpPattern& ops, int64_t stream);

// overlap: each blocking collective whose name matches `which` (all_reduce, ...) made asynchronous: a wait for it
// goes before the first later op of its step and thread that reads or writes its tensors, or after the step's last
// op there, so the work in between overlaps it (perturb_ops.cc).
std::string overlap_collectives(Trace& t, const OpPattern& which);

// The op times closed over the dropped spans (begin, end in microseconds; perturb.cc): each time moves earlier by the
// time dropped before it, a time inside a span to where the span began; the gaps outside the spans stay as they were.
void close_dropped_time(Trace& t, std::vector<std::pair<double, double>> dropped);

// The step a node belongs to as replay cuts steps (profiler_steps: id ranges; -1 in none), and the thread node it runs
// under.
int64_t step_of(const Trace& t, const std::vector<StepSpan>& steps, uint32_t i);
uint32_t thread_of(const Trace& t, uint32_t i);

// foreach: each optimizer step (a scope matching `scope`) whose ops repeat one per-parameter block of ops
// becomes one _foreach_ op per op of the block, over every parameter's tensors (perturb_foreach.cc). Each foreach
// op keeps the times of the first parameter's op; the time of the other parameters' blocks is closed.
std::string foreach_optimizer(Trace& t, const OpPattern& scope);

// The schema of the host delay node replay runs as a busy wait on the host (replay/src/op_compiler.cc).
constexpr const char* kHostDelaySchema = "reprise::host_delay(int us) -> ()";

}  // namespace reprise::gen
