#include "decoder.h"

#include <ATen/core/TensorBody.h>
#include <ATen/record_function.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

#include "log_format.h"
#include "recording.h"
#include "reprise/common/dtype.h"

namespace reprise::capture::detail {
namespace {

// The name PyTorch's ET writes for a tensor's dtype ("float", "c10::Half", "long int"): the dtype table's, or c10's
// own type name for the few types the table lacks (quantized ones), as PyTorch would write them.
std::string et_name_of(c10::ScalarType st) {
  if (const reprise::Dtype* d = reprise::dtype_of_scalar_type(static_cast<int>(st))) return std::string(d->et_name);
  auto name = c10::scalarTypeToTypeMeta(st).name();
  return std::string(name.data(), name.size());
}

int32_t itemsize_of(c10::ScalarType st) {
  if (const reprise::Dtype* d = reprise::dtype_of_scalar_type(static_cast<int>(st))) return d->itemsize;
  return static_cast<int32_t>(c10::elementSize(st));
}

// Reads one thread's events (log_format.h) into a Decoded.
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
    while (!r.at_end()) {
      auto ev = r.get<uint8_t>();
      switch (ev) {
        case kBegin:
          begin(r);
          break;
        case kEnd:
          end(r);
          break;
        case kLeaf:
          leaf(r);
          break;
        case kStepBegin:
          step_begin(r);
          break;
        case kStepEnd:
          step_end(r);
          break;
        default:
          throw std::runtime_error("capture log: unknown event " + std::to_string(ev));
      }
    }
  }

 private:
  struct OpenNode {
    uint64_t handle;
    size_t node;
    bool step;
  };

  int64_t parent() const { return open_.empty() ? d_.thread_node : d_.nodes[open_.back().node].id; }

  void begin(LogReader& r) {
    auto rec = r.get<BeginRecord>();
    DecodedNode n;
    n.id = rec.id;
    n.parent = parent();
    n.rf_id = static_cast<int64_t>(rec.handle);
    n.name = rec.name;
    n.schema = rec.schema;
    n.seq = rec.seq;
    n.scope = rec.scope;
    n.tid = static_cast<int64_t>((rec.flags & kTid) ? r.get<uint64_t>() : d_.tid);
    if (rec.flags & kFwTid) {
      n.fw_tid = static_cast<int64_t>(r.get<uint64_t>());
      n.fw_parent = r.get<int64_t>();
    }
    if (!(rec.flags & kInner)) {
      values(r, n.in, n.nin);
      n.range = ranges(r);
    }
    if (rec.flags & kTime) n.ts = r.get<int64_t>();
    open_.push_back({rec.handle, d_.nodes.size(), false});
    d_.nodes.push_back(n);
  }

