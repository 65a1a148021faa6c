// Matrix products: FLOPs = 2 * batch * m * n * k, bytes = the operands and the result.
#include "family.h"

namespace reprise::predict::detail {
namespace {

bool set_gemm(const Trace& t, const Tensor& a, double batch, double m, double n, double k, OpWork& w) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return false;
  const double item = a.itemsize > 0 ? a.itemsize : 4;
  w.flops = 2 * batch * m * n * k;
  w.bytes = item * batch * (m * k + k * n + m * n);
  w.key = {m, n, k, batch};
  w.dtype = dtype_of(t, a);
  return true;
}

// Operands at inputs a and b: [.., m, k] x [.., k, n], batch dims broadcast (matmul, bmm, mm, addmm).
bool two_operands(const Trace& t, const Node& n, size_t ia, size_t ib, OpWork& w) {
  const Tensor* a = input_tensor(t, n, ia);
  const Tensor* b = input_tensor(t, n, ib);
  if (!a || !b || a->rank == 0 || b->rank == 0) return false;
  std::vector<int64_t> sa = shape_of(t, *a), sb = shape_of(t, *b);
  if (sa.size() == 1) sa.insert(sa.begin(), 1);  // matmul's vector operands
  if (sb.size() == 1) sb.push_back(1);
  const double m = static_cast<double>(sa[sa.size() - 2]), k = static_cast<double>(sa.back());
  const double nn = static_cast<double>(sb.back());
  std::vector<int64_t> ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  double batch = std::max(numel_of(ba), numel_of(bb));
  return set_gemm(t, *a, batch, m, nn, k, w);
}

bool gemm_work(const Trace& t, const Node& n, OpWork& w) {
  std::string_view name = t.name(n);
  name = name.substr(name.rfind("::") == std::string_view::npos ? 0 : name.rfind("::") + 2);
  if (name == "linear") {  // input [.., k] x weight [n, k]^T
    const Tensor* x = input_tensor(t, n, 0);
    const Tensor* wt = input_tensor(t, n, 1);
    if (!x || !wt || x->rank == 0 || wt->rank != 2) return false;
    std::vector<int64_t> sx = shape_of(t, *x), sw = shape_of(t, *wt);
    const double k = static_cast<double>(sx.back());
    sx.pop_back();
    return set_gemm(t, *x, 1, numel_of(sx), static_cast<double>(sw[0]), k, w);
  }
  if (name == "addmm" || name == "baddbmm" || name == "addbmm" || name == "_addmm_activation" || name == "addmv")
    return two_operands(t, n, 1, 2, w);
  return two_operands(t, n, 0, 1, w);
}

}  // namespace

const Family kGemm{OpFamily::Gemm,
                   {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_addmm_activation", "mv", "addmv",
                    "dot", "vdot", "_scaled_mm"},
                   gemm_work};

}  // namespace reprise::predict::detail
