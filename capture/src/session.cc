// Live capture: RecordFunction callbacks append compact binary events to per-thread logs (event_log.h: no JSON, no
// string work, no allocation and no file work on the hot path); closing the recording window decodes the logs into
// a Trace and writes it as ET JSON.
#include "reprise/capture/session.h"

#include <ATen/ATen.h>
#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "event_log.h"
#include "reprise/common/clock.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/strings.h"
#include "reprise/trace/write.h"

namespace reprise::capture {
namespace {

using detail::BlockPool;
using detail::LogReader;
using detail::LogWriter;

// ---- The event stream ----------------------------------------------------------------------------------------
// Each thread appends events to its own LogWriter; nothing is decoded, interned or allocated per op on the hot
// path (names and schemas are interned once per operator). Closing the window decodes the streams into nodes.
//
//   Begin   id i64, rf handle u64, name u32, schema u32, seq i64, scope u8, flags u8, [tid u64],
//           [fw_tid u64, fw_parent i64],
//           [inputs: count u32, values; ranges: (1 u8, position u32, min i64, max i64)..., 0 u8], [ts i64]
//   End     rf handle u64, flags u8, [ts i64], [outputs: count u32, values]
//   Leaf    id i64, name u32, scope u8, collective i32, inputs, outputs (a node without a RecordFunction)
//   StepBegin / StepEnd   the ProfilerStep#N marker: id i64, name u32, ts i64 / ts i64
enum Event : uint8_t { kBegin = 1, kEnd, kLeaf, kStepBegin, kStepEnd };
enum BeginFlags : uint8_t { kInner = 1, kTid = 2, kFwTid = 4, kTime = 8 };
enum EndFlags : uint8_t { kEndTime = 1, kEndValues = 2 };

// Values: a tag, then the payload. A tensor is its object's and storage's addresses (numbered when the trace is
// built), offset, scalar type, device, rank, sizes and strides.
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
  kSameTensor
};
enum TensorFlags : uint8_t { kStrided = 1 };

// A tensor record: a 29-byte header (object and storage addresses, offset, scalar type, device type and index,
// flags, rank), then the sizes and the strides. Most tensors come back unchanged within a few ops (an op's output
// is the next op's input, weights recur), so each thread keeps its last records in a direct-mapped cache keyed by
// the object's address; a record equal to its slot's is written as kSameTensor and the slot (2 bytes instead of
// 45 to 93). The decoder keeps the same cache, updated by the same rule.
constexpr size_t kTensorHeader = 29;

struct TensorCache {
  static constexpr size_t kSlots = 256, kMaxRank = 4;
  static constexpr size_t kMaxBytes = kTensorHeader + 2 * sizeof(int64_t) * kMaxRank;
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
    std::memcpy(&address, rec, 8);
    Entry& e = slots[slot(address)];
    e.len = static_cast<uint8_t>(len);
    std::memcpy(e.rec, rec, len);
  }
};

// A recorded value in the trace model's form; String/Device refs are global string ids here.
using RVal = Value;

struct RTensor {
  int64_t id = 0, storage = 0, offset = 0;
  int32_t itemsize = 0;
  uint32_t device = 0, dtype = 0;  // global string ids
  uint32_t dims = 0;               // rank sizes then rank strides, in ints
  uint16_t rank = 0;
};

// A decoded node.
struct RNode {
  int64_t id = 0, parent = 0;
  uint32_t name = 0, schema = 0;
  int64_t rf_id = 0, seq = -1, tid = 0, fw_tid = 0, fw_parent = 0;
  int32_t scope = 0;
  uint32_t in = 0, nin = 0, out = 0, nout = 0;
  uint32_t range = 0;  // global string id of the tensor_range JSON, 0 = none
  int32_t collective = -1;
  int64_t ts = 0, dur = -1;  // host time, nanoseconds since the window opened; dur -1: not timed
};

int64_t g_origin_ns = 0;  // steady clock when the window opened

struct NameEntry {
  const char* key = nullptr;
  uint32_t name = 0, schema = 0;
  bool comms = false;  // record_param_comms keeps its arguments in lean capture
};

struct Open {
  uint64_t handle = 0;  // 0: the step marker
  int64_t id = 0;       // its node id
  bool op = false;      // a dispatcher op (has a schema)
  bool inner = false;   // recorded without arguments
};

BlockPool& pool() {
  static BlockPool* p = new BlockPool;  // never destroyed: callbacks may run during static destruction
  return *p;
}

// One thread's records. Owned by the global state, so a thread may end before the session does.
struct ThreadLog {
  ThreadLog() : w(pool()) {}
  uint64_t tid = 0;
  int64_t thread_node = 0;
  LogWriter w;
  std::vector<Open> stack;  // open RecordFunctions (and the step marker) of this thread
  TensorCache tensors;
  // The innermost open node's id (the thread node's when none), for backward ops on other threads: their
  // fw_parent is what their forward thread has open when they start.
  std::atomic<int64_t> top{0};
  std::atomic<size_t> nodes{0};

  void set_top() { top.store(stack.empty() ? thread_node : stack.back().id, std::memory_order_relaxed); }
  // Names and schemas of dispatcher ops, keyed by their (stable) name pointer: a direct-mapped cache in front of
  // a map.
  static constexpr size_t kCache = 512;
  NameEntry cache[kCache];
  std::unordered_map<const char*, NameEntry> names;
};

