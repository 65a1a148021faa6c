// reprise-torch: the subcommands that link LibTorch (replay, capture). `reprise replay ...` runs this binary, so tools
// that only read traces do not pay LibTorch's start-up (about 0.5 s and 165 MB).
#include <ATen/Parallel.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "bundle_commands.h"
#include "cli.h"
#include "progress.h"
#include "reprise/common/stats.h"
#include "reprise/comms/communicator.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/output.h"
#include "reprise/trace/write.h"
#include "reprise/workloads/workloads.h"

namespace po = boost::program_options;

namespace {

using reprise::cli::kBadInput;

using reprise::UserError;
using reprise::cli::parse;

// A rank that stops making progress must not hang the job: each rank ends itself (exit 124) when its time limit
// passes, and the launcher then ends the others. The limit can move: a replay derives it once the trace is read, and
// moves it after its first pass and its warm-up.
class Watchdog {
 public:
  // Ends the process `seconds` from now (0: never), printing `why`.
  void arm(double seconds, const std::string& why) {
    std::lock_guard<std::mutex> lock(m_);
    armed_ = seconds > 0;
    deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(std::min(seconds, 1e9)));
    why_ = why;
    if (!started_) std::thread([this] { watch(); }).detach();
    started_ = true;
    cv_.notify_all();
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      if (!armed_) {
        cv_.wait(lock);
      } else if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ &&
                 std::chrono::steady_clock::now() >= deadline_) {
        std::cerr << "reprise: " + why_ + "\n";
        reprise::remove_registered_now();  // _Exit runs no destructor: a results file being written must not stay
        std::_Exit(124);
      }
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::chrono::steady_clock::time_point deadline_;
  std::string why_;
  bool armed_ = false, started_ = false;
};

Watchdog& watchdog() {
  static Watchdog* w = new Watchdog;  // never destroyed: its thread may outlive main
  return *w;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f s", s);
  return buf;
}

// What a limit is and where it came from, for the line printed when it is set and the one printed when it passes.
std::string time_limit_text(const reprise::replay::TimeLimit& l) {
  if (l.from == "given") return seconds_text(l.seconds) + " (--timeout)";
  if (l.from == "trace") return seconds_text(l.seconds) + " (derived: 60 s + 10x the recorded iteration time)";
  if (l.from == "floor") return seconds_text(l.seconds) + " (derived: the floor; the trace records no iteration time)";
  return seconds_text(l.seconds) + " (derived: 60 s + 10x the rest at the " + l.from + "'s rate)";
}

// The files written and, with --strict, exit status 1 when this rank skipped an op.
int finish_replay(const reprise::replay::LaunchReport& report, const reprise::replay::LaunchOptions& job, bool strict) {
  const char* all = report.world_size > 1 ? " (all ranks)" : "";
  std::ostream& said = reprise::cli::report_ostream({job.out, job.timeline});  // stderr when an output is "-"
  if (report.reporter && !job.out.empty()) said << "results: " << job.out << all << "\n";
  if (report.reporter && !job.timeline.empty())
    said << "timeline: " << job.timeline << (report.world_size > 1 ? " (all ranks; " : " (")
         << "open in https://ui.perfetto.dev)\n";
  const reprise::replay::ReplayResult& r = report.result;
  if (!strict || r.ops_replayed >= r.ops_selected) return 0;
  std::cerr << "reprise: --strict: ";
  if (report.world_size > 1) std::cerr << "rank " << report.rank << ": ";
  std::cerr << (r.ops_selected - r.ops_replayed) << " selected op(s) not replayed";
  if (report.world_size == 1 && !r.skipped.empty())
    std::cerr << " (first: " << r.skipped.front().op << ": " << r.skipped.front().reason << ")";
  std::cerr << "\n";
  return 1;
}

// The numeric options Boost accepts too much of: any int, and "-1" read into an unsigned as a huge number.
struct ReplayNumbers {
  double timeout = -1;
  int64_t seed = 0;
  std::string host_time, data_loader;
};

void require(bool ok, const std::string& what) {
  if (!ok) throw UserError("replay: " + what);
}

int max_threads() { return static_cast<int>(std::min(1024u, std::max(64u, 4 * std::thread::hardware_concurrency()))); }

