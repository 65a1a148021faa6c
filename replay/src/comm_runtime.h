// Runs a plan's collectives: one sub-communicator per process group (created once, in the same order on every
// rank), pooled buffers on the replay device, asynchronous collectives completed at their waits, timings.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "plan.h"

namespace reprise::replay::detail {

// A failure every rank of a launch finds at the same point from the same exchanged data, with the same message: the
// ranks can end together and cleanly (rank 0 says why) instead of one of them aborting the job.
class AgreedFailure : public UserError {
 public:
  using UserError::UserError;
};

class CommRuntime {
 public:
  // Collective over the world: every rank constructs it. Throws AgreedFailure, on every rank, when the ranks'
  // traces disagree (a rank outside a group it uses, collectives that differ between a group's members).
  CommRuntime(const Trace& trace, Plan& plan, comms::Communicator& world, at::Device device);
  ~CommRuntime();
  // Issues the collective (completing it now unless a later wait does), or completes the one a wait names.
  void run(uint32_t spec);
  // Completes whatever is still in flight (end of a step).
  void end_step();
  void reset_stats();
  std::vector<CollectiveTiming> timings(int iterations) const;
  std::string backend() const;
  // Distinct GPU streams the original ran these collectives on (from a linked Kineto trace); 0 when unknown.
  size_t trace_streams() const;

 private:
  struct Flight {
    std::unique_ptr<comms::Request> req;
    std::vector<at::Tensor> bufs;  // every member's send and receive buffers, back to the pool at completion
  };
  struct GroupLog;
  std::vector<std::vector<int>> check_collectives_agree(const Trace& trace);
  [[noreturn]] void report_mismatch(const Trace& trace, const std::vector<int>& ranks,
                                    const std::vector<GroupLog>& logs);
  void check_p2p_pairs(const Trace& trace);
  [[noreturn]] void report_p2p_mismatch(const Trace& trace, const std::string& group, int from, int to,
                                        const std::vector<uint32_t>& specs);
  void complete(uint32_t spec);
  uint32_t lead(uint32_t spec) const;  // the CommSpec that issues `spec` (its batch's first member)
  comms::Args with_buffers(const CommSpec& s, Flight& f);
  at::Tensor take(int64_t bytes);
  void give(at::Tensor t);
  void collect(uint32_t spec, comms::Request& r);

  Plan& plan_;
  comms::Communicator& world_;
  at::Device device_;
  std::unique_ptr<comms::Communicator> device_world_;  // NCCL over the world, on GPUs
  std::vector<std::unique_ptr<comms::Communicator>> owned_;
  std::vector<comms::Communicator*> group_comms_;                           // per Plan::comm_groups
  std::vector<Flight> flights_;                                             // per spec
  std::vector<std::pair<uint32_t, std::unique_ptr<comms::Request>>> done_;  // GPU: timed after the step
  std::multimap<int64_t, at::Tensor> pool_;
  std::vector<double> seconds_;
  std::vector<int64_t> calls_;
  void* comm_stream_ = nullptr;             // GPU: the collectives' default stream (a c10::cuda::CUDAStream)
  std::map<int64_t, void*> trace_streams_;  // GPU: one stream per stream the original ran collectives on
  void* stream_for(int64_t trace_stream);
};

}  // namespace reprise::replay::detail