  void end(LogReader& r) {
    auto rec = r.get<EndRecord>();
    size_t k = open_.size();
    while (k > 0 && (open_[k - 1].step || open_[k - 1].handle != rec.handle)) --k;
    if (k == 0) throw std::runtime_error("capture log: an end without its begin");
    DecodedNode& n = d_.nodes[open_[k - 1].node];
    open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(k - 1));
    if (rec.flags & kEndTime) n.dur = r.get<int64_t>() - n.ts;
    if (rec.flags & kEndValues) values(r, n.out, n.nout);
  }

  void leaf(LogReader& r) {
    auto rec = r.get<LeafRecord>();
    DecodedNode n;
    n.id = rec.id;
    n.parent = parent();
    n.name = rec.name;
    n.scope = rec.scope;
    n.collective = rec.collective;
    n.tid = static_cast<int64_t>(d_.tid);
    if (rec.dur >= 0) {
      n.ts = rec.ts;
      n.dur = rec.dur;
      // A timed leaf links to its host event by a Record function id of its own: 2^40 and up, above RecordFunction's
      // handles (a counter from 1) and below 2^53, which JSON readers that go through a double keep exactly.
      n.rf_id = (int64_t{1} << 40) + rec.id;
    }
    values(r, n.in, n.nin);
    values(r, n.out, n.nout);
    d_.nodes.push_back(n);
  }

  void step_begin(LogReader& r) {
    auto rec = r.get<StepBeginRecord>();
    DecodedNode n;
    n.id = rec.id;
    n.parent = parent();
    n.name = rec.name;
    n.scope = static_cast<int32_t>(at::RecordScope::USER_SCOPE);
    n.tid = static_cast<int64_t>(d_.tid);
    n.ts = rec.ts;
    open_.push_back({0, d_.nodes.size(), true});
    d_.nodes.push_back(n);
  }

  void step_end(LogReader& r) {
    auto ts = r.get<int64_t>();
    // The marker is the oldest open node: what is still open above it ends with the step.
    for (size_t k = 0; k < open_.size(); ++k)
      if (open_[k].step) {
        DecodedNode& m = d_.nodes[open_[k].node];
        m.dur = ts - m.ts;
        open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(k), open_.end());
        break;
      }
  }

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
    Value v;
    uint32_t type = 0;
    auto tag = r.get<uint8_t>();
    switch (tag) {
      case kTensor:
      case kUndefinedTensor:
      case kSameTensor:
        v.kind = ValueKind::Tensor;
        v.ref = tensor(r, tag, type);
        break;
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
        v.ref = device_id(dt, di);
        type = device_type_;
        break;
      }
      case kList:
      case kTuple:
        type = items(r, tag, v);
        break;
      case kOther:
        type = s_.intern(r.get_bytes());
        break;
      default:
        throw std::runtime_error("capture log: unknown value tag " + std::to_string(tag));
    }
    d_.vals[slot] = v;
    return type;
  }

  uint32_t items(LogReader& r, uint8_t tag, Value& v) {
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
    return s_.intern(list + "]");
  }

  // The tensor's record: its header and dims, from the log or (kSameTensor) from the cache, which it updates.
  void tensor_record(LogReader& r, uint8_t tag, TensorHeader& h, const uint8_t*& dims) {
    if (tag == kSameTensor) {
      const TensorCache::Entry& e = cache_.slots[r.get<uint8_t>()];
      if (e.len == 0) throw std::runtime_error("capture log: a tensor refers to an empty cache slot");
      std::memcpy(&h, e.rec, sizeof h);
      dims = e.rec + sizeof h;
      return;
    }
    h = r.get<TensorHeader>();
    size_t n = tensor_dims_bytes(h.rank, (h.flags & kStrided) != 0);
    dims = n ? r.span(n) : nullptr;
    if (sizeof h + n <= TensorCache::kMaxBytes) {  // the writer cached it: so does the reader
      uint8_t rec[TensorCache::kMaxBytes];
      std::memcpy(rec, &h, sizeof h);
      if (n) std::memcpy(rec + sizeof h, dims, n);
      cache_.remember(rec, sizeof h + n);
    }
  }

  uint32_t tensor(LogReader& r, uint8_t tag, uint32_t& type) {
    DecodedTensor t;
    if (tag == kUndefinedTensor) {
      t.dtype = s_.intern("nullptr (uninitialized)");
      t.device = s_.intern("cpu");
      type = s_.intern("Tensor(nullptr (uninitialized))");
      d_.tensors.push_back(t);
      return static_cast<uint32_t>(d_.tensors.size() - 1);
    }
    TensorHeader h;
    const uint8_t* dims = nullptr;
    tensor_record(r, tag, h, dims);
    t.id = static_cast<int64_t>(h.address);
    t.storage = static_cast<int64_t>(h.storage);
    t.offset = h.offset;
    t.rank = h.rank;
    const DtypeEntry& dt = dtype(static_cast<c10::ScalarType>(h.scalar_type));
    t.dtype = dt.dtype;
    t.itemsize = dt.itemsize;
    type = dt.type;
    t.device = device_id(static_cast<int8_t>(h.device_type), static_cast<int8_t>(h.device_index));
    t.dims = static_cast<uint32_t>(d_.ints.size());
    d_.ints.resize(d_.ints.size() + 2 * size_t{t.rank}, 0);
    if (t.rank) std::memcpy(d_.ints.data() + t.dims, dims, tensor_dims_bytes(t.rank, (h.flags & kStrided) != 0));
    d_.tensors.push_back(t);
    return static_cast<uint32_t>(d_.tensors.size() - 1);
  }

  struct DtypeEntry {
    uint32_t dtype = 0, type = 0;
    int32_t itemsize = 0;
  };

  const DtypeEntry& dtype(c10::ScalarType st) {
    auto key = static_cast<size_t>(st);
    if (key >= dtypes_.size()) dtypes_.resize(key + 1);
    DtypeEntry& e = dtypes_[key];
    if (!e.dtype) {
      std::string n = et_name_of(st);
      e.dtype = s_.intern(n);
      e.type = s_.intern("Tensor(" + n + ")");
      e.itemsize = itemsize_of(st);
    }
    return e;
  }

  uint32_t device_id(int8_t type, int8_t index) {
    auto it = devices_.find({type, index});
    if (it == devices_.end())
      it = devices_
               .emplace(std::make_pair(type, index),
                        s_.intern(c10::Device(static_cast<c10::DeviceType>(type), index).str()))
               .first;
    return it->second;
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

  StringTable& s_;
  Decoded& d_;
  std::vector<OpenNode> open_;
  std::vector<DtypeEntry> dtypes_;
  TensorCache cache_;  // mirrors the writer's
  std::map<std::pair<int8_t, int8_t>, uint32_t> devices_;
  uint32_t int_type_, double_type_, bool_type_, string_type_, device_type_, none_type_;
};

}  // namespace

std::vector<Decoded> decode_logs() {
  RecordingState& S = state();
  std::lock_guard<std::mutex> lock(S.mu);
  std::vector<Decoded> out(S.logs.size());
  for (size_t k = 0; k < S.logs.size(); ++k) {
    const ThreadLog& L = *S.logs[k];
    out[k].tid = L.tid;
    out[k].thread_node = L.thread_node;
    LogReader r(L.w.blocks());
    Decoder(S.strings, out[k]).run(r);
  }
  return out;
}

}  // namespace reprise::capture::detail
