#include "trace_from_log.h"

#include <ATen/record_function.h>
#include <unistd.h>

#include <unordered_map>

#include "recording.h"
#include "reprise/trace/builder.h"

namespace reprise::capture::detail {
namespace {

std::string list_text(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t k = 0; k < v.size(); ++k) out += (k ? ", " : "") + std::to_string(v[k]);
  return out + "]";
}

constexpr int kUserScope = static_cast<int>(at::RecordScope::USER_SCOPE);

// Feeds the decoded nodes to a TraceBuilder. Holds the recording state's lock (its strings) throughout.
class TraceAssembler {
 public:
  TraceAssembler(const TraceInfo& info, const std::vector<Collective>& collectives)
      : lock_(state().mu), b_(info.path), collectives_(collectives), next_id_(state().next_id.load()) {
    b_.set_metadata("pid", std::to_string(static_cast<long long>(::getpid())));
    b_.set_metadata("time", "\"" + info.start_time + "\"");
    if (info.rank >= 0) b_.set_metadata("rank", std::to_string(info.rank));
    NodeSpec root;
    root.id = 1;
    root.parent = 1;
    root.name = "[pytorch|profiler|execution_trace|process]";
    root.scope = kUserScope;
    b_.add_node(root);
  }

  void add_thread(const Decoded& L) {
    NodeSpec th;
    th.id = L.thread_node;
    th.parent = 1;
    th.name = "[pytorch|profiler|execution_trace|thread]";
    th.tid = static_cast<int64_t>(L.tid);
    th.scope = kUserScope;
    b_.add_node(th);
    for (const DecodedNode& n : L.nodes) add_node(L, n);
  }

  Trace finish() { return b_.finish(); }

 private:
  std::string str(uint32_t id) const { return std::string(state().strings.str(id)); }

  // Tensor and storage ids: the recorded addresses, numbered after the node ids in order of appearance.
  int64_t number(std::unordered_map<int64_t, int64_t>& ids, int64_t address) {
    if (address == 0) return 0;
    auto it = ids.find(address);
    if (it != ids.end()) return it->second;
    ids.emplace(address, next_id_);
    return next_id_++;
  }

  Value tensor(const Decoded& L, const DecodedTensor& t) {
    TensorSpec s;
    s.id = number(tensor_ids_, t.id);
    s.storage_id = number(storage_ids_, t.storage);
    s.offset = t.offset;
    s.dtype = str(t.dtype);
    s.itemsize = t.itemsize;
    s.device = str(t.device);
    s.shape.assign(L.ints.begin() + t.dims, L.ints.begin() + t.dims + t.rank);
    s.strides.assign(L.ints.begin() + t.dims + t.rank, L.ints.begin() + t.dims + 2 * t.rank);
    return b_.tensor(s);
  }

  Value convert(const Decoded& L, const Value& v) {
    switch (v.kind) {
      case ValueKind::Tensor:
        return tensor(L, L.tensors[v.ref]);
      case ValueKind::Int:
        return b_.integer(v.i);
      case ValueKind::Double:
        return b_.real(v.d);
      case ValueKind::Bool:
        return b_.boolean(v.i != 0);
      case ValueKind::String:
        return b_.string(str(v.ref));
      case ValueKind::Device:
        return b_.device(str(v.ref));
      case ValueKind::List:
      case ValueKind::Tuple: {
        std::vector<Value> items;
        for (uint32_t k = 0; k < v.count; ++k) items.push_back(convert(L, L.vals[v.ref + k]));
        return v.kind == ValueKind::List ? b_.list(items) : b_.tuple(items);
      }
      default:
        return b_.none();
    }
  }

  void add_node(const Decoded& L, const DecodedNode& n) {
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
    for (uint32_t k = 0; k < n.nin; ++k) s.inputs.push_back({convert(L, L.vals[n.in + k]), str(L.types[n.in + k])});
    for (uint32_t k = 0; k < n.nout; ++k) s.outputs.push_back({convert(L, L.vals[n.out + k]), str(L.types[n.out + k])});
    b_.add_node(s);
    if (n.collective >= 0) add_collective_attrs(collectives_[static_cast<size_t>(n.collective)]);
  }

  // The communication attrs PyTorch 2.x writes on record_param_comms.
  void add_collective_attrs(const Collective& c) {
    b_.add_attr("collective_name", "string", b_.string(c.raw_name));
    b_.add_attr("dtype", "string", b_.string(c.dtype));
    b_.add_attr("in_msg_nelems", "uint64", b_.integer(c.in_elems));
    b_.add_attr("out_msg_nelems", "uint64", b_.integer(c.out_elems));
    b_.add_attr("in_split_size", "string", b_.string(list_text(c.in_splits)));
    b_.add_attr("out_split_size", "string", b_.string(list_text(c.out_splits)));
    b_.add_attr("global_rank_start", "uint64", b_.integer(c.global_rank_start));
    b_.add_attr("global_rank_stride", "uint64", b_.integer(c.global_rank_stride));
    b_.add_attr("pg_name", "string", b_.string(c.pg_name));
    b_.add_attr("pg_desc", "string", b_.string(c.pg_desc));
    b_.add_attr("pg_size", "uint64", b_.integer(c.pg_size));
  }

  std::lock_guard<std::mutex> lock_;
  TraceBuilder b_;
  const std::vector<Collective>& collectives_;
  std::unordered_map<int64_t, int64_t> tensor_ids_, storage_ids_;
  int64_t next_id_;
};

}  // namespace

Trace build_trace(const std::vector<Decoded>& logs, const TraceInfo& info, const std::vector<Collective>& collectives) {
  TraceAssembler a(info, collectives);
  for (const Decoded& L : logs) a.add_thread(L);
  return a.finish();
}

}  // namespace reprise::capture::detail
