// A replay as a launcher starts it: which trace this process replays, what a capture manifest adds, the world its
// collectives run over, and the results of every rank gathered on rank 0.
#include <ATen/Context.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "comm_runtime.h"
#include "preflight.h"
#include "progress.h"
#include "reprise/common/clock.h"
#include "reprise/common/error.h"
#include "reprise/common/files.h"
#include "reprise/common/stats.h"
#include "reprise/comms/communicator.h"
#include "reprise/generators/bundle.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/output.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"
#include "time_limit.h"

namespace reprise::replay {
namespace {

// Under a launcher each process replays its own rank's trace (rank-N, else the N-th file); one trace serves every
// rank of a launch of its world's size, or of any size when it comes from a one-rank run (each replays a copy). A
// single process replays the rank asked for, else the only or first one.
const Trace& pick_trace(const TraceSet& set, const LaunchOptions& job, const comms::Launch& launch) {
  const int files = static_cast<int>(set.ranks.size());
  const bool launched = launch.size > 1;
  if (launched && files > 1 && files != launch.size)
    throw UserError(job.trace + ": " + std::to_string(files) + " rank traces, but the launch has " +
                    std::to_string(launch.size) + " ranks: launch " + std::to_string(files) + " (" +
                    comms::launch_command(launch, files) + "), or replay one rank in a single process");
  if (launched && files == 1) {
    const int world = trace_world_size(set.ranks.front(), 1);
    if (world != 1 && world != launch.size)
      throw UserError(job.trace + ": one rank's trace of a " + std::to_string(world) +
                      "-rank run, but the launch has " + std::to_string(launch.size) + " ranks: launch " +
                      std::to_string(world) + " (" + comms::launch_command(launch, world) +
                      ") with the trace of every rank, or replay it in a single process");
  }
  const int64_t rank = launched ? launch.rank : std::max<int64_t>(job.rank, 0);
  const bool by_position = launched || job.rank < 0;
  for (const Trace& t : set.ranks)
    if (t.rank == rank) return t;
  if (by_position && rank < files) return set.ranks[static_cast<size_t>(rank)];
  if (by_position && files == 1) return set.ranks.front();
  throw UserError(job.trace + ": no trace for rank " + std::to_string(rank) + " (it has " + std::to_string(files) +
                  " rank(s))");
}

// A capture folder's manifest holds the original (uninstrumented) iteration times, peak memory and thread count.
void read_manifest(const LaunchOptions& job, int64_t rank, ReplayOptions& o) {
  const std::string manifest = (std::filesystem::path(job.trace) / "manifest.json").string();
  if (!std::filesystem::is_directory(job.trace) || !std::filesystem::exists(manifest)) return;
  const gen::CaptureFacts m = gen::read_capture_manifest(read_text_file(manifest), manifest);
  const int64_t r = std::max<int64_t>(rank, 0);
  if (auto t = m.iteration_seconds.find(r); t != m.iteration_seconds.end() && !t->second.empty())
    o.original_iteration_seconds = {median(t->second)};
  if (auto l = m.data_loader_seconds.find(r); l != m.data_loader_seconds.end() && !l->second.empty())
    o.plain_data_loader_seconds = median(l->second);
  if (auto p = m.peak_memory_bytes.find(r); p != m.peak_memory_bytes.end()) o.original_peak_memory_bytes = p->second;
  if (job.threads_from_manifest) o.threads = m.threads;
}

int64_t files_to_write(const LaunchOptions& job) { return (job.out.empty() ? 0 : 1) + (job.timeline.empty() ? 0 : 1); }

LaunchReport replay_alone(const Trace& trace, const LaunchOptions& job, const ReplayOptions& o) {
  LaunchReport report;
  report.result = replay_trace(trace, o);
  if (files_to_write(job) == 0) return report;
  detail::PhaseProgress progress(o.progress);
  progress.begin("write", files_to_write(job), "file");
  if (!job.out.empty()) write_result_json(report.result, job.out);
  if (!job.timeline.empty()) write_timeline(report.result, trace, job.timeline);
  progress.end();
  return report;
}

// Everything to rank 0: one results file, one timeline with a process per rank, the per-rank medians.
void gather(const Trace& trace, const LaunchOptions& job, const ReplayOptions& o, comms::Communicator& world,
            LaunchReport& report) {
  std::vector<std::string> all = world.exchange(result_json(report.result));
  std::vector<std::string> timelines;
  if (!job.timeline.empty()) timelines = world.exchange(timeline_json(report.result, trace));
  if (!report.reporter) return;
  const std::string merged = merged_result_json(all);
  if (files_to_write(job) > 0) {
    detail::PhaseProgress progress(o.progress);
    progress.begin("write", files_to_write(job), "file");
    if (!job.out.empty()) write_text_file(job.out, merged);
    if (!job.timeline.empty()) write_merged_timeline(timelines, job.timeline);
    progress.end();
  }
  auto j = nlohmann::json::parse(merged);
  for (auto& e : j["ranks"]) report.rank_median_seconds.push_back(e["median_iteration_seconds"].get<double>());
  report.slowest_rank_seconds = j["median_iteration_seconds_max_over_ranks"].get<double>();
}

void check_outputs(const LaunchOptions& job) {
  if (!job.check_output) return;
  check_outputs_apart({job.trace}, {{"--out", job.out}, {"--timeline", job.timeline}});
  if (!job.out.empty()) job.check_output(job.out);
  if (!job.timeline.empty()) job.check_output(job.timeline);
}

// What every rank must pass before any work, shared: a refusal found on one rank (rank 0's output paths) ends every
// rank together instead of leaving the others waiting in a collective. The ranks also take the longest time limit
// any of them derived, so the limit the results report is the one that holds.
void agree_before_work(comms::Communicator& world, const std::function<void()>& check, ReplayOptions& o,
                       double armed_at) {
  std::string mine = "L" + std::to_string(o.time_limit.seconds);
  try {
    check();
  } catch (const UserError& e) {
    mine = std::string("E") + e.what();
  }
  double longest = o.time_limit.seconds;
  for (const std::string& s : world.exchange(mine)) {
    if (s[0] == 'E') throw detail::AgreedFailure(s.substr(1));
    longest = std::max(longest, std::stod(s.substr(1)));
  }
  if (longest > o.time_limit.seconds && o.time_limit.from != "given") {
    o.time_limit.seconds = longest;
    if (o.arm_time_limit) o.arm_time_limit(longest - (now_seconds() - armed_at), o.time_limit);
  }
}

LaunchReport replay_ranks(const Trace& trace, const LaunchOptions& job, ReplayOptions o,
                          std::unique_ptr<comms::Communicator> world, const std::string& launcher, double armed_at) {
  LaunchReport report;
  report.world_size = world->size();
  report.rank = world->rank();
  report.reporter = world->rank() == 0;
  // A one-rank run's trace under a launch: each rank replays a copy, its collectives over a world of its own.
  const bool replicated = trace_world_size(trace, o.trace_ranks) == 1;
  std::unique_ptr<comms::Communicator> self;
  try {
    agree_before_work(
        *world,
        [&] {
          if (report.reporter) check_outputs(job);
          detail::require_execution_trace(trace);
        },
        o, armed_at);
    if (replicated) self = comms::make_self();
    o.comm = replicated ? self.get() : world.get();
    report.result = replay_trace(trace, o);
  } catch (const detail::AgreedFailure& e) {
    self.reset();
    world.reset();
    comms::finalize();
    if (report.reporter) throw UserError(e.what());
    report.quiet_failure = 2;
    return report;
  } catch (const std::exception& e) {
    // The other ranks would wait for this one forever: end them all.
    std::cerr << "reprise: rank " << world->rank() << ": " << (out_of_memory(e) ? "out of memory: " : "")
              << error_line(e) << "\n";
    world->abort(exit_status(e));
  }
  ReplayResult& r = report.result;
  r.rank = world->rank();
  r.launcher = launcher;
  if (trace.rank >= 0 && trace.rank != r.rank) r.trace_rank = trace.rank;
  r.replicated = replicated;
  gather(trace, job, o, *world, report);
  world->exchange("");  // nobody finalizes while rank 0 is still writing
  self.reset();
  world.reset();
  comms::finalize();
  return report;
}

// A bundle: only this rank's role is read, and its manifest gives the world, the defaults and the original times.
Trace bundle_trace(const LaunchOptions& job, const comms::Launch& launch, ReplayOptions& o) {
  const gen::Bundle b = gen::read_bundle(job.trace);
  if (launch.size > 1 && launch.size != b.world_size)
    throw UserError(job.trace + ": a bundle of " + std::to_string(b.world_size) + " rank(s), but the launch has " +
                    std::to_string(launch.size) + ": launch " + std::to_string(b.world_size) + " (" +
                    comms::launch_command(launch, b.world_size) + ")" +
                    (b.world_size == 1 ? ", or run it in a single process" : ""));
  const int64_t rank = launch.size > 1 ? launch.rank : std::max<int64_t>(job.rank, 0);
  if (!job.chosen.device) o.device = b.replay.device;
  if (!job.chosen.iterations) o.iterations = b.replay.iterations;
  if (!job.chosen.warmup) o.warmup = b.replay.warmup;
  o.trace_ranks = b.world_size;
  for (const gen::RankExpectation& x : b.expected)
    if (x.rank == rank && !x.iteration_seconds.empty()) o.original_iteration_seconds = {median(x.iteration_seconds)};
  if (!b.capture_manifest.empty()) {
    const gen::CaptureFacts facts =
        gen::read_capture_manifest(b.capture_manifest, b.dir + "/benchmark.yaml: capture_manifest");
    if (job.threads_from_manifest) o.threads = facts.threads;
    o.plain_step_seconds = gen::plain_step_seconds(b, facts, rank);
    o.plain_data_loader_seconds = gen::plain_data_loader_seconds(b, facts, rank);
  }
  ReadOptions ro;
  ro.warn = job.warn;
  return gen::load_bundle_rank(b, rank, ro);
}

}  // namespace

LaunchReport replay_launch(const LaunchOptions& job) {
  comms::Launch launch = comms::detect_launch();
  if (launch.size <= 1) check_outputs(job);  // a launch's rank 0 checks them once its world can hear it
  load_op_libraries(job.libraries);
  ReplayOptions o = job.replay;
  TraceSet set;
  if (gen::is_bundle(job.trace)) {
    set.ranks.push_back(bundle_trace(job, launch, o));  // checked against the launch before MPI starts
  } else {
    ReadOptions ro;
    ro.warn = job.warn;
    set = load_traces({job.trace}, ro);
    const Trace& picked = pick_trace(set, job, launch);
    read_manifest(job, picked.rank, o);
    o.trace_ranks = static_cast<int>(set.ranks.size());
    if (&picked != &set.ranks.front()) std::swap(set.ranks.front(), set.ranks[&picked - set.ranks.data()]);
  }
  const Trace& trace = set.ranks.front();
  if (launch.size > 1) {
    // Armed before MPI starts: from here on a rank can wait for another.
    const double armed_at = now_seconds();
    if (o.time_limit.seconds < 0) {
      o.time_limit = detail::derived_time_limit(trace, o);
      if (o.arm_time_limit) o.arm_time_limit(o.time_limit.seconds, o.time_limit);
    }
    std::unique_ptr<comms::Communicator> world = comms::make_world();
    if (world->rank() != 0) o.progress = nullptr;  // one voice
    if (o.device.empty() || o.device == "cuda")    // each local rank takes its own GPU
      if (at::hasCUDA()) o.device = "cuda:" + std::to_string(launch.local_rank);
    return replay_ranks(trace, job, o, std::move(world), launch.launcher, armed_at);
  }
  if (o.time_limit.seconds < 0) o.time_limit = {0, "single process"};
  // A single process replays collectives when the trace's world is one rank; a rank of a larger run replays its
  // compute only (the summary says why its collectives were skipped).
  std::unique_ptr<comms::Communicator> self;
  if (trace_world_size(trace, o.trace_ranks) == 1 && o.device != "meta") {
    self = comms::make_self();
    o.comm = self.get();
  }
  return replay_alone(trace, job, o);
}

int exit_status(const std::exception& e) {
  if (out_of_memory(e)) return 3;
  return dynamic_cast<const UserError*>(&e) ? 2 : 1;
}

std::string error_line(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  const std::string what = c10 ? c10->what_without_backtrace() : e.what();
  return what.substr(0, what.find('\n'));
}

// LibTorch reports a failed allocation as c10::OutOfMemoryError on GPUs and as a plain c10::Error on the CPU
// ("DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes").
bool out_of_memory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  return c10 && (c10->msg().find("can't allocate memory") != std::string::npos ||
                 c10->msg().find("out of memory") != std::string::npos);
}

}  // namespace reprise::replay
