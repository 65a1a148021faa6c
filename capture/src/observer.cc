#include "observer.h"

#include <ATen/ATen.h>
#include <ATen/core/function_schema.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "reprise/common/clock.h"

namespace reprise::capture::detail {
namespace {

thread_local ThreadLog* tl_log = nullptr;
thread_local uint64_t tl_generation = ~uint64_t{0};

}  // namespace

ThreadLog& thread_log() {
  RecordingState& S = state();
  uint64_t gen = S.generation.load(std::memory_order_acquire);
  if (tl_generation != gen || !tl_log) {
    auto log = std::make_unique<ThreadLog>();
    log->stack.reserve(64);
    log->tid = at::RecordFunction::currentThreadId();
    log->thread_node = S.next_id++;
    log->set_top();
    tl_log = log.get();
    tl_generation = gen;
    size_t slot = S.num_threads.fetch_add(1);
    if (slot < RecordingState::kMaxThreads) S.threads[slot].store(log.get(), std::memory_order_release);
    std::lock_guard<std::mutex> lock(S.mu);
    S.logs.push_back(std::move(log));
  }
  return *tl_log;
}

namespace {

int64_t since_origin() { return now_ns() - state().origin_ns; }

// What the forward thread of a backward op has open now (PyTorch's fw_parent); 0 if that thread recorded nothing.
int64_t forward_parent(const ThreadLog& L, uint64_t fw_tid) {
  if (fw_tid == L.tid) return L.stack.empty() ? L.thread_node : L.stack.back().id;
  RecordingState& S = state();
  size_t n = std::min(S.num_threads.load(std::memory_order_acquire), RecordingState::kMaxThreads);
  for (size_t k = 0; k < n; ++k) {
    const ThreadLog* t = S.threads[k].load(std::memory_order_acquire);
    if (t && t->tid == fw_tid) return t->top.load(std::memory_order_relaxed);
  }
  return 0;
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
    std::ostringstream text;
    text << *schema;
    e.schema = intern(text.str());
  }
  // Only dispatcher ops have names that outlive the call; others are looked up every time.
  if (fn.scope() != at::RecordScope::FUNCTION || e.schema == 0) {
    scratch = e;
    return scratch;
  }
  L.cache[slot] = e;
  return L.names.emplace(name, e).first->second;
}

void copy_dims(uint8_t* out, const c10::TensorImpl* impl, c10::IntArrayRef sizes, bool strided) {
  size_t half = sizes.size() * sizeof(int64_t);
  if (half) std::memcpy(out, sizes.data(), half);
  if (half && strided) std::memcpy(out + half, impl->strides().data(), half);
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
  c10::Device d = impl->device();
  TensorHeader h;
  h.address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(impl));
  h.storage = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(impl->unsafe_storage().unsafeGetStorageImpl()));
  h.offset = static_cast<int64_t>(strided ? impl->storage_offset() : 0);
  h.scalar_type = static_cast<uint8_t>(c10::typeMetaToScalarType(impl->dtype()));
  h.device_type = static_cast<uint8_t>(static_cast<int8_t>(d.type()));
  h.device_index = static_cast<uint8_t>(static_cast<int8_t>(d.index()));
  h.flags = strided ? kStrided : 0;
  h.rank = static_cast<uint8_t>(sizes.size());
  size_t dims = tensor_dims_bytes(sizes.size(), strided);
  size_t len = sizeof h + dims;
  if (len > TensorCache::kMaxBytes) {  // too large to cache: straight to the log
    w.put(kTensor);
    w.put(h);
    if (dims) copy_dims(w.span(dims), impl, sizes, strided);
    return;
  }
  // Built on the stack and compared with the cache first.
  uint8_t rec[TensorCache::kMaxBytes];
  std::memcpy(rec, &h, sizeof h);
  copy_dims(rec + sizeof h, impl, sizes, strided);
  size_t slot = TensorCache::slot(h.address);
  TensorCache::Entry& e = L.tensors.slots[slot];
  if (e.len == len && std::memcmp(e.rec, rec, len) == 0) {
    w.put(kSameTensor);
    w.put(static_cast<uint8_t>(slot));
    return;
  }
  e.len = static_cast<uint8_t>(len);
  std::memcpy(e.rec, rec, len);
  w.put(kTensor);
  std::memcpy(w.span(sizeof h), rec, sizeof h);
  if (dims) std::memcpy(w.span(dims), rec + sizeof h, dims);
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
  RecordingState& S = state();
  if (!S.active.load(std::memory_order_acquire)) return nullptr;
  ThreadLog& L = thread_log();
  NameEntry scratch;
  const NameEntry& e = name_entry(L, fn, scratch);
  // Lean capture: an op called by another dispatcher op is recorded without its arguments (replay issues the
  // outer op, never this one); communication records keep theirs.
  bool inner = !S.nested_values && !L.stack.empty() && L.stack.back().op && !e.comms;
  uint64_t handle = fn.handle();
  uint64_t tid = fn.threadId(), fw_tid = fn.forwardThreadId();
  uint8_t flags = (inner ? kInner : 0) | (S.host_times ? kTime : 0);
  if (tid != 0 && tid != L.tid) flags |= kTid;
  if (fw_tid != 0) flags |= kFwTid;
  auto id = static_cast<int64_t>(S.next_id++);
  LogWriter& w = L.w;
  w.put(kBegin);
  w.put(BeginRecord{id, handle, e.name, e.schema, static_cast<int64_t>(fn.seqNr()), static_cast<uint8_t>(fn.scope()),
                    flags});
  if (flags & kTid) w.put(tid);
  if (flags & kFwTid) {
    w.put(fw_tid);
    w.put(forward_parent(L, fw_tid));
  }
  if (!inner) {
    auto inputs = fn.inputs();
    put_values(L, inputs);
    if (S.tensor_ranges) {
      put_ranges(w, inputs);
    } else {
      w.put(uint8_t{0});
    }
  }
  if (S.host_times) w.put(since_origin());
  L.stack.push_back({handle, id, e.schema != 0, inner});
  L.set_top();
  L.count_node();
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  RecordingState& S = state();
  if (!S.active.load(std::memory_order_acquire)) return;
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
  w.put(EndRecord{handle, static_cast<uint8_t>((S.host_times ? kEndTime : 0) | (inner ? 0 : kEndValues))});
  if (S.host_times) w.put(since_origin());
  if (!inner) {
    const std::vector<c10::IValue>& outs = fn.outputs();
    put_values(L, c10::ArrayRef<const c10::IValue>(outs.data(), outs.size()));
  }
}

}  // namespace

