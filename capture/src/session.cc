// Live capture: RecordFunction callbacks append compact records to per-thread logs (no JSON, no file work on the
// hot path); closing the recording window turns the logs into a Trace and writes it as ET JSON.
#include "reprise/capture/session.h"

#include <ATen/ATen.h>
#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <functional>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "reprise/capture/builder.h"
#include "reprise/capture/strings.h"
#include "reprise/capture/write.h"

namespace reprise::capture {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Values are recorded in the trace model's own form (String/Device refs are global string ids here).
using RVal = Value;

struct RTensor {
  int64_t id = 0, storage = 0, offset = 0, numel = 0;
  int32_t itemsize = 0;
  uint32_t device = 0, dtype = 0;  // global string ids
  uint32_t dims = 0;               // rank sizes then rank strides, in ints
  uint16_t rank = 0;
  bool strided = true;
};

struct RNode {
  int64_t id = 0, parent = 0;
  uint32_t name = 0, schema = 0;
  int64_t rf_id = 0, seq = -1, tid = 0, fw_tid = 0;
  int32_t scope = 0;
  uint32_t in = 0, nin = 0, out = 0, nout = 0;
  uint32_t range = 0;  // global string id of the tensor_range JSON, 0 = none
  int32_t collective = -1;
  double ts = 0, dur = -1;  // host time, microseconds since the window opened
  bool inner = false;       // lean capture: recorded without arguments
};

double g_origin = 0;  // steady-clock seconds when the window opened
inline double since_origin_us() { return (now_seconds() - g_origin) * 1e6; }

struct NameEntry {
  std::string name;
  uint32_t name_id = 0, schema_id = 0;
};

// One thread's records. Owned by the global state, so a thread may end before the session does.
struct ThreadLog {
  uint64_t tid = 0;
  int64_t thread_node = 0;
  std::vector<RNode> nodes;
  std::vector<RVal> vals;
  std::vector<uint32_t> types;  // parallel to vals: global string id of the type string
  std::vector<RTensor> tensors;
  std::vector<int64_t> ints;
  std::vector<uint32_t> stack;  // open nodes (indices in nodes)
  std::unordered_map<const char*, NameEntry> names;  // keyed by the op's (stable) name pointer
  std::unordered_map<std::string, uint32_t> type_ids;
  // Per scalar type: the dtype's string id and "Tensor(<dtype>)"'s type id and text; per device: its string id.
  struct DtypeEntry {
    uint32_t dtype = 0, type = 0;
    std::string text;
  };
  std::vector<DtypeEntry> dtypes;
  std::vector<uint32_t> devices;
  uint32_t int_type = 0, double_type = 0, bool_type = 0, string_type = 0, device_type = 0, none_type = 0;
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
    // Room for a typical step, touched now: growing the logs on the hot path costs copies and page faults.
    auto prepare = [](auto& v, size_t n) {
      v.resize(n);
      v.clear();
    };
    prepare(log->nodes, 16384);
    prepare(log->vals, 65536);
    prepare(log->types, 65536);
    prepare(log->tensors, 32768);
    prepare(log->ints, 131072);
    log->stack.reserve(64);
    log->tid = at::RecordFunction::currentThreadId();
    log->thread_node = G.next_id++;
    tl_log = log.get();
    tl_generation = gen;
    std::lock_guard<std::mutex> lock(G.mu);
    G.logs.push_back(std::move(log));
  }
  return *tl_log;
}

uint32_t type_id(ThreadLog& L, const std::string& type) {
  auto it = L.type_ids.find(type);
  if (it != L.type_ids.end()) return it->second;
  uint32_t id = intern(type);
  L.type_ids.emplace(type, id);
  return id;
}

