// Anti-patterns injected into a clean Kineto timeline at a known window, for the labeled corpus the detectors are
// scored on (docs/analyze.md, "Evaluation"). The editor works on a copy of the trace's Kineto events: it delays what
// follows an instant (host work, and the GPU work launched after it) and adds host ops, runtime calls and GPU work
// linked by correlation, as a profiler would have recorded them. kineto_json writes the result back as Kineto JSON,
// which is read again to be analyzed, so the injected trace goes through the same reader as any other.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "reprise/trace/trace.h"
#include "timeline.h"

namespace reprise::analyze::detail {

class Editor {
 public:
  explicit Editor(const Trace& t);

  // Delays the host from `t` on by `host_us` (events spanning `t`, such as its step, grow by it) and the GPU work
  // launched from `t` on by `gpu_us`.
  void shift(double t, double host_us, double gpu_us);
  // When the GPU finishes the work launched before `t` (`t` when none is pending then).
  double drain(double t) const;
  // Whether the trace has GPU work. On one without (a CPU capture) the work is the host's top-level CPU ops, and an
  // injection adds those instead of kernels (`work`), shifting the host only.
  bool gpu() const { return gpu_; }
  // Host events: a CPU op or user annotation; a runtime call, with a new correlation id.
  int32_t op(const std::string& name, double ts, double dur, KinetoCat cat = KinetoCat::CpuOp);
  // A top-level CPU op that is work on a trace without GPU work: counted as added computation unless it
  // communicates.
  int32_t work(const std::string& name, double ts, double dur);
  // The host thread's top-level CPU ops (no CPU op encloses them; scopes such as ProfilerStep aside), by start.
  std::vector<int32_t> top_level_ops() const;
  int64_t runtime(const std::string& name, double ts, double dur);
  // GPU work (kernel, memcpy, memset) linked to the runtime call with correlation `corr`, on `stream` (-1: the main
  // stream, the one with the most kernels).
  int32_t gpu(KinetoCat cat, const std::string& name, int64_t corr, double ts, double dur, int64_t stream = -1,
              int64_t bytes = -1);
  // A CPU op's recorded inputs (Kineto's Input Dims / Input type).
  void inputs(int32_t event, const std::vector<std::vector<int64_t>>& dims, const std::vector<std::string>& types);
  // Renames an event.
  void rename(int32_t event, const std::string& name);
  // Lengthens an event by `us` (a compute kernel's counts as added computation).
  void stretch(int32_t event, double us);
  // Fuses each chain of GPU kernels (events, in order) into its first: as long and named as the longest member,
  // where the first began; the others, and the runtime calls that launched them, are left out of the written trace.
  // On a trace without GPU work the chain's members are top-level CPU ops, left out with the ops they called.
  void fuse(const std::vector<std::vector<int32_t>>& chains);

  // The computation added so far (kernels other than communication, copies and memsets): what makes a rank slower
  // than the others in a step whatever was injected, which the corpus labels from it (not from the detector).
  double added_compute_us() const { return added_compute_us_; }

  const KinetoInfo& kineto() const { return *t_.kineto; }
  const Trace& trace() const { return t_; }
  int64_t comm_stream() const { return comm_stream_; }

 private:
  Trace t_;  // a copy: its Kineto events are edited, new names interned into its strings
  int64_t next_corr_ = 1;
  bool gpu_ = false;
  double added_compute_us_ = 0;
  std::vector<uint8_t> removed_;  // by event: left out of kineto_json (empty: none)
  int64_t host_pid_ = 0, host_tid_ = 0, gpu_pid_ = 0, main_stream_ = 7, comm_stream_ = 8;
  friend std::string kineto_json(const Editor& e);
};

// The edited timeline as Kineto JSON (every event with its args: External id, correlation, stream, device, bytes,
// Input Dims / Input type; the trace's devices and distributed info).
std::string kineto_json(const Editor& e);

// Where and how much to inject: the window, its length, and a random source.
struct InjectSite {
  double begin = 0, end = 0;
  std::mt19937_64* rng = nullptr;
  double length() const { return end - begin; }
  // A host instant in the window's middle part at which a kernel is launched (injections go right before it), or
  // -1 when the window launches none there; with `queued`, one whose kernel waited in the GPU's queue (so the GPU
  // is busy at that instant).
  double launch_point(const Editor& e, bool queued) const;
  // On a trace without GPU work: a host instant in the window's middle part at which a top-level CPU op begins,
  // outside optimizer, zero_grad and data loader calls (their own patterns), or -1 when there is none.
  double host_point(const Editor& e) const;
};

}  // namespace reprise::analyze::detail