struct Global {
  std::mutex mu;  // strings, logs
  StringTable strings;
  std::vector<std::unique_ptr<ThreadLog>> logs;
  std::atomic<int64_t> next_id{1};
  std::atomic<uint64_t> generation{0};
  std::atomic<void*> active{nullptr};  // the recording Session::Impl
  Session* session = nullptr;
  bool tensor_ranges = true;
  bool nested_values = true;
  bool host_times = true;  // time each op (for the host timeline)
  // This window's logs, readable without the lock (fw_parent lookups from other threads).
  static constexpr size_t kMaxThreads = 1024;
  std::atomic<ThreadLog*> threads[kMaxThreads] = {};
  std::atomic<size_t> num_threads{0};

  // Drops every log (their blocks go back to the pool). Holds mu.
  void forget_logs() {
    for (size_t k = 0; k < std::min(num_threads.load(), kMaxThreads); ++k) threads[k].store(nullptr);
    num_threads = 0;
    logs.clear();
  }
};

Global& g() {
  static Global* global = new Global;  // never destroyed: callbacks may run during static destruction
  return *global;
}

thread_local ThreadLog* tl_log = nullptr;
thread_local uint64_t tl_generation = ~uint64_t{0};

uint32_t intern(std::string_view s) {
  std::lock_guard<std::mutex> lock(g().mu);
  return g().strings.intern(s);
}

ThreadLog& thread_log() {
  Global& G = g();
  uint64_t gen = G.generation.load(std::memory_order_acquire);
  if (tl_generation != gen || !tl_log) {
    auto log = std::make_unique<ThreadLog>();
    log->stack.reserve(64);
    log->tid = at::RecordFunction::currentThreadId();
    log->thread_node = G.next_id++;
    log->set_top();
    tl_log = log.get();
    tl_generation = gen;
    size_t slot = G.num_threads.fetch_add(1);
    if (slot < Global::kMaxThreads) G.threads[slot].store(log.get(), std::memory_order_release);
    std::lock_guard<std::mutex> lock(G.mu);
    G.logs.push_back(std::move(log));
  }
  return *tl_log;
}

// What the forward thread of a backward op has open now (PyTorch's fw_parent); 0 if that thread recorded nothing.
int64_t forward_parent(const ThreadLog& L, uint64_t fw_tid) {
  if (fw_tid == L.tid) return L.stack.empty() ? L.thread_node : L.stack.back().id;
  Global& G = g();
  size_t n = std::min(G.num_threads.load(std::memory_order_acquire), Global::kMaxThreads);
  for (size_t k = 0; k < n; ++k) {
    const ThreadLog* t = G.threads[k].load(std::memory_order_acquire);
    if (t && t->tid == fw_tid) return t->top.load(std::memory_order_relaxed);
  }
  return 0;
}

void count_node(ThreadLog& L) { L.nodes.store(L.nodes.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }

// Nodes recorded so far in this window, the thread nodes included.
size_t recorded_so_far() {
  std::lock_guard<std::mutex> lock(g().mu);
  size_t n = 0;
  for (const auto& l : g().logs) n += l->nodes.load(std::memory_order_relaxed) + 1;
  return n;
}

const NameEntry& name_entry(ThreadLog& L, const at::RecordFunction& fn, NameEntry& scratch) {
  const char* name = fn.name();
  size_t slot = (reinterpret_cast<uintptr_t>(name) >> 3) & (ThreadLog::kCache - 1);
  if (L.cache[slot].key == name && name) return L.cache[slot];
  auto it = L.names.find(name);
  if (it != L.names.end()) {
    L.cache[slot] = it->second;
    return it->second;
  }
  NameEntry e;
  e.key = name;
  e.name = intern(name);
  e.comms = std::strcmp(name, "record_param_comms") == 0;
  if (auto schema = fn.operator_schema()) {
    std::ostringstream s;
    s << *schema;
    e.schema = intern(s.str());
  }
  // Only dispatcher ops have names that outlive the call; others are looked up every time.
  if (fn.scope() != at::RecordScope::FUNCTION || e.schema == 0) {
    scratch = e;
    return scratch;
  }
  L.cache[slot] = e;
  return L.names.emplace(name, e).first->second;
}

void put_tensor(ThreadLog& L, const at::Tensor& t) {
  LogWriter& w = L.w;
  if (!t.defined()) {
    w.put(kUndefinedTensor);
    return;
  }
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  bool nested = impl->is_nested();
  bool strided = !nested && impl->layout() == at::kStrided;
  c10::IntArrayRef sizes = nested ? c10::IntArrayRef() : impl->sizes();  // a nested tensor's sizes are per component
  auto address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(impl));
  auto storage = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(impl->unsafe_storage().unsafeGetStorageImpl()));
  auto offset = static_cast<int64_t>(strided ? impl->storage_offset() : 0);
  c10::Device d = impl->device();
  size_t dims = sizes.size() * sizeof(int64_t) * (strided ? 2 : 1);
  size_t len = kTensorHeader + dims;
  uint8_t local[TensorCache::kMaxBytes];
  // Small records are built on the stack and compared with the cache; large ones go straight to the log.
  bool cacheable = len <= TensorCache::kMaxBytes;
  uint8_t* h = cacheable ? local : nullptr;
  if (!cacheable) {
    w.put(kTensor);
    h = w.span(kTensorHeader);
  }
  std::memcpy(h, &address, 8);
  std::memcpy(h + 8, &storage, 8);
  std::memcpy(h + 16, &offset, 8);
  h[24] = static_cast<uint8_t>(c10::typeMetaToScalarType(impl->dtype()));
  h[25] = static_cast<uint8_t>(static_cast<int8_t>(d.type()));
  h[26] = static_cast<uint8_t>(static_cast<int8_t>(d.index()));
  h[27] = strided ? kStrided : 0;
  h[28] = static_cast<uint8_t>(sizes.size());
  uint8_t* out = cacheable ? local + kTensorHeader : (dims ? w.span(dims) : nullptr);
  size_t half = sizes.size() * sizeof(int64_t);
  if (half) std::memcpy(out, sizes.data(), half);
  if (half && strided) std::memcpy(out + half, impl->strides().data(), half);
  if (!cacheable) return;
  size_t slot = TensorCache::slot(address);
  TensorCache::Entry& e = L.tensors.slots[slot];
  if (e.len == len && std::memcmp(e.rec, local, len) == 0) {
    w.put(kSameTensor);
    w.put(static_cast<uint8_t>(slot));
    return;
  }
  e.len = static_cast<uint8_t>(len);
  std::memcpy(e.rec, local, len);
  w.put(kTensor);
  std::memcpy(w.span(kTensorHeader), local, kTensorHeader);
  if (dims) std::memcpy(w.span(dims), local + kTensorHeader, dims);
}

