// What one traced op asks of a machine, read from its recorded shapes and dtypes: the op family whose model times
// it, the floating-point operations, the bytes it moves, and the few sizes its family's model is keyed by.
//
//   OpWork w = op_work(trace, node);   // aten::addmm [64,512] x [512,256]: gemm, 2*64*256*512 FLOPs
//   if (w.family == OpFamily::Unmodeled) ...  // counted in a prediction's coverage, never silently zero
//
// One descriptor per family (src/families/NAME.cc, listed in families.cc): the op names it claims, how it reads
// their work, and its roofline. The Chakra export writes flops and bytes as num_ops and tensor_size.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "reprise/trace/trace.h"

namespace reprise::predict {

enum class OpFamily : uint8_t {
  Gemm,        // mm, addmm, bmm, matmul, linear, ...: FLOPs-bound
  Conv,        // convolutions and their backward
  Attention,   // fused scaled-dot-product attention and its backward
  Embedding,   // embedding and embedding-bag lookups and their backward: random row reads
  Memory,      // elementwise, reductions, norms, softmax, copies: bytes moved
  View,        // metadata only (view, transpose, expand, empty): host time, no device work
  Collective,  // collectives and p2p: the fitted bandwidth curves
  Sync,        // waits and barriers: time comes from what they wait for
  Unmodeled,   // none of the above: host time only, reported in coverage
};
constexpr int kOpFamilyCount = 9;
const char* family_name(OpFamily f);
// The family of an op by its name alone ("aten::addmm" -> gemm), for tables keyed by op name; ops the name does not
// settle (an unknown custom op) are Memory when `has_tensors`, else Unmodeled.
OpFamily family_of_name(std::string_view op, bool has_tensors = true);

struct OpWork {
  OpFamily family = OpFamily::Unmodeled;
  bool by_name = true;  // the family claims the op by name (false: a fallback, e.g. an unknown op moving bytes)
  double flops = 0;     // floating-point operations
  double bytes = 0;     // bytes read and written
  std::string dtype;    // of the main operand, as c10 names it ("Float", "BFloat16"); "" when none
  // The sizes the family's model is keyed by (gemm: m, n, k, batch; embedding: lookups, dim, table bytes, bags;
  // others: bytes, flops). Zero where unused.
  std::array<double, 4> key{};
  int64_t collective = -1;  // Collective and Sync: index in Trace::collectives
  // Bytes of the outputs of at least kFreshPageBytes in storage no input holds (none for a view or an `empty`). On a
  // CPU, glibc maps an allocation that large afresh on every call (replay fixes its mmap threshold there; a free heap
  // chunk as large would serve it instead) and unmaps it when freed, so the kernel faults in and zeroes each of its
  // pages every time: a cost of the size alone, not of the op's rate.
  double fresh_bytes = 0;
};

constexpr double kFreshPageBytes = 32.0 * 1024 * 1024;

// The work of node `node` (an operator, collective or wait). Never throws: what the shapes cannot settle falls
// back to bytes moved, and an op with no tensors to Unmodeled.
OpWork op_work(const Trace& t, uint32_t node);

// Whether a family times this autograd node whole (fbgemm's table-batched backward, which updates the tables inside
// it, when the lookup it differentiates is in the trace): the simulator and the Chakra export then take it as one op
// covering its children, as an operator is.
bool timed_whole(const Trace& t, uint32_t autograd_node);

// Whether the op blocks its host thread until the device is done (item, .cpu(), nonzero, synchronize).
bool syncs_host(std::string_view op);

}  // namespace reprise::predict
