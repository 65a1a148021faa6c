// Megatron-style model parallelism for the built-in workloads: the rank layout and its process groups, the tensor
// parallel conjugate operators f and g, and the 1F1B pipeline schedule.
#pragma once

#include <ATen/ATen.h>

#include <functional>

#include "reprise/workloads/workloads.h"

namespace reprise::workloads::detail {

// Megatron's default order (tp-dp-pp): tensor parallel ranks adjacent, then data parallel, then pipeline stages,
// so global rank = tp_rank + tp * (dp_rank + dp * pp_rank). A dimension of size 1 gets no group (nullptr): nothing
// to communicate. The groups are made data parallel first, then tensor, then pipeline parallel (Megatron's
// initialize_model_parallel order), each dimension's in the order of their lowest rank.
struct ParallelGroups {
  Collectives* tp = nullptr;
  Collectives* pp = nullptr;
  Collectives* dp = nullptr;
  int64_t tp_rank = 0, pp_rank = 0, dp_rank = 0;
};
ParallelGroups make_parallel_groups(Collectives* world, int64_t tp, int64_t pp, int64_t dp);

// Megatron's f (copy_to_tensor_model_parallel_region): identity forward, gradient all_reduce over `tp` backward;
// in front of a column-parallel linear.
at::Tensor copy_to_tp(const at::Tensor& x, Collectives& tp);
// Megatron's g (reduce_from_tensor_model_parallel_region): all_reduce over `tp` forward (in place, as Megatron),
// identity backward; after a row-parallel linear.
at::Tensor reduce_from_tp(const at::Tensor& x, Collectives& tp);

// One pipeline stage as the schedule drives it.
struct PipelineStage {
  // Micro-batch m forward from the previous stage's activation (undefined on the first stage); returns what goes to
  // the next stage (on the last stage: the loss, kept for backward).
  std::function<at::Tensor(int m, const at::Tensor& input)> forward;
  // Micro-batch m backward from the next stage's gradient of this stage's output (undefined on the last stage);
  // returns the gradient of the input, for the previous stage (ignored on the first).
  std::function<at::Tensor(int m, const at::Tensor& output_grad)> backward;
};
// Megatron's 1F1B schedule (forward_backward_pipelining_without_interleaving) for this rank's stage, pp.rank() of
// pp.world_size(): warm-up forwards, steady one-forward-one-backward, cool-down backwards. Activations and their
// gradients (`shape`, `options`) go between neighbours with send/recv; where a stage sends and receives at the
// same point (send_forward_recv_backward, send_backward_recv_forward) the pair is one batch_p2p.
void run_1f1b(Collectives& pp, int micro_batches, at::IntArrayRef shape, at::TensorOptions options,
              const PipelineStage& stage);

}  // namespace reprise::workloads::detail
