// Runs a built-in workload: warm-up, timed uninstrumented steps (the original iteration time), recorded steps.
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "reprise/capture/session.h"
#include "reprise/device/device.h"
#include "workload.h"

namespace reprise::workloads {
namespace detail {

int64_t or_default(int64_t v, int64_t d) {
  if (v < 0) throw std::invalid_argument("sizes must be positive");
  return v > 0 ? v : d;
}

at::Tensor parameter(at::IntArrayRef shape, double scale, at::Device device) {
  return at::empty(shape, at::TensorOptions().device(device)).uniform_(-scale, scale).set_requires_grad(true);
}

void all_reduce_grads(std::vector<at::Tensor>& params, Collectives* comm) {
  if (!comm || comm->world_size() <= 1) return;
  at::NoGradGuard no_grad;
  for (at::Tensor& p : params) {
    at::Tensor g = p.grad();
    if (!g.defined()) continue;
    comm->all_reduce(g);
    g.div_(comm->world_size());
  }
}

void sgd(std::vector<at::Tensor>& params, double lr) {
  at::NoGradGuard no_grad;
  for (at::Tensor& p : params) {
    at::Tensor g = p.grad();
    if (!g.defined()) continue;
    p.add_(g, -lr);
    g.zero_();
  }
}

}  // namespace detail

namespace {

struct Entry {
  const char* name;
  const char* help;
  std::unique_ptr<detail::Workload> (*make)(const WorkloadOptions&, at::Device);
};

const std::vector<Entry>& registry() {
  static const std::vector<Entry> table = {
      {"mlp", "Linear+ReLU layers, MSE loss, SGD (--batch --hidden --layers); data parallel", detail::make_mlp},
      {"dlrm",
       "EmbeddingBag tables (model parallel, all_to_all) + MLPs (data parallel, all_reduce), dot interaction "
       "(--batch --tables --rows --dim --lookups --hidden)",
       detail::make_dlrm},
      {"gpt",
       "decoder blocks: causal attention, LayerNorm, GELU MLP, AdamW (--batch --seq --hidden --heads --layers "
       "--vocab); data parallel",
       detail::make_gpt},
  };
  return table;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> workload_list() {
  std::vector<std::pair<std::string, std::string>> v;
  for (const Entry& e : registry()) v.emplace_back(e.name, e.help);
  return v;
}

CaptureReport capture_workload(const WorkloadOptions& o) {
  const Entry* entry = nullptr;
  for (const Entry& e : registry())
    if (o.name == e.name) entry = &e;
  if (!entry) {
    std::string names;
    for (const Entry& e : registry()) names += (names.empty() ? "" : ", ") + std::string(e.name);
    throw std::invalid_argument("workload '" + o.name + "': unknown (built in: " + names + ")");
  }
  if (o.warmup < 0 || o.steps < 1 || o.record < 1)
    throw std::invalid_argument("warm-up steps must be >= 0, timed and recorded steps >= 1");
  at::Device device(at::kCPU);
  try {
    device = at::Device(o.device);
  } catch (const std::exception&) {
    throw std::invalid_argument("device '" + o.device + "': not a device (cpu, cuda, cuda:N)");
  }
  if (device.is_cuda() && !at::hasCUDA())
    throw std::invalid_argument("device '" + o.device + "': this LibTorch (" TORCH_VERSION ") has no CUDA");
  if (device.is_cuda() && !device.has_index()) device = at::Device(at::kCUDA, 0);
  auto progress = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  device::install_memory_tracking();
  at::manual_seed(o.seed);
  std::unique_ptr<detail::Workload> w = entry->make(o, device);

  CaptureReport r;
  r.rank = o.comm ? o.comm->rank() : 0;
  r.description = w->describe();
  r.threads = at::get_num_threads();
  r.device = device.str();
  progress(r.description + " on " + r.device + ": " + std::to_string(o.warmup) + " warm-up, " +
           std::to_string(o.steps) + " timed, " + std::to_string(o.record) + " recorded step(s)");
  for (int k = 0; k < o.warmup; ++k) w->step();
  device::synchronize(device);
  device::reset_memory_peak(device);
  device::RegionTimer timer(device);
  for (int k = 0; k < o.steps; ++k) {
    timer.start();
    w->step();
    r.iteration_seconds.push_back(timer.stop_seconds());
  }
  r.peak_memory_bytes = device::memory_peak(device);

  r.trace = "rank-" + std::to_string(r.rank) + ".json.gz";
  capture::SessionOptions so;
  if (!o.out_dir.empty()) {
    std::filesystem::create_directories(o.out_dir);
    so.path = (std::filesystem::path(o.out_dir) / r.trace).string();
  }
  so.record_steps = o.record;
  so.nested_values = !o.lean;
  so.rank = r.rank;
  int world = o.comm ? o.comm->world_size() : 1;
  so.process_groups = "[{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"" +
                      std::string(device.is_cuda() ? "cuda:nccl" : "cpu:mpi") +
                      "\", \"ranks\": [], \"group_size\": " + std::to_string(world) + ", \"group_count\": 1}]";
  {
    capture::Session session(so);
    for (int k = 0; k < o.record; ++k) {
      session.step();
      w->step();
      device::synchronize(device);
    }
    session.stop();
    for (const capture::StepTime& st : session.step_times())
      if (st.recorded) r.recorded_iteration_seconds.push_back(st.seconds);
  }
  progress("recorded " + so.path);
  return r;
}

std::string manifest_json(const WorkloadOptions& o, const std::vector<CaptureReport>& ranks, int world_size) {
  nlohmann::ordered_json j;
  j["reprise_capture"] = 1;
  j["workload"] = o.name;
  j["description"] = ranks.empty() ? "" : ranks.front().description;
  j["device"] = ranks.empty() ? o.device : ranks.front().device;
  j["torch_version"] = TORCH_VERSION;
  j["world_size"] = world_size;
  j["threads"] = ranks.empty() ? 1 : ranks.front().threads;
  j["steps"] = {{"warmup", o.warmup}, {"timed", o.steps}, {"recorded", o.record}};
  j["seed"] = o.seed;
  j["lean"] = o.lean;
  auto a = nlohmann::ordered_json::array();
  for (const CaptureReport& r : ranks)
    a.push_back({{"rank", r.rank},
                 {"trace", r.trace},
                 {"iteration_seconds", r.iteration_seconds},
                 {"recorded_iteration_seconds", r.recorded_iteration_seconds},
                 {"peak_memory_bytes", r.peak_memory_bytes}});
  j["ranks"] = a;
  return j.dump(2) + "\n";
}

}  // namespace reprise::workloads
