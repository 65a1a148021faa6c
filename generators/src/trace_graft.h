// Grafting one trace's ops into another (splice's concat): nodes copied across string tables, with fresh tensor ids
// and storages, after the target's last op.
#pragma once

#include <string>

#include "reprise/trace/trace.h"

namespace reprise::gen {

// Appends every op of `from` (its thread roots' subtrees, ProfilerSteps renamed to follow `into`'s, the
// process-group node left out) after `into`'s last top-level node, under `into`'s thread of the same tid (else its
// first thread). Tensors get new ids and storages; sequence numbers are shifted past `into`'s. Returns the nodes added.
size_t graft(Trace& into, const Trace& from);

}  // namespace reprise::gen