void put_value(ThreadLog& L, const c10::IValue& v) {
  LogWriter& w = L.w;
  if (v.isTensor()) {
    put_tensor(L, v.toTensor());
  } else if (v.isInt()) {
    w.put(kInt);
    w.put(v.toInt());
  } else if (v.isDouble()) {
    w.put(kDouble);
    w.put(v.toDouble());
  } else if (v.isBool()) {
    w.put(kBool);
    w.put(static_cast<uint8_t>(v.toBool()));
  } else if (v.isNone()) {
    w.put(kNone);
  } else if (v.isString()) {
    w.put(kString);
    w.put_bytes(v.toStringRef());
  } else if (v.isDevice()) {
    w.put(kDevice);
    w.put(static_cast<int8_t>(v.toDevice().type()));
    w.put(static_cast<int8_t>(v.toDevice().index()));
  } else if (v.isList()) {
    c10::ArrayRef<c10::IValue> items = v.toListRef();
    w.put(kList);
    w.put(static_cast<uint32_t>(items.size()));
    for (const c10::IValue& e : items) put_value(L, e);
  } else if (v.isTuple()) {
    const auto& items = v.toTupleRef().elements();
    w.put(kTuple);
    w.put(static_cast<uint32_t>(items.size()));
    for (const c10::IValue& e : items) put_value(L, e);
  } else {
    // What replay cannot rebuild (generators, streams, objects): recorded as None of that type.
    w.put(kOther);
    w.put_bytes(v.tagKind());
  }
}

void put_values(ThreadLog& L, c10::ArrayRef<const c10::IValue> values) {
  L.w.put(static_cast<uint32_t>(values.size()));
  for (const c10::IValue& v : values) put_value(L, v);
}

// [min, max] of the integer CPU tensors among the inputs (index ranges for replay), each after a 1 byte, then a 0.
void put_ranges(LogWriter& w, c10::ArrayRef<const c10::IValue> in) {
  for (size_t k = 0; k < in.size(); ++k) {
    if (!in[k].isTensor()) continue;
    const at::Tensor& t = in[k].toTensor();
    if (!t.defined() || !at::isIntegralType(t.scalar_type(), /*includeBool=*/false) || !t.device().is_cpu() ||
        t.layout() != at::kStrided || t.numel() == 0 || t.numel() > (int64_t{1} << 22))
      continue;
    at::DisableRecordFunctionGuard no_record;
    int64_t lo = t.min().item<int64_t>(), hi = t.max().item<int64_t>();
    w.put(uint8_t{1});
    w.put(static_cast<uint32_t>(k));
    w.put(lo);
    w.put(hi);
  }
  w.put(uint8_t{0});
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  Global& G = g();
  if (!G.active.load(std::memory_order_acquire)) return nullptr;
  ThreadLog& L = thread_log();
  NameEntry scratch;
  const NameEntry& e = name_entry(L, fn, scratch);
  // Lean capture: an op called by another dispatcher op is recorded without its arguments (replay issues the
  // outer op, never this one); communication records keep theirs.
  bool inner = !G.nested_values && !L.stack.empty() && L.stack.back().op && !e.comms;
  uint64_t handle = fn.handle();
  uint64_t tid = fn.threadId(), fw_tid = fn.forwardThreadId();
  uint8_t flags = (inner ? kInner : 0) | (G.host_times ? kTime : 0);
  if (tid != 0 && tid != L.tid) flags |= kTid;
  if (fw_tid != 0) flags |= kFwTid;
  auto id = static_cast<int64_t>(G.next_id++);
  LogWriter& w = L.w;
  w.put(kBegin);
  w.put(id);
  w.put(handle);
  w.put(e.name);
  w.put(e.schema);
  w.put(static_cast<int64_t>(fn.seqNr()));
  w.put(static_cast<uint8_t>(fn.scope()));
  w.put(flags);
  if (flags & kTid) w.put(tid);
  if (flags & kFwTid) {
    w.put(fw_tid);
    w.put(forward_parent(L, fw_tid));
  }
  if (!inner) {
    auto inputs = fn.inputs();
    put_values(L, inputs);
    if (G.tensor_ranges) {
      put_ranges(w, inputs);
    } else {
      w.put(uint8_t{0});
    }
  }
  if (G.host_times) w.put(now_ns() - g_origin_ns);
  L.stack.push_back({handle, id, e.schema != 0, inner});
  L.set_top();
  count_node(L);
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  Global& G = g();
  if (!G.active.load(std::memory_order_acquire)) return;
  ThreadLog& L = thread_log();
  uint64_t handle = fn.handle();
  size_t k = L.stack.size();
  while (k > 0 && L.stack[k - 1].handle != handle) --k;
  if (k == 0) return;  // started on another thread (async ops), or before the window opened
  bool inner = L.stack[k - 1].inner;
  L.stack.erase(L.stack.begin() + static_cast<std::ptrdiff_t>(k - 1));
  L.set_top();
  LogWriter& w = L.w;
  w.put(kEnd);
  w.put(handle);
  w.put(static_cast<uint8_t>((G.host_times ? kEndTime : 0) | (inner ? 0 : kEndValues)));
  if (G.host_times) w.put(now_ns() - g_origin_ns);
  if (!inner) {
    const std::vector<c10::IValue>& outs = fn.outputs();
    put_values(L, c10::ArrayRef<const c10::IValue>(outs.data(), outs.size()));
  }
}