void check_replay_numbers(const po::variables_map& vm, const reprise::replay::LaunchOptions& job,
                          const ReplayNumbers& n) {
  const reprise::replay::ReplayOptions& o = job.replay;
  const std::string most = std::to_string(max_threads());
  require(o.threads >= 0 && o.threads <= max_threads(),
          "--threads must be between 0 (the default) and " + most + " (4x this machine's cores, at least 64)");
  require(!vm.count("rank") || job.rank >= 0, "--rank must not be negative");
  require(!vm.count("iteration") || o.iteration >= 0, "--iteration must not be negative");
  require(!vm.count("iteration") || !o.all_iterations, "--iteration N and --all-iterations: give one");
  require(!vm.count("device") || !o.device.empty(), "--device '': give cpu, cuda, cuda:N or meta");
  require(o.max_ops >= 0, "--max-ops must not be negative (0: all)");
  require(o.warmup >= 0, "--warmup must not be negative");
  require(o.iterations >= 1, "--iterations must be at least 1");
  require(n.seed >= 0, "--seed must not be negative");
  require(!vm.count("timeout") || (std::isfinite(n.timeout) && n.timeout >= 0 && n.timeout <= 1e7),
          "--timeout must be between 0 (never) and 1e7 seconds");
  require(o.per_op_passes >= 1 && o.per_op_passes <= 1000, "--per-op-passes must be between 1 and 1000");
}

}  // namespace

