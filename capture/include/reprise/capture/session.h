// Live capture from LibTorch programs: a Session observes every operator through RecordFunction global callbacks
// and writes the same execution trace PyTorch 2.x writes (schema 1.1.1-chakra.0.0.4), which `reprise inspect` and
// `reprise replay` read.
//
//   reprise::capture::SessionOptions o;
//   o.path = "trace/rank-0.json.gz";
//   o.skip_steps = 2;     // warm up uninstrumented: these steps give the original iteration time
//   o.record_steps = 1;
//   reprise::capture::Session session(o);
//   for (int i = 0; i < 3; ++i) {
//     session.step();     // an iteration begins
//     train_step();
//   }
//   session.stop();       // writes the file (also done by the destructor)
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace reprise::capture {

struct SessionOptions {
  std::string path;           // the ET to write (".json" or ".json.gz")
  int skip_steps = 0;         // steps run before recording starts
  int record_steps = 1;       // steps recorded; 0 = every step until stop()
  bool tensor_ranges = true;  // record [min, max] of integer CPU tensor inputs (index ranges for replay)
  // Record the arguments of ops called by other dispatcher ops too, as PyTorch's observer does. false ("lean"):
  // those inner ops keep their names, schemas and times but no arguments, which roughly halves the observer's
  // own cost; replay issues outer ops only, but can then no longer fall back to an unknown op's children.
  bool nested_values = true;
  int64_t rank = -1;           // written to the trace's metadata when >= 0
  std::string process_groups;  // JSON list for the `## process_group:init ##` node; empty = none
  // Also write the recorded ops' host times as a Kineto-style trace beside the ET (rank-0.kineto.json.gz), which
  // readers link to the ET by rf_id: replay then reports each op's original time.
  bool host_timeline = true;
  // Memory faulted in for the recording when the window opens (before the step is timed), so the observer does not
  // wait on page faults; more is mapped in the background as the logs grow. 75 to 125 bytes per recorded node.
  size_t log_reserve_mb = 32;
};

// One step boundary to the next, as the Session saw it.
struct StepTime {
  int64_t step = 0;
  double seconds = 0;
  bool recorded = false;  // observed (the observer's overhead is in it)
};

// A collective issued outside the dispatcher (by Reprise's communicator), recorded as PyTorch records it: a
// `record_param_comms` node with the communication attrs.
struct CollectiveRecord {
  std::string name;   // all_reduce, all_gather, all_to_allv, broadcast, ...
  std::string dtype;  // Float, Half, Long, ...
  int64_t in_elems = 0, out_elems = 0;
  std::vector<int64_t> in_splits, out_splits;
  std::string pg_name = "0", pg_desc = "default_pg";
  int64_t pg_size = 1, global_rank_start = 0, global_rank_stride = 1;
  int64_t seq = 0;
  int64_t rank = 0;
};

class Session {
 public:
  explicit Session(SessionOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Marks the start of an iteration. The recording window opens at step `skip_steps` and closes after
  // `record_steps` steps; each recorded step becomes a ProfilerStep#N node.
  void step();
  // Ends the recording and writes the trace (once; later calls do nothing). Throws on write errors.
  void stop();
  bool recording() const;
  // Every completed step, recorded or not.
  std::vector<StepTime> step_times() const;
  // Nodes recorded so far.
  size_t num_nodes() const;
  // Records a collective (while recording) as a record_param_comms node under the current op, with the tensors
  // it reads and writes, so replay can follow the data to and from the compute around it.
  void record_collective(const CollectiveRecord& c, const std::vector<at::Tensor>& inputs = {},
                         const std::vector<at::Tensor>& outputs = {});

  // The session currently recording in this process, or nullptr.
  static Session* active();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reprise::capture