// ---- Decoding, when the window closes --------------------------------------------------------------------------

// One thread's stream as nodes, values, tensors and type strings (every string id global).
struct Decoded {
  uint64_t tid = 0;
  int64_t thread_node = 0;
  std::vector<RNode> nodes;
  std::vector<RVal> vals;
  std::vector<uint32_t> types;  // parallel to vals: global string id of the type string
  std::vector<RTensor> tensors;
  std::vector<int64_t> ints;
};

class Decoder {
 public:
  Decoder(StringTable& strings, Decoded& out) : s_(strings), d_(out) {
    int_type_ = s_.intern("Int");
    double_type_ = s_.intern("Double");
    bool_type_ = s_.intern("Bool");
    string_type_ = s_.intern("String");
    device_type_ = s_.intern("Device");
    none_type_ = s_.intern("None");
  }

  void run(LogReader& r) {
    struct OpenNode {
      uint64_t handle;
      size_t node;
      bool step;
    };
    std::vector<OpenNode> stack;
    auto parent = [&]() { return stack.empty() ? d_.thread_node : d_.nodes[stack.back().node].id; };
    while (!r.at_end()) {
      auto ev = r.get<uint8_t>();
      switch (ev) {
        case kBegin: {
          RNode n;
          n.id = r.get<int64_t>();
          n.parent = parent();
          uint64_t handle = r.get<uint64_t>();
          n.rf_id = static_cast<int64_t>(handle);
          n.name = r.get<uint32_t>();
          n.schema = r.get<uint32_t>();
          n.seq = r.get<int64_t>();
          n.scope = r.get<uint8_t>();
          auto flags = r.get<uint8_t>();
          n.tid = static_cast<int64_t>((flags & kTid) ? r.get<uint64_t>() : d_.tid);
          if (flags & kFwTid) {
            n.fw_tid = static_cast<int64_t>(r.get<uint64_t>());
            n.fw_parent = r.get<int64_t>();
          }
          if (!(flags & kInner)) {
            values(r, n.in, n.nin);
            n.range = ranges(r);
          }
          if (flags & kTime) n.ts = r.get<int64_t>();
          stack.push_back({handle, d_.nodes.size(), false});
          d_.nodes.push_back(n);
          break;
        }
        case kEnd: {
          auto handle = r.get<uint64_t>();
          auto flags = r.get<uint8_t>();
          size_t k = stack.size();
          while (k > 0 && (stack[k - 1].step || stack[k - 1].handle != handle)) --k;
          if (k == 0) throw std::runtime_error("capture log: an end without its begin");
          RNode& n = d_.nodes[stack[k - 1].node];
          stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(k - 1));
          if (flags & kEndTime) n.dur = r.get<int64_t>() - n.ts;
          if (flags & kEndValues) values(r, n.out, n.nout);
          break;
        }
        case kLeaf: {
          RNode n;
          n.id = r.get<int64_t>();
          n.parent = parent();
          n.name = r.get<uint32_t>();
          n.scope = r.get<uint8_t>();
          n.collective = r.get<int32_t>();
          n.tid = static_cast<int64_t>(d_.tid);
          values(r, n.in, n.nin);
          values(r, n.out, n.nout);
          d_.nodes.push_back(n);
          break;
        }
        case kStepBegin: {
          RNode n;
          n.id = r.get<int64_t>();
          n.parent = parent();
          n.name = r.get<uint32_t>();
          n.scope = static_cast<int32_t>(at::RecordScope::USER_SCOPE);
          n.tid = static_cast<int64_t>(d_.tid);
          n.ts = r.get<int64_t>();
          stack.push_back({0, d_.nodes.size(), true});
          d_.nodes.push_back(n);
          break;
        }
        case kStepEnd: {
          int64_t ts = r.get<int64_t>();
          // The marker is the oldest open node: what is still open above it ends with the step.
          for (size_t k = 0; k < stack.size(); ++k)
            if (stack[k].step) {
              RNode& m = d_.nodes[stack[k].node];
              m.dur = ts - m.ts;
              stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(k), stack.end());
              break;
            }
          break;
        }
        default:
          throw std::runtime_error("capture log: unknown event " + std::to_string(ev));
      }
    }
  }

 private:
  void values(LogReader& r, uint32_t& first, uint32_t& count) {
    count = r.get<uint32_t>();
    first = static_cast<uint32_t>(d_.vals.size());
    d_.vals.resize(d_.vals.size() + count);
    d_.types.resize(d_.vals.size(), 0);
    for (uint32_t k = 0; k < count; ++k) {
      uint32_t type = value(r, first + k);
      d_.types[first + k] = type;
    }
  }

  // Fills vals[slot] and returns its type string's id ("Int", "Tensor(float)", "GenericList[Int,Int]", ...).
  uint32_t value(LogReader& r, size_t slot) {
    RVal v;
    uint32_t type = 0;
    auto tag = r.get<uint8_t>();
    switch (tag) {
      case kTensor:
      case kUndefinedTensor:
      case kSameTensor: {
        v.kind = ValueKind::Tensor;
        v.ref = tensor(r, tag, type);
        break;
      }
      case kInt:
        v.kind = ValueKind::Int;
        v.i = r.get<int64_t>();
        type = int_type_;
        break;
      case kDouble:
        v.kind = ValueKind::Double;
        v.d = r.get<double>();
        type = double_type_;
        break;
      case kBool:
        v.kind = ValueKind::Bool;
        v.i = r.get<uint8_t>();
        type = bool_type_;
        break;
      case kNone:
        type = none_type_;
        break;
      case kString:
        v.kind = ValueKind::String;
        v.ref = s_.intern(r.get_bytes());
        type = string_type_;
        break;
      case kDevice: {
        v.kind = ValueKind::Device;
        auto dt = r.get<int8_t>();
        auto di = r.get<int8_t>();
        v.ref = s_.intern(c10::Device(static_cast<c10::DeviceType>(dt), di).str());
        type = device_type_;
        break;
      }
      case kList:
      case kTuple: {
        v.kind = tag == kList ? ValueKind::List : ValueKind::Tuple;
        v.count = r.get<uint32_t>();
        v.ref = static_cast<uint32_t>(d_.vals.size());
        d_.vals.resize(d_.vals.size() + v.count);
        d_.types.resize(d_.vals.size(), 0);
        std::string list = tag == kList ? "GenericList[" : "Tuple[";
        for (uint32_t k = 0; k < v.count; ++k) {
          if (k) list += ',';
          list += s_.str(value(r, v.ref + k));
        }
        type = s_.intern(list + "]");
        break;
      }
      case kOther:
        type = s_.intern(r.get_bytes());
        break;
      default:
        throw std::runtime_error("capture log: unknown value tag " + std::to_string(tag));
    }
    d_.vals[slot] = v;
    return type;
  }

  uint32_t tensor(LogReader& r, uint8_t tag, uint32_t& type) {
    RTensor t;
    if (tag == kUndefinedTensor) {
      t.dtype = s_.intern("nullptr (uninitialized)");
      t.device = s_.intern("cpu");
      type = s_.intern("Tensor(nullptr (uninitialized))");
      d_.tensors.push_back(t);
      return static_cast<uint32_t>(d_.tensors.size() - 1);
    }
    uint8_t rec[TensorCache::kMaxBytes];
    const uint8_t* h;
    const uint8_t* dims = nullptr;
    if (tag == kSameTensor) {
      const TensorCache::Entry& e = cache_.slots[r.get<uint8_t>()];
      if (e.len == 0) throw std::runtime_error("capture log: a tensor refers to an empty cache slot");
      h = e.rec;
      dims = e.rec + kTensorHeader;
    } else {
      h = r.span(kTensorHeader);
      size_t n = size_t{h[28]} * sizeof(int64_t) * ((h[27] & kStrided) ? 2 : 1);
      if (n) dims = r.span(n);
      if (kTensorHeader + n <= TensorCache::kMaxBytes) {  // the writer cached it: so does the reader
        std::memcpy(rec, h, kTensorHeader);
        if (n) std::memcpy(rec + kTensorHeader, dims, n);
        cache_.remember(rec, kTensorHeader + n);
      }
    }
    uint64_t address, storage;
    std::memcpy(&address, h, 8);
    std::memcpy(&storage, h + 8, 8);
    std::memcpy(&t.offset, h + 16, 8);
    t.id = static_cast<int64_t>(address);
    t.storage = static_cast<int64_t>(storage);
    auto st = static_cast<c10::ScalarType>(h[24]);
    auto dt = static_cast<int8_t>(h[25]);
    auto di = static_cast<int8_t>(h[26]);
    bool strided = h[27] & kStrided;
    t.rank = h[28];
    size_t key = static_cast<size_t>(st);
    if (key >= dtypes_.size()) dtypes_.resize(key + 1);
    if (!dtypes_[key].dtype) {
      auto name = c10::scalarTypeToTypeMeta(st).name();
      std::string n(name.data(), name.size());
      dtypes_[key].dtype = s_.intern(n);
      dtypes_[key].type = s_.intern("Tensor(" + n + ")");
      dtypes_[key].itemsize = static_cast<int32_t>(c10::elementSize(st));
    }
    t.dtype = dtypes_[key].dtype;
    t.itemsize = dtypes_[key].itemsize;
    type = dtypes_[key].type;
    auto dev = devices_.find({dt, di});
    if (dev == devices_.end())
      dev = devices_.emplace(std::make_pair(dt, di), s_.intern(c10::Device(static_cast<c10::DeviceType>(dt), di).str()))
                .first;
    t.device = dev->second;
    t.dims = static_cast<uint32_t>(d_.ints.size());
    d_.ints.resize(d_.ints.size() + 2 * size_t{t.rank}, 0);
    if (t.rank) std::memcpy(d_.ints.data() + t.dims, dims, t.rank * sizeof(int64_t) * (strided ? 2 : 1));
    d_.tensors.push_back(t);
    return static_cast<uint32_t>(d_.tensors.size() - 1);
  }

  // {"<input position>": [min, max], ...}
  uint32_t ranges(LogReader& r) {
    std::string out;
    while (r.get<uint8_t>()) {
      auto pos = r.get<uint32_t>();
      auto lo = r.get<int64_t>();
      auto hi = r.get<int64_t>();
      out += (out.empty() ? "{\"" : ", \"") + std::to_string(pos) + "\": [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]";
    }
    return out.empty() ? 0 : s_.intern(out + "}");
  }

  struct DtypeEntry {
    uint32_t dtype = 0, type = 0;
    int32_t itemsize = 0;
  };
  StringTable& s_;
  Decoded& d_;
  std::vector<DtypeEntry> dtypes_;
  TensorCache cache_;  // mirrors the writer's
  std::map<std::pair<int8_t, int8_t>, uint32_t> devices_;
  uint32_t int_type_, double_type_, bool_type_, string_type_, device_type_, none_type_;
};

}  // namespace