// Records t; `type` receives its type string's id and `text` the string itself (for list types).
uint32_t add_tensor(ThreadLog& L, const at::Tensor& t, uint32_t& type, const std::string*& text) {
  RTensor r;
  if (!t.defined()) {
    static const std::string undefined = "Tensor(nullptr (uninitialized))";
    r.dtype = intern("nullptr (uninitialized)");
    r.device = intern("cpu");
    type = type_id(L, undefined);
    text = &undefined;
    L.tensors.push_back(r);
    return static_cast<uint32_t>(L.tensors.size() - 1);
  }
  size_t st = static_cast<size_t>(t.scalar_type());
  if (st >= L.dtypes.size()) L.dtypes.resize(st + 1);
  ThreadLog::DtypeEntry& de = L.dtypes[st];
  if (!de.dtype) {
    auto name = t.dtype().name();
    std::string n(name.data(), name.size());
    de.dtype = intern(n);
    de.text = "Tensor(" + n + ")";
    de.type = type_id(L, de.text);
  }
  type = de.type;
  text = &de.text;
  r.dtype = de.dtype;
  size_t dev_key = static_cast<size_t>(t.device().type()) * 64 + static_cast<size_t>(t.device().index() + 1);
  if (dev_key >= L.devices.size()) L.devices.resize(dev_key + 1, 0);
  if (!L.devices[dev_key]) L.devices[dev_key] = intern(t.device().str());
  r.device = L.devices[dev_key];
  // The objects' addresses stand in for ids on the hot path; build() numbers them (a reused address is the
  // same id, as in PyTorch's observer).
  r.id = reinterpret_cast<intptr_t>(t.unsafeGetTensorImpl());
  if (t.has_storage()) r.storage = reinterpret_cast<intptr_t>(t.storage().unsafeGetStorageImpl());
  r.strided = t.layout() == at::kStrided && !t.is_nested();
  r.offset = r.strided ? t.storage_offset() : 0;
  r.numel = t.numel();
  r.itemsize = static_cast<int32_t>(t.element_size());
  r.rank = static_cast<uint16_t>(t.dim());
  r.dims = static_cast<uint32_t>(L.ints.size());
  for (int64_t s : t.sizes()) L.ints.push_back(s);
  if (r.strided)
    for (int64_t s : t.strides()) L.ints.push_back(s);
  else
    for (int64_t k = 0; k < t.dim(); ++k) L.ints.push_back(0);
  L.tensors.push_back(r);
  return static_cast<uint32_t>(L.tensors.size() - 1);
}

// Fills vals[slot] with v and returns its type string's id; lists and tuples reserve their elements
// contiguously, and only they build a type string ("GenericList[Int,Int]").
uint32_t fill_value(ThreadLog& L, const c10::IValue& v, size_t slot, std::string* text) {
  if (!L.int_type) {
    L.int_type = type_id(L, "Int");
    L.double_type = type_id(L, "Double");
    L.bool_type = type_id(L, "Bool");
    L.string_type = type_id(L, "String");
    L.device_type = type_id(L, "Device");
    L.none_type = type_id(L, "None");
  }
  RVal r;
  uint32_t type = 0;
  const char* name = nullptr;
  if (v.isTensor()) {
    r.kind = ValueKind::Tensor;
    const std::string* tt = nullptr;
    r.ref = add_tensor(L, v.toTensor(), type, tt);
    if (text) *text = *tt;
  } else if (v.isInt()) {
    r.kind = ValueKind::Int;
    r.i = v.toInt();
    type = L.int_type;
    name = "Int";
  } else if (v.isDouble()) {
    r.kind = ValueKind::Double;
    r.d = v.toDouble();
    type = L.double_type;
    name = "Double";
  } else if (v.isBool()) {
    r.kind = ValueKind::Bool;
    r.i = v.toBool();
    type = L.bool_type;
    name = "Bool";
  } else if (v.isString()) {
    r.kind = ValueKind::String;
    r.ref = intern(v.toStringRef());
    type = L.string_type;
    name = "String";
  } else if (v.isDevice()) {
    r.kind = ValueKind::Device;
    r.ref = intern(v.toDevice().str());
    type = L.device_type;
    name = "Device";
  } else if (v.isList() || v.isTuple()) {
    std::vector<c10::IValue> items;
    if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) items.push_back(e);
    } else {
      for (const c10::IValue& e : v.toTupleRef().elements()) items.push_back(e);
    }
    r.kind = v.isList() ? ValueKind::List : ValueKind::Tuple;
    r.count = static_cast<uint32_t>(items.size());
    r.ref = static_cast<uint32_t>(L.vals.size());
    L.vals.resize(L.vals.size() + items.size());
    L.types.resize(L.vals.size(), 0);
    std::string list = v.isList() ? "GenericList[" : "Tuple[";
    std::string elem;
    for (size_t k = 0; k < items.size(); ++k) {
      fill_value(L, items[k], r.ref + k, &elem);
      list += (k ? "," : "") + elem;
    }
    list += "]";
    type = type_id(L, list);
    if (text) *text = std::move(list);
  } else {
    // None, and what replay cannot rebuild (generators, streams, objects): recorded as None of that type.
    std::string t = v.isNone() ? "None" : v.tagKind();
    type = v.isNone() ? L.none_type : type_id(L, t);
    if (text) *text = std::move(t);
  }
  if (name && text) *text = name;
  L.vals[slot] = r;
  return type;
}

