// Kineto / Chrome trace JSON: reading, CPU-op nesting, and the link to an ET.
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "json_scan.h"
#include "reader_internal.h"
#include "reprise/trace/link.h"

namespace reprise {
namespace {

namespace od = simdjson::ondemand;

KinetoCat category(std::string_view c) {
  if (c == "cpu_op" || c == "Operator" || c == "operator") return KinetoCat::CpuOp;
  if (c == "user_annotation") return KinetoCat::UserAnnotation;
  if (c == "gpu_user_annotation") return KinetoCat::GpuUserAnnotation;
  if (c == "cuda_runtime" || c == "Runtime" || c == "hip_runtime" || c == "xpu_runtime" || c == "mtia_runtime")
    return KinetoCat::Runtime;
  if (c == "cuda_driver" || c == "hip_driver") return KinetoCat::Driver;
  if (c == "kernel" || c == "Kernel") return KinetoCat::Kernel;
  if (c == "gpu_memcpy" || c == "Memcpy") return KinetoCat::Memcpy;
  if (c == "gpu_memset" || c == "Memset") return KinetoCat::Memset;
  if (c == "cuda_sync") return KinetoCat::Sync;
  return KinetoCat::Other;
}

bool is_cpu(KinetoCat c) { return c == KinetoCat::CpuOp || c == KinetoCat::UserAnnotation; }

class KinetoReader {
 public:
  KinetoReader(const std::string& name, Trace& t, const ReadOptions& options) : name_(name), t_(t), opt_(options) {}

  void run(simdjson::padded_string_view text) {
    text_begin_ = text.data();
    KinetoInfo k;
    k.source = name_;
    od::parser parser;
    try {
      od::document doc = parser.iterate(text);
      if (doc.type() == od::json_type::array) {
        for (auto e : doc.get_array()) read_event(e.value(), k);
      } else {
        bool saw_events = false;
        for (auto field : doc.get_object()) {
          std::string_view key = field.unescaped_key();
          od::value v = field.value();
          if (key == "traceEvents") {
            saw_events = true;
            for (auto e : v.get_array()) read_event(e.value(), k);
          } else if (key == "reprise_timeline") {
            k.producer = std::string(v.get_string().value());
          } else if (key == "deviceProperties") {
            for (auto d : v.get_array()) read_device(d.get_object(), k);
          } else if (key == "distributedInfo") {
            for (auto f : v.get_object()) {
              std::string_view k2 = f.unescaped_key();
              od::value v2 = f.value();
              if (k2 == "backend")
                k.dist_backend = std::string(v2.get_string().value());
              else if (k2 == "rank")
                k.dist_rank = v2.get_int64();
              else if (k2 == "world_size")
                k.dist_world_size = v2.get_int64();
            }
          }
        }
        if (!saw_events) throw UserError(name_ + ": no \"traceEvents\": not a Kineto/Chrome trace");
      }
    } catch (const simdjson::simdjson_error& e) {
      uint64_t off = event_start_ ? static_cast<uint64_t>(event_start_ - text.data()) : 0;
      if (e.error() == simdjson::UTF8_ERROR) {
        size_t bad = detail::first_invalid_utf8(text.data(), text.size());
        if (bad < text.size())
          throw UserError(name_ + ": byte " + std::to_string(bad) + ": a byte that is not UTF-8 (JSON text is UTF-8)");
      }
      // Before any event is read (a structural error), in an event's string (a bad escape), or where simdjson sees a
      // wrong type (which it also says of a malformed literal, `tru`): a streaming parse finds the byte, from the
      // event's start.
      if (off == 0 || e.error() == simdjson::STRING_ERROR || e.error() == simdjson::INCORRECT_TYPE) {
        std::string why;
        if (const size_t at =
                detail::first_json_error(std::string_view(text.data() + off, text.size() - off), why, off != 0);
            at != std::string_view::npos)
          throw UserError(name_ + ": byte " + std::to_string(off + at) + ": invalid Kineto JSON: " + why);
      }
      // Valid JSON, but a value of the wrong type in a field this reader reads (a string "dur"): name the field.
      if (e.error() == simdjson::INCORRECT_TYPE && !field_.empty())
        throw UserError(name_ + ": byte " + std::to_string(off) + ": an event's \"" + std::string(field_) +
                        "\" is not of the type Kineto writes there (" + simdjson::error_message(e.error()) + ")");
      throw UserError(name_ + ": byte " + std::to_string(off) +
                      ": invalid Kineto JSON: " + simdjson::error_message(e.error()));
    }
    t_.kineto = std::move(k);
    if (dropped_ > 0 && opt_.warn)
      opt_.warn(name_ + ": " + std::to_string(dropped_) +
                " event(s) with a negative duration left out (the first: " + first_dropped_ + ")");
  }

