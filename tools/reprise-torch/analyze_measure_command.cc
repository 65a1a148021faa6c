// reprise analyze --measure: each class of findings fixed by the generators (its detector's transform) and replayed
// against the original in interleaved pairs, so the table shows a measured saving beside the estimated one. It runs
// here because it replays; the analyze library plans the fixes and reports them (docs/analyze.md, "Measured savings").
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "bundle_commands.h"
#include "cli.h"
#include "progress.h"
#include "reprise/analyze/analyze.h"
#include "reprise/analyze/evaluate.h"
#include "reprise/common/error.h"
#include "reprise/common/files.h"
#include "reprise/common/stats.h"
#include "reprise/comms/communicator.h"
#include "reprise/generators/generate.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/read.h"
#include "reprise/trace/summary.h"
#include "reprise/trace/write.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace reprise::cli {
namespace {

// The variants' folder: --keep's, or a temporary one removed when the command ends.
struct WorkDir {
  fs::path path;
  bool keep = false;
  explicit WorkDir(const std::string& keep_dir) : keep(!keep_dir.empty()) {
    path = keep ? fs::path(keep_dir) : fs::temp_directory_path() / ("reprise-measure-" + std::to_string(::getpid()));
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) throw UserError("analyze: cannot create " + path.string() + ": " + ec.message());
  }
  ~WorkDir() {
    if (!keep) remove_tree(path.string());
  }
};

// A single-quoted YAML scalar.
std::string yaml_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

// A fix replay makes itself (DetectorInfo::transform `replay: {...}`): the original on both sides, replayed on the
// fixed side without what the fix removes; no bundle of its own.
enum class ReplayFix {
  None,        // a generator step: the fixed variant is a bundle
  DataLoader,  // replay: {data_loader: none}: the original re-spends its DataLoader calls, the fixed side does not
  HostTime,    // replay: {host_time: none}: the original re-spends its host time, the fixed side none of it
  PinMemory,   // replay: {pin_memory: true}: the fixed side's host-to-device copies read pinned memory (a GPU's)
  CudaGraph,   // replay: {cuda_graph: true}: the fixed side's steps are CUDA graph launches (a GPU's)
};

ReplayFix replay_fix(const std::string& transform) {
  if (transform == analyze::kReplayWithoutDataLoader) return ReplayFix::DataLoader;
  if (transform == analyze::kReplayWithoutHostTime) return ReplayFix::HostTime;
  if (transform == analyze::kReplayWithPinnedMemory) return ReplayFix::PinMemory;
  if (transform == analyze::kReplayAsCudaGraph) return ReplayFix::CudaGraph;
  return ReplayFix::None;
}

// The same for a detector's fix (on ranks that did not plan it).
ReplayFix replay_fix_of(const std::string& detector) {
  for (const analyze::DetectorInfo& d : analyze::detectors())
    if (d.id == detector) return replay_fix(d.transform);
  return ReplayFix::None;
}

}  // namespace