void add_values(ThreadLog& L, c10::ArrayRef<const c10::IValue> values, uint32_t& first, uint32_t& count) {
  first = static_cast<uint32_t>(L.vals.size());
  count = static_cast<uint32_t>(values.size());
  L.vals.resize(L.vals.size() + values.size());
  L.types.resize(L.vals.size(), 0);
  for (size_t k = 0; k < values.size(); ++k) L.types[first + k] = fill_value(L, values[k], first + k, nullptr);
}

// {"<input position>": [min, max]} of the integer CPU tensors among the inputs: index ranges for replay.
uint32_t tensor_ranges(c10::ArrayRef<const c10::IValue> in) {
  std::string out;
  for (size_t k = 0; k < in.size(); ++k) {
    if (!in[k].isTensor()) continue;
    const at::Tensor& t = in[k].toTensor();
    if (!t.defined() || !t.device().is_cpu() || t.layout() != at::kStrided || t.numel() == 0 ||
        t.numel() > (int64_t{1} << 22) || !at::isIntegralType(t.scalar_type(), /*includeBool=*/false))
      continue;
    at::DisableRecordFunctionGuard no_record;
    int64_t lo = t.min().item<int64_t>(), hi = t.max().item<int64_t>();
    out += (out.empty() ? "{" : ", ") + ("\"" + std::to_string(k) + "\": [" + std::to_string(lo) + ", " +
                                          std::to_string(hi) + "]");
  }
  if (out.empty()) return 0;
  return intern(out + "}");
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (!g().active.load(std::memory_order_acquire)) return nullptr;
  ThreadLog& L = thread_log();
  RNode n;
  n.id = g().next_id++;
  n.parent = L.stack.empty() ? L.thread_node : L.nodes[L.stack.back()].id;
  const char* name = fn.name();
  auto it = L.names.find(name);
  if (it == L.names.end() || it->second.name != name) {
    NameEntry e;
    e.name = name;
    e.name_id = intern(e.name);
    if (auto schema = fn.operator_schema()) {
      std::ostringstream s;
      s << *schema;
      e.schema_id = intern(s.str());
    }
    // Only dispatcher ops have names that outlive the call; others are looked up every time.
    if (fn.scope() == at::RecordScope::FUNCTION && e.schema_id != 0) it = L.names.insert_or_assign(name, e).first;
    n.name = e.name_id;
    n.schema = e.schema_id;
  } else {
    n.name = it->second.name_id;
    n.schema = it->second.schema_id;
  }
  n.rf_id = static_cast<int64_t>(fn.handle());
  n.seq = fn.seqNr();
  n.tid = static_cast<int64_t>(fn.threadId());
  n.fw_tid = static_cast<int64_t>(fn.forwardThreadId());
  n.scope = static_cast<int32_t>(fn.scope());
  // Lean capture: an op called by another dispatcher op is recorded without its arguments (replay issues the
  // outer op, never this one); communication records keep theirs.
  bool inner = !g().nested_values && !L.stack.empty() && L.nodes[L.stack.back()].schema != 0 &&
               std::strcmp(name, "record_param_comms") != 0;
  n.inner = inner;
  if (!inner) {
    auto inputs = fn.inputs();
    add_values(L, inputs, n.in, n.nin);
    if (g().tensor_ranges) n.range = tensor_ranges(inputs);
  }
  if (g().host_times) n.ts = since_origin_us();
  L.stack.push_back(static_cast<uint32_t>(L.nodes.size()));
  L.nodes.push_back(n);
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (!g().active.load(std::memory_order_acquire)) return;
  ThreadLog& L = thread_log();
  int64_t handle = static_cast<int64_t>(fn.handle());
  size_t k = L.stack.size();
  while (k > 0 && L.nodes[L.stack[k - 1]].rf_id != handle) --k;
  if (k == 0) return;  // started on another thread (async ops), or before the window opened
  uint32_t idx = L.stack[k - 1];
  if (g().host_times) L.nodes[idx].dur = since_origin_us() - L.nodes[idx].ts;
  L.stack.erase(L.stack.begin() + static_cast<std::ptrdiff_t>(k - 1));
  if (L.nodes[idx].inner) return;
  const std::vector<c10::IValue>& outs = fn.outputs();
  uint32_t first, count;
  add_values(L, c10::ArrayRef<const c10::IValue>(outs.data(), outs.size()), first, count);
  L.nodes[idx].out = first;
  L.nodes[idx].nout = count;
}

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

  void open_window();
  void close_window();
  void open_step();
  void close_step();
  Trace build() const;
  void write_host_timeline(const std::string& path) const;
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
    G.logs.clear();
    G.strings = StringTable();
  }
  G.next_id = 2;  // 1 is the process root
  G.tensor_ranges = o.tensor_ranges;
  G.nested_values = o.nested_values;
  G.host_times = o.host_timeline && !o.path.empty();
  g_origin = now_seconds();
  G.generation.fetch_add(1, std::memory_order_acq_rel);
  std::time_t now = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  start_time = buf;
  if (!o.process_groups.empty()) {
    ThreadLog& L = thread_log();
    RNode n;
    n.id = G.next_id++;
    n.parent = L.thread_node;
    n.name = intern("## process_group:init ##");
    n.scope = static_cast<int32_t>(at::RecordScope::USER_SCOPE);
    n.in = static_cast<uint32_t>(L.vals.size());
    n.nin = 1;
    RVal v;
    v.kind = ValueKind::String;
    v.ref = intern(o.process_groups);
    L.vals.push_back(v);
    L.types.push_back(intern("String"));
    L.nodes.push_back(n);
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
  window_open = false;
  if (!o.path.empty()) {
    write_et(build(), o.path);
    if (o.host_timeline) write_host_timeline(timeline_path_for(o.path));
  }
}