 private:
  // Integral JSON numbers as int64; fractions truncated; anything out of range is -1.
  static int64_t to_int(double d) { return d >= -9.2e18 && d <= 9.2e18 ? static_cast<int64_t>(d) : -1; }

  static int64_t id_of(od::value v, StringTable& strings) {
    // A number at or below kNamedId would read as a name: such ids (never real pids) are clamped above it.
    if (v.type() == od::json_type::number) return std::max(to_int(v.get_double()), kNamedId + 1);
    if (v.type() == od::json_type::string)  // "Spans", "PyTorch Profiler": names, not numbers
      return kNamedId - static_cast<int64_t>(strings.intern(v.get_string().value()));
    return 0;
  }

  static int64_t int_of(od::value v) {
    if (v.type() == od::json_type::number) return to_int(v.get_double());
    return -1;
  }

  void read_event(od::value event, KinetoInfo& k) {
    const char* loc = nullptr;
    if (event.current_location().get(loc) == simdjson::SUCCESS) event_start_ = loc;
    od::object obj = event.get_object();
    KinetoEvent e;
    std::string_view ph, cat;
    int64_t flow_id = 0;
    bool has_flow_id = false;
    field_ = {};
    for (auto field : obj) {
      std::string_view key = field.unescaped_key();
      field_ = key;
      od::value v = field.value();
      if (key == "ph")
        ph = keep(v.get_string());
      else if (key == "cat")
        cat = keep(v.get_string());
      else if (key == "name")
        e.name = t_.strings.intern(v.get_string().value());
      else if (key == "pid")
        e.pid = id_of(v, t_.strings);
      else if (key == "tid")
        e.tid = id_of(v, t_.strings);
      else if (key == "ts")
        e.ts = v.get_double();
      else if (key == "dur")
        e.dur = v.get_double();
      else if (key == "id") {
        flow_id = int_of(v);
        has_flow_id = true;
      } else if (key == "args" && v.type() == od::json_type::object) {
        read_args(v.get_object(), e, k);
      }
    }
    field_ = {};
    if (ph == "s" || ph == "f" || ph == "t") {
      KinetoFlow f;
      f.id = has_flow_id ? flow_id : 0;
      f.cat = t_.strings.intern(cat);
      f.start = ph == "s";
      f.pid = e.pid;
      f.tid = e.tid;
      f.ts = e.ts;
      k.flows.push_back(f);
      return;
    }
    if (ph != "X") return;  // metadata and instant events carry nothing Reprise uses
    e.cat = category(cat);
    if (e.cat == KinetoCat::Other) return;
    // An event that ends before it starts (profilers before mid-2022 left some ops without their end) would be
    // misread by every reader (a kernel of -5 us idles the GPU): left out, counted, and said once the read is done.
    if (!std::isfinite(e.ts) || !std::isfinite(e.dur) || e.dur < 0) {
      if (dropped_++ == 0) {
        const uint64_t off = event_start_ ? static_cast<uint64_t>(event_start_ - text_begin_) : 0;
        first_dropped_ = "byte " + std::to_string(off) + ": '" + std::string(t_.strings.str(e.name)) + "' (ts " +
                         shortest(e.ts) + ", dur " + shortest(e.dur) + " us)";
      }
      return;
    }
    k.events.push_back(e);
  }

