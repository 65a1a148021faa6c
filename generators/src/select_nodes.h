// Node sets the select and splice transforms are made of. Each returns a mask over Trace::nodes that holds the
// ancestors of what it keeps, so masks combine with a plain AND.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise::gen {

// RecordScope::BACKWARD_FUNCTION, as ET writes a node's scope.
constexpr int kScopeBackwardFunction = 1;

// The outermost ops: nodes that are not structure (root, thread, annotation) and have no ancestor that is not.
// A backward function (the engine's `evaluate_function: ...` wrapper) is one of them, with what it calls: drop,
// fuse and foreach move it as one.
std::vector<uint32_t> outermost_ops(const Trace& t);
// The ops replay issues: the same with backward functions transparent too, so an all_reduce DDP issues inside
// AccumulateGrad's wrapper is one op, and the compute beside it another.
std::vector<uint32_t> replayed_ops(const Trace& t);
// Per node: whether it is a communication op or holds one (record_param_comms, c10d:: ops, waits).
std::vector<bool> comm_ops(const Trace& t, const std::vector<uint32_t>& outer);
// The nodes of ProfilerStep#N for each N in `steps` (id ranges, as replay cuts steps); `where` prefixes the error
// for a step the trace does not have.
std::vector<bool> nodes_in_iterations(const Trace& t, const std::vector<int64_t>& steps, const std::string& where);
std::vector<bool> nodes_in_id_ranges(const Trace& t, const std::vector<std::pair<int64_t, int64_t>>& ranges);
// The subtrees of `scopes` and, with `backward`, the backward ops their forward ops led to (the same sequence
// number, or a forward parent inside the scope).
std::vector<bool> nodes_in_scopes(const Trace& t, const std::vector<uint32_t>& scopes, bool backward);
// Marks the root, thread and process-group nodes kept: every trace needs them.
void keep_structure(const Trace& t, std::vector<bool>& keep);
// Sets `mask` for `node` and its ancestors.
void mark_with_ancestors(const Trace& t, uint32_t node, std::vector<bool>& mask);
// Sets `mask` for `node`'s subtree.
void mark_subtree(const Trace& t, uint32_t node, std::vector<bool>& mask);

}  // namespace reprise::gen
