// One descriptor per anti-pattern, as predict has one per op family: what it looks for, the fix, how the fixed
// variant is built, and the rule over a window's stats. detectors.cc holds the table; a new detector is one file
// (detectors/NAME.cc) and a row. Thresholds and saving estimates are listed in docs/analyze.md.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "inject.h"
#include "reprise/analyze/analyze.h"
#include "timeline.h"

namespace reprise::analyze::detail {

struct Detector {
  DetectorInfo info;
  // Always sets f.score, the rule's statistic over its threshold (0 when the window has nothing of the kind): what
  // evaluation ranks windows by. True when the window shows the pattern; then also fills the finding's evidence,
  // saving, instances, ops and kernels (the caller fills its detector, ranks and window).
  bool (*find)(const WindowStats& s, Finding& f);
  // Puts the pattern into a clean timeline inside the window, at about three times the rule's threshold (the labeled
  // corpus); false when the window has no place for it. nullptr: not injected at the timeline level.
  bool (*inject)(Editor& e, const InjectSite& site) = nullptr;
  // Puts in something that looks like the pattern to a cause-blind measure but is not it (a hard negative: syncs
  // that wait for nothing, overlapped communication, pinned copies); nullptr: none.
  bool (*decoy)(Editor& e, const InjectSite& site) = nullptr;
  // The fix's generator step made from the sizes a class's findings name (Finding::sizes, merged and sorted), for a
  // fix that depends on the trace; "" when none can be built from them. nullptr: info.transform as it is.
  std::string (*fix)(const std::vector<int64_t>& sizes) = nullptr;
  // Its saving is host time of the recorded step (the GPU waiting for the host to launch), which the observers'
  // callbacks lengthen: taken down by what the step ran over its time without them (Options::plain_step_seconds).
  bool host_saving = false;
};

extern const Detector kGpuIdle, kHostSync, kLaunchBound, kPageableCopy, kUnfusedElementwise, kDtypeChurn, kFp32Gemm,
    kUnalignedGemm, kExposedComm, kStraggler, kSingleTensorOptimizer, kZeroGrad, kDataLoader;
const std::vector<const Detector*>& detector_table();
// The detector of that id (DetectorInfo::id); nullptr when none has it.
const Detector* find_detector(const std::string& id);

// A threshold: the larger of an absolute time and a share of the window.
inline double threshold(const WindowStats& s, double at_least_us, double share) {
  return std::max(at_least_us, share * s.duration());
}
// Keeps the `n` longest instances, in time order, and sets the finding's range to span all of them.
void keep_instances(Finding& f, std::vector<Instance> all, size_t n = 5);
// Names a finding's work (its `ops` most time-consuming CPU ops, 3 kernels) and keeps its instances.
void describe(Finding& f, const Timeline& tl, const std::vector<size_t>& work, size_t ops, std::vector<Instance> all);
// The work that starts at or after b and ends by e (indices in Timeline::work).
std::vector<size_t> work_in(const Timeline& tl, double b, double e);

}  // namespace reprise::analyze::detail
