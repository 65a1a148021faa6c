#include "reprise/predict/host_overheads.h"

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "reprise/common/error.h"
#include "reprise/trace/read.h"
#include "step_ops.h"

namespace reprise::predict {
namespace {

// The mean with each value past a fence counted at the fence: a step's long tails stay in, a first step's one-off
// CUDA initialization (milliseconds to seconds in one call) does not. The fence is Tukey's far-out one (the upper
// quartile plus three interquartile ranges); under five values, which have no quartiles to speak of, ten times the
// lower median, and never under 100 us (calls that short are not clipped).
double mean(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double q1 = v[n / 4], q3 = v[(3 * n) / 4];
  const double fence = std::max(n < 5 ? 10 * v[(n - 1) / 2] : q3 + 3 * (q3 - q1), 1e-4);
  double s = 0;
  for (double x : v) s += std::min(x, fence);
  return s / static_cast<double>(n);
}

double plain_mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// The samples of one key, kind by kind: each kind's mean over the samples that have it (a gap where an op of the step
// ran before it, the launch kinds where it launched, between launches where it launched twice or more). Means, not
// medians: a step's host time is the sum of its ops', long tails included.
struct Pool {
  std::vector<double> gap, first, launch, between, after, launches, launching, waiting, none;
  void add(const HostKinds& k, bool has_gap) {
    if (has_gap) gap.push_back(k.gap_before);
    launches.push_back(k.launches);
    launching.push_back(k.launches > 0 ? 1 : 0);
    waiting.push_back(k.waiting > 0 ? 1 : 0);
    if (k.launches > 0) {
      first.push_back(k.to_first_launch);
      launch.push_back(k.launch);
      after.push_back(k.after_last_launch);
      if (k.launches > 1) between.push_back(k.between_launches);
    } else {
      none.push_back(k.no_launch);
    }
  }
  HostKinds fit() const {
    HostKinds k;
    k.gap_before = mean(gap);
    k.to_first_launch = mean(first);
    k.launch = mean(launch);
    k.between_launches = mean(between);
    k.after_last_launch = mean(after);
    k.launches = plain_mean(launches);
    k.launching = plain_mean(launching);
    k.waiting = plain_mean(waiting);
    k.no_launch = mean(none);
    k.samples = static_cast<int64_t>(launches.size());
    return k;
  }
};

// Sorts intervals and merges those that overlap (a runtime sync around a driver sync is one wait).
void merge_intervals(std::vector<std::pair<double, double>>& v) {
  if (v.size() < 2) return;
  std::sort(v.begin(), v.end());
  size_t out = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i].first <= v[out].second)
      v[out].second = std::max(v[out].second, v[i].second);
    else
      v[++out] = v[i];
  }
  v.resize(out + 1);
}

// [from, to] less the intervals of `waits` inside it.
double less_waits(double from, double to, const std::vector<std::pair<double, double>>& waits) {
  double x = std::max(to - from, 0.0);
  for (const auto& [a, b] : waits) x -= std::max(std::min(b, to) - std::max(a, from), 0.0);
  return std::max(x, 0.0);
}

}  // namespace

double HostKinds::host_seconds() const {
  // Of the calls, a share `launching` launched (`launches / launching` calls each, one gap fewer between them), the
  // rest took `no_launch`.
  const double p = std::clamp(launching, 0.0, 1.0);
  if (p <= 0 || launches <= 0) return gap_before + no_launch;
  return gap_before + p * (to_first_launch + after_last_launch) + launches * launch +
         std::max(launches - p, 0.0) * between_launches + (1 - p) * no_launch;
}

double HostKinds::launch_at() const {
  return launching <= 0 || launches <= 0 ? -1 : gap_before + to_first_launch + launch;
}

namespace {

// " [4,16]": one input's sizes in a shape key.
void append_dims(std::string& key, const int64_t* dims, size_t rank) {
  key += " [";
  for (size_t d = 0; d < rank; ++d) key += (d ? "," : "") + std::to_string(dims[d]);
  key += "]";
}

}  // namespace

