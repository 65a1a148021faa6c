#include <algorithm>

#include "detector.h"

namespace reprise::analyze {
namespace detail {

const std::vector<const Detector*>& detector_table() {
  static const std::vector<const Detector*> table{
      &kGpuIdle,   &kHostSync,      &kLaunchBound, &kPageableCopy, &kUnfusedElementwise,    &kDtypeChurn,
      &kFp32Gemm,  &kUnalignedGemm, &kExposedComm, &kStraggler,    &kSingleTensorOptimizer, &kZeroGrad,
      &kDataLoader};
  return table;
}

const Detector* find_detector(const std::string& id) {
  for (const Detector* d : detector_table())
    if (d->info.id == id) return d;
  return nullptr;
}

void keep_instances(Finding& f, std::vector<Instance> all, size_t n) {
  if (all.empty()) return;
  f.begin_us = all.front().begin_us;
  f.end_us = all.front().end_us;
  for (const Instance& i : all) {
    f.begin_us = std::min(f.begin_us, i.begin_us);
    f.end_us = std::max(f.end_us, i.end_us);
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Instance& a, const Instance& b) { return a.end_us - a.begin_us > b.end_us - b.begin_us; });
  if (all.size() > n) all.resize(n);
  std::sort(all.begin(), all.end(), [](const Instance& a, const Instance& b) { return a.begin_us < b.begin_us; });
  f.instances = std::move(all);
}

void describe(Finding& f, const Timeline& tl, const std::vector<size_t>& work, size_t ops, std::vector<Instance> all) {
  f.ops = top_ops(tl, work, ops);
  f.kernels = top_kernels(tl, work, 3);
  keep_instances(f, std::move(all));
}

std::vector<size_t> work_in(const Timeline& tl, double b, double e) {
  std::vector<size_t> out;
  auto it = std::lower_bound(tl.work.begin(), tl.work.end(), b, [](const Work& w, double v) { return w.begin < v; });
  for (; it != tl.work.end() && it->begin < e; ++it)
    if (it->end <= e) out.push_back(static_cast<size_t>(it - tl.work.begin()));
  return out;
}

}  // namespace detail

const std::vector<DetectorInfo>& detectors() {
  static const std::vector<DetectorInfo> list = [] {
    std::vector<DetectorInfo> out;
    for (const detail::Detector* d : detail::detector_table()) out.push_back(d->info);
    return out;
  }();
  return list;
}

}  // namespace reprise::analyze