struct Session::Impl {
  SessionOptions o;
  int64_t step = -1;
  bool window_open = false, done = false;
  at::CallbackHandle handle = 0;
  double step_start = 0;
  std::vector<StepTime> times;
  ThreadLog* step_log = nullptr;  // the log holding the open ProfilerStep node
  std::mutex coll_mu;
  std::vector<CollectiveRecord> collectives;
  std::string start_time;
  size_t recorded_nodes = 0;  // once the window closed

  void open_window();
  void close_window();
  void open_step();
  void close_step();
  std::vector<Decoded> decode() const;
  Trace build(const std::vector<Decoded>& logs) const;
  void write_host_timeline(const std::vector<Decoded>& logs, const std::string& path) const;
};

// DIR/rank-0.json.gz -> DIR/rank-0.kineto.json.gz
std::string timeline_path_for(const std::string& et_path) {
  std::string p = et_path;
  for (const char* ext : {".json.gz", ".json"})
    if (p.size() > std::strlen(ext) && p.compare(p.size() - std::strlen(ext), std::strlen(ext), ext) == 0) {
      p.resize(p.size() - std::strlen(ext));
      break;
    }
  return p + ".kineto.json.gz";
}

void Session::Impl::open_window() {
  Global& G = g();
  {
    std::lock_guard<std::mutex> lock(G.mu);
    G.forget_logs();
    G.strings = StringTable();
  }
  // The logs' first blocks are faulted in now, before the step is timed, and refilled in the background.
  pool().start_refill((o.log_reserve_mb << 20) / pool().block_bytes());
  G.next_id = 2;  // 1 is the process root
  G.tensor_ranges = o.tensor_ranges;
  G.nested_values = o.nested_values;
  G.host_times = o.host_timeline && !o.path.empty();
  g_origin_ns = now_ns();
  G.generation.fetch_add(1, std::memory_order_acq_rel);
  std::time_t now = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  start_time = buf;
  if (!o.process_groups.empty()) {
    ThreadLog& L = thread_log();
    LogWriter& w = L.w;
    w.put(kLeaf);
    w.put(static_cast<int64_t>(G.next_id++));
    w.put(intern("## process_group:init ##"));
    w.put(static_cast<uint8_t>(at::RecordScope::USER_SCOPE));
    w.put(int32_t{-1});
    w.put(uint32_t{1});
    w.put(kString);
    w.put_bytes(o.process_groups);
    w.put(uint32_t{0});
    count_node(L);
  }
  at::RecordFunctionCallback cb(&on_start, &on_end);
  cb.needsInputs(true).needsOutputs(true).needsIds(true);
  G.active.store(this, std::memory_order_release);
  handle = at::addGlobalCallback(cb);
  window_open = true;
}