std::string host_shape_key(const Trace& t, const Node& n) {
  std::string key;
  for (const Value& v : t.inputs(n)) {
    if (v.kind != ValueKind::Tensor || t.tensors[v.ref].rank == 0) continue;
    const Span<int64_t> dims = t.dims(t.tensors[v.ref]);
    append_dims(key, dims.begin(), dims.size());
  }
  return key.empty() ? key : std::string(t.name(n)) + key;
}

std::vector<HostSample> host_samples(const Trace& t) {
  if (!t.kineto) throw UserError(t.source + ": no Kineto trace: host overheads are measured from one");
  const KinetoInfo& k = *t.kineto;
  std::vector<std::string> names;
  const std::vector<StepSpan> steps = detail::chosen_steps(t, {}, true, names);
  // Each node's unit: the op a replay issues that it is (or is inside).
  std::vector<uint32_t> unit_of(t.nodes.size(), kNone32);
  std::vector<std::vector<uint32_t>> units;  // per step, in execution order
  // The steps' DataLoader calls: not ops, but where the host was (a gap after one is not the next op's overhead).
  std::vector<bool> loader(t.nodes.size(), false);
  for (const StepSpan& s : steps) {
    std::vector<uint32_t> calls;
    units.push_back(detail::step_units(t, s, &calls));
    for (uint32_t u : units.back()) unit_of[u] = u;
    for (uint32_t c : calls) loader[c] = true;
    units.back().insert(units.back().end(), calls.begin(), calls.end());
  }
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const uint32_t p = t.nodes[i].parent;
    if (unit_of[i] == kNone32 && p != kNone32 && p < i) unit_of[i] = unit_of[p];
  }
  // Each unit's launch calls: the runtime calls that launched GPU work of an op inside it.
  std::vector<std::vector<int32_t>> calls(t.nodes.size());
  for (const KinetoEvent& e : k.events) {
    if (!is_gpu_work(e.cat) || e.launcher < 0 || e.node == kNone32 || e.node >= t.nodes.size()) continue;
    const uint32_t u = unit_of[e.node];
    if (u != kNone32) calls[u].push_back(e.launcher);
  }
  // Each unit's waits on the device (the runtime's synchronize calls and blocking copies): the simulator times them
  // as the device work the host waits for, so each is taken out of the stretch of the op it lies in, and the op is
  // marked as one the host waits in. A call inside a CPU op the trace has no node for belongs to the nearest
  // enclosing op that has one; a call outside every op (torch.cuda.synchronize() between ops) leaves the gap.
  std::vector<std::vector<std::pair<double, double>>> waits(t.nodes.size());  // (start, end), microseconds
  std::vector<std::pair<double, double>> loose;                               // outside every op
  for (const KinetoEvent& e : k.events) {
    if (e.cat != KinetoCat::Runtime && e.cat != KinetoCat::Driver) continue;
    if (!is_host_sync(t, e) && !is_blocking_copy(t, e)) continue;
    uint32_t node = e.node;
    for (int32_t c = e.cpu_op; node == kNone32 && c >= 0 && static_cast<size_t>(c) < k.events.size();
         c = k.events[c].parent)
      node = k.events[c].node;
    if (node < t.nodes.size() && unit_of[node] != kNone32)
      waits[unit_of[node]].emplace_back(e.ts, e.ts + e.dur);
    else
      loose.emplace_back(e.ts, e.ts + e.dur);
  }
  for (auto& w : waits) merge_intervals(w);
  merge_intervals(loose);
  // Kineto's own event of each node (a CPU op, a user annotation): its times where linking did not set the node's (a
  // Kineto-only trace), and its Input Dims where the node records no inputs.
  std::vector<int32_t> event_of(t.nodes.size(), -1);
  for (int32_t i = 0; i < static_cast<int32_t>(k.events.size()); ++i) {
    const KinetoEvent& e = k.events[static_cast<size_t>(i)];
    const bool cpu = e.cat == KinetoCat::CpuOp || e.cat == KinetoCat::UserAnnotation;  // an op, a loader's call
    if (cpu && e.node < t.nodes.size() && event_of[e.node] < 0) event_of[e.node] = i;
  }
  auto times = [&](uint32_t u, double& ts, double& dur) {
    ts = t.nodes[u].ts_us, dur = t.nodes[u].dur_us;
    if ((ts < 0 || dur < 0) && event_of[u] >= 0) ts = k.events[event_of[u]].ts, dur = k.events[event_of[u]].dur;
    return ts >= 0 && dur >= 0;
  };
  auto shape_of = [&](uint32_t u) {
    std::string key = host_shape_key(t, t.nodes[u]);
    if (!key.empty() || t.nodes[u].num_inputs > 0 || event_of[u] < 0) return key;
    const KinetoEvent& e = k.events[event_of[u]];
    for (uint32_t i = e.inputs; i < e.inputs + e.num_inputs; ++i) {
      const KinetoInput& in = k.inputs[i];
      if (in.has_dims && in.rank > 0) append_dims(key, k.input_dims.data() + in.dims, in.rank);
    }
    return key.empty() ? key : std::string(t.name(t.nodes[u])) + key;
  };
  std::vector<HostSample> out;
  size_t timed = 0;
  for (std::vector<uint32_t>& step : units) {
    // The simulator issues a rank's ops from one host thread, so the gap before an op is the time since the last op
    // of any thread ended: the main thread's wait in backward() (the autograd thread's ops) is not host overhead.
    std::vector<std::pair<double, std::pair<double, uint32_t>>> timed_units;  // (start, (duration, unit))
    for (uint32_t u : step) {
      double ts = 0, dur = 0;
      if (times(u, ts, dur)) timed_units.push_back({ts, {dur, u}});
    }
    std::stable_sort(timed_units.begin(), timed_units.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    double last_end = -1;                    // microseconds; -1 before the step's first op
    for (const auto& entry : timed_units) {  // not structured bindings: the lambdas below capture them
      const double ts = entry.first, dur = entry.second.first;
      const uint32_t u = entry.second.second;
      if (loader[u]) {  // the host was in the loader's call: the next op's gap starts after it
        last_end = std::max(last_end, ts + dur);
        continue;
      }
      ++timed;
      HostSample s;
      s.op = std::string(t.name(t.nodes[u]));
      s.shape = shape_of(u);
      HostKinds& h = s.kinds;
      h.samples = 1;
      const double end = ts + dur;
      const bool has_gap = last_end >= 0;
      if (has_gap) h.gap_before = less_waits(last_end, ts, loose) * 1e-6;  // 0 under another thread's op
      last_end = std::max(last_end, end);
      std::vector<int32_t>& c = calls[u];
      std::sort(c.begin(), c.end(), [&](int32_t a, int32_t b) {
        return k.events[a].ts != k.events[b].ts ? k.events[a].ts < k.events[b].ts : a < b;
      });
      c.erase(std::unique(c.begin(), c.end()), c.end());
      // A stretch of the op, less the device waits inside it (microseconds).
      auto busy = [&](double from, double to) { return less_waits(from, to, waits[u]); };
      h.launches = static_cast<double>(c.size());
      h.launching = c.empty() ? 0 : 1;
      h.waiting = waits[u].empty() ? 0 : 1;
      if (c.empty()) {
        h.no_launch = busy(ts, end) * 1e-6;
      } else {
        // Each launch call within the op's span (a call the trace has outlast its op is cut to it).
        auto from = [&](int32_t i) { return std::clamp(k.events[i].ts, ts, end); };
        auto to = [&](int32_t i) { return std::clamp(k.events[i].ts + std::max(k.events[i].dur, 0.0), ts, end); };
        h.to_first_launch = busy(ts, from(c.front())) * 1e-6;
        h.after_last_launch = busy(to(c.back()), end) * 1e-6;
        double launch = 0, between = 0;
        for (size_t i = 0; i < c.size(); ++i) {
          launch += busy(from(c[i]), to(c[i]));  // a blocking copy's wait is the device's
          if (i > 0) between += busy(to(c[i - 1]), from(c[i]));
        }
        h.launch = launch / static_cast<double>(c.size()) * 1e-6;
        if (c.size() > 1) h.between_launches = between / static_cast<double>(c.size() - 1) * 1e-6;
      }
      // A calibration keeps times up to kLongestSeconds (read_calibration refuses more): past it is no step's.
      const double longest = std::max(dur, has_gap ? h.gap_before * 1e6 : 0.0) * 1e-6;
      if (!(longest <= kLongestSeconds))
        throw UserError(t.source + ": " + s.op + " at " + std::to_string(ts) +
                        " us: " + (dur * 1e-6 >= longest ? "lasts " : "follows a gap of ") + std::to_string(longest) +
                        " s, more than an hour: not an op of a step");
      if (!has_gap) h.gap_before = -1;  // marks "no predecessor" for the fit
      out.push_back(std::move(s));
    }
  }
  if (timed == 0)
    throw UserError(t.source +
                    ": no op of its steps is linked to a Kineto CPU op: nothing to measure host overheads by");
  return out;
}