// The recorded ops' host times as a Kineto-style Chrome trace (cpu_op events carrying "Record function id"), so
// readers link them to the ET by rf_id and know each op's original duration.
void Session::Impl::write_host_timeline(const std::string& path) const {
  Global& G = g();
  std::lock_guard<std::mutex> lock(G.mu);
  nlohmann::json events = nlohmann::json::array();
  int64_t pid = static_cast<int64_t>(::getpid());
  int64_t ext = 1;
  for (const auto& log : G.logs)
    for (const RNode& n : log->nodes) {
      if (n.dur < 0) continue;
      bool step = n.rf_id == 0;
      nlohmann::json args = {{"External id", ext++}};
      if (!step) args["Record function id"] = n.rf_id;
      if (n.seq >= 0) args["Sequence number"] = n.seq;
      events.push_back({{"ph", "X"},
                        {"cat", step ? "user_annotation" : "cpu_op"},
                        {"name", std::string(G.strings.str(n.name))},
                        {"pid", pid},
                        {"tid", static_cast<int64_t>(log->tid)},
                        {"ts", n.ts},
                        {"dur", n.dur},
                        {"args", args}});
    }
  nlohmann::json doc = {{"schemaVersion", 1}, {"traceEvents", events}, {"traceName", path}};
  if (o.rank >= 0) doc["distributedInfo"] = {{"rank", o.rank}};
  write_text_file(path, doc.dump());
}

