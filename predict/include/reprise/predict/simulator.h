// The trace-driven simulator: every rank's host thread issues its ops in trace order; on a GPU each op's kernel runs
// on its stream after its launch, after the stream's previous work and after the cross-stream work it reads;
// collectives run on a stream per process group once every member has arrived (so a straggler delays the group),
// sends and receives once their peer has (on a channel per direction between two ranks);
// waits make the compute stream wait for their collective; host-syncing ops make the host wait for the device. On a
// CPU the ops run on the host thread and collectives progress inside their waits (MPI without a progress thread).
//
//   SimInput in;
//   in.programs = {&role0, &role0, &role1};   // one per rank (ranks of a role share a program)
//   in.groups = {{{0, 1, 2}}};                // the process groups the programs' collectives name
//   SimResult r = simulate(in);               // r.ranks[i].step_seconds, r.critical_path, ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace reprise::predict {

struct SimOp {
  enum class Kind : uint8_t {
    Compute,   // host time, then (GPU) a kernel on `stream`
    Issue,     // a collective's host call: `coll` starts on its group's stream
    Wait,      // the compute stream (GPU) or the host (CPU) waits for collective `coll`
    HostSync,  // a compute op whose result the host reads: the host waits for the device
    StepEnd,   // the end of an iteration: the host waits for every stream (the replay synchronizes there)
  };
  Kind kind = Kind::Compute;
  uint16_t stream = 0;              // compute stream index
  int32_t coll = -1;                // Issue, Wait: index in SimProgram::collectives
  uint32_t node = 0;                // the trace node (names in timelines and critical paths)
  uint32_t deps = 0, num_deps = 0;  // cross-stream producers: indices of earlier ops, in SimProgram::deps
  double host = 0, device = 0;      // seconds
  double launch_at = -1;            // Compute on a GPU: seconds into `host` when the kernel is launched (-1: its end)
};

struct SimCollective {
  int32_t group = 0;    // index in SimInput::groups
  int64_t seq = 0;      // its order among this program's collectives on the group (p2p: among its sends, or
                        // receives, with `peer` on the group)
  double seconds = 0;   // on the wire once every member has arrived
  bool waited = false;  // a Wait completes it (else the issue does: a synchronous collective)
  // Point-to-point: the other rank (global). A send pairs with that rank's receive of the same seq, not with the
  // whole group, and each direction between two ranks is a channel of its own (NCCL's per-pair communicators).
  int64_t peer = -1;
  bool send = false;
};

struct SimProgram {
  std::string name;            // for messages: the role or trace
  bool host_runs_ops = false;  // a CPU device: ops run on the host thread, collectives progress in their waits
  std::vector<SimOp> ops;
  std::vector<SimCollective> collectives;
  std::vector<uint32_t> deps;
  std::vector<std::string> op_names;  // by trace node index, for timelines (may be empty)
  int steps = 1;                      // StepEnd ops it holds
};

struct SimGroup {
  std::string name;
  std::vector<int64_t> ranks;  // members, global ranks
};

struct SimInput {
  std::vector<const SimProgram*> programs;  // one per rank
  std::vector<SimGroup> groups;
  std::vector<int64_t> timeline_ranks;  // ranks whose events go into SimResult::timeline (empty: none)
  bool critical_path = true;
};

struct SimRank {
  std::vector<double> step_seconds;                       // per StepEnd
  double end = 0;                                         // when its last step ended
  double host_busy = 0, compute_busy = 0, comm_busy = 0;  // over every step (a Prediction's: per step)
  double exposed_comm = 0;                                // communication time not hidden under compute
};

struct SimEvent {
  int64_t rank = 0;
  std::string resource;  // "host", "stream 0", "comm <group>"
  uint32_t node = 0;
  std::string name;
  double start = 0, end = 0;
};

struct SimResult {
  std::vector<SimRank> ranks;
  double makespan = 0;                  // the slowest rank's end
  std::vector<SimEvent> critical_path;  // from the start to the slowest rank's end, in time order
  std::vector<SimEvent> timeline;       // events of SimInput::timeline_ranks
  int64_t ops = 0;                      // op instances simulated over all ranks
};

// Runs the simulation. Throws UserError when the programs cannot complete: a collective some member of its group
// never issues (named with the rank, node and group), a send or receive its peer never matches, or a rank issuing on
// a group it is not a member of.
SimResult simulate(const SimInput& in);

}  // namespace reprise::predict
