// The capture log's binary format, the one definition both the observer (which writes it) and the decoder (which
// reads it) include. A thread's log is a sequence of events, each a one-byte Event tag and a record:
//
//   Begin   BeginRecord, [tid u64], [fw_tid u64, fw_parent i64],
//           [inputs: count u32, values; ranges: (1 u8, position u32, min i64, max i64)..., 0 u8], [ts i64]
//   End     EndRecord, [ts i64], [outputs: count u32, values]
//   Leaf    LeafRecord, inputs, outputs (a node without a RecordFunction: collectives, the process groups; timed
//           when its dur is 0 or more)
//   StepBegin / StepEnd   the ProfilerStep#N marker: StepBeginRecord / ts i64
//
// The bracketed parts are present when the record's flags say so. Times are nanoseconds since the window opened.
// Values are a Tag and its payload; a tensor is a TensorHeader (numbered when the trace is built), then its sizes
// and, when strided, its strides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace reprise::capture::detail {

enum Event : uint8_t { kBegin = 1, kEnd, kLeaf, kStepBegin, kStepEnd };
enum BeginFlags : uint8_t { kInner = 1, kTid = 2, kFwTid = 4, kTime = 8 };
enum EndFlags : uint8_t { kEndTime = 1, kEndValues = 2 };

enum Tag : uint8_t {
  kTensor = 1,
  kUndefinedTensor,
  kInt,
  kDouble,
  kBool,
  kNone,
  kString,
  kDevice,
  kList,
  kTuple,
  kOther,
  kSameTensor  // then a TensorCache slot u8
};
enum TensorFlags : uint8_t { kStrided = 1 };

// Packed: a record is copied into the log in one piece, at any alignment.
#pragma pack(push, 1)
struct BeginRecord {
  int64_t id;
  uint64_t handle;  // the RecordFunction's, which its End repeats
  uint32_t name, schema;
  int64_t seq;
  uint8_t scope, flags;
};
struct EndRecord {
  uint64_t handle;
  uint8_t flags;
};
struct LeafRecord {
  int64_t id;
  uint32_t name;
  uint8_t scope;
  int32_t collective;  // index in the Session's collectives, -1: none
  int64_t ts, dur;     // host time (ns since the window opened); dur -1: not timed
};
struct StepBeginRecord {
  int64_t id;
  uint32_t name;
  int64_t ts;
};
struct TensorHeader {
  uint64_t address, storage;  // the TensorImpl's and its StorageImpl's
  int64_t offset;
  uint8_t scalar_type, device_type, device_index, flags, rank;
};
#pragma pack(pop)
static_assert(sizeof(TensorHeader) == 29, "TensorHeader is packed");

// Most tensors come back unchanged within a few ops (an op's output is the next op's input, weights recur), so each
// thread keeps its last records in a direct-mapped cache keyed by the object's address; a record equal to its
// slot's is written as kSameTensor and the slot (2 bytes instead of 45 to 93). The decoder keeps the same cache,
// updated by the same rule.
struct TensorCache {
  static constexpr size_t kSlots = 256, kMaxRank = 4;
  static constexpr size_t kMaxBytes = sizeof(TensorHeader) + 2 * sizeof(int64_t) * kMaxRank;
  struct Entry {
    uint8_t len = 0;  // 0: empty
    uint8_t rec[kMaxBytes];
  };
  Entry slots[kSlots];
  static size_t slot(uint64_t address) { return ((address >> 4) ^ (address >> 12)) & (kSlots - 1); }
  // Remembers a record (if small enough to be cached) in its address's slot.
  void remember(const uint8_t* rec, size_t len) {
    if (len > kMaxBytes) return;
    uint64_t address;
    std::memcpy(&address, rec, sizeof address);
    Entry& e = slots[slot(address)];
    e.len = static_cast<uint8_t>(len);
    std::memcpy(e.rec, rec, len);
  }
};

// Bytes of a tensor's sizes and strides after its header.
inline size_t tensor_dims_bytes(size_t rank, bool strided) { return rank * sizeof(int64_t) * (strided ? 2 : 1); }

}  // namespace reprise::capture::detail
