// Windows, their features, the cross-rank skew, and the detectors over each step.
#include "reprise/analyze/analyze.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "detector.h"
#include "reprise/analyze/evaluate.h"
#include "reprise/common/error.h"
#include "reprise/common/stats.h"
#include "timeline.h"

namespace reprise::analyze {
namespace {

using namespace detail;

std::vector<double> features_of(const WindowStats& s) {
  const double dur = std::max(s.duration(), 1e-9);
  double stretch = 0, chain_saving = 0, unaligned = 0, unaligned_slow = 0, optimizer_launches = 0, single_launches = 0,
         multi = 0, zero = 0, data_idle = 0;
  for (const Stretch& r : s.stretches) stretch += r.end - r.begin;
  for (const Chain& c : s.chains) chain_saving += c.saving_us();
  for (const GemmOp& g : s.gemm_ops)
    if (!g.aligned) {
      unaligned += g.device_us;
      unaligned_slow += std::max(0.0, g.device_us - aligned_gemm_us(*s.tl, g));
    }
  for (const ScopeUse& u : s.optimizer) {
    optimizer_launches += double(u.work);
    if (u.multi_tensor) multi = 1;
    if (!u.multi_tensor) single_launches += double(u.work);  // an optimizer step with no multi-tensor op of its own
  }
  for (const ScopeUse& u : s.zero_grad) zero += double(u.zero_ops ? u.zero_ops : u.memsets);
  for (const ScopeUse& u : s.data) data_idle += u.idle_us;
  std::map<std::string, int> from;
  for (const Conversion& c : s.conversions)
    if (!c.from.empty()) ++from[c.from];
  const double n = double(s.kernels);
  return {s.duration(),
          s.busy_us / dur,
          s.idle_us(GapCause::Host),
          s.idle_us(GapCause::Sync),
          s.idle_us(GapCause::Data),
          s.idle_us(GapCause::Dependency),
          n,
          n > 0 ? s.kernel_us / n : 0,
          n > 0 ? s.launch_us / n : 0,
          n > 0 ? double(s.short_kernels) / n : 0,
          stretch,
          double(s.syncs.size()),
          s.sync_us,
          double(s.h2d),
          s.h2d_bytes,
          s.h2d_pageable_us,
          double(s.d2h),
          s.d2h_bytes,
          double(s.memsets),
          s.memset_bytes,
          double(s.conversions.size()),
          double(from.size()),
          double(s.chains.size()),
          chain_saving,
          s.gemm_us,
          s.gemm_fp32_us,
          unaligned,
          unaligned_slow,
          s.comm_us,
          s.comm_exposed_us,
          s.comm_us > 0 ? 1 - s.comm_exposed_us / s.comm_us : 1,
          optimizer_launches,
          multi,
          single_launches,
          zero,
          data_idle,
          s.skew};
}

constexpr double kSegmentGapUs = 100e3;

}  // namespace

const char* window_kind_name(WindowKind k) {
  switch (k) {
    case WindowKind::Step:
      return "step";
    case WindowKind::Scope:
      return "scope";
    case WindowKind::Sliding:
      return "sliding";
    case WindowKind::Segment:
      return "segment";
  }
  return "?";
}

const std::vector<std::string>& feature_names() {
  static const std::vector<std::string> names{"duration_us",
                                              "gpu_busy_frac",
                                              "idle_host_us",
                                              "idle_sync_us",
                                              "idle_data_us",
                                              "idle_dependency_us",
                                              "kernels",
                                              "kernel_mean_us",
                                              "launch_mean_us",
                                              "short_kernel_frac",
                                              "launch_stretch_us",
                                              "syncs",
                                              "sync_us",
                                              "h2d_copies",
                                              "h2d_bytes",
                                              "h2d_pageable_us",
                                              "d2h_copies",
                                              "d2h_bytes",
                                              "memsets",
                                              "memset_bytes",
                                              "conversions",
                                              "conversion_dtypes",
                                              "elementwise_chains",
                                              "elementwise_chain_saving_us",
                                              "gemm_us",
                                              "gemm_fp32_us",
                                              "gemm_unaligned_us",
                                              "gemm_unaligned_slow_us",
                                              "comm_us",
                                              "comm_exposed_us",
                                              "comm_overlap_frac",
                                              "optimizer_launches",
                                              "optimizer_multi_tensor",
                                              "optimizer_single_tensor_launches",
                                              "zero_grad_ops",
                                              "data_idle_us",
                                              "rank_skew"};
  return names;
}

Analysis analyze(const TraceSet& set, const Options& o) {
  for (const std::string& id : o.only) {
    const auto& table = detector_table();
    if (std::none_of(table.begin(), table.end(), [&](const Detector* d) { return d->info.id == id; }))
      throw UserError("analyze: unknown detector '" + id + "' (reprise analyze --list names them)");
  }
  if (set.ranks.empty()) throw UserError("analyze: no traces to analyze");
  if (o.sliding_us < 0 || !std::isfinite(o.sliding_us))
    throw UserError("analyze: the sliding window must be a positive number of microseconds");
  Analysis a;
  if (o.classifier) a.learned_classes = o.classifier->classes;
  std::vector<Timeline> tls;
  tls.reserve(set.ranks.size());
  for (size_t r = 0; r < set.ranks.size(); ++r) {
    const Trace& t = set.ranks[r];
    tls.push_back(build_timeline(t, t.rank >= 0 ? static_cast<int>(t.rank) : static_cast<int>(r)));
    Timeline& tl = tls.back();
    set_gemm_rates(tl);
    RankInfo info;
    info.rank = tl.rank;
    info.source = t.kineto->source.empty() ? t.source : t.kineto->source;
    info.device = t.kineto->devices.empty() ? (tl.gpu ? "GPU" : "cpu") : t.kineto->devices.front().name;
    info.gpu = tl.gpu;
    info.events = t.kineto->events.size();
    info.steps = tl.steps.size();
    info.span_us = tl.end - tl.begin;
    a.ranks.push_back(info);
  }

  // The windows detectors judge: each step, or each segment of device activity when the trace has no steps.
  struct Judged {
    size_t tl;
    std::string name;
    WindowKind kind;
    double begin, end;
  };
  std::vector<Judged> judged;
  for (size_t r = 0; r < tls.size(); ++r) {
    // Without steps: the device's stretches of activity, cut where it idles 100 ms or more (a harness's pauses
    // between phases, not a step's gaps).
    if (tls[r].steps.empty()) {
      const Timeline& tl = tls[r];
      if (tl.busy.empty()) {
        judged.push_back({r, "segment 0", WindowKind::Segment, tl.begin, tl.end + 1});
        continue;
      }
      double b = tl.busy.front().begin, e = tl.busy.front().end;
      auto close = [&] {
        judged.push_back({r, "segment " + std::to_string(judged.size()), WindowKind::Segment, b, e + 1});
      };
      const size_t first = judged.size();
      for (const Range& x : tl.busy) {
        if (x.begin - e >= kSegmentGapUs) {
          close();
          b = x.begin;
        }
        e = std::max(e, x.end);
      }
      close();
      for (size_t k = first; k < judged.size(); ++k) judged[k].name = "segment " + std::to_string(k - first);
    }
    for (const Scope& s : tls[r].steps) judged.push_back({r, s.name, WindowKind::Step, s.begin, s.end});
  }
  // Skew: each step's computation on each rank against the median rank's.
  std::map<std::string, std::vector<double>> compute_by_step;
  for (const Judged& j : judged)
    if (j.kind == WindowKind::Step) compute_by_step[j.name].push_back(covered(tls[j.tl].compute, j.begin, j.end));

  std::vector<const Detector*> run;
  for (const Detector* d : detector_table())
    if (o.only.empty() || std::find(o.only.begin(), o.only.end(), d->info.id) != o.only.end()) run.push_back(d);

  for (const Judged& j : judged) {
    const Timeline& tl = tls[j.tl];
    WindowStats s = window_stats(tl, j.begin, j.end);
    auto step = compute_by_step.find(j.name);
    if (j.kind == WindowKind::Step && step != compute_by_step.end() && step->second.size() > 1) {
      const double mid = median(step->second);
      if (mid > 0) {
        s.skew = s.compute_us / mid;
        s.skew_over_us = s.compute_us - mid;
      }
    }
    a.windows.push_back({tl.rank, j.kind, j.name, j.begin, j.end, features_of(s), {}});
    // The classifier learned from GPU steps (what the corpus labels): segments of a step-less trace and CPU traces
    // are not its domain.
    if (o.classifier && j.kind == WindowKind::Step && tl.gpu)
      a.windows.back().learned = o.classifier->predict(a.windows.back().features);
    // The observers' cost in a step recorded longer than it ran without them (Options::plain_step_seconds).
    double observers_us = 0;
    if (auto plain = o.plain_step_seconds.find(tl.rank);
        j.kind == WindowKind::Step && plain != o.plain_step_seconds.end())
      observers_us = std::max(0.0, j.end - j.begin - plain->second * 1e6);
    WindowVerdict verdict;
    if (o.verdicts) verdict = {tl.rank, j.name, {}, {}, a.windows.back().features};
    for (const Detector* d : detector_table()) {
      const bool wanted = std::find(run.begin(), run.end(), d) != run.end();
      if (!wanted && !o.verdicts) continue;
      Finding f;
      const bool fired = d->find(s, f);
      if (o.verdicts) {
        verdict.fired.push_back(wanted && fired);
        verdict.score.push_back(f.score);
      }
      if (!wanted || !fired) continue;
      f.detector = d->info.id;
      if (d->host_saving && observers_us > 0) {
        f.observers_us = std::min(f.saving_us, observers_us);
        f.saving_us -= f.observers_us;
        f.evidence += "; " + time_text(f.observers_us) + " of it the observers' (the step ran " +
                      time_text(j.end - j.begin) + " recorded, " + time_text(j.end - j.begin - observers_us) +
                      " without them)";
      }
      f.ranks = {tl.rank};
      f.window = j.name;
      f.window_us = j.end - j.begin;
      if (f.instances.empty()) {
        f.begin_us = j.begin;
        f.end_us = j.end;
      }
      a.findings.push_back(std::move(f));
    }
    if (o.verdicts) a.verdicts.push_back(std::move(verdict));
  }

  // Feature windows: annotated scopes and a sliding window over each rank's timeline.
  for (const Timeline& tl : tls) {
    if (o.scopes)
      for (const Scope& s : tl.scopes)
        if (s.end > s.begin)
          a.windows.push_back(
              {tl.rank, WindowKind::Scope, s.name, s.begin, s.end, features_of(window_stats(tl, s.begin, s.end)), {}});
    if (!o.sliding) continue;
    double width = o.sliding_us;
    if (width <= 0) {
      std::vector<double> steps;
      for (const Scope& s : tl.steps) steps.push_back(s.end - s.begin);
      width = std::max(1000.0, (steps.empty() ? tl.end - tl.begin : median(steps)) / 8);
      // The default stays under 100,000 windows however long the timeline (a stray early timestamp included).
      width = std::max(width, 2 * (tl.end - tl.begin) / 1e5);
    }
    const double stride = width / 2, span = tl.end - tl.begin;
    if (span / stride > 1e6 || tl.begin + stride == tl.begin)
      throw UserError(tl.trace->source + ": a sliding window of " + time_text(width) + " cuts its " + time_text(span) +
                      " into over a million windows (or finer than its timestamps); give a wider --window");
    const size_t count = std::max<size_t>(1, static_cast<size_t>(std::ceil(span / stride)));
    for (size_t k = 0; k < count; ++k) {
      const double b = tl.begin + double(k) * stride;
      a.windows.push_back({tl.rank,
                           WindowKind::Sliding,
                           "sliding " + std::to_string(k),
                           b,
                           b + width,
                           features_of(window_stats(tl, b, b + width)),
                           {}});
    }
  }
  std::stable_sort(a.findings.begin(), a.findings.end(),
                   [](const Finding& x, const Finding& y) { return x.saving_us > y.saving_us; });
  return a;
}

}  // namespace reprise::analyze