  void read_args(od::object args, KinetoEvent& e, KinetoInfo& k) {
    dims_.clear();
    types_.clear();
    for (auto a : args) {
      std::string_view ak = a.unescaped_key();
      od::value av = a.value();
      if (ak == "External id")
        e.external_id = int_of(av);
      else if (ak == "correlation")
        e.correlation = int_of(av);
      else if (ak == "Record function id")
        e.rf_id = int_of(av);
      else if (ak == "Sequence number")
        e.seq = int_of(av);
      else if (ak == "stream")
        e.stream = int_of(av);
      else if (ak == "device")
        e.device = static_cast<int32_t>(int_of(av));
      else if (ak == "bytes")
        e.bytes = int_of(av);
      else if (ak == "Input Dims" && av.type() == od::json_type::array)
        read_input_dims(av.get_array());
      else if (ak == "Input type" && av.type() == od::json_type::array)
        for (auto x : av.get_array()) {
          od::value xv = x.value();
          types_.push_back(xv.type() == od::json_type::string ? t_.strings.intern(xv.get_string().value()) : 0);
        }
    }
    const size_t n = std::max(dims_.size(), types_.size());
    if (n == 0) return;
    e.inputs = static_cast<uint32_t>(k.inputs.size());
    e.num_inputs = static_cast<uint32_t>(n);
    for (size_t i = 0; i < n; ++i) {
      KinetoInput in;
      if (i < types_.size()) in.type = types_[i];
      if (i < dims_.size() && dims_[i].first) {
        in.has_dims = true;
        in.dims = static_cast<uint32_t>(k.input_dims.size());
        in.rank = static_cast<uint16_t>(std::min<size_t>(dims_[i].second.size(), UINT16_MAX));
        k.input_dims.insert(k.input_dims.end(), dims_[i].second.begin(), dims_[i].second.begin() + in.rank);
      }
      k.inputs.push_back(in);
    }
  }

  // "Input Dims": one entry per input, a list of sizes for a tensor ([] for a scalar or none); a list of lists (a
  // tensor list) or anything else has no dims.
  void read_input_dims(od::array list) {
    size_t used = 0;
    for (auto x : list) {
      if (dims_.size() <= used) dims_.emplace_back();
      auto& [ok, sizes] = dims_[used++];
      ok = false;
      sizes.clear();
      od::value xv = x.value();
      if (xv.type() != od::json_type::array) continue;
      ok = true;
      for (auto d : xv.get_array()) {
        od::value dv = d.value();
        if (dv.type() != od::json_type::number) {
          ok = false;
          break;
        }
        sizes.push_back(to_int(dv.get_double()));
      }
    }
    dims_.resize(used);
  }

  void read_device(od::object obj, KinetoInfo& k) {
    GpuDevice d;
    for (auto field : obj) {
      std::string_view key = field.unescaped_key();
      od::value v = field.value();
      if (key == "id")
        d.id = int_of(v);
      else if (key == "name")
        d.name = std::string(v.get_string().value());
      else if (key == "totalGlobalMem")
        d.total_memory = int_of(v);
      else if (key == "numSms")
        d.num_sms = int_of(v);
      else if (key == "computeMajor")
        d.compute_major = static_cast<int>(int_of(v));
      else if (key == "computeMinor")
        d.compute_minor = static_cast<int>(int_of(v));
    }
    k.devices.push_back(std::move(d));
  }

  std::string_view keep(simdjson::simdjson_result<std::string_view> s) {
    return t_.strings.str(t_.strings.intern(s.value()));
  }

  std::string name_;
  Trace& t_;
  const ReadOptions& opt_;
  const char* event_start_ = nullptr;
  std::string_view field_;     // the event field being read (in the parser's buffer), for a type error's message
  int64_t dropped_ = 0;        // events left out for a negative duration
  std::string first_dropped_;  // the first of them, for the warning
  const char* text_begin_ = nullptr;

