// Megatron-style parallelism: rank layout and groups (megatron/core/parallel_state.py), the tensor parallel f and g
// operators (megatron/core/tensor_parallel/mappings.py) and the 1F1B schedule (megatron/core/pipeline_parallel/
// schedules.py, p2p_communication.py).
#include "parallel.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

namespace reprise::workloads::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group travels through the autograd context as an integer: its IValue map holds no pointers.
void save_group(AutogradContext* ctx, Collectives* group) {
  ctx->saved_data["group"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(group));
}
Collectives& saved_group(AutogradContext* ctx) {
  return *reinterpret_cast<Collectives*>(static_cast<intptr_t>(ctx->saved_data["group"].toInt()));
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Collectives* tp) {
    save_group(ctx, tp);
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::Tensor g = grads[0].contiguous();
    saved_group(ctx).all_reduce(g);
    return {g, at::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, Collectives* tp) {
    at::Tensor y = x;  // a linear's output: contiguous, and nothing saved it for backward
    tp->all_reduce(y);
    return y;
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], at::Tensor()}; }
};

void add_group(Collectives* world, std::vector<int> ranks, const char* desc, Collectives*& mine) {
  if (Collectives* g = world->new_group(ranks, desc)) mine = g;
}

}  // namespace

ParallelGroups make_parallel_groups(Collectives* world, int64_t tp, int64_t pp, int64_t dp) {
  ParallelGroups g;
  if (!world) return g;
  const int64_t rank = world->rank(), W = tp * pp * dp;
  g.tp_rank = rank % tp;
  g.dp_rank = rank / tp % dp;
  g.pp_rank = rank / (tp * dp);
  auto ranks = [](int64_t first, int64_t n, int64_t stride) {
    std::vector<int> v;
    for (int64_t k = 0; k < n; ++k) v.push_back(static_cast<int>(first + k * stride));
    return v;
  };
  if (dp > 1)
    for (int64_t p = 0; p < pp; ++p)
      for (int64_t t = 0; t < tp; ++t) add_group(world, ranks(p * tp * dp + t, dp, tp), "dp", g.dp);
  if (tp > 1)
    for (int64_t first = 0; first < W; first += tp) add_group(world, ranks(first, tp, 1), "tp", g.tp);
  if (pp > 1)
    for (int64_t first = 0; first < tp * dp; ++first) add_group(world, ranks(first, pp, tp * dp), "pp", g.pp);
  return g;
}

at::Tensor copy_to_tp(const at::Tensor& x, Collectives& tp) { return CopyToTp::apply(x, &tp); }
at::Tensor reduce_from_tp(const at::Tensor& x, Collectives& tp) { return ReduceFromTp::apply(x, &tp); }

void run_1f1b(Collectives& pp, int M, at::IntArrayRef shape, at::TensorOptions options, const PipelineStage& stage) {
  const int s = pp.rank(), P = pp.world_size();
  const bool first = s == 0, last = s == P - 1;
  // p2p_communication.py's five operations, each a lone send or recv or one batch of both.
  auto recv_from = [&](int peer) {
    at::Tensor t = at::empty(shape, options);
    pp.recv(t, peer);
    return t;
  };
  auto exchange_with = [&](const at::Tensor& send, int peer) {
    at::Tensor received = at::empty(shape, options);
    pp.batch_p2p({{true, send.contiguous(), peer}, {false, received, peer}});
    return received;
  };
  auto recv_forward = [&] { return first ? at::Tensor() : recv_from(s - 1); };
  auto send_forward = [&](const at::Tensor& out) {
    if (!last) pp.send(out.contiguous(), s + 1);
  };
  auto recv_backward = [&] { return last ? at::Tensor() : recv_from(s + 1); };
  auto send_backward = [&](const at::Tensor& grad) {
    if (!first) pp.send(grad.contiguous(), s - 1);
  };
  auto send_forward_recv_backward = [&](const at::Tensor& out) {
    return last ? at::Tensor() : exchange_with(out, s + 1);
  };
  auto send_backward_recv_forward = [&](const at::Tensor& grad) {
    return first ? at::Tensor() : exchange_with(grad, s - 1);
  };

  const int warmup = std::min(P - s - 1, M), steady = M - warmup;
  int f = 0, b = 0;
  for (int i = 0; i < warmup; ++i) send_forward(stage.forward(f++, recv_forward()));
  at::Tensor input = steady > 0 ? recv_forward() : at::Tensor();
  for (int i = 0; i < steady; ++i) {
    at::Tensor out_grad = send_forward_recv_backward(stage.forward(f++, input));
    at::Tensor in_grad = stage.backward(b++, out_grad);
    if (i + 1 == steady)
      send_backward(in_grad);
    else
      input = send_backward_recv_forward(in_grad);
  }
  for (int i = 0; i < warmup; ++i) send_backward(stage.backward(b++, recv_backward()));
}

}  // namespace reprise::workloads::detail