void Session::Impl::close_window() {
  if (!window_open) return;
  close_step();
  at::removeCallback(handle);
  g().active.store(nullptr, std::memory_order_release);
  pool().stop_refill();
  window_open = false;
  recorded_nodes = recorded_so_far();
  // The logs' memory goes back however writing ends.
  struct Release {
    ~Release() {
      {
        std::lock_guard<std::mutex> lock(g().mu);
        g().forget_logs();
      }
      pool().trim();
    }
  } release;
  if (!o.path.empty()) {
    std::vector<Decoded> logs;
    Trace trace;
    try {
      logs = decode();
      trace = build(logs);
    } catch (const std::exception& e) {
      throw UserError(o.path + ": the recording could not be turned into a trace: " + e.what());
    }
    write_et(trace, o.path);
    if (o.host_timeline) write_host_timeline(logs, timeline_path_for(o.path));
  }
}

std::vector<Decoded> Session::Impl::decode() const {
  Global& G = g();
  std::lock_guard<std::mutex> lock(G.mu);
  std::vector<Decoded> out(G.logs.size());
  for (size_t k = 0; k < G.logs.size(); ++k) {
    const ThreadLog& L = *G.logs[k];
    out[k].tid = L.tid;
    out[k].thread_node = L.thread_node;
    LogReader r(L.w.blocks());
    Decoder(G.strings, out[k]).run(r);
  }
  return out;
}