  static std::string shortest(double v) {  // 1e+308, not 309 digits
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
  }
  std::vector<std::pair<bool, std::vector<int64_t>>> dims_;  // the current event's "Input Dims"
  std::vector<StrId> types_;                                 // and its "Input type"
};

// Parent of each CPU event (innermost enclosing CPU event on its thread) and the CPU op around each runtime call.
void nest_cpu_events(KinetoInfo& k) {
  std::vector<int32_t> order;
  for (int32_t i = 0; i < static_cast<int32_t>(k.events.size()); ++i) {
    KinetoCat c = k.events[i].cat;
    if (is_cpu(c) || c == KinetoCat::Runtime || c == KinetoCat::Driver) order.push_back(i);
  }
  auto& ev = k.events;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const KinetoEvent &x = ev[a], &y = ev[b];
    if (x.pid != y.pid) return x.pid < y.pid;
    if (x.tid != y.tid) return x.tid < y.tid;
    if (x.ts != y.ts) return x.ts < y.ts;
    if (x.dur != y.dur) return x.dur > y.dur;
    return is_cpu(x.cat) && !is_cpu(y.cat);  // an op encloses the runtime call starting with it
  });
  std::vector<int32_t> stack;
  for (size_t i = 0; i < order.size(); ++i) {
    KinetoEvent& e = ev[order[i]];
    if (i > 0) {
      const KinetoEvent& prev = ev[order[i - 1]];
      if (prev.pid != e.pid || prev.tid != e.tid) stack.clear();
    }
    while (!stack.empty() && ev[stack.back()].ts + ev[stack.back()].dur <= e.ts &&
           !(ev[stack.back()].dur == 0 && ev[stack.back()].ts == e.ts))
      stack.pop_back();
    int32_t top = stack.empty() ? -1 : stack.back();
    if (is_cpu(e.cat)) {
      e.parent = top;
      stack.push_back(order[i]);
    } else {
      e.cpu_op = top;
    }
  }
  std::unordered_map<int64_t, int32_t> by_corr;
  std::unordered_map<int64_t, int32_t> op_by_ext;
  for (int32_t i = 0; i < static_cast<int32_t>(ev.size()); ++i) {
    if ((ev[i].cat == KinetoCat::Runtime || ev[i].cat == KinetoCat::Driver) && ev[i].correlation >= 0)
      by_corr.emplace(ev[i].correlation, i);
    if (ev[i].cat == KinetoCat::CpuOp && ev[i].external_id >= 0) op_by_ext.emplace(ev[i].external_id, i);
  }
  for (auto& e : ev) {
    if (!is_gpu_work(e.cat) && e.cat != KinetoCat::Sync) continue;
    auto it = by_corr.find(e.correlation);
    if (it != by_corr.end()) {
      e.launcher = it->second;
      e.cpu_op = ev[it->second].cpu_op;
    } else {
      auto op = op_by_ext.find(e.external_id);
      if (op != op_by_ext.end()) e.cpu_op = op->second;
    }
  }
}

void attach_gpu_work(Trace& t) {
  KinetoInfo& k = *t.kineto;
  for (KinetoEvent& e : k.events) {
    if (!is_gpu_work(e.cat)) continue;
    for (int32_t op = e.cpu_op; op >= 0; op = k.events[op].parent) {
      if (k.events[op].node != kNone32) {
        e.node = k.events[op].node;
        Node& n = t.nodes[e.node];
        n.gpu_us += e.dur;
        ++n.num_gpu_events;
        break;
      }
    }
  }
}

}  // namespace

