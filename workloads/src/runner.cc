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
  c10::NoGradGuard no_grad;
  for (at::Tensor& p : params) {
    at::Tensor g = p.grad();
    if (!g.defined()) continue;
    comm->all_reduce(g);
    g.div_(comm->world_size());
  }
}

void sgd(std::vector<at::Tensor>& params, double lr) {
  c10::NoGradGuard no_grad;
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
  // --help's line: `model (sizes)rest`, the size options in the middle being the ones it reads.
  const char* model;
  const char* sizes;
  const char* rest;
  std::unique_ptr<detail::Workload> (*make)(const WorkloadOptions&, at::Device);
  void (*check)(const WorkloadOptions&, int world);  // before anything is built; nullptr: nothing to check
};

// The size options of every workload (0: the workload's default), by the name --help gives them.
const std::vector<std::pair<const char*, int64_t WorkloadOptions::*>>& size_options() {
  static const std::vector<std::pair<const char*, int64_t WorkloadOptions::*>> sizes = {
      {"--batch", &WorkloadOptions::batch},     {"--hidden", &WorkloadOptions::hidden},
      {"--layers", &WorkloadOptions::layers},   {"--tables", &WorkloadOptions::tables},
      {"--rows", &WorkloadOptions::rows},       {"--dim", &WorkloadOptions::dim},
      {"--lookups", &WorkloadOptions::lookups}, {"--seq", &WorkloadOptions::seq},
      {"--heads", &WorkloadOptions::heads},     {"--vocab", &WorkloadOptions::vocab},
  };
  return sizes;
}

const std::vector<Entry>& registry() {
  static const std::vector<Entry> table = {
      {"mlp", "Linear+ReLU layers, MSE loss, SGD", "--batch --hidden --layers", "; data parallel", detail::make_mlp,
       nullptr},
      {"dlrm", "EmbeddingBag tables (model parallel, all_to_all) + MLPs (data parallel, all_reduce), dot interaction",
       "--batch --tables --rows --dim --lookups --hidden",
       "; tables of their own sizes and pooling, placed by a sharding plan (--table-rows --table-lookups --shards)",
       detail::make_dlrm, detail::check_dlrm},
      {"gpt", "decoder blocks: causal attention, LayerNorm, GELU MLP, AdamW",
       "--batch --seq --hidden --heads --layers --vocab",
       "; Megatron-style tensor, pipeline (1F1B) and data parallel (--tp --pp --dp --micro-batches), ZeRO (--zero)",
       detail::make_gpt, detail::check_gpt},
  };
  return table;
}

const Entry& find_entry(const std::string& name) {
  for (const Entry& e : registry())
    if (name == e.name) return e;
  std::string names;
  for (const Entry& e : registry()) names += (names.empty() ? "" : ", ") + std::string(e.name);
  throw std::invalid_argument("workload '" + name + "': unknown (built in: " + names + ")");
}

// The trace's `## process_group:init ##` node, as PyTorch 2.x writes it: a group of every rank lists no ranks.
std::string process_groups_json(const std::vector<GroupInfo>& groups, int world, int named,
                                const std::string& backend) {
  std::string s = "[";
  for (const GroupInfo& g : groups) {
    std::string ranks;
    if (static_cast<int>(g.ranks.size()) != world)
      for (int r : g.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    s += (s.size() > 1 ? ", " : "") + std::string("{\"pg_name\": \"") + g.name + "\", \"pg_desc\": \"" + g.desc +
         "\", \"backend_config\": \"" + backend + "\", \"ranks\": [" + ranks +
         "], \"group_size\": " + std::to_string(g.ranks.size()) + ", \"group_count\": " + std::to_string(named) + "}";
  }
  return s + "]";
}

}  // namespace