// The recorded ops' host times as a Kineto-style Chrome trace (cpu_op events carrying "Record function id"), so
// readers link them to the ET by rf_id and know each op's original duration.
void Session::Impl::write_host_timeline(const std::vector<Decoded>& logs, const std::string& path) const {
  Global& G = g();
  std::lock_guard<std::mutex> lock(G.mu);
  // Formatted directly: a recorded step can have hundreds of thousands of ops.
  std::string out = "{\"schemaVersion\": 1, ";
  if (o.rank >= 0) {
    out += "\"distributedInfo\": {\"rank\": ";
    append_json_int(out, o.rank);
    out += "}, ";
  }
  out += "\"traceName\": ";
  append_json_string(out, path);
  out += ", \"traceEvents\": [";
  std::string pid = std::to_string(::getpid());
  int64_t ext = 1;
  bool first = true;
  for (const Decoded& log : logs)
    for (const RNode& n : log.nodes) {
      if (n.dur < 0) continue;
      bool step = n.rf_id == 0;
      out += first ? "\n" : ",\n";
      first = false;
      out += step ? "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": "
                  : "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": ";
      append_json_string(out, G.strings.str(n.name));
      out += ", \"pid\": " + pid + ", \"tid\": ";
      append_json_int(out, static_cast<int64_t>(log.tid));
      out += ", \"ts\": ";
      append_json_double(out, static_cast<double>(n.ts) / 1000);  // microseconds, as Kineto writes
      out += ", \"dur\": ";
      append_json_double(out, static_cast<double>(n.dur) / 1000);
      out += ", \"args\": {\"External id\": ";
      append_json_int(out, ext++);
      if (!step) {
        out += ", \"Record function id\": ";
        append_json_int(out, n.rf_id);
      }
      if (n.seq >= 0) {
        out += ", \"Sequence number\": ";
        append_json_int(out, n.seq);
      }
      out += "}}";
    }
  out += "\n]}\n";
  write_text_file(path, out);
}

void Session::Impl::open_step() {
  ThreadLog& L = thread_log();
  int64_t id = g().next_id++;
  L.w.put(kStepBegin);
  L.w.put(id);
  L.w.put(intern("ProfilerStep#" + std::to_string(step)));
  L.w.put(now_ns() - g_origin_ns);
  L.stack.push_back({0, id, false, false});
  L.set_top();
  count_node(L);
  step_log = &L;
}

void Session::Impl::close_step() {
  if (!step_log) return;
  // The step marker (handle 0) is the oldest open entry of its thread: everything above it is closed by now.
  auto& st = step_log->stack;
  for (size_t k = 0; k < st.size(); ++k)
    if (st[k].handle == 0) {
      st.erase(st.begin() + static_cast<std::ptrdiff_t>(k), st.end());
      break;
    }
  step_log->set_top();
  step_log->w.put(kStepEnd);
  step_log->w.put(now_ns() - g_origin_ns);
  step_log = nullptr;
}