int cmd_analyze_measure(int argc, char** argv) {
  po::options_description opts(
      "usage: reprise analyze TRACE --measure [options]\n\n"
      "Analyzes TRACE (a capture folder, or one rank's ET with its Kineto trace beside it), then, for each class\n"
      "of findings whose fix the generators can build (--list shows the transform), generates the fixed variant,\n"
      "replays it against the original in interleaved pairs (original, fixed, fixed, original, ...) and reports\n"
      "the measured saving per step beside the estimated one. A fix the replay makes itself (replay: {...}: the\n"
      "data loader's time or the host's gaps left out, pinned copies, a CUDA graph a step) replays the original on\n"
      "both sides. Both replay every step of the trace with the same --host-time: on one process, or, under\n"
      "mpirun/srun with as many ranks as the trace has, on every rank at once with its collectives (the step is\n"
      "the slowest rank's; the bundles go to a folder every rank reads: the system's temporary folder, or --keep's\n"
      "on several nodes).\n\noptions");
  std::vector<std::string> inputs;
  std::string json_out, html_out, keep, device, host_time;
  int pairs = 5, iterations = 3, warmup = 1, threads = 0;
  size_t top = 20;
  analyze::Options o;
  opts.add_options()("help,h", "show this help")("measure", "measure the fixes' savings (this command)")(
      "pairs", po::value(&pairs)->default_value(5), "interleaved (original, fixed) replays per class, 1 to 1000")(
      "iterations", po::value(&iterations)->default_value(3), "measured passes over the trace's steps per replay")(
      "warmup", po::value(&warmup)->default_value(1), "untimed passes first, per replay")(
      "device", po::value(&device), "replay device: cpu, cuda, cuda:N (default: the trace's)")(
      "host-time", po::value(&host_time)->default_value("default"),
      "re-spend the original's host time between ops on both sides: none, recorded, a scale, or default (the\n"
      "device's, as reprise replay does)")("threads", po::value(&threads)->default_value(0),
                                           "intra-op CPU threads (0: a capture's own count, else LibTorch's default)")(
      "only", po::value(&o.only)->multitoken()->composing(), "run only these detectors (ids from --list)")(
      "keep", po::value(&keep), "write the original and fixed bundles to this folder (replayable elsewhere)")(
      "top", po::value(&top)->default_value(20), "findings in the table")(
      "json", po::value(&json_out), "write findings and measured savings as JSON (reprise-analysis/1)")(
      "html", po::value(&html_out), "write a self-contained HTML report: measured savings, then worst windows first")(
      "quiet,q", "no table or progress")("inputs", po::value(&inputs)->multitoken(), "the trace");
  po::positional_options_description pos;
  pos.add("inputs", -1);
  auto vm = parse(argc, argv, opts, pos);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (inputs.size() != 1)
    throw UserError("analyze: --measure takes one trace (a capture folder, or one rank's ET), not " +
                    std::to_string(inputs.size()));
  if (pairs < 1 || pairs > 1000) throw UserError("analyze: --pairs must be from 1 to 1000");
  if (iterations < 1 || iterations > 100000) throw UserError("analyze: --iterations must be from 1 to 100000");
  if (warmup < 0 || warmup > 100000) throw UserError("analyze: --warmup must be from 0 to 100000");
  if (threads < 0 || threads > 4096) throw UserError("analyze: --threads must be from 0 to 4096");
  const double host_scale = host_time == "default" ? -1 : parse_host_time(host_time, "analyze");
  if (!json_out.empty()) check_output_path(json_out);
  if (!html_out.empty()) check_output_path(html_out);
  check_outputs_apart(inputs, {{"--json", json_out}, {"--html", html_out}});
  // Under a launch of several ranks every rank replays its own rank of each bundle; rank 0 analyzes, generates and
  // reports.
  std::unique_ptr<comms::Communicator> world;
  if (comms::detect_launch().size > 1) world = comms::make_world();
  const int my_rank = world ? world->rank() : 0;
  const bool speaker = my_rank == 0;
  const bool quiet = vm.count("quiet") > 0 || !speaker;
  ProgressLine line;
  auto phase = [&](const std::string& name, int64_t done, int64_t total, bool finished, const std::string& note) {
    if (quiet) return;
    Phase p;
    p.phase = name;
    p.done = done;
    p.total = total;
    p.unit = total ? "replay" : "";
    p.finished = finished;
    p.note = note;
    line.update(p);
  };
  const std::string source = fs::absolute(inputs[0]).lexically_normal().string();
  const int world_size = world ? world->size() : 1;

  // Rank 0: read, analyze, plan the fixes and generate their variants. The other ranks learn where the bundles are
  // and which variants were built (or rank 0's error, to end together).
  analyze::Analysis a;
  std::unique_ptr<WorkDir> work;
  std::vector<analyze::MeasuredFix*> built;  // rank 0: the fixes whose variant was built, in measuring order
  std::string plan;                          // "K" work folder, then one detector per line; or "E" rank 0's error
  std::optional<TraceSet> report_set;        // rank 0, with --html: the traces its report draws
  if (speaker) {
    try {
      ReadOptions ro;
      if (!quiet) ro.warn = [&line](const std::string& w) { line.message("warning: " + w); };
      phase("read", 0, 0, false, "");
      TraceSet set = load_traces(inputs, ro);
      o.plain_step_seconds = gen::capture_plain_steps(inputs);
      phase("read", 0, 0, true, std::to_string(set.ranks.size()) + " rank(s)");
      if (world && int(set.ranks.size()) != world_size)
        throw UserError("analyze: --measure under a launch of " + std::to_string(world_size) +
                        " ranks replays a trace of as many, and " + inputs[0] + " has " +
                        std::to_string(set.ranks.size()));
      if (!world && set.ranks.size() != 1)
        throw UserError("analyze: --measure replays one process, and " + inputs[0] + " has " +
                        std::to_string(set.ranks.size()) + " ranks: launch as many (mpirun -np " +
                        std::to_string(set.ranks.size()) + " reprise analyze " + inputs[0] +
                        " --measure), or give one rank's ET with its Kineto trace");
      for (const Trace& t : set.ranks)
        if (t.nodes.empty() || t.from_kineto_only)
          throw UserError("analyze: --measure replays the ET, and " + t.source + " has none (a Kineto trace alone)");
      const analyze::WindowModel classifier = analyze::default_window_model();
      o.classifier = &classifier;
      phase("analyze", 0, 0, false, "");
      a = analyze::analyze(set, o);
      a.measured = analyze::plan_fixes(a, world != nullptr);
      if (!html_out.empty()) report_set.emplace(std::move(set));
      phase("analyze", 0, 0, true,
            std::to_string(a.windows.size()) + " windows, " + std::to_string(a.findings.size()) + " findings");
      size_t measurable = 0;
      for (const analyze::MeasuredFix& m : a.measured) measurable += !m.transform.empty();
      plan = "K";
      if (measurable > 0) {
        work = std::make_unique<WorkDir>(keep);
        plan += work->path.string();
        gen::GenerateOptions go;
        go.force = true;
        go.dry_run = [](const Trace& t, const std::string& role, const std::vector<int64_t>& steps) {
          replay::dry_run(t, role, steps);
        };
        go.infer_shapes = replay::infer_shapes;
        if (!quiet) go.warn = [&line](const std::string& w) { line.message("warning: " + w); };
        phase("generate", 0, 0, false, "");
        go.out = (work->path / "original").string();
        gen::generate_from_trace(source, go);
        for (analyze::MeasuredFix& m : a.measured) {
          if (m.transform.empty()) continue;
          if (replay_fix(m.transform) != ReplayFix::None) {  // the original again, replayed otherwise: no bundle
            built.push_back(&m);
            plan += "\n" + m.detector;
            continue;
          }
          const fs::path config = work->path / (m.detector + ".yaml");
          write_text_file(config.string(), "name: fixed-" + m.detector + "\ndescription: " + inputs[0] +
                                               " without its " + m.detector +
                                               " findings (reprise analyze --measure)\nsource: " + yaml_quoted(source) +
                                               "\ntransforms:\n  - " + m.transform + "\n");
          go.out = (work->path / ("fixed-" + m.detector)).string();
          try {
            gen::generate_from_config(config.string(), go);
            built.push_back(&m);
            plan += "\n" + m.detector;
          } catch (const UserError& e) {
            m.note = std::string("the fixed variant could not be built: ") + e.what();
          }
        }
        phase("generate", 0, 0, true, std::to_string(1 + built.size()) + " bundle(s) in " + work->path.string());
      }
    } catch (const std::exception& e) {
      // Under a launch the other ranks wait for the plan: they hear rank 0's error (its first line) and end with it.
      if (!world) throw;
      const std::string what = e.what();
      plan = "E" + what.substr(0, what.find('\n'));
    }
  }
  if (world) plan = world->exchange(speaker ? plan : "")[0];
  if (plan[0] == 'E') {  // rank 0's error, which it reports
    world->exchange("");
    world.reset();
    comms::finalize();
    if (speaker) throw UserError(plan.substr(1));
    return 2;
  }
  std::vector<std::string> detectors;  // the built variants, on every rank
  fs::path work_path;
  {
    std::istringstream in(plan.substr(1));
    std::string l;
    std::getline(in, l);
    work_path = l;
    while (std::getline(in, l)) detectors.push_back(l);
  }

  if (!detectors.empty()) {
    // Each rank replays its own rank of the original and of each fixed variant.
    replay::ReplayOptions rep;
    Trace original;
    bool original_respends = false;  // the original's op times are re-spent as host time (so a variant without them
                                     // would be measured unevenly)
    try {
      const gen::Bundle original_bundle = gen::read_bundle((work_path / "original").string());
      original = gen::load_bundle_rank(original_bundle, my_rank);
      rep.device = device.empty() ? original_bundle.replay.device : device;
      rep.all_iterations = true;
      rep.warmup = warmup;
      rep.iterations = iterations;
      rep.host_time_scale = host_scale;  // both sides alike: the fixed variants keep the op times (drop closes them)
      rep.threads = threads;
      rep.comm = world.get();
      rep.trace_ranks = original_bundle.world_size;
      if (!original_bundle.capture_manifest.empty()) {
        const gen::CaptureFacts facts = gen::read_capture_manifest(
            original_bundle.capture_manifest, original_bundle.dir + "/benchmark.yaml: capture_manifest");
        if (threads == 0) rep.threads = facts.threads;  // the capture's threads, checked
        // The DataLoader calls' time as the capture timed them without the observers (data_loader's fix re-spends it)
        rep.plain_data_loader_seconds = gen::plain_data_loader_seconds(original_bundle, facts, my_rank);
      }
      // The original's step time as a replay of the bundle takes it (the capture's uninstrumented steps): the host
      // time both sides re-spend leaves out the observers' share (docs/replay.md, "Host time").
      for (const gen::RankExpectation& x : original_bundle.expected)
        if (x.rank == my_rank && !x.iteration_seconds.empty())
          rep.original_iteration_seconds = {median(x.iteration_seconds)};
      original_respends =
          !original_bundle.roles[0].timeline.empty() && replay::expected_host_time_scale(original, rep) != 0;
    } catch (const std::exception& e) {
      if (!world) throw;
      std::cerr << "reprise: analyze: rank " << my_rank << ": " << e.what() << "\n";
      world->abort(replay::exit_status(e));
    }
    // A job's step is its slowest rank's.
    auto job_step = [&](double mine) {
      if (!world) return mine;
      char text[64];
      std::snprintf(text, sizeof text, "%.17g", mine);
      double worst = 0;
      for (const std::string& x : world->exchange(text)) worst = std::max(worst, std::stod(x));
      return worst;
    };
    const int64_t total = int64_t(detectors.size()) * pairs * 2;
    int64_t done = 0;
    phase("measure", 0, total, false, "");
    for (size_t v = 0; v < detectors.size(); ++v) {
      analyze::MeasuredFix* m = speaker ? built[v] : nullptr;
      Trace fixed;                           // a generator's variant
      const Trace* fixed_trace = &original;  // the fixed side's trace: the original for a fix replay makes
      std::vector<double> orig_steps, fixed_steps, savings;
      replay::ReplayResult last_orig, last_fixed;
      replay::ReplayOptions side = rep;
      bool untimed = false;
      const ReplayFix fix = replay_fix_of(detectors[v]);
      replay::ReplayOptions fixed_side;
      if (fix == ReplayFix::HostTime && !original_respends) {  // every rank alike: nothing to take away
        if (m)
          m->note =
              "nothing to measure: the original re-spends no host time (--host-time none, or no op times); "
              "give --host-time recorded";
        done += 2 * pairs;
        continue;
      }
      if (fix == ReplayFix::PinMemory || fix == ReplayFix::CudaGraph) {  // every rank alike: the bundle says the device
        std::string on;
        try {
          on = replay::replay_device_name(original, rep);
        } catch (const std::exception& e) {
          on = e.what();
        }
        if (on.rfind("cuda", 0) != 0) {
          if (m)
            m->note = std::string("not measured: ") +
                      (fix == ReplayFix::PinMemory ? "pinned host memory" : "a CUDA graph") +
                      " is a GPU replay's (this one runs on " + on + ")";
          done += 2 * pairs;
          continue;
        }
      }
      try {
        if (fix == ReplayFix::DataLoader) side.data_loader_scale = 1;  // the original re-spends the loader's time
        // A launch-bound step's time is its dispatch: the original's calls held to their recorded host time, as it
        // dispatched them (replay's own calls are faster). The fixed side is a graph launch: no host time.
        if (fix == ReplayFix::CudaGraph) side.hold_ops = true;
        if (fix == ReplayFix::None) {
          const gen::Bundle b = gen::read_bundle((work_path / ("fixed-" + detectors[v])).string());
          fixed = gen::load_bundle_rank(b, my_rank);
          fixed_trace = &fixed;
          untimed = original_respends && b.roles[0].timeline.empty();
          if (untimed) side.host_time_scale = 0;  // the variant has no op times: neither side re-spends them
        }
        fixed_side = side;  // the same, but for what the replay's own fix changes
        fixed_side.data_loader_scale = fix == ReplayFix::DataLoader ? 0 : side.data_loader_scale;
        if (fix == ReplayFix::HostTime) fixed_side.host_time_scale = 0;
        fixed_side.pin_memory = fix == ReplayFix::PinMemory;
        fixed_side.cuda_graph = fix == ReplayFix::CudaGraph;
        for (int p = 0; p < pairs; ++p) {
          double t[2];
          for (int k = 0; k < 2; ++k) {
            const bool fix_side = (k == 1) != (p % 2 == 1);  // original first on even pairs, fixed first on odd
            replay::ReplayResult r =
                fix_side ? replay::replay_trace(*fixed_trace, fixed_side) : replay::replay_trace(original, side);
            t[fix_side] = 1e6 * median(r.iteration_seconds);  // one entry per step replayed
            (fix_side ? last_fixed : last_orig) = std::move(r);
            phase("measure", ++done, total, false, "");
          }
          t[0] = job_step(t[0]);
          t[1] = job_step(t[1]);
          orig_steps.push_back(t[0]);
          fixed_steps.push_back(t[1]);
          savings.push_back(t[0] - t[1]);
        }
      } catch (const std::exception& e) {
        // The other ranks would wait in this replay's collectives: end them all.
        if (world) {
          std::cerr << "reprise: analyze: rank " << my_rank << ": " << e.what() << "\n";
          world->abort(replay::exit_status(e));
        }
        if (!dynamic_cast<const UserError*>(&e)) throw;
        m->note = std::string("the replay failed: ") + e.what();
        done += 2 * pairs - int64_t(2 * savings.size());
        continue;
      }
      if (!m) continue;
      m->pairs = pairs;
      m->device = last_orig.device;
      m->host_time = last_orig.host_time.mode;
      m->original_us = median(orig_steps);
      m->fixed_us = median(fixed_steps);
      m->saving_us = median(savings);
      m->saving_lo_us = *std::min_element(savings.begin(), savings.end());
      m->saving_hi_us = *std::max_element(savings.begin(), savings.end());
      const analyze::MedianInterval ci = analyze::median_interval(savings);
      m->interval_lo_us = ci.lo, m->interval_hi_us = ci.hi, m->interval_coverage = ci.coverage;
      std::string note;
      auto say = [&note](const std::string& what) { note += (note.empty() ? "" : "; ") + what; };
      const int64_t dropped = last_orig.ops_selected - last_fixed.ops_selected;
      if (dropped > 0) say(std::to_string(dropped) + " op(s) dropped per pass" + (world ? " on rank 0" : ""));
      if (last_orig.collectives_selected > last_orig.collectives_replayed)
        say("collectives skipped (one process): their time is not in it");
      if (last_orig.coverage < 1 || last_fixed.coverage < 1)
        say("not every op replayed (coverage " + std::to_string(int(100 * last_orig.coverage)) + "% and " +
            std::to_string(int(100 * last_fixed.coverage)) + "%)");
      if (untimed) say("no host time re-spent: the transform leaves the variant without the original's op times");
      if (fix == ReplayFix::DataLoader && last_orig.host_time.data_loader_seconds <= 0)
        say("nothing re-spent: the trace's DataLoader calls in the replayed steps have no times");
      else if (fix == ReplayFix::DataLoader)
        say("the original re-spends its DataLoader calls' " + human_seconds(last_orig.host_time.data_loader_seconds) +
            " a step; the fixed side leaves them out");
      else if (fix == ReplayFix::HostTime)
        say("the original re-spends " + human_seconds(last_orig.host_time.seconds) +
            " of host time a step, the fixed side none (each op still dispatched)");
      else if (fix == ReplayFix::CudaGraph && !last_fixed.cuda_graph)
        say("the fixed side could not be captured, so it ran op by op too: " + last_fixed.cuda_graph_refused);
      else if (fix == ReplayFix::CudaGraph)
        say("the fixed side replays each step as one CUDA graph launch; the original re-spends " +
            human_seconds(last_orig.host_time.seconds) + " of host time a step");
      else if (fix == ReplayFix::PinMemory)
        say("the fixed side copies " + std::to_string(last_fixed.pinned_copies) +
            " host-to-device tensor(s) a step from pinned memory, non-blocking" +
            (last_fixed.pageable_copies > 0
                 ? ", " + std::to_string(last_fixed.pageable_copies) + " left pageable (made in the step)"
                 : std::string()));
      m->note = note;
    }
    phase("measure", done, total, true,
          std::to_string(detectors.size()) + " fix(es), " + std::to_string(pairs) + " pair(s) each, on " +
              (rep.device.empty() ? "cpu" : rep.device) +
              (world ? ", " + std::to_string(world_size) + " ranks" : std::string()));
  }
  if (world) {
    world->exchange("");  // every rank is done with the bundles before rank 0 removes them
    world.reset();
    comms::finalize();
  }
  if (!speaker) return 0;
  if (!json_out.empty()) write_text_file(json_out, analyze::analysis_json(a));
  if (report_set) write_text_file(html_out, analyze::analysis_html(a, *report_set));
  if (vm.count("quiet")) return 0;
  std::FILE* table = report_stream({json_out, html_out});  // stderr when a report goes to standard output
  analyze::print_analysis(table, a, top);
  if (a.findings.empty()) std::fprintf(table, "nothing to measure: no findings\n");
  if (!json_out.empty()) std::fprintf(table, "json: %s\n", json_out.c_str());
  if (report_set) std::fprintf(table, "report: %s\n", html_out.c_str());
  return 0;
}

}  // namespace reprise::cli