at::CallbackHandle add_observer() {
  at::RecordFunctionCallback cb(&on_start, &on_end);
  cb.needsInputs(true).needsOutputs(true).needsIds(true);
  return at::addGlobalCallback(cb);
}

void open_step_marker(ThreadLog& L, uint32_t name) {
  auto id = static_cast<int64_t>(state().next_id++);
  L.w.put(kStepBegin);
  L.w.put(StepBeginRecord{id, name, since_origin()});
  L.stack.push_back({0, id, false, false});
  L.set_top();
  L.count_node();
}

void close_step_marker(ThreadLog& L) {
  // The marker (handle 0) is the oldest open entry of its thread: everything above it is closed by now.
  auto& st = L.stack;
  for (size_t k = 0; k < st.size(); ++k)
    if (st[k].handle == 0) {
      st.erase(st.begin() + static_cast<std::ptrdiff_t>(k), st.end());
      break;
    }
  L.set_top();
  L.w.put(kStepEnd);
  L.w.put(since_origin());
}

void write_leaf(ThreadLog& L, uint32_t name, int32_t collective, const std::vector<c10::IValue>& inputs,
                const std::vector<c10::IValue>& outputs, int64_t began_ns) {
  RecordingState& S = state();
  auto id = static_cast<int64_t>(S.next_id++);
  int64_t ts = 0, dur = -1;
  if (S.host_times && began_ns >= 0) {
    ts = began_ns - S.origin_ns;
    dur = std::max<int64_t>(0, now_ns() - began_ns);
  }
  L.w.put(kLeaf);
  L.w.put(LeafRecord{id, name, static_cast<uint8_t>(at::RecordScope::USER_SCOPE), collective, ts, dur});
  put_values(L, c10::ArrayRef<const c10::IValue>(inputs.data(), inputs.size()));
  put_values(L, c10::ArrayRef<const c10::IValue>(outputs.data(), outputs.size()));
  L.count_node();
}

}  // namespace reprise::capture::detail
