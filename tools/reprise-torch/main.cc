// reprise-torch: the subcommands that link LibTorch (replay). `reprise replay ...` runs this binary, so tools
// that only read traces do not pay LibTorch's start-up (about 0.5 s and 165 MB).
#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <boost/program_options.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli.h"
#include "reprise/comms/communicator.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"
#include "reprise/workloads/workloads.h"

namespace po = boost::program_options;

namespace {

using reprise::cli::kBadInput;

using reprise::UserError;
using reprise::cli::parse;

int cmd_replay(int argc, char** argv) {
  po::options_description opts(
      "usage: reprise replay TRACE [options]\n\n"
      "Replays one iteration of a trace op for op through the LibTorch dispatcher, with the recorded shapes,\n"
      "dtypes, strides and views, and measures it. TRACE is an ET file, a folder of per-rank files or an\n"
      "archive; the rank replayed is --rank, else the launcher's rank (mpirun/srun/torchrun), else 0.\n"
      "Under mpirun/srun each rank replays its own trace and the collectives run over MPI (CPU) or NCCL (GPU, one\n"
      "GPU per local rank); rank 0 writes the results of every rank. A single process replays the collectives of\n"
      "one-rank traces and skips those of larger ones.\n\noptions");
  std::string trace_path, device, out, timeline;
  int64_t iteration = -1, rank = -1, max_ops = 0;
  double timeout = 0;
  int warmup = 1, iterations = 5, threads = 0;
  uint64_t seed = 0;
  opts.add_options()("help,h", "show this help")(
      "device", po::value(&device), "cpu, cuda, cuda:N or meta (shapes only); default: the trace's device")(
      "iteration", po::value(&iteration), "replay ProfilerStep#N (default: the first complete step)")(
      "all-iterations", "replay every ProfilerStep of the trace, in order")(
      "warmup", po::value(&warmup)->default_value(1), "untimed iterations before measuring")(
      "iterations", po::value(&iterations)->default_value(5), "measured iterations")(
      "per-op", "time each op in a second pass (the iteration times are not perturbed)")(
      "out", po::value(&out), "write the results as JSON to this file")(
      "timeline", po::value(&timeline), "write a Chrome/Perfetto trace of the per-op pass to this file")(
      "strict", "fail (exit 1) when any selected op was not replayed")("threads", po::value(&threads)->default_value(0),
                                                                       "intra-op CPU threads (0: LibTorch's default)")(
      "rank", po::value(&rank), "which rank of a multi-rank TRACE to replay")(
      "seed", po::value(&seed)->default_value(0), "seed of the generated input data")(
      "max-ops", po::value(&max_ops)->default_value(0), "replay only the first N ops of each step (0: all)")(
      "timeout", po::value(&timeout)->default_value(0), "abort every rank after this many seconds (0: never)")(
      "quiet,q", "no progress lines")("trace", po::value(&trace_path), "the trace");
  po::positional_options_description pos;
  pos.add("trace", 1);
  auto vm = parse(argc, argv, opts, pos);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (trace_path.empty()) throw UserError("replay: no trace given (see reprise replay --help)");
  bool quiet = vm.count("quiet") > 0;
  if (timeout > 0) {
    // A rank that stops making progress must not hang the job: abort every rank after the limit.
    std::thread([timeout] {
      std::this_thread::sleep_for(std::chrono::duration<double>(timeout));
      std::cerr << "reprise: replay: --timeout " << timeout << " s reached; aborting every rank\n";
      std::_Exit(124);
    }).detach();
  }

  reprise::ReadOptions ro;
  if (!quiet) ro.warn = [](const std::string& w) { std::cerr << "reprise: warning: " << w << "\n"; };
  reprise::TraceSet set = reprise::load_traces({trace_path}, ro);

  // The launch: mpirun/srun give one process per rank; each replays its own trace (rank-N, or the N-th file).
  reprise::comms::Launch launch = reprise::comms::detect_launch();
  std::unique_ptr<reprise::comms::Communicator> world;
  if (launch.size > 1) world = reprise::comms::make_world();
  const int64_t my_rank = world ? world->rank() : (rank >= 0 ? rank : 0);
  const reprise::Trace* trace = nullptr;
  if (world && set.ranks.size() > 1 && static_cast<int>(set.ranks.size()) != world->size())
    throw UserError(trace_path + ": " + std::to_string(set.ranks.size()) + " rank traces, but the launch has " +
                    std::to_string(world->size()) + " ranks");
  for (const reprise::Trace& t : set.ranks)
    if (t.rank == my_rank) trace = &t;
  if (!trace && static_cast<size_t>(my_rank) < set.ranks.size() && (world || rank < 0)) trace = &set.ranks[my_rank];
  if (!trace && set.ranks.size() == 1 && (world || rank < 0)) trace = &set.ranks.front();
  if (!trace)
    throw UserError(trace_path + ": no trace for rank " + std::to_string(my_rank) + " (it has " +
                    std::to_string(set.ranks.size()) + " rank(s))");
  if (world && !quiet && world->rank() != 0) quiet = true;  // one voice: rank 0 prints progress

  reprise::replay::ReplayOptions o;
  // A capture folder's manifest holds the original (uninstrumented) iteration times and thread count.
  std::string manifest = (std::filesystem::path(trace_path) / "manifest.json").string();
  if (std::filesystem::is_directory(trace_path) && std::filesystem::exists(manifest)) {
    try {
      auto m = nlohmann::json::parse(std::ifstream(manifest));
      for (auto& r : m.at("ranks"))
        if (r.at("rank").get<int64_t>() == std::max<int64_t>(trace->rank, 0)) {
          std::vector<double> t = r.at("iteration_seconds").get<std::vector<double>>();
          if (!t.empty()) {
            std::sort(t.begin(), t.end());
            o.original_iteration_seconds = {t[t.size() / 2]};
          }
          o.original_peak_memory_bytes = r.value("peak_memory_bytes", int64_t{-1});
        }
      if (!vm.count("threads") || vm["threads"].defaulted()) threads = m.value("threads", 0);
    } catch (const std::exception& e) {
      throw UserError(manifest + ": not a capture manifest (" + std::string(e.what()) + ")");
    }
  }
  o.device = device;
  o.iteration = iteration;
  o.all_iterations = vm.count("all-iterations") > 0;
  o.warmup = warmup;
  o.iterations = iterations;
  o.per_op = vm.count("per-op") > 0;
  o.timeline = !timeline.empty();
  const bool strict = vm.count("strict") > 0;
  o.threads = threads;
  o.seed = seed;
  o.max_ops = max_ops;
  if (!quiet) o.progress = [](const std::string& s) { std::cerr << "reprise: " << s << "\n"; };
  o.trace_ranks = static_cast<int>(set.ranks.size());
  std::unique_ptr<reprise::comms::Communicator> self;
  if (world) {
    o.comm = world.get();
    if (o.device.empty() || o.device == "cuda")  // each local rank takes its own GPU
      if (at::hasCUDA()) o.device = "cuda:" + std::to_string(launch.local_rank);
  } else {
    // A single process replays collectives when the trace's world is one rank; a rank of a larger run replays its
    // compute only (the summary says why its collectives were skipped).
    int trace_world = reprise::replay::trace_world_size(*trace, static_cast<int>(set.ranks.size()));
    if (trace_world == 1 && o.device != "meta") {
      self = reprise::comms::make_self();
      o.comm = self.get();
    }
  }
  reprise::replay::ReplayResult r;
  try {
    r = reprise::replay::replay_trace(*trace, o);
  } catch (const std::exception& e) {
    if (!world) throw;
    std::cerr << "reprise: rank " << world->rank() << ": " << e.what() << "\n";
    world->abort(2);
  }
  if (world) {
    // Everything to rank 0: one results file, one timeline with a process per rank.
    std::vector<std::string> all = world->exchange(reprise::replay::result_json(r));
    std::vector<std::string> timelines;
    if (!timeline.empty()) timelines = world->exchange(reprise::replay::timeline_json(r, *trace));
    if (world->rank() == 0) {
      const std::string merged = reprise::replay::merged_result_json(all);
      if (!out.empty()) reprise::write_text_file(out, merged);
      if (!timeline.empty()) reprise::replay::write_merged_timeline(timelines, timeline);
      reprise::replay::print_summary(r, stdout);
      auto j = nlohmann::json::parse(merged);
      std::printf("  ranks        %d; iteration median per rank:", world->size());
      for (auto& e : j["ranks"]) std::printf(" %.3f ms", 1e3 * e["median_iteration_seconds"].get<double>());
      std::printf("\n  slowest rank %.3f ms median per iteration\n",
                  1e3 * j["median_iteration_seconds_max_over_ranks"].get<double>());
      if (!out.empty()) std::cout << "results: " << out << " (all ranks)\n";
      if (!timeline.empty()) std::cout << "timeline: " << timeline << " (all ranks; open in https://ui.perfetto.dev)\n";
    }
    world->exchange("");
    bool strict_fail = strict && r.ops_replayed < r.ops_selected;
    world.reset();
    reprise::comms::finalize();
    if (strict_fail) {
      std::cerr << "reprise: --strict: rank " << my_rank << ": " << (r.ops_selected - r.ops_replayed)
                << " selected op(s) not replayed\n";
      return 1;
    }
    return 0;
  }
  if (!out.empty()) reprise::replay::write_result_json(r, out);
  if (!timeline.empty()) reprise::replay::write_timeline(r, *trace, timeline);
  reprise::replay::print_summary(r, stdout);
  if (!out.empty()) std::cout << "results: " << out << "\n";
  if (!timeline.empty()) std::cout << "timeline: " << timeline << " (open in https://ui.perfetto.dev)\n";
  if (strict && r.ops_replayed < r.ops_selected) {
    std::cerr << "reprise: --strict: " << (r.ops_selected - r.ops_replayed) << " selected op(s) not replayed";
    if (!r.skipped.empty()) std::cerr << " (first: " << r.skipped.front().op << ": " << r.skipped.front().reason << ")";
    std::cerr << "\n";
    return 1;
  }
  return 0;
}

int cmd_capture(int argc, char** argv) {
  std::string workloads;
  for (auto& [name, help] : reprise::workloads::workload_list()) workloads += "  " + name + ": " + help + "\n";
  po::options_description opts(
      "usage: reprise capture --workload NAME --out DIR [options]\n\n"
      "Runs a built-in LibTorch training workload: warm-up steps, timed steps without the observer (the original\n"
      "iteration time that replay is compared with), then recorded steps. Writes DIR/rank-N.json.gz (PyTorch ET\n"
      "1.1.1) and DIR/manifest.json; `reprise replay DIR` then reports replay/original.\n\nworkloads:\n" +
      workloads + "\noptions");
  reprise::workloads::WorkloadOptions w;
  int threads = 0;
  opts.add_options()("help,h", "show this help")("workload", po::value(&w.name)->default_value("mlp"),
                                                 "mlp, dlrm or gpt")("out", po::value(&w.out_dir), "output folder")(
      "device", po::value(&w.device)->default_value("cpu"), "cpu, cuda or cuda:N")(
      "batch", po::value(&w.batch)->default_value(0), "batch size (per rank)")(
      "hidden", po::value(&w.hidden)->default_value(0), "hidden size")(
      "layers", po::value(&w.layers)->default_value(0), "layers")("tables", po::value(&w.tables)->default_value(0),
                                                                  "dlrm: embedding tables")(
      "rows", po::value(&w.rows)->default_value(0), "dlrm: rows per table")("dim", po::value(&w.dim)->default_value(0),
                                                                            "dlrm: embedding dimension")(
      "lookups", po::value(&w.lookups)->default_value(0), "dlrm: lookups per sample and table")(
      "seq", po::value(&w.seq)->default_value(0), "gpt: sequence length")(
      "heads", po::value(&w.heads)->default_value(0), "gpt: attention heads")(
      "vocab", po::value(&w.vocab)->default_value(0), "gpt: vocabulary size")(
      "warmup", po::value(&w.warmup)->default_value(2), "untimed steps first")(
      "steps", po::value(&w.steps)->default_value(5), "timed steps without the observer")(
      "record", po::value(&w.record)->default_value(1), "recorded steps")(
      "threads", po::value(&threads)->default_value(0), "intra-op CPU threads (0: LibTorch's default)")(
      "seed", po::value(&w.seed)->default_value(0), "random seed")(
      "lean",
      "record ops called by other ops without their arguments (a smaller trace and a little less\n"
      "overhead on tiny ops; replay issues the outer ops only)")("quiet,q", "no progress lines");
  auto vm = parse(argc, argv, opts, {});
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (w.out_dir.empty()) throw UserError("capture: --out DIR is required (see reprise capture --help)");
  w.lean = vm.count("lean") > 0;
  if (threads > 0) at::set_num_threads(threads);
  if (!vm.count("quiet")) w.progress = [](const std::string& s) { std::cerr << "reprise: " << s << "\n"; };
  // Under mpirun/srun every rank runs the workload with its collectives over MPI (NCCL on GPUs).
  reprise::comms::Launch launch = reprise::comms::detect_launch();
  std::unique_ptr<reprise::comms::Communicator> world;
  std::unique_ptr<reprise::workloads::Collectives> collectives;
  if (launch.size > 1) {
    world = reprise::comms::make_world();
    if (w.device == "cuda") w.device = "cuda:" + std::to_string(launch.local_rank);
    if (world->rank() != 0) w.progress = nullptr;
  }
  reprise::workloads::CaptureReport r;
  try {
    if (world) {
      collectives = reprise::workloads::make_collectives(*world, at::Device(w.device));
      w.comm = collectives.get();
    }
    r = reprise::workloads::capture_workload(w);
  } catch (const std::exception& e) {
    if (!world) throw UserError(std::string("capture: ") + e.what());
    std::cerr << "reprise: capture: rank " << world->rank() << ": " << e.what() << "\n";
    world->abort(2);
  }
  std::string manifest = (std::filesystem::path(w.out_dir) / "manifest.json").string();
  std::string text = reprise::workloads::manifest_json(w, {r}, world ? world->size() : 1);
  if (world) {
    // One manifest with every rank's report, written by rank 0.
    std::vector<std::string> all = world->exchange(text);
    auto m = nlohmann::ordered_json::parse(all[0]);
    m["ranks"] = nlohmann::ordered_json::array();
    for (const std::string& s : all) m["ranks"].push_back(nlohmann::ordered_json::parse(s)["ranks"][0]);
    text = m.dump(2) + "\n";
  }
  if (!world || world->rank() == 0) reprise::write_text_file(manifest, text);
  if (world) {
    world->exchange("");
    bool quiet_rank = world->rank() != 0;
    collectives.reset();
    world.reset();
    reprise::comms::finalize();
    if (quiet_rank) return 0;
  }
  std::vector<double> t = r.iteration_seconds;
  std::sort(t.begin(), t.end());
  std::printf("%s on %s, %d thread(s)\n", r.description.c_str(), r.device.c_str(), r.threads);
  double median = t[t.size() / 2];
  double recorded = r.recorded_iteration_seconds.empty() ? 0.0 : r.recorded_iteration_seconds.front();
  std::printf("  iteration    %.3f ms median over %zu uninstrumented steps; recorded step %.3f ms (%.2fx)\n",
              1e3 * median, t.size(), 1e3 * recorded, median > 0 ? recorded / median : 0.0);
  std::printf("  trace        %s\n  manifest     %s\n", (std::filesystem::path(w.out_dir) / r.trace).c_str(),
              manifest.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: reprise-torch replay|capture ... (run through `reprise replay` / `reprise capture`)\n";
    return kBadInput;
  }
  std::string cmd = argv[1];
  return reprise::cli::guarded([&]() -> int {
    if (cmd == "replay") return cmd_replay(argc - 1, argv + 1);
    if (cmd == "capture") return cmd_capture(argc - 1, argv + 1);
    std::cerr << "reprise: unknown command '" << cmd << "' (see reprise --help)\n";
    return kBadInput;
  });
}
