// Adding ops to a trace: new tensors, new operator nodes, and their insertion at a place in execution order (node
// ids are renumbered to make room, and every reference to an id or node index follows).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise::gen {

// A tensor the trace did not record: its own id and storage, contiguous, on `device` (a StrId; 0 = no device).
struct NewTensor {
  std::string dtype;  // as ET type strings write it ("float", "c10::BFloat16")
  int itemsize = 4;
  StrId device = 0;
  std::vector<int64_t> shape;
};
// Appends the tensor; returns a Tensor value for it.
Value add_tensor(Trace& t, const NewTensor& x);
// Where a new tensor of a trace goes: the device of its first accelerator tensor, else of its first tensor.
StrId main_device(const Trace& t);

// Per tensor index: the first index of the same tensor (id, storage, offset, dtype and shape agree), as traces
// built in code may list one tensor more than once.
std::vector<uint32_t> same_tensor(const Trace& t);

struct NewArg {
  Value value;
  std::string type;  // "Tensor(float)", "Int", "Bool"
};
Value int_value(int64_t v);
Value bool_value(bool v);
// "Tensor(c10::BFloat16)" for a tensor value, else the type given.
std::string tensor_type(const Trace& t, const Value& tensor);

// An operator node (not yet in the trace) for `schema` ("aten::mm(Tensor self, Tensor mat2) -> Tensor"): its name is
// the schema's up to the overload; its arguments are appended to the trace's pools.
Node make_op(Trace& t, std::string_view schema, const std::vector<NewArg>& inputs, const std::vector<NewArg>& outputs);
// A copy of node `i` (not yet in the trace) with its own top-level values and attributes, so either may be edited.
Node copy_node(Trace& t, uint32_t i);

// The first rf_id after every one the trace has: where nodes an edit adds take their own from.
int64_t next_rf_id(const Trace& t);
// Times a node about to be inserted next to `anchor` (before it: at its start; after it: at its end) in no time, with
// an rf_id of its own taken from `next_rf` (a timeline links one node by an rf_id), so that the trace's op times stay
// true; untimed when the anchor is.
void time_beside(Node& n, const Node& anchor, bool before, int64_t& next_rf);

// Nodes to add next to an existing one (`anchor`, a node index): before it, or after its whole subtree. The first
// node is the anchor's sibling; parent[k] >= 0 puts node k under nodes[parent[k]] instead.
struct Insertion {
  uint32_t anchor = 0;
  bool before = false;
  std::vector<Node> nodes;
  std::vector<int> parent;  // per node; -1 = the anchor's parent
};
// Inserts every insertion at once (ids of the trace's nodes shift up to make room; parents, forward parents and
// linked Kineto events follow) and reindexes. Returns, per insertion, the ids its nodes got; `renumbered`, when
// given, receives each existing node's old id -> new id, for callers holding ids of their own.
std::vector<std::vector<int64_t>> insert_nodes(Trace& t, std::vector<Insertion> ins,
                                               std::unordered_map<int64_t, int64_t>* renumbered = nullptr);

}  // namespace reprise::gen