namespace detail {

// Builds trace nodes from the CPU events when no ET was given.
void build_nodes_from_kineto(Trace& t) {
  KinetoInfo& k = *t.kineto;
  std::vector<int32_t> cpu;
  for (int32_t i = 0; i < static_cast<int32_t>(k.events.size()); ++i)
    if (is_cpu(k.events[i].cat)) cpu.push_back(i);
  std::stable_sort(cpu.begin(), cpu.end(), [&](int32_t a, int32_t b) {
    if (k.events[a].ts != k.events[b].ts) return k.events[a].ts < k.events[b].ts;
    return k.events[a].dur > k.events[b].dur;
  });
  t.from_kineto_only = true;
  Node root;
  root.id = 1;
  root.parent_id = 1;
  root.name = t.strings.intern("[pytorch|profiler|execution_trace|process]");
  t.nodes.push_back(root);
  std::unordered_map<int64_t, int64_t> thread_node;
  int64_t next_id = 2;
  for (int32_t i : cpu) {
    auto [it, fresh] = thread_node.emplace(k.events[i].tid, next_id);
    if (!fresh) continue;
    Node th;
    th.id = next_id++;
    th.parent_id = 1;
    th.tid = k.events[i].tid;
    th.fields = kHasTid;
    th.name = t.strings.intern("[pytorch|profiler|execution_trace|thread]");
    t.nodes.push_back(th);
  }
  std::vector<int64_t> id_of_event(k.events.size(), 0);
  for (int32_t i : cpu) id_of_event[i] = next_id++;
  for (int32_t i : cpu) {
    KinetoEvent& e = k.events[i];
    Node n;
    n.id = id_of_event[i];
    n.parent_id = e.parent >= 0 ? id_of_event[e.parent] : thread_node[e.tid];
    n.name = e.name;
    n.tid = e.tid;
    n.rf_id = e.rf_id >= 0 ? e.rf_id : e.external_id;
    n.fields = kHasTid | kHasRfId;
    if (e.cat == KinetoCat::UserAnnotation) {
      n.scope = 7;
      n.fields |= kHasScope;
    }
    if (e.seq >= 0) {
      n.seq_id = e.seq;
      n.fields |= kHasSeqId;
    }
    n.inputs = n.outputs = n.attrs = 0;
    t.nodes.push_back(n);
  }
  ReadOptions none;
  detail::finalize_trace(t, none);
  // finalize sorted the nodes by id: event i now sits at find(id_of_event[i])
  for (int32_t i : cpu) k.events[i].node = t.find(id_of_event[i]);
  k.link_method = "kineto-only";
  attach_gpu_work(t);
}

void read_kineto_events(const PaddedBuffer& text, const std::string& name, Trace& trace, const ReadOptions& options) {
  KinetoReader(name, trace, options).run(simdjson::padded_string_view(text.data.get(), text.size, text.capacity));
  nest_cpu_events(*trace.kineto);
}

void read_kineto_events(std::string_view text, const std::string& name, Trace& trace, const ReadOptions& options) {
  simdjson::padded_string padded(text);
  KinetoReader(name, trace, options).run(padded);
  nest_cpu_events(*trace.kineto);
}

size_t kineto_padding() { return simdjson::SIMDJSON_PADDING; }

}  // namespace detail

namespace {
void finish_kineto(const std::string& name, Trace& trace, const ReadOptions& options) {
  if (trace.nodes.empty()) {
    if (trace.source.empty()) trace.source = name;
    detail::build_nodes_from_kineto(trace);
  } else if (options.link) {
    link_kineto(trace, options);
  }
}

}  // namespace

void read_kineto_text(std::string_view text, const std::string& name, Trace& trace, const ReadOptions& options) {
  detail::read_kineto_events(text, name, trace, options);
  finish_kineto(name, trace, options);
}

void read_kineto(const std::string& path, Trace& trace, const ReadOptions& options) {
  // Read straight into a buffer simdjson can parse in place: one copy of the text, not three.
  auto src = detail::open_file(path);
  const detail::PaddedBuffer text = detail::read_all_padded(*src, detail::kineto_padding());
  detail::read_kineto_events(text, path, trace, options);
  finish_kineto(path, trace, options);
}

namespace {

// Links the Kineto CPU ops `ops` to ET nodes; each returns how many it linked.
class KinetoLinker {
 public:
  KinetoLinker(Trace& t, std::vector<int32_t> ops) : t_(t), k_(*t.kineto), ops_(std::move(ops)) {
    for (uint32_t i = 0; i < t.nodes.size(); ++i)
      if (t.nodes[i].fields & kHasRfId) node_by_rf_.emplace(t.nodes[i].rf_id, i);
  }

