// What the splice transform is made of: a scope's unit (its subtrees and their backward), the unit's seams (the
// tensors it reads from the ops around it and those it hands back), and node copies within a trace and across
// traces (strings re-interned, tensors through a map).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise::gen {

// Every subtree named `name` (a match inside a match belongs to the outer one), and their backward: autograd nodes
// with the sequence number of one of their ops or a forward parent among them, taken with their autograd wrappers,
// and the gradient accumulations of what that backward wrote.
struct SpliceUnit {
  std::string name;
  std::vector<uint32_t> roots, back_roots;  // node indices, in order
  std::vector<bool> forward, backward;      // per node
  bool has(uint32_t i) const { return forward[i] || backward[i]; }
};
SpliceUnit find_unit(const Trace& t, const std::string& name);

// A tensor the unit reads that an op outside it wrote before (an activation or an incoming gradient; parameters
// and constants, which no op writes, are not seams), and a tensor the unit wrote last before an op outside reads it.
// `backward`: the first reader (in) or the writer (out) is in the unit's backward.
struct SeamIn {
  uint32_t tensor, reader, writer;
  bool backward;
};
struct SeamOut {
  uint32_t tensor, writer, reader;
  bool backward;
};
struct Seams {
  std::vector<SeamIn> in;
  std::vector<SeamOut> out;      // in the order the unit wrote them
  std::vector<uint32_t> rebind;  // value indices of the outside reads of `out` tensors
  std::vector<uint8_t> state;    // per tensor: 0 unused by the unit, 1 read from outside, 2 produced inside
};
Seams find_seams(const Trace& t, const SpliceUnit& u);

bool same_shape(const Trace& a, uint32_t x, const Trace& b, uint32_t y);
// "tensor 12 [4, 8] float", for messages.
std::string tensor_text(const Trace& t, uint32_t x);

// A subtree in id order (execution order, which a copy keeps), each node's parent as an index in the list (-1 for
// the root).
void subtree(const Trace& t, uint32_t root, std::vector<uint32_t>& nodes, std::vector<int>& parent);

// Tensor ids and storage ids past every one in the trace.
struct Fresh {
  int64_t next_id = 1, next_storage = 1;
  explicit Fresh(const Trace& t);
};
// A copy of tensor x with its own id (ids are mapped through `ids`, so one tensor seen twice gets one id); with its
// own storage too when `own_storage` (a parameter or input of the copy). Tensors a copy produces keep their storage
// ids: traces reuse storage ids after frees, and the copy reuses them in the original's order.
uint32_t fresh_tensor(Trace& t, uint32_t x, std::unordered_map<int64_t, int64_t>& ids,
                      std::unordered_map<int64_t, int64_t>& storages, Fresh& f, bool own_storage);

// A copy of node i (not yet in the trace) with its own values, tensors mapped through `remap` (kNone32 keeps one),
// its sequence number shifted; forward parent, children and collective cleared.
Node copy_with(Trace& t, uint32_t i, const std::vector<uint32_t>& remap, int64_t seq_shift);

// Copies nodes of `from` into `into`: strings re-interned, tensors through `map` (per `from` tensor; kNone32 means
// a fresh tensor in `into`, with a fresh id and storage, made once).
class NodeImporter {
 public:
  NodeImporter(Trace& into, const Trace& from, std::vector<uint32_t> map, int64_t seq_shift);
  Node node(uint32_t i);
  uint32_t tensor(uint32_t x);

 private:
  StrId str(StrId s);
  uint32_t values(uint32_t first, uint32_t count);
  Trace& to_;
  const Trace& from_;
  std::vector<uint32_t> map_;
  std::vector<StrId> strs_;
  Fresh fresh_;
  std::unordered_map<int64_t, int64_t> ids_, storages_;
  int64_t seq_shift_;
};

// Makes the sequence numbers of collectives increase again within each process group after copies repeated some
// (the least shift that does; each wait follows its collective), in the positional argument and a `seq` attribute.
// Reindexes when it changed anything.
void renumber_collective_seqs(Trace& t);

// Appends every op of `from` (its thread roots' subtrees, ProfilerSteps renamed to follow `into`'s, the
// process-group node left out) after `into`'s last top-level node, under `into`'s thread of the same tid (else its
// first thread). Tensors get new ids and storages; sequence numbers are shifted past `into`'s. Returns the nodes added.
size_t graft(Trace& into, const Trace& from);

}  // namespace reprise::gen