Trace Session::Impl::build(const std::vector<Decoded>& logs) const {
  Global& G = g();
  std::lock_guard<std::mutex> lock(G.mu);
  TraceBuilder b(o.path);
  // Tensor and storage ids: the recorded addresses, numbered after the node ids in order of appearance.
  std::unordered_map<int64_t, int64_t> tensor_ids, storage_ids;
  int64_t next_id = G.next_id.load();
  auto number = [&next_id](std::unordered_map<int64_t, int64_t>& m, int64_t address) -> int64_t {
    if (address == 0) return 0;
    auto it = m.find(address);
    if (it != m.end()) return it->second;
    m.emplace(address, next_id);
    return next_id++;
  };
  b.set_metadata("pid", std::to_string(static_cast<long long>(::getpid())));
  b.set_metadata("time", "\"" + start_time + "\"");
  if (o.rank >= 0) b.set_metadata("rank", std::to_string(o.rank));
  auto str = [&](uint32_t id) { return std::string(G.strings.str(id)); };

  NodeSpec root;
  root.id = 1;
  root.parent = 1;
  root.name = "[pytorch|profiler|execution_trace|process]";
  root.scope = static_cast<int>(at::RecordScope::USER_SCOPE);
  b.add_node(root);
  for (const Decoded& L : logs) {
    NodeSpec th;
    th.id = L.thread_node;
    th.parent = 1;
    th.name = "[pytorch|profiler|execution_trace|thread]";
    th.tid = static_cast<int64_t>(L.tid);
    th.scope = static_cast<int>(at::RecordScope::USER_SCOPE);
    b.add_node(th);
    std::function<Value(const RVal&)> conv = [&](const RVal& v) -> Value {
      switch (v.kind) {
        case ValueKind::Tensor: {
          const RTensor& t = L.tensors[v.ref];
          TensorSpec s;
          s.id = number(tensor_ids, t.id);
          s.storage_id = number(storage_ids, t.storage);
          s.offset = t.offset;
          s.dtype = str(t.dtype);
          s.itemsize = t.itemsize;
          s.device = str(t.device);
          s.shape.assign(L.ints.begin() + t.dims, L.ints.begin() + t.dims + t.rank);
          s.strides.assign(L.ints.begin() + t.dims + t.rank, L.ints.begin() + t.dims + 2 * t.rank);
          return b.tensor(s);
        }
        case ValueKind::Int:
          return b.integer(v.i);
        case ValueKind::Double:
          return b.real(v.d);
        case ValueKind::Bool:
          return b.boolean(v.i != 0);
        case ValueKind::String:
          return b.string(str(v.ref));
        case ValueKind::Device:
          return b.device(str(v.ref));
        case ValueKind::List:
        case ValueKind::Tuple: {
          std::vector<Value> items;
          for (uint32_t k = 0; k < v.count; ++k) items.push_back(conv(L.vals[v.ref + k]));
          return v.kind == ValueKind::List ? b.list(items) : b.tuple(items);
        }
        default:
          return b.none();
      }
    };
    for (const RNode& n : L.nodes) {
      NodeSpec s;
      s.id = n.id;
      s.parent = n.parent;
      s.name = str(n.name);
      if (n.schema) s.op_schema = str(n.schema);
      s.rf_id = n.rf_id;
      s.seq_id = n.seq;
      s.tid = n.tid ? n.tid : static_cast<int64_t>(L.tid);
      s.fw_tid = n.fw_tid;
      s.fw_parent = n.fw_parent;
      s.scope = n.scope;
      if (n.range) s.tensor_range = str(n.range);
      for (uint32_t k = 0; k < n.nin; ++k) s.inputs.push_back({conv(L.vals[n.in + k]), str(L.types[n.in + k])});
      for (uint32_t k = 0; k < n.nout; ++k) s.outputs.push_back({conv(L.vals[n.out + k]), str(L.types[n.out + k])});
      b.add_node(s);
      if (n.collective >= 0) {
        const CollectiveRecord& c = collectives[static_cast<size_t>(n.collective)];
        auto list_text = [](const std::vector<int64_t>& v) {
          std::string s = "[";
          for (size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + std::to_string(v[k]);
          return s + "]";
        };
        b.add_attr("collective_name", "string", b.string(c.name));
        b.add_attr("dtype", "string", b.string(c.dtype));
        b.add_attr("in_msg_nelems", "uint64", b.integer(c.in_elems));
        b.add_attr("out_msg_nelems", "uint64", b.integer(c.out_elems));
        b.add_attr("in_split_size", "string", b.string(list_text(c.in_splits)));
        b.add_attr("out_split_size", "string", b.string(list_text(c.out_splits)));
        b.add_attr("global_rank_start", "uint64", b.integer(c.global_rank_start));
        b.add_attr("global_rank_stride", "uint64", b.integer(c.global_rank_stride));
        b.add_attr("pg_name", "string", b.string(c.pg_name));
        b.add_attr("pg_desc", "string", b.string(c.pg_desc));
        b.add_attr("pg_size", "uint64", b.integer(c.pg_size));
      }
    }
  }
  return b.finish();
}

Session::Session(SessionOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->o = std::move(options);
  if (impl_->o.skip_steps < 0 || impl_->o.record_steps < 0)
    throw std::invalid_argument("capture: skip_steps and record_steps must not be negative");
  Global& G = g();
  std::lock_guard<std::mutex> lock(G.mu);
  if (G.session) throw std::logic_error("capture: another Session is already open in this process");
  G.session = this;
}

Session::~Session() {
  try {
    stop();
  } catch (...) {
    // A destructor must not throw; call stop() to see write errors.
  }
  std::lock_guard<std::mutex> lock(g().mu);
  if (g().session == this) g().session = nullptr;
}

void Session::step() {
  Impl& s = *impl_;
  if (s.done) return;
  double now = now_seconds();
  if (s.step >= 0) s.times.push_back({s.step, now - s.step_start, s.window_open});
  ++s.step;
  bool record = s.step >= s.o.skip_steps && (s.o.record_steps == 0 || s.step < s.o.skip_steps + s.o.record_steps);
  if (s.window_open) s.close_step();
  if (!record && s.window_open) s.close_window();
  if (record && !s.window_open) s.open_window();
  if (s.window_open) s.open_step();
  s.step_start = now_seconds();
}

void Session::stop() {
  Impl& s = *impl_;
  if (s.done) return;
  s.done = true;
  if (s.step >= 0) s.times.push_back({s.step, now_seconds() - s.step_start, s.window_open});
  s.close_window();
}

bool Session::recording() const { return impl_->window_open; }

std::vector<StepTime> Session::step_times() const { return impl_->times; }

size_t Session::num_nodes() const { return impl_->window_open ? recorded_so_far() : impl_->recorded_nodes; }

Session* Session::active() {
  std::lock_guard<std::mutex> lock(g().mu);
  return g().session && g().session->recording() ? g().session : nullptr;
}

void Session::record_collective(const CollectiveRecord& c, const std::vector<at::Tensor>& inputs,
                                const std::vector<at::Tensor>& outputs) {
  Impl& s = *impl_;
  if (!s.window_open) return;
  ThreadLog& L = thread_log();
  int32_t index;
  {
    std::lock_guard<std::mutex> lock(s.coll_mu);
    index = static_cast<int32_t>(s.collectives.size());
    s.collectives.push_back(c);
  }
  auto tensors = [](const std::vector<at::Tensor>& v) {
    c10::List<at::Tensor> l;
    for (const at::Tensor& t : v) l.push_back(t);
    return c10::IValue(l);
  };
  auto ints = [](const std::vector<int64_t>& v) {
    c10::List<int64_t> l;
    for (int64_t x : v) l.push_back(x);
    return c10::IValue(l);
  };
  // The positional layout PyTorch writes: [tensors, seq, (pg_name, pg_desc), rank, name, in_splits, out_splits,
  // global_rank_start, global_rank_stride, pg_size]
  std::vector<c10::IValue> in = {
      tensors(inputs),
      c10::IValue(c.seq),
      c10::IValue(c10::ivalue::Tuple::create({c10::IValue(c.pg_name), c10::IValue(c.pg_desc)})),
      c10::IValue(c.rank),
      c10::IValue(c.name),
      ints(c.in_splits),
      ints(c.out_splits),
      c10::IValue(c.global_rank_start),
      c10::IValue(c.global_rank_stride),
      c10::IValue(c.pg_size)};
  std::vector<c10::IValue> out = {tensors(outputs)};
  LogWriter& w = L.w;
  w.put(kLeaf);
  w.put(static_cast<int64_t>(g().next_id++));
  w.put(intern("record_param_comms"));
  w.put(static_cast<uint8_t>(at::RecordScope::USER_SCOPE));
  w.put(index);
  put_values(L, c10::ArrayRef<const c10::IValue>(in.data(), in.size()));
  put_values(L, c10::ArrayRef<const c10::IValue>(out.data(), out.size()));
  count_node(L);
}

}  // namespace reprise::capture