HostOverheads fit_host_overheads(const std::vector<HostSample>& samples) {
  std::map<std::string, Pool> op, shape;
  for (const HostSample& s : samples) {
    const bool has_gap = s.kinds.gap_before >= 0;
    op[s.op].add(s.kinds, has_gap);
    if (!s.shape.empty()) shape[s.shape].add(s.kinds, has_gap);
  }
  HostOverheads h;
  for (const auto& [name, pool] : op) h.by_op[name] = pool.fit();
  for (const auto& [key, pool] : shape) h.by_shape[key] = pool.fit();
  return h;
}

bool HostOverheads::launched() const {
  return std::any_of(by_op.begin(), by_op.end(), [](const auto& op) { return op.second.launching > 0; });
}

HostOverheads measure_host_overheads(const std::vector<std::string>& inputs, size_t* calls) {
  // Each folder or archive is a job of its own (captures of several workloads each hold a rank 0); the files named
  // one by one are one job together (ETs and their Kineto traces, paired by rank).
  std::vector<std::vector<std::string>> jobs;
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (std::filesystem::is_directory(in, ec) || is_archive_name(in))
      jobs.push_back({in});
    else
      files.push_back(in);
  }
  if (!files.empty()) jobs.push_back(files);
  std::vector<HostSample> measured;
  for (const std::vector<std::string>& job : jobs)
    for (const Trace& t : load_traces(job).ranks) {
      std::vector<HostSample> s = host_samples(t);
      measured.insert(measured.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
    }
  HostOverheads h = fit_host_overheads(measured);
  for (const std::string& f : inputs) h.source += (h.source.empty() ? "" : ", ") + f;
  if (calls) *calls = measured.size();
  return h;
}

const HostKinds* HostOverheads::find(const Trace& t, uint32_t node) const {
  if (by_op.empty()) return nullptr;
  const Node& n = t.nodes[node];
  return find(std::string(t.name(n)), by_shape.empty() ? std::string() : host_shape_key(t, n));
}

const HostKinds* HostOverheads::find(const std::string& op, const std::string& shape) const {
  if (!shape.empty()) {
    auto it = by_shape.find(shape);
    if (it != by_shape.end()) return &it->second;
  }
  auto it = by_op.find(op);
  return it != by_op.end() ? &it->second : nullptr;
}

}  // namespace reprise::predict