void check_options(const WorkloadOptions& o, int world_size) {
  const Entry& entry = find_entry(o.name);
  if (o.warmup < 0 || o.steps < 1 || o.record < 1)
    throw std::invalid_argument("warm-up steps must be >= 0, timed and recorded steps >= 1");
  if (!o.anti_pattern.empty() && o.anti_pattern != "sync" && o.anti_pattern != "casts" && o.anti_pattern != "unfused" &&
      o.anti_pattern != "loop" && o.anti_pattern != "unaligned" && o.anti_pattern != "loader")
    throw std::invalid_argument("anti-pattern '" + o.anti_pattern +
                                "': unknown (built in: sync, casts, unfused, loop, unaligned, loader)");
  if (!o.anti_pattern.empty() && o.name != "mlp")
    throw std::invalid_argument("workload '" + o.name + "': anti-patterns are built into mlp only");
  if (o.name != "gpt" &&
      (o.tp != 1 || o.pp != 1 || (o.dp != 0 && o.dp != world_size) || o.micro_batches != 0 || o.zero))
    throw std::invalid_argument("workload '" + o.name +
                                "': tensor and pipeline parallelism, micro-batches and ZeRO are gpt's; it is data "
                                "parallel over the launch's ranks");
  if (o.name != "dlrm" && (!o.table_rows.empty() || !o.table_lookups.empty() || !o.shards.empty()))
    throw std::invalid_argument("workload '" + o.name + "': --table-rows, --table-lookups and --shards are dlrm's");
  // A size another workload reads would be silently ignored: a capture of something else than asked for.
  const std::string sizes = std::string(entry.sizes) + " ";
  for (const auto& [flag, field] : size_options())
    if (o.*field != 0 && sizes.find(std::string(flag) + " ") == std::string::npos)
      throw std::invalid_argument("workload '" + o.name + "': " + flag + " is not one of its sizes (" + entry.sizes +
                                  ")");
  if (entry.check) entry.check(o, world_size);
}

std::vector<std::pair<std::string, std::string>> workload_list() {
  std::vector<std::pair<std::string, std::string>> v;
  for (const Entry& e : registry()) v.emplace_back(e.name, std::string(e.model) + " (" + e.sizes + ")" + e.rest);
  return v;
}

CaptureReport capture_workload(const WorkloadOptions& o) {
  const Entry& entry = find_entry(o.name);
  check_options(o, o.comm ? o.comm->world_size() : 1);
  at::Device device(at::kCPU);
  try {
    device = at::Device(o.device);
  } catch (const std::exception&) {
    throw std::invalid_argument("device '" + o.device + "': not a device (cpu, cuda, cuda:N)");
  }
  if (!device.is_cpu() && !device.is_cuda())  // meta runs no work: nothing to time, and no backward kernels
    throw std::invalid_argument("device '" + o.device + "': a capture runs the workload (cpu, cuda, cuda:N)");
  if (device.is_cuda() && !at::hasCUDA())
    throw std::invalid_argument("device '" + o.device + "': this LibTorch (" TORCH_VERSION ") has no CUDA");
  if (device.is_cuda() && !device.has_index()) device = at::Device(at::kCUDA, 0);
  auto progress = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  device::install_memory_tracking();
  at::manual_seed(o.seed);
  std::unique_ptr<detail::Workload> w = entry.make(o, device);

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
    for (int side = 0; side < (o.anti_pattern.empty() ? 1 : 2); ++side) {
      // With it first on even steps, without it first on odd ones; every step "with" when none is built in.
      const bool without = !o.anti_pattern.empty() && (side == 1) != (k % 2 == 1);
      w->set_anti_pattern(!without);
      w->take_data_loader_seconds();
      timer.start();
      w->step();
      (without ? r.without_anti_pattern_seconds : r.iteration_seconds).push_back(timer.stop_seconds());
      if (const double loader = w->take_data_loader_seconds(); !without && loader > 0)
        r.data_loader_seconds.push_back(loader);
    }
    w->set_anti_pattern(true);
    if (k == 0) r.loss = w->loss();
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
  const std::string backend = device.is_cuda() ? "cuda:nccl" : "cpu:mpi";
  if (o.comm)
    so.process_groups = process_groups_json(o.comm->groups(), o.comm->world_size(), o.comm->groups_named(), backend);
  else
    so.process_groups = process_groups_json({{"0", "default_pg", {0}}}, 1, 1, backend);
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
  if (!o.anti_pattern.empty()) j["anti_pattern"] = o.anti_pattern;
  if (!o.table_rows.empty()) j["table_rows"] = o.table_rows;
  if (!o.table_lookups.empty()) j["table_lookups"] = o.table_lookups;
  if (!o.shards.empty()) j["shards"] = o.shards;
  auto a = nlohmann::ordered_json::array();
  for (const CaptureReport& r : ranks) {
    a.push_back({{"rank", r.rank},
                 {"trace", r.trace},
                 {"iteration_seconds", r.iteration_seconds},
                 {"recorded_iteration_seconds", r.recorded_iteration_seconds},
                 {"peak_memory_bytes", r.peak_memory_bytes}});
    if (std::isfinite(r.loss)) a.back()["loss"] = r.loss;
    if (!r.without_anti_pattern_seconds.empty())
      a.back()["without_anti_pattern_seconds"] = r.without_anti_pattern_seconds;
    if (!r.data_loader_seconds.empty()) a.back()["data_loader_seconds"] = r.data_loader_seconds;
  }
  j["ranks"] = a;
  return j.dump(2) + "\n";
}

}  // namespace reprise::workloads