  size_t link() {
    size_t with_rf = 0;
    for (int32_t i : ops_) with_rf += k_.events[i].rf_id >= 0;
    if (with_rf > 0) {
      // PyTorch 2.x: Kineto's "Record function id" is the ET's rf_id.
      k_.link_method = "rf_id";
      return by_rf_id();
    }
    // Older traces: External id often equals rf_id; accept it when the names agree.
    if (external_ids_agree()) {
      k_.link_method = "external_id";
      return by_external_id();
    }
    // Fall back to matching the sequence of op names (ET id order vs Kineto start order).
    k_.link_method = "order";
    return by_order();
  }

 private:
  void bind(int32_t ev, uint32_t node) {
    k_.events[ev].node = node;
    t_.nodes[node].ts_us = k_.events[ev].ts;
    t_.nodes[node].dur_us = k_.events[ev].dur;
  }

  size_t by_rf_id() {
    size_t linked = 0;
    for (int32_t i : ops_) {
      auto it = node_by_rf_.find(k_.events[i].rf_id);
      if (k_.events[i].rf_id >= 0 && it != node_by_rf_.end() && t_.nodes[it->second].name == k_.events[i].name) {
        bind(i, it->second);
        ++linked;
      }
    }
    return linked;
  }

  // Nine in ten of the ops whose External id names an ET node agree with it on the name.
  bool external_ids_agree() const {
    size_t tried = 0, agree = 0;
    for (int32_t i : ops_) {
      auto it = node_by_rf_.find(k_.events[i].external_id);
      if (it == node_by_rf_.end()) continue;
      ++tried;
      agree += t_.nodes[it->second].name == k_.events[i].name;
    }
    return tried > 0 && agree * 10 >= tried * 9;
  }

  size_t by_external_id() {
    size_t linked = 0;
    for (int32_t i : ops_) {
      auto it = node_by_rf_.find(k_.events[i].external_id);
      if (it != node_by_rf_.end() && t_.nodes[it->second].name == k_.events[i].name && t_.nodes[it->second].ts_us < 0) {
        bind(i, it->second);
        ++linked;
      }
    }
    return linked;
  }

  size_t by_order() {
    size_t linked = 0;
    std::vector<int32_t> sorted = ops_;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [&](int32_t a, int32_t b) { return k_.events[a].ts < k_.events[b].ts; });
    size_t j = 0;
    for (uint32_t n = 0; n < t_.nodes.size() && j < sorted.size(); ++n) {
      NodeKind kind = t_.nodes[n].kind;
      if (kind == NodeKind::Root || kind == NodeKind::Thread) continue;
      size_t look = j;
      while (look < sorted.size() && look < j + 64 && k_.events[sorted[look]].name != t_.nodes[n].name) ++look;
      if (look < sorted.size() && k_.events[sorted[look]].name == t_.nodes[n].name) {
        bind(sorted[look], n);
        ++linked;
        j = look + 1;
      }
    }
    return linked;
  }

  Trace& t_;
  KinetoInfo& k_;
  std::vector<int32_t> ops_;
  std::unordered_map<int64_t, uint32_t> node_by_rf_;
};

}  // namespace

void link_kineto(Trace& t, const ReadOptions& opt) {
  if (!t.kineto) return;
  KinetoInfo& k = *t.kineto;
  for (KinetoEvent& e : k.events) e.node = kNone32;
  for (Node& n : t.nodes) {
    n.ts_us = n.dur_us = -1;
    n.gpu_us = 0;
    n.num_gpu_events = 0;
  }
  std::vector<int32_t> ops;
  for (int32_t i = 0; i < static_cast<int32_t>(k.events.size()); ++i)
    if (is_cpu(k.events[i].cat)) ops.push_back(i);
  k.cpu_ops = ops.size();
  size_t linked = KinetoLinker(t, ops).link();
  k.linked_ops = linked;
  attach_gpu_work(t);
  size_t et_ops = 0;
  for (const Node& n : t.nodes) et_ops += n.kind == NodeKind::Operator;
  if (opt.warn && et_ops > 0 && linked * 2 < std::min(et_ops, ops.size()))
    opt.warn(t.source + ": only " + std::to_string(linked) + " of " + std::to_string(ops.size()) +
             " Kineto CPU ops were linked to the ET (method: " + k.link_method + ")");
}

}  // namespace reprise
