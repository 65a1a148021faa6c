// One training workload: builds its model on a device and runs one iteration per step(). One file per workload.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "reprise/workloads/workloads.h"

namespace reprise::workloads::detail {

class Workload {
 public:
  virtual ~Workload() = default;
  virtual std::string describe() const = 0;
  virtual void step() = 0;
  // The last step's loss where this rank computes it (read between steps: it may synchronize); NaN otherwise.
  virtual double loss() const { return std::nan(""); }
  // Switches the anti-pattern built in (WorkloadOptions::anti_pattern) off and on again, so that the same process
  // times the step with and without it, interleaved.
  virtual void set_anti_pattern(bool /*on*/) {}
  // The host time the steps since the last call spent in their DataLoader calls (the scopes replay leaves out), and
  // starts over; 0 for a workload without any. The capture's timed steps record it, without the observers, for
  // replay's --data-loader (CaptureReport::data_loader_seconds).
  double take_data_loader_seconds() { return std::exchange(data_loader_seconds_, 0.0); }

 protected:
  double data_loader_seconds_ = 0;
};

std::unique_ptr<Workload> make_mlp(const WorkloadOptions& o, at::Device device);
std::unique_ptr<Workload> make_dlrm(const WorkloadOptions& o, at::Device device);
std::unique_ptr<Workload> make_gpt(const WorkloadOptions& o, at::Device device);
// gpt's sizes and layout against a world of `world` ranks; throws std::invalid_argument.
void check_gpt(const WorkloadOptions& o, int world);
// dlrm's table lists and sharding plan against a world of `world` ranks; throws std::invalid_argument.
void check_dlrm(const WorkloadOptions& o, int world);
// dlrm's table count: --tables, else the length of a table list, else 8.
int64_t dlrm_tables(const WorkloadOptions& o);

// A parameter: leaf tensor that requires grad, initialised uniform in [-scale, scale].
at::Tensor parameter(at::IntArrayRef shape, double scale, at::Device device);
// Averages the gradients over ranks (data parallelism), when there is more than one.
void all_reduce_grads(std::vector<at::Tensor>& params, Collectives* comm);
// p -= lr * grad; grads zeroed.
void sgd(std::vector<at::Tensor>& params, double lr);
int64_t or_default(int64_t v, int64_t d);

}  // namespace reprise::workloads::detail
