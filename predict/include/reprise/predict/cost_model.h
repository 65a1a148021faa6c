// Per-op time from a cluster's rates and a calibration: host time (dispatch and launches) and device time (the
// kernels), each op's family model keyed by its shapes, with a residual for the interval.
//
//   CostModel m(cluster, &calibration);
//   OpCost c = m.op(trace, node);           // c.host + c.device seconds; c.sigma: log-residual of its fit
//   double s = m.collective(trace.collectives[k], {0, 1, 2, 3});
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "reprise/predict/calibration.h"
#include "reprise/predict/cluster.h"
#include "reprise/predict/op_work.h"

namespace reprise::predict {

struct OpCost {
  double host = 0;    // seconds on the issuing host thread (on a CPU device: the whole op)
  double device = 0;  // seconds on a GPU stream (0 on a CPU device)
  // Seconds into the host part when the device work is launched (measured host overheads: the end of the first
  // launch call); -1: at the host part's end.
  double launch_at = -1;
  double host_gap = 0;        // of `host`, the framework's time before the op itself (measured host overheads)
  bool host_kinds = false;    // `host` is the measured host overheads' (their gap before the op included)
  bool waits_device = false;  // measured: most of its calls waited on the device (a .cpu() copy, a sync)
  double sigma = 0;           // std of log(measured / modelled) of the model that timed it
  OpWork work;
  bool modeled = false;  // a family model timed it (not a fallback, not host time only)
  // On a CPU, of `host`: the modelled time of a memory or embedding op's streaming work, which slows when other ranks
  // of the node stream at once (predict applies the calibration's contention to it); 0 for other ops and devices.
  double streaming = 0;
};

class CostModel {
 public:
  explicit CostModel(const Cluster& cluster, const Calibration* calibration = nullptr);
  ~CostModel();
  CostModel(CostModel&&) noexcept;

  OpCost op(const Trace& t, uint32_t node) const;
  // A collective's time over a group of global ranks (their link level picks the curve), and its sigma.
  double collective(const Collective& c, const std::vector<int64_t>& group, double* sigma = nullptr) const;
  const Cluster& cluster() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// An op's time at the device's peak rates (the roofline), before any efficiency; 0 for ops without device work.
double roofline_seconds(const OpWork& w, const DeviceSpec& d);

}  // namespace reprise::predict
