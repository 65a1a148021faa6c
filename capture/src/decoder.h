// Reading the window's logs back when it closes: each thread's events become nodes with their values, tensors and
// type strings, every string an id in the recording state's table.
#pragma once

#include <cstdint>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise::capture::detail {

struct DecodedTensor {
  int64_t id = 0, storage = 0, offset = 0;  // id and storage: the recorded addresses
  int32_t itemsize = 0;
  uint32_t device = 0, dtype = 0;  // string ids
  uint32_t dims = 0;               // in Decoded::ints: rank sizes, then rank strides
  uint16_t rank = 0;
};

struct DecodedNode {
  int64_t id = 0, parent = 0;
  uint32_t name = 0, schema = 0;
  int64_t rf_id = 0, seq = -1, tid = 0, fw_tid = 0, fw_parent = 0;
  int32_t scope = 0;
  uint32_t in = 0, nin = 0, out = 0, nout = 0;  // in Decoded::vals
  uint32_t range = 0;                           // string id of the tensor_range JSON, 0 = none
  int32_t collective = -1;
  int64_t ts = 0, dur = -1;  // host time, nanoseconds since the window opened; dur -1: not timed
};

// One thread's log. Values are the trace model's, with String/Device refs as string ids and Tensor refs as
// indices in `tensors`.
struct Decoded {
  uint64_t tid = 0;
  int64_t thread_node = 0;
  std::vector<DecodedNode> nodes;
  std::vector<Value> vals;
  std::vector<uint32_t> types;  // parallel to vals: string id of the type string
  std::vector<DecodedTensor> tensors;
  std::vector<int64_t> ints;
};

// Every thread's log of the window, in the order the threads started recording. Throws std::runtime_error on a
// malformed log.
std::vector<Decoded> decode_logs();

}  // namespace reprise::capture::detail
