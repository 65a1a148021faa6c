// Operators that exist for one backend only (cudnn_*, miopen_*, _fused_*), and the device-generic operator
// each maps to when a trace is replayed elsewhere. One small descriptor per op.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <string_view>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise::replay::detail {

// One argument of the generic op: a recorded argument of the original op, or a constant built from them.
struct RemapArg {
  int source = -1;  // position in the recorded inputs; -1 = `constant`
  c10::IValue constant;
};

struct Remap {
  std::string name, overload;  // the generic op
  std::vector<RemapArg> args;
};

RemapArg remap_source(int source);           // recorded argument `source`
RemapArg remap_constant(c10::IValue value);  // a constant

// The generic equivalent of the backend-specific op `name` with the recorded `inputs`, or false when there is
// none. The generic op may return fewer outputs than the original (cudnn's reserve space): the extra recorded
// outputs are left unbound.
bool remap_backend_op(std::string_view name, const Trace& trace, Span<Value> inputs, Remap& out);

// True for op names that only one GPU backend implements (cudnn_, miopen_, _cudnn_, flash/efficient attention).
bool is_backend_specific(std::string_view name);

}  // namespace reprise::replay::detail
