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
//
// A collective the program issues outside the dispatcher (its own communicator) is recorded beside the ops:
//
//   if (auto* s = reprise::capture::Session::active()) {
//     reprise::Collective c;
//     c.name = "all_reduce";
//     c.raw_name = "allreduce";  // the name PyTorch records
//     c.dtype = "Float";
//     c.in_elems = c.out_elems = grad.numel();
//     c.pg_size = world_size;
//     c.rank = rank;
//     s->record_collective(c, {grad}, {grad});
//   }
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reprise/trace/trace.h"

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
  // Records a collective issued outside the dispatcher (while recording), as PyTorch records its own: a
  // record_param_comms node under the current op with the communication attrs and the tensors it reads and writes,
  // so replay can follow the data to and from the compute around it. Of `c`, the fields a trace carries are used:
  // raw_name is the name written (PyTorch's: allreduce, all_to_all, ...; `name` when empty), dtype ("Float", ...),
  // in/out_elems and splits, seq (written as PyTorch 2.x's (seq, isP2P) tuple when p2p is set), rank, pg_name,
  // pg_desc, pg_size, global_rank_start and stride. Those left
  // unknown (-1, "") are written as the default process group's: "0", "default_pg", size 1, ranks from 0 by 1.
  // With `began_ns` (reprise::now_ns() of reprise/common/clock.h when the collective was issued; call this once it
  // returns) the node is timed on the host timeline, from then to this call, and linked to it by its rf_id.
  void record_collective(const Collective& c, const std::vector<at::Tensor>& inputs = {},
                         const std::vector<at::Tensor>& outputs = {}, int64_t began_ns = -1);

  // The session currently recording in this process, or nullptr.
  static Session* active();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reprise::capture
