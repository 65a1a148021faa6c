// Pipeline traces built in code for the point-to-point tests: one rank's step with sends, receives, coalesced
// batches and waits recorded as PyTorch 2.x's ProcessGroupNCCL records them (record_param_comms with a
// (seq, isP2P) tuple and the peer's group rank in the rank argument).
#pragma once

#include <string>
#include <vector>

#include "reprise/trace/builder.h"

namespace reprise::test {

struct P2pOp {
  std::string name;  // "send", "recv", "coalesced", "wait", "all_reduce"
  int peer = -1;     // send/recv: the rank argument (the peer's group rank in PyTorch 2.x)
  int64_t count = 0;
  int64_t seq = 0;
  bool p2p = true;    // isP2P
  bool tuple = true;  // seq written as PyTorch 2.x's (seq, isP2P); false: a plain int, as older versions
};

// One rank's trace: a process group over `group` (global ranks), a ProfilerStep with a relu (some compute), then
// `ops` on the group in order.
inline Trace p2p_trace(int rank, const std::vector<int>& group, const std::vector<P2pOp>& ops,
                       const std::string& source = "<p2p>") {
  TraceBuilder b(source);
  const int64_t thread = b.roots();
  std::string ranks;
  for (int r : group) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
  b.annotation("## process_group:init ##", thread,
               {b.string("[{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cpu:mpi\", "
                         "\"ranks\": [" +
                         ranks + "], \"group_size\": " + std::to_string(group.size()) + "}]")});
  b.set_parent(b.annotation("ProfilerStep#1"));
  int64_t storage = 1000;
  auto tensor = [&](int64_t n) {
    TensorSpec s;
    s.id = b.next_id();
    s.storage_id = storage++;
    s.shape = {std::max<int64_t>(n, 1)};
    return b.tensor(s);
  };
  Value x = tensor(16), y = tensor(16);
  b.op("aten::relu(Tensor self) -> Tensor", {x}, {y});
  for (const P2pOp& o : ops) {
    const bool comm = o.name != "wait" && o.name != "coalesced";
    Value t = comm ? tensor(o.count) : Value();
    std::vector<Value> tensors = comm ? std::vector<Value>{t} : std::vector<Value>{};
    Value seq = o.tuple ? b.tuple({b.integer(o.seq), b.boolean(o.p2p)}) : b.integer(o.seq);
    b.op("record_param_comms",
         {b.list(tensors), seq, b.tuple({b.string("0"), b.string("default_pg")}), b.integer(o.peer < 0 ? 0 : o.peer),
          b.string(o.name == "all_reduce" ? "allreduce" : o.name), b.list({}), b.list({}), b.integer(group.front()),
          b.integer(1), b.integer(static_cast<int64_t>(group.size()))},
         {b.list(tensors)});
  }
  Trace tr = b.finish();
  tr.rank = rank;
  return tr;
}

}  // namespace reprise::test
