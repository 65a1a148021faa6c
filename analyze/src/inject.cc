#include "inject.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "reprise/trace/write.h"

namespace reprise::analyze::detail {
namespace {

bool host_side(KinetoCat c) {
  return c == KinetoCat::CpuOp || c == KinetoCat::UserAnnotation || c == KinetoCat::Runtime || c == KinetoCat::Driver;
}

void append_id(std::string& out, const Trace& t, int64_t id) {
  if (id <= kNamedId)
    append_json_string(out, t.str(static_cast<StrId>(kNamedId - id)));
  else
    append_json_int(out, id);
}

}  // namespace

Editor::Editor(const Trace& t) : t_(clone(t)) {
  if (!t_.kineto) t_.kineto = KinetoInfo{};
  const auto& ev = t_.kineto->events;
  std::map<int64_t, size_t> streams, comm_streams;
  std::map<std::pair<int64_t, int64_t>, size_t> hosts;
  bool gpu_seen = false;
  for (const KinetoEvent& e : ev) {
    next_corr_ = std::max(next_corr_, e.correlation + 1);
    if (e.cat == KinetoCat::CpuOp) ++hosts[{e.pid, e.tid}];
    if (e.cat == KinetoCat::Kernel) {
      (classify_kernel(t_.str(e.name)) == WorkClass::Comm ? comm_streams : streams)[e.stream]++;
      if (!gpu_seen) gpu_pid_ = e.pid;
      gpu_seen = true;
    }
    if (is_gpu_work(e.cat)) gpu_ = true;
  }
  auto most = [](const auto& counts, auto fallback) {
    auto best = fallback;
    size_t n = 0;
    for (const auto& [key, c] : counts)
      if (c > n) {
        n = c;
        best = key;
      }
    return best;
  };
  main_stream_ = most(streams, int64_t{7});
  comm_stream_ = most(comm_streams, main_stream_ + 1);
  if (comm_stream_ == main_stream_) comm_stream_ = main_stream_ + 1;
  const auto host = most(hosts, std::pair<int64_t, int64_t>{1, 1});
  host_pid_ = host.first;
  host_tid_ = host.second;
  // A CPU op linked to its ET node without Kineto's Input Dims / Input type (a Reprise capture's host timeline)
  // takes the node's tensor inputs: the written trace, read alone, keeps what the detectors read through the link.
  for (int32_t i = 0; i < static_cast<int32_t>(ev.size()); ++i) {
    const KinetoEvent& e = ev[i];
    if (e.cat != KinetoCat::CpuOp || e.node == kNone32 || e.num_inputs || e.node >= t_.nodes.size()) continue;
    const Node& n = t_.nodes[e.node];
    std::vector<std::vector<int64_t>> dims;
    std::vector<std::string> types;
    for (const Value& v : t_.inputs(n)) {
      if (v.kind != ValueKind::Tensor) {
        dims.emplace_back();
        types.emplace_back();
        continue;
      }
      const Tensor& x = t_.tensors[v.ref];
      dims.push_back(std::vector<int64_t>(t_.dims(x).begin(), t_.dims(x).end()));
      types.emplace_back(t_.str(x.dtype));
    }
    if (!types.empty()) inputs(i, dims, types);
  }
}

void Editor::shift(double t, double host_us, double gpu_us) {
  auto& ev = t_.kineto->events;
  std::vector<uint8_t> after(ev.size(), 0);
  // GPU-side events move with their launch; those no runtime call launched (no correlation) by their own time.
  for (size_t i = 0; i < ev.size(); ++i)
    if (!host_side(ev[i].cat)) after[i] = ev[i].launcher >= 0 ? ev[ev[i].launcher].ts >= t : ev[i].ts >= t;
  for (size_t i = 0; i < ev.size(); ++i) {
    KinetoEvent& e = ev[i];
    // On a CPU capture the host thread is delayed, not its neighbours (a data loader's workers): their ops neither
    // move nor grow, which would add computation nothing injected.
    if (!gpu_ && (e.pid != host_pid_ || e.tid != host_tid_)) continue;
    if (host_side(e.cat)) {
      if (e.ts >= t)
        e.ts += host_us;
      else if (e.ts + e.dur > t)
        e.dur += host_us;
    } else if (after[i]) {
      e.ts += gpu_us;
    }
  }
}

double Editor::drain(double t) const {
  const auto& ev = t_.kineto->events;
  double end = t;
  for (const KinetoEvent& e : ev)
    if (is_gpu_work(e.cat) && e.launcher >= 0 && ev[e.launcher].ts < t) end = std::max(end, e.ts + e.dur);
  return end;
}

int32_t Editor::op(const std::string& name, double ts, double dur, KinetoCat cat) {
  KinetoEvent e;
  e.cat = cat;
  e.name = t_.strings.intern(name);
  e.pid = host_pid_;
  e.tid = host_tid_;
  e.ts = ts;
  e.dur = dur;
  t_.kineto->events.push_back(e);
  return static_cast<int32_t>(t_.kineto->events.size() - 1);
}

int32_t Editor::work(const std::string& name, double ts, double dur) {
  if (!gpu_ && is_compute(classify_op(name))) added_compute_us_ += dur;  // as the timeline counts it
  return op(name, ts, dur);
}

std::vector<int32_t> Editor::top_level_ops() const {
  const auto& ev = t_.kineto->events;
  std::vector<int32_t> ops;
  for (int32_t i = 0; i < static_cast<int32_t>(ev.size()); ++i)
    if (ev[i].cat == KinetoCat::CpuOp && ev[i].pid == host_pid_ && ev[i].tid == host_tid_ && ev[i].dur >= 0 &&
        !is_scope_name(t_.str(ev[i].name)))
      ops.push_back(i);
  std::sort(ops.begin(), ops.end(), [&](int32_t a, int32_t b) {
    return ev[a].ts != ev[b].ts ? ev[a].ts < ev[b].ts : ev[a].dur > ev[b].dur;  // an enclosing op first
  });
  std::vector<int32_t> top;
  double end = -INFINITY;
  for (int32_t i : ops)
    if (ev[i].ts >= end) {
      top.push_back(i);
      end = ev[i].ts + ev[i].dur;
    }
  return top;
}

int64_t Editor::runtime(const std::string& name, double ts, double dur) {
  const int32_t i = op(name, ts, dur, KinetoCat::Runtime);
  t_.kineto->events[i].correlation = next_corr_;
  return next_corr_++;
}

int32_t Editor::gpu(KinetoCat cat, const std::string& name, int64_t corr, double ts, double dur, int64_t stream,
                    int64_t bytes) {
  auto& ev = t_.kineto->events;
  KinetoEvent e;
  e.cat = cat;
  e.name = t_.strings.intern(name);
  e.pid = gpu_pid_;
  e.stream = stream >= 0 ? stream : main_stream_;
  e.tid = e.stream;
  e.ts = ts;
  e.dur = dur;
  e.correlation = corr;
  e.device = 0;
  e.bytes = bytes;
  if (cat == KinetoCat::Kernel && classify_kernel(name) != WorkClass::Comm) added_compute_us_ += dur;
  for (int32_t i = static_cast<int32_t>(ev.size()) - 1; i >= 0; --i)
    if (ev[i].correlation == corr && host_side(ev[i].cat)) {
      e.launcher = i;
      break;
    }
  ev.push_back(e);
  return static_cast<int32_t>(ev.size() - 1);
}

void Editor::inputs(int32_t event, const std::vector<std::vector<int64_t>>& dims,
                    const std::vector<std::string>& types) {
  KinetoInfo& k = *t_.kineto;
  KinetoEvent& e = k.events[event];
  const size_t n = std::max(dims.size(), types.size());
  e.inputs = static_cast<uint32_t>(k.inputs.size());
  e.num_inputs = static_cast<uint32_t>(n);
  for (size_t i = 0; i < n; ++i) {
    KinetoInput in;
    if (i < types.size()) in.type = t_.strings.intern(types[i]);
    if (i < dims.size()) {
      in.has_dims = true;
      in.dims = static_cast<uint32_t>(k.input_dims.size());
      in.rank = static_cast<uint16_t>(dims[i].size());
      k.input_dims.insert(k.input_dims.end(), dims[i].begin(), dims[i].end());
    }
    k.inputs.push_back(in);
  }
}

void Editor::rename(int32_t event, const std::string& name) { t_.kineto->events[event].name = t_.strings.intern(name); }

void Editor::stretch(int32_t event, double us) {
  KinetoEvent& e = t_.kineto->events[static_cast<size_t>(event)];
  e.dur += us;
  if (e.cat == KinetoCat::Kernel && classify_kernel(t_.str(e.name)) != WorkClass::Comm) added_compute_us_ += us;
}

void Editor::fuse(const std::vector<std::vector<int32_t>>& chains) {
  auto& ev = t_.kineto->events;
  removed_.resize(ev.size(), 0);
  std::map<int64_t, size_t> launch;  // correlation -> runtime call, once for every chain
  for (size_t i = 0; i < ev.size(); ++i)
    if ((ev[i].cat == KinetoCat::Runtime || ev[i].cat == KinetoCat::Driver) && ev[i].correlation >= 0)
      launch.emplace(ev[i].correlation, i);
  for (const std::vector<int32_t>& kernels : chains) {
    if (kernels.size() < 2) continue;
    int32_t longest = kernels.front();
    for (int32_t k : kernels)
      if (ev[static_cast<size_t>(k)].dur > ev[static_cast<size_t>(longest)].dur) longest = k;
    KinetoEvent& first = ev[static_cast<size_t>(kernels.front())];
    first.dur = ev[static_cast<size_t>(longest)].dur;
    // A CPU op keeps its name, which the ops it called go with (an autograd wrapper's name over another's calls
    // would not be the work it is).
    if (first.cat != KinetoCat::CpuOp) first.name = ev[static_cast<size_t>(longest)].name;
    for (size_t i = 1; i < kernels.size(); ++i) {
      const size_t k = static_cast<size_t>(kernels[i]);
      removed_[k] = 1;
      auto l = launch.find(ev[k].correlation);
      if (ev[k].correlation >= 0 && l != launch.end()) removed_[l->second] = 1;
    }
  }
  // A CPU op left out (a CPU capture's chain member) takes the ops it called along: those under a removed CPU op.
  for (size_t j = 0; j < ev.size(); ++j) {
    if (ev[j].cat != KinetoCat::CpuOp || removed_[j]) continue;
    for (int32_t p = ev[j].parent; p >= 0; p = ev[static_cast<size_t>(p)].parent)
      if (removed_[static_cast<size_t>(p)] && ev[static_cast<size_t>(p)].cat == KinetoCat::CpuOp) {
        removed_[j] = 1;
        break;
      }
  }
}

std::string kineto_json(const Editor& ed) {
  const Trace& t = ed.trace();
  const KinetoInfo& k = ed.kineto();
  // The header (devices, rank) through a DOM, the events, which may be millions, written directly.
  nlohmann::json head{{"schemaVersion", 1}};
  for (const GpuDevice& d : k.devices)
    head["deviceProperties"].push_back({{"id", d.id},
                                        {"name", d.name},
                                        {"totalGlobalMem", d.total_memory},
                                        {"numSms", d.num_sms},
                                        {"computeMajor", d.compute_major},
                                        {"computeMinor", d.compute_minor}});
  if (k.dist_rank >= 0)
    head["distributedInfo"] = {{"backend", k.dist_backend}, {"rank", k.dist_rank}, {"world_size", k.dist_world_size}};
  std::string out = head.dump();
  out.pop_back();  // its closing brace: the events follow
  out += ", \"traceEvents\": [";
  bool any = false;
  for (size_t i = 0; i < k.events.size(); ++i) {
    if (i < ed.removed_.size() && ed.removed_[i]) continue;
    const KinetoEvent& e = k.events[i];
    out += any ? ",\n" : "\n";
    any = true;
    out += "{\"ph\": \"X\", \"cat\": ";
    append_json_string(out, kineto_cat_name(e.cat));
    out += ", \"name\": ";
    append_json_string(out, t.str(e.name));
    out += ", \"pid\": ";
    append_id(out, t, e.pid);
    out += ", \"tid\": ";
    append_id(out, t, e.tid);
    out += ", \"ts\": ";
    append_json_double(out, e.ts);
    out += ", \"dur\": ";
    append_json_double(out, e.dur);
    out += ", \"args\": {";
    bool first = true;
    auto key = [&](const char* name) {
      out += first ? "\"" : ", \"";
      out += name;
      out += "\": ";
      first = false;
    };
    const std::pair<const char*, int64_t> ints[] = {{"External id", e.external_id},
                                                    {"correlation", e.correlation},
                                                    {"Record function id", e.rf_id},
                                                    {"Sequence number", e.seq},
                                                    {"stream", e.stream},
                                                    {"device", e.device},
                                                    {"bytes", e.bytes}};
    for (const auto& [name, v] : ints)
      if (v >= 0) {
        key(name);
        append_json_int(out, v);
      }
    if (e.num_inputs) {
      key("Input Dims");
      out += "[";
      for (uint32_t a = 0; a < e.num_inputs; ++a) {
        const KinetoInput& in = k.inputs[e.inputs + a];
        out += a ? ", [" : "[";
        if (in.has_dims)
          for (uint16_t d = 0; d < in.rank; ++d) {
            out += d ? ", " : "";
            append_json_int(out, k.input_dims[in.dims + d]);
          }
        out += "]";
      }
      out += "]";
      key("Input type");
      out += "[";
      for (uint32_t a = 0; a < e.num_inputs; ++a) {
        out += a ? ", " : "";
        append_json_string(out, t.str(k.inputs[e.inputs + a].type));
      }
      out += "]";
    }
    out += "}}";
  }
  out += "\n]}\n";
  return out;
}

double InjectSite::launch_point(const Editor& e, bool queued) const {
  const auto& ev = e.kineto().events;
  const double from = begin + 0.3 * length(), to = begin + 0.7 * length();
  std::vector<double> points;
  for (const KinetoEvent& g : ev) {
    if (g.cat != KinetoCat::Kernel || g.launcher < 0) continue;
    const KinetoEvent& l = ev[g.launcher];
    if (l.ts < from || l.ts >= to) continue;
    if (queued && g.ts <= l.ts + l.dur + 5) continue;
    points.push_back(l.ts);
  }
  if (points.empty()) return -1;
  std::sort(points.begin(), points.end());
  return points[std::uniform_int_distribution<size_t>(0, points.size() - 1)(*rng)];
}

double InjectSite::host_point(const Editor& e) const {
  const auto& ev = e.kineto().events;
  const double from = begin + 0.3 * length(), to = begin + 0.7 * length();
  std::vector<std::pair<double, double>> own;  // the calls other patterns are about
  for (const KinetoEvent& x : ev) {
    const std::string_view n = e.trace().str(x.name);
    if ((x.cat == KinetoCat::CpuOp || x.cat == KinetoCat::UserAnnotation) && is_scope_name(n) && !is_step_name(n))
      own.emplace_back(x.ts, x.ts + x.dur);
  }
  std::vector<double> points;
  for (int32_t i : e.top_level_ops()) {
    const double ts = ev[i].ts;
    if (ts < from || ts >= to) continue;
    if (std::none_of(own.begin(), own.end(), [&](const auto& r) { return ts >= r.first && ts < r.second; }))
      points.push_back(ts);
  }
  if (points.empty()) return -1;
  return points[std::uniform_int_distribution<size_t>(0, points.size() - 1)(*rng)];
}

}  // namespace reprise::analyze::detail
