// Fused attention: q [B, H, L, D], k [B, H, S, D], v [B, H, S, Dv]: FLOPs = 2*B*H*L*S*(D + Dv) forward (QK^T and PV);
// the backward recomputes the scores and forms four products, 2.5 times the forward (FlashAttention-2's count).
#include "family.h"

namespace reprise::predict::detail {
namespace {

bool attention_work(const Trace& t, const Node& n, OpWork& w) {
  const bool backward = t.name(n).find("backward") != std::string_view::npos;
  const size_t first = backward ? 1 : 0;  // the backward takes grad_out first
  const Tensor* q = input_tensor(t, n, first);
  const Tensor* k = input_tensor(t, n, first + 1);
  const Tensor* v = input_tensor(t, n, first + 2);
  if (!q || !k || !v || q->rank < 3 || k->rank != q->rank || v->rank != q->rank) return false;
  std::vector<int64_t> sq = shape_of(t, *q), sk = shape_of(t, *k), sv = shape_of(t, *v);
  const double l = static_cast<double>(sq[sq.size() - 2]), s = static_cast<double>(sk[sk.size() - 2]);
  const double d = static_cast<double>(sq.back()), dv = static_cast<double>(sv.back());
  std::vector<int64_t> batch(sq.begin(), sq.end() - 2);
  double fwd = 2 * numel_of(batch) * l * s * (d + dv);
  w.flops = backward ? 2.5 * fwd : fwd;
  w.bytes = io_bytes(t, n);
  w.key = {w.bytes, w.flops, 0, 0};
  w.dtype = dtype_of(t, *q);
  return w.flops > 0;
}

}  // namespace

const Family kAttention{
    OpFamily::Attention,
    {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
     "_scaled_dot_product_cudnn_attention", "_flash_attention_forward", "_efficient_attention_forward",
     "_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_efficient_attention_backward",
     "_scaled_dot_product_cudnn_attention_backward", "_flash_attention_backward", "_efficient_attention_backward"},
    attention_work};

}  // namespace reprise::predict::detail
