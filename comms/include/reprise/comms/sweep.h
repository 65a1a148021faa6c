// An nccl-tests-like sweep of one collective over message sizes on the current launch: time, algorithm and bus
// bandwidth per size, with the results checked against the expected data.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "reprise/comms/communicator.h"

namespace reprise::comms {

struct SweepOptions {
  Kind kind = Kind::AllReduce;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  size_t min_bytes = 8, max_bytes = 64 << 20;
  double factor = 2;  // size step
  int warmup = 5, iters = 20;
  bool check = true;
  int device = 0;  // GPU for NCCL buffers
};

struct SweepRow {
  size_t bytes = 0;             // nccl-tests "size": the larger of the send and receive buffers of one rank
  size_t count = 0;             // elements of that buffer
  double time_us = 0;           // per operation, the slowest rank's average
  double algbw = 0, busbw = 0;  // GB/s
  int64_t wrong = 0;            // elements that differ from the expected result, summed over ranks; -1 = not checked
};

// The most memory one rank's sweep holds at once, at its largest size over `nranks` ranks: the send and receive
// buffers (host memory on CPUs, device memory with NCCL) and the host copy a check reads the results into.
struct SweepMemory {
  size_t buffers = 0, host_copy = 0;
};
SweepMemory sweep_memory(const SweepOptions& o, int nranks);
// The sweep's element counts per row over `nranks` ranks, smallest first: sizes too small to give every rank an
// element are left out, so a range of only such sizes has none.
std::vector<size_t> sweep_counts(const SweepOptions& o, int nranks);

std::vector<SweepRow> sweep(Communicator& c, const SweepOptions& o,
                            const std::function<void(const SweepRow&)>& on_row = {});
// The familiar table header and a row, as nccl-tests prints them.
void print_header(std::FILE* out, const Communicator& c, const SweepOptions& o);
void print_row(std::FILE* out, const SweepOptions& o, const SweepRow& r);
std::string sweep_json(const Communicator& c, const SweepOptions& o, const std::vector<SweepRow>& rows);

}  // namespace reprise::comms