void Session::Impl::open_step() {
  ThreadLog& L = thread_log();
  RNode n;
  n.id = g().next_id++;
  n.parent = L.stack.empty() ? L.thread_node : L.nodes[L.stack.back()].id;
  n.name = intern("ProfilerStep#" + std::to_string(step));
  n.scope = static_cast<int32_t>(at::RecordScope::USER_SCOPE);
  n.tid = static_cast<int64_t>(L.tid);
  n.ts = since_origin_us();
  L.stack.push_back(static_cast<uint32_t>(L.nodes.size()));
  L.nodes.push_back(n);
  step_log = &L;
}

void Session::Impl::close_step() {
  if (!step_log) return;
  // The step marker is the oldest open node of its thread: everything above it is closed by now.
  auto& st = step_log->stack;
  for (size_t k = 0; k < st.size(); ++k)
    if (step_log->nodes[st[k]].rf_id == 0 && step_log->nodes[st[k]].scope == static_cast<int32_t>(at::RecordScope::USER_SCOPE)) {
      RNode& marker = step_log->nodes[st[k]];
      marker.dur = since_origin_us() - marker.ts;
      st.erase(st.begin() + static_cast<std::ptrdiff_t>(k), st.end());
      break;
    }
  step_log = nullptr;
}

Trace Session::Impl::build() const {
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
  for (const auto& log : G.logs) {
    const ThreadLog& L = *log;
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
        case ValueKind::Int: return b.integer(v.i);
        case ValueKind::Double: return b.real(v.d);
        case ValueKind::Bool: return b.boolean(v.i != 0);
        case ValueKind::String: return b.string(str(v.ref));
        case ValueKind::Device: return b.device(str(v.ref));
        case ValueKind::List:
        case ValueKind::Tuple: {
          std::vector<Value> items;
          for (uint32_t k = 0; k < v.count; ++k) items.push_back(conv(L.vals[v.ref + k]));
          return v.kind == ValueKind::List ? b.list(items) : b.tuple(items);
        }
        default: return b.none();
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

size_t Session::num_nodes() const {
  std::lock_guard<std::mutex> lock(g().mu);
  size_t n = 0;
  for (const auto& l : g().logs) n += l->nodes.size() + 1;
  return n;
}

Session* Session::active() {
  std::lock_guard<std::mutex> lock(g().mu);
  return g().session && g().session->recording() ? g().session : nullptr;
}

void Session::record_collective(const CollectiveRecord& c, const std::vector<at::Tensor>& inputs,
                                const std::vector<at::Tensor>& outputs) {
  Impl& s = *impl_;
  if (!s.window_open) return;
  ThreadLog& L = thread_log();
  RNode n;
  n.id = g().next_id++;
  n.parent = L.stack.empty() ? L.thread_node : L.nodes[L.stack.back()].id;
  n.name = intern("record_param_comms");
  n.scope = static_cast<int32_t>(at::RecordScope::USER_SCOPE);
  n.tid = static_cast<int64_t>(L.tid);
  {
    std::lock_guard<std::mutex> lock(s.coll_mu);
    n.collective = static_cast<int32_t>(s.collectives.size());
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
  std::vector<c10::IValue> in = {tensors(inputs),
                                 c10::IValue(c.seq),
                                 c10::IValue(c10::ivalue::Tuple::create({c10::IValue(c.pg_name), c10::IValue(c.pg_desc)})),
                                 c10::IValue(c.rank),
                                 c10::IValue(c.name),
                                 ints(c.in_splits),
                                 ints(c.out_splits),
                                 c10::IValue(c.global_rank_start),
                                 c10::IValue(c.global_rank_stride),
                                 c10::IValue(c.pg_size)};
  add_values(L, c10::ArrayRef<const c10::IValue>(in.data(), in.size()), n.in, n.nin);
  std::vector<c10::IValue> out = {tensors(outputs)};
  add_values(L, c10::ArrayRef<const c10::IValue>(out.data(), out.size()), n.out, n.nout);
  L.nodes.push_back(n);
}

}  // namespace reprise::capture