namespace {

// --host-time none|recorded|SCALE: the scale of the recorded host time re-spent; -1 (not given) the device's default.
double host_time_scale(const po::variables_map& vm, const std::string& text) {
  return vm.count("host-time") ? reprise::cli::parse_host_time(text, "replay") : -1;
}

po::options_description replay_options(reprise::replay::LaunchOptions& job, ReplayNumbers& n) {
  po::options_description opts(
      "usage: reprise replay TRACE [options]\n\n"
      "Replays one iteration of a trace op for op through the LibTorch dispatcher, with the recorded shapes,\n"
      "dtypes, strides and views, and measures it. TRACE is an ET file, a folder of per-rank files, an archive\n"
      "or a bundle (reprise generate: its manifest gives the world size, device, iterations and warm-up); the rank "
      "replayed is --rank, else the launcher's rank (mpirun/srun/torchrun), else 0.\n"
      "Under mpirun/srun each rank replays its own trace and the collectives run over MPI (CPU) or NCCL (GPU, one\n"
      "GPU per local rank); rank 0 writes the results of every rank. A single process replays the collectives of\n"
      "one-rank traces and skips those of larger ones. Progress goes to stderr: one line per phase (compile,\n"
      "collectives, inputs, validate, warm-up, capture, measure, per-op, write), redrawn in place on a terminal;\n"
      "rank 0 only.\n\noptions");
  reprise::replay::ReplayOptions& o = job.replay;
  opts.add_options()("help,h", "show this help")(
      "device", po::value(&o.device), "cpu, cuda, cuda:N or meta (shapes only); default: the trace's device")(
      "iteration", po::value(&o.iteration), "replay ProfilerStep#N (default: the first complete step)")(
      "all-iterations", po::bool_switch(&o.all_iterations), "replay every ProfilerStep of the trace, in order")(
      "warmup", po::value(&o.warmup)->default_value(1), "untimed iterations before measuring")(
      "iterations", po::value(&o.iterations)->default_value(5), "measured iterations")(
      "per-op", po::bool_switch(&o.per_op), "time each op in a second pass (the iteration times are not perturbed)")(
      "per-op-passes", po::value(&o.per_op_passes)->default_value(1),
      "per-op passes (implies --per-op); each op's time is its median over them")(
      "out,o", po::value(&job.out), "write the results as JSON to this file")(
      "timeline", po::value(&job.timeline), "write a Chrome/Perfetto trace of the per-op pass to this file")(
      "strict", "fail (exit 1) when any selected op was not replayed")(
      "threads", po::value(&o.threads)->default_value(0),
      "intra-op CPU threads (0: a capture manifest's, else LibTorch's default)")(
      "rank", po::value(&job.rank), "which rank of a multi-rank TRACE to replay")(
      "seed", po::value(&n.seed)->default_value(0), "seed of the generated input data")(
      "max-ops", po::value(&o.max_ops)->default_value(0), "replay only the first N ops of each step (0: all)")(
      "host-time", po::value(&n.host_time),
      "none, recorded or SCALE: re-spend the host time the original spent between ops (Python, autograd, the "
      "optimizer's loop) as a busy wait before each op, times SCALE; default: recorded on cuda and for a Python "
      "capture's profiled steps, else none (docs/replay.md)")(
      "data-loader", po::value(&n.data_loader)->default_value("none"),
      "none, recorded or SCALE: re-spend the time the original's DataLoader calls took (their ops are not "
      "replayed) as a busy wait where they were; none benchmarks the step's own work, recorded a loader-bound step "
      "as it ran")("hold-ops", po::bool_switch(&o.hold_ops),
                   "with host time re-spent on a GPU: hold each op's call to its original's own host time (its span "
                   "less its copies and syncs), as a launch-bound Python step dispatched; overstates a step recorded "
                   "under the ET observer (docs/replay.md)")(
      "pin-memory", po::bool_switch(&o.pin_memory),
      "replay the host-to-device copies from pinned memory, non-blocking (DataLoader(pin_memory=True) and "
      ".to(device, non_blocking=True)): GPU replays")(
      "cuda-graph", po::bool_switch(&o.cuda_graph),
      "capture each step in a CUDA graph after the warm-up and measure it as one graph launch (no dispatch, "
      "launches or host time between ops): GPU replays of one stream without collectives")(
      "emulate-tbe", po::bool_switch(&o.emulate_tbe),
      "run fbgemm's table-batched embedding lookups (without FBGEMM loaded) and their fused-optimizer backward as "
      "ATen lookups and row updates over tables of the recorded size (memory: the tables and optimizer state)")(
      "load-library", po::value(&job.libraries)->composing(),
      "a shared library that registers ops (FBGEMM's fbgemm_gpu_py.so, a custom op library), loaded before the "
      "trace is compiled so that its ops replay instead of decomposing into what they recorded; repeatable")(
      "timeout", po::value(&n.timeout),
      "end every rank after this many seconds (0: never); default under mpirun/srun: derived from the trace "
      "(docs/replay.md), none for a single process")("quiet,q", "no progress lines or warnings")(
      "trace", po::value(&job.trace), "the trace");
  return opts;
}

int cmd_replay(int argc, char** argv) {
  reprise::replay::LaunchOptions job;
  ReplayNumbers numbers;
  po::options_description opts = replay_options(job, numbers);
  po::positional_options_description pos;
  pos.add("trace", 1);
  auto vm = parse(argc, argv, opts, pos);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (job.trace.empty()) throw UserError("replay: no trace given (see reprise replay --help)");
  check_replay_numbers(vm, job, numbers);
  job.replay.seed = static_cast<uint64_t>(numbers.seed);
  job.replay.host_time_scale = host_time_scale(vm, numbers.host_time);
  job.replay.data_loader_scale = reprise::cli::parse_host_time(numbers.data_loader, "replay", "--data-loader");
  if (!vm["per-op-passes"].defaulted()) job.replay.per_op = true;
  job.check_output = reprise::cli::check_output_path;
  const bool quiet = vm.count("quiet") > 0;
  const bool speaker = reprise::comms::detect_launch().rank == 0;
  job.replay.arm_time_limit = [quiet, speaker](double seconds, const reprise::replay::TimeLimit& l) {
    const std::string text = time_limit_text(l);
    watchdog().arm(seconds, "replay: time limit of " + text + " reached; ending this rank, and with it the launch" +
                                (l.from == "given" ? "" : " (--timeout S sets another, 0 none)"));
    if (!quiet && speaker && l.from != "given") std::cerr << "reprise: time limit: " << text << "\n";
  };
  if (vm.count("timeout")) {
    job.replay.time_limit = {numbers.timeout, "given"};
    if (numbers.timeout > 0) job.replay.arm_time_limit(numbers.timeout, job.replay.time_limit);
  }
  job.replay.timeline = !job.timeline.empty();
  job.threads_from_manifest = vm["threads"].defaulted();
  job.chosen = {vm.count("device") > 0, !vm["iterations"].defaulted(), !vm["warmup"].defaulted()};
  reprise::cli::ProgressLine line;
  if (!vm.count("quiet")) {
    job.warn = [&line](const std::string& w) { line.message("warning: " + w); };
    job.replay.progress = [&line](const reprise::replay::Progress& p) { line.update(p); };
  }
  reprise::replay::LaunchReport report = reprise::replay::replay_launch(job);
  if (report.quiet_failure) return report.quiet_failure;  // rank 0 says why
  if (report.reporter) reprise::replay::print_summary(reprise::cli::report_stream({job.out, job.timeline}), report);
  std::fflush(stdout);
  return finish_replay(report, job, vm.count("strict") > 0);
}

po::options_description capture_options(reprise::workloads::WorkloadOptions& w, int& threads, double& timeout) {
  std::string workloads, names;
  for (auto& [name, help] : reprise::workloads::workload_list()) {
    workloads += "  " + name + ": " + help + "\n";
    names += (names.empty() ? "" : ", ") + name;
  }
  po::options_description opts(
      "usage: reprise capture --workload NAME --out DIR [options]\n\n"
      "Runs a built-in LibTorch training workload: warm-up steps, timed steps without the observer (the original\n"
      "iteration time that replay is compared with), then recorded steps. Writes DIR/rank-N.json.gz (PyTorch ET\n"
      "1.1.1), DIR/rank-N.kineto.json.gz (the recorded ops' host times, from which replay reports each op's\n"
      "original time) and DIR/manifest.json; `reprise replay DIR` then reports replay/original. Sizes left at 0\n"
      "take the workload's default.\n\nworkloads:\n" +
      workloads + "\noptions");
  opts.add_options()("help,h", "show this help")("workload", po::value(&w.name), ("required: " + names).c_str())(
      "out,o", po::value(&w.out_dir), "required: output folder")("device", po::value(&w.device)->default_value("cpu"),
                                                                 "cpu, cuda or cuda:N")(
      "batch", po::value(&w.batch)->default_value(0), "batch size (per rank)")(
      "hidden", po::value(&w.hidden)->default_value(0), "hidden size")(
      "layers", po::value(&w.layers)->default_value(0), "layers")("tables", po::value(&w.tables)->default_value(0),
                                                                  "dlrm: embedding tables")(
      "rows", po::value(&w.rows)->default_value(0), "dlrm: rows per table")("dim", po::value(&w.dim)->default_value(0),
                                                                            "dlrm: embedding dimension")(
      "lookups", po::value(&w.lookups)->default_value(0), "dlrm: lookups per sample and table")(
      "table-rows", po::value<std::string>(), "dlrm: rows of each table, e.g. 100000,5000,... (one per table)")(
      "table-lookups", po::value<std::string>(),
      "dlrm: lookups per sample of each table (pooling factors), e.g. 40,2,... (one per table)")(
      "shards", po::value<std::string>(),
      "dlrm: the sharding plan, the rank holding each table, e.g. 0,0,1,0 (one per table; default: rank r holds\n"
      "the r-th block of tables / ranks); ranks holding different numbers exchange by all_to_allv")(
      "seq", po::value(&w.seq)->default_value(0), "gpt: sequence length")(
      "heads", po::value(&w.heads)->default_value(0), "gpt: attention heads")(
      "vocab", po::value(&w.vocab)->default_value(0), "gpt: vocabulary size")(
      "tp", po::value(&w.tp)->default_value(1), "gpt: tensor parallel ranks (attention heads split over them)")(
      "pp", po::value(&w.pp)->default_value(1), "gpt: pipeline stages (layers split over them; 1F1B schedule)")(
      "dp", po::value(&w.dp)->default_value(0),
      "gpt: data parallel ranks (0: the launch's ranks / (tp * pp)); tp * pp * dp must be the launch's ranks")(
      "micro-batches", po::value(&w.micro_batches)->default_value(0),
      "gpt: micro-batches per step, dividing --batch (0: 1 without a pipeline, else 2 * pp)")(
      "zero", "gpt: ZeRO: reduce_scatter the gradients, AdamW on this rank's shard, all_gather the parameters")(
      "anti-pattern", po::value(&w.anti_pattern),
      "mlp: build in an anti-pattern: sync (loss.item() between forward and backward), casts (each hidden\n"
      "activation round-tripped through bf16), unfused (a tanh GELU as eight elementwise ops, against\n"
      "at::gelu), loop (SGD one parameter at a time, against foreach ops), unaligned (hidden size --hidden less\n"
      "one, against it padded to a multiple of 8) or loader (each batch made sample by sample in a DataLoader\n"
      "scope, against one made beforehand); what `reprise analyze --measure` is checked against")(
      "warmup", po::value(&w.warmup)->default_value(2), "untimed steps first")(
      "steps", po::value(&w.steps)->default_value(5), "timed steps without the observer")(
      "record", po::value(&w.record)->default_value(1), "recorded steps")(
      "threads", po::value(&threads)->default_value(0), "intra-op CPU threads (0: LibTorch's default)")(
      "seed", po::value(&w.seed)->default_value(0), "random seed")(
      "timeout", po::value(&timeout),
      "end every rank after this many seconds (0: never); default 1800 under mpirun/srun, none for a single process")(
      "lean",
      "record ops called by other ops without their arguments (a smaller trace and a little less\n"
      "overhead on tiny ops; replay issues the outer ops only)")("quiet,q", "no progress lines");
  return opts;
}

constexpr double kCaptureLaunchTimeout = 1800;

struct Captured {
  reprise::workloads::CaptureReport report;  // this rank's
  std::string manifest;                      // its path
  bool reporter = true;                      // rank 0 (or the only process)
  int quiet_failure = 0;                     // the exit status of a rank whose failure rank 0 reports
};

// Runs the workload on this process, or on every rank under mpirun/srun with its collectives over MPI (NCCL on
// GPUs); the only or first rank writes the manifest with every rank's report.
Captured capture_on_launch(reprise::workloads::WorkloadOptions& w) {
  reprise::comms::Launch launch = reprise::comms::detect_launch();
  Captured c;
  // Options every rank judges alike (sizes, the parallel layout against the launch) are refused before MPI starts,
  // in one line from rank 0; the other ranks end with the same status, quietly.
  try {
    reprise::workloads::check_options(w, launch.size);
  } catch (const std::invalid_argument& e) {
    if (launch.rank == 0) throw UserError(std::string("capture: ") + e.what());
    c.quiet_failure = kBadInput;
    return c;
  }
  std::unique_ptr<reprise::comms::Communicator> world;
  std::unique_ptr<reprise::workloads::Collectives> collectives;
  if (launch.size > 1) {
    world = reprise::comms::make_world();
    if (w.device == "cuda") w.device = "cuda:" + std::to_string(launch.local_rank);
    if (world->rank() != 0) w.progress = nullptr;
  }
  try {
    if (world) {
      collectives = reprise::workloads::make_collectives(*world, at::Device(w.device));
      w.comm = collectives.get();
    }
    c.report = reprise::workloads::capture_workload(w);
  } catch (const std::exception& e) {
    if (!world && reprise::replay::out_of_memory(e)) throw;
    if (!world) throw UserError("capture: " + reprise::replay::error_line(e));
    std::cerr << "reprise: capture: rank " << world->rank() << ": " << reprise::replay::error_line(e) << "\n";
    world->abort(reprise::replay::out_of_memory(e) ? 3 : 2);
  }
  c.manifest = (std::filesystem::path(w.out_dir) / "manifest.json").string();
  std::string text = reprise::workloads::manifest_json(w, {c.report}, world ? world->size() : 1);
  if (world) {
    std::vector<std::string> all = world->exchange(text);
    auto m = nlohmann::ordered_json::parse(all[0]);
    m["ranks"] = nlohmann::ordered_json::array();
    for (const std::string& s : all) m["ranks"].push_back(nlohmann::ordered_json::parse(s)["ranks"][0]);
    text = m.dump(2) + "\n";
    c.reporter = world->rank() == 0;
  }
  if (c.reporter) reprise::write_text_file(c.manifest, text);
  if (world) {
    world->exchange("");
    collectives.reset();
    world.reset();
    reprise::comms::finalize();
  }
  return c;
}

void print_capture(const Captured& c, const std::string& out_dir) {
  const reprise::workloads::CaptureReport& r = c.report;
  std::vector<double> t = r.iteration_seconds;
  std::sort(t.begin(), t.end());
  std::printf("%s on %s, %d thread(s)\n", r.description.c_str(), r.device.c_str(), r.threads);
  double median = t[t.size() / 2];
  double recorded = r.recorded_iteration_seconds.empty() ? 0.0 : r.recorded_iteration_seconds.front();
  std::printf("  iteration    %.3f ms median over %zu uninstrumented steps; recorded step %.3f ms (%.2fx)\n",
              1e3 * median, t.size(), 1e3 * recorded, median > 0 ? recorded / median : 0.0);
  if (!r.without_anti_pattern_seconds.empty()) {
    std::vector<double> saving;
    for (size_t k = 0; k < r.iteration_seconds.size() && k < r.without_anti_pattern_seconds.size(); ++k)
      saving.push_back(r.iteration_seconds[k] - r.without_anti_pattern_seconds[k]);
    std::printf(
        "  without it   %.3f ms median over as many steps, interleaved: the anti-pattern costs %.3f ms a step\n",
        1e3 * reprise::median(r.without_anti_pattern_seconds), 1e3 * reprise::median(saving));
  }
  std::printf("  trace        %s\n  manifest     %s\n", (std::filesystem::path(out_dir) / r.trace).c_str(),
              c.manifest.c_str());
}

int cmd_capture(int argc, char** argv) {
  reprise::workloads::WorkloadOptions w;
  int threads = 0;
  double timeout = -1;
  po::options_description opts = capture_options(w, threads, timeout);
  auto vm = parse(argc, argv, opts, {});
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (!vm.count("workload")) throw UserError("capture: --workload NAME is required (see reprise capture --help)");
  if (w.out_dir.empty()) throw UserError("capture: --out DIR is required (see reprise capture --help)");
  if (vm.count("timeout") && !(std::isfinite(timeout) && timeout >= 0 && timeout <= 1e7))
    throw UserError("capture: --timeout must be between 0 (never) and 1e7 seconds");
  if (threads < 0 || threads > max_threads())
    throw UserError("capture: --threads must be between 0 (the default) and " + std::to_string(max_threads()));
  // The workload's time is not known before it runs, so a launch of several ranks gets a fixed, generous limit
  // (docs/cli.md): a stopped rank holds the others in a collective otherwise.
  if (!vm.count("timeout") && reprise::comms::detect_launch().size > 1) timeout = kCaptureLaunchTimeout;
  if (timeout > 0)
    watchdog().arm(timeout,
                   "capture: time limit of " + seconds_text(timeout) +
                       " reached; ending this rank, and with it the launch (--timeout S sets another, 0 none)");
  w.lean = vm.count("lean") > 0;
  w.zero = vm.count("zero") > 0;
  for (const auto& [name, list] : {std::pair<std::string, std::vector<int64_t>*>{"table-rows", &w.table_rows},
                                   {"table-lookups", &w.table_lookups},
                                   {"shards", &w.shards}})
    if (vm.count(name)) *list = reprise::cli::parse_int_list(vm[name].as<std::string>(), "capture: --" + name);
  if (threads > 0) at::set_num_threads(threads);
  reprise::cli::ProgressLine line;
  if (!vm.count("quiet")) w.progress = [&line](const std::string& s) { line.message(s); };
  Captured c = capture_on_launch(w);
  if (c.quiet_failure) return c.quiet_failure;
  if (c.reporter) print_capture(c, w.out_dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: reprise-torch replay|capture|generate|verify ... (run through `reprise COMMAND`)\n";
    return kBadInput;
  }
  std::string cmd = argv[1];
  return reprise::cli::guarded([&]() -> int {
    try {
      if (cmd == "replay") return cmd_replay(argc - 1, argv + 1);
      if (cmd == "capture") return cmd_capture(argc - 1, argv + 1);
      if (cmd == "generate") return reprise::cli::cmd_generate(argc - 1, argv + 1);
      if (cmd == "verify") return reprise::cli::cmd_verify(argc - 1, argv + 1);
      if (cmd == "calibrate") return reprise::cli::cmd_calibrate(argc - 1, argv + 1);
      if (cmd == "analyze") {
        for (int i = 2; i < argc; ++i)
          if (std::strcmp(argv[i], "--measure") == 0) return reprise::cli::cmd_analyze_measure(argc - 1, argv + 1);
        return reprise::cli::cmd_analyze_train(argc - 1, argv + 1);
      }
    } catch (const c10::Error& e) {
      // LibTorch's allocation failures are c10::Errors, not std::bad_alloc: the same exit status 3.
      if (!reprise::replay::out_of_memory(e)) throw;
      const std::string what = e.what_without_backtrace();
      std::cerr << "reprise: out of memory: " << what.substr(0, what.find('\n')) << "\n";
      return reprise::replay::exit_status(e);
    }
    std::cerr << "reprise: unknown command '" << cmd << "' (see reprise --help)\n";
    return kBadInput;
  });
}
