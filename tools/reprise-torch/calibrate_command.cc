// reprise calibrate: microbenchmarks (a sweep trace replayed op by op) or earlier replays' per-op times, fitted into a
// calibration file for `reprise predict`.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <malloc.h>
#include <torch/version.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <thread>

#include "bundle_commands.h"
#include "cli.h"
#include "progress.h"
#include "reprise/common/clock.h"
#include "reprise/common/device_name.h"
#include "reprise/common/stats.h"
#include "reprise/comms/communicator.h"
#include "reprise/comms/sweep.h"
#include "reprise/device/device.h"
#include "reprise/predict/calibration.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/output.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"

namespace po = boost::program_options;

namespace reprise::cli {
namespace {

using namespace reprise::predict;

// A replay's op times (node id, seconds) as samples: by node index (Trace::find), with their host parts (a GPU's,
// in the same order; empty when not measured).
std::vector<OpSample> samples_of(const Trace& t, const std::vector<std::pair<int64_t, double>>& times,
                                 const std::vector<double>& host_times, double fresh_page_seconds_per_byte) {
  std::vector<std::pair<uint32_t, double>> measured;
  std::vector<double> host;
  for (size_t k = 0; k < times.size(); ++k)
    if (const uint32_t i = t.find(times[k].first); i != kNone32) {
      measured.emplace_back(i, times[k].second);
      if (k < host_times.size()) host.push_back(host_times[k]);
    }
  return samples_from_trace(t, measured, host, fresh_page_seconds_per_byte);
}

// How long `f()` takes, in seconds.
template <typename F>
double seconds_of(F&& f) {
  const double t0 = now_seconds();
  f();
  return now_seconds() - t0;
}

// What a fresh page costs a byte on this CPU, as an op pays it: a 64 MiB tensor made, filled and freed (under
// replay's allocator settings, which the caller installs, glibc maps it afresh and unmaps it, so the kernel faults in
// and zeroes every page) against the same fill of a tensor kept, alternating, the difference of the medians of 9 each
// over the bytes. (A raw mmap written by memset read 0.55-0.59 ns a byte where tensors read 0.43-0.45: the figure is
// the tensors'.)
double fresh_page_seconds_per_byte() {
  constexpr int64_t n = int64_t{16} << 20;  // floats
  const at::Tensor kept = at::empty({n});
  kept.fill_(0);
  std::vector<double> fresh, reused;
  for (int k = 0; k < 11; ++k) {
    const double a = seconds_of([] { at::empty({n}).fill_(1); });
    const double b = seconds_of([&kept] { kept.fill_(1); });
    if (k >= 2) fresh.push_back(a), reused.push_back(b);
  }
  return std::max(0.0, (median(fresh) - median(reused)) / static_cast<double>(n * 4));
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// This CPU's caches (L2 and up, as Linux lists cpu0's: "l2", "l3") and memory, for the cluster it is described as:
// predict's embedding model asks whether a table fits in the largest cache.
void describe_this_cpu(DeviceSpec& d) {
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_in(dir + "level"), type_in(dir + "type"), size_in(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_in >> level) || !(type_in >> type) || !(size_in >> size)) break;
    if (level < 2 || type == "Instruction" || size.empty()) continue;
    double bytes = std::strtod(size.c_str(), nullptr);
    const char unit = size.back();
    bytes *= unit == 'K' ? 1024.0 : unit == 'M' ? 1024.0 * 1024 : unit == 'G' ? 1024.0 * 1024 * 1024 : 1;
    if (bytes > 0) d.caches["l" + std::to_string(level)] = bytes;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) d.memory_bytes = static_cast<double>(pages) * static_cast<double>(page);
}

// Samples from replays written with --per-op: each rank's op times against its own trace.
std::vector<OpSample> samples_from_replays(const std::vector<std::string>& files, std::string& source,
                                           int& concurrent_ranks, double fresh_page_seconds_per_byte) {
  std::vector<OpSample> out;
  for (const std::string& f : files) {
    for (const OpTimes& ot : read_op_times(f)) {
      concurrent_ranks = std::max(concurrent_ranks, static_cast<int>(ot.world_size));
      if (ot.trace.empty()) throw UserError(f + ": the results do not name their trace");
      // The trace as the replay named it: relative to where it ran, else to the results file's folder.
      std::string trace = ot.trace;
      const std::filesystem::path beside = std::filesystem::path(f).parent_path() / trace;
      if (!std::filesystem::exists(trace) && std::filesystem::path(trace).is_relative() &&
          std::filesystem::exists(beside))
        trace = beside.string();
      TraceSet set = load_traces({trace});
      const Trace* t = nullptr;
      for (const Trace& x : set.ranks)
        if (x.rank == ot.rank || set.ranks.size() == 1) t = &x;
      if (!t) throw UserError(f + ": " + ot.trace + " has no rank " + std::to_string(ot.rank));
      std::vector<OpSample> s = samples_of(*t, ot.in_order, ot.host_in_order, fresh_page_seconds_per_byte);
      out.insert(out.end(), s.begin(), s.end());
    }
    source += (source.empty() ? "" : ", ") + f;
  }
  return out;
}

// Under a launcher of several ranks: each collective a replay issues, swept over message sizes at the launch's
// world size on its backend (MPI on CPUs, NCCL on GPUs), as `reprise comms` sweeps it. Every rank takes part; the
// points are rank 0's (a sweep's time is the slowest rank's).
std::vector<CommPoint> sweep_collectives(comms::Communicator& world, size_t max_bytes, bool gpu, int device,
                                         bool progress) {
  std::vector<CommPoint> points;
  std::unique_ptr<comms::Communicator> nccl;
  if (gpu) nccl = comms::make_nccl(world, device);
  comms::Communicator& c = nccl ? *nccl : world;
  for (comms::Kind kind : {comms::Kind::AllReduce, comms::Kind::AllGather, comms::Kind::ReduceScatter,
                           comms::Kind::AllToAll, comms::Kind::AllToAllV, comms::Kind::Send}) {
    comms::SweepOptions o;
    o.kind = kind;
    o.min_bytes = 4;
    o.max_bytes = max_bytes;
    o.warmup = 3;
    o.iters = 10;
    o.check = false;
    o.device = device;
    const std::string op = comms::describe(kind).name;
    // A send is swept as a ring (each rank sends to the next and receives from the one before): every message is
    // between two ranks, so its curve is the pair's (curve_of), the one predict times a send and its receive with.
    const auto [name, group] = curve_of(op, c.size());
    for (const comms::SweepRow& r : comms::sweep(c, o))
      if (r.bytes > 0 && r.time_us > 0)
        points.push_back({name, group, "", static_cast<double>(r.bytes), r.time_us * 1e-6});
    if (progress && c.rank() == 0)
      std::fprintf(stderr, "reprise: collectives: %s swept on %d ranks\n", op.c_str(), c.size());
  }
  return points;
}

// How much slower a streaming op runs when K ranks of a node run it at once than when one does, for K = 2, 4, 8, ...
// and the node's ranks, by each rank's working set (8, 24 and 64 MiB: about a last-level cache's share of a rank, to
// past it): a copy (memory: half the set copied into the other half) and an embedding bag's lookup and backward
// (embedding: a table of that size, 64 floats wide, 8,192 bags of 20 rows drawn uniformly; its dense gradient is as
// large, so the working set recorded, as predict counts a step's storages, is twice the table). Each is timed on
// rank 0 alone, then on ranks 0..K-1 together, in 5 alternating rounds, each block started at a barrier (the ranks of
// a data- or model-parallel step run their streaming ops in lockstep: a rank's memory-bound phase meets the others'),
// on tensors made beforehand and memory from the heap alone (no page faults timed); the median of the rounds'
// ratios (--quick: 8 MiB alone, 3 rounds). Ranks 0..K-1 are taken to share rank 0's node (mpirun's by-slot mapping,
// srun's block distribution). Rank 0's figures (1 where an op did not slow); none elsewhere. CPU only.
std::vector<Contention> measure_contention(comms::Communicator& world, int node_ranks, bool quick, bool progress) {
  mallopt(M_MMAP_MAX, 0);  // a 64 MiB gradient would be mapped afresh on every call under replay's settings
  std::vector<int> counts;
  for (int k = 2; k < node_ranks; k *= 2) counts.push_back(k);
  if (node_ranks >= 2) counts.push_back(node_ranks);
  std::vector<Contention> out;
  for (const char* family : {"memory", "embedding"}) {
    for (const int64_t mib : quick ? std::vector<int64_t>{8} : std::vector<int64_t>{8, 24, 64}) {
      const int64_t bytes = mib << 20;
      std::function<void()> op;
      int reps = 12;
      if (std::string(family) == "memory") {
        const at::Tensor src = at::rand({bytes / 8}), dst = at::empty_like(src);
        op = [src, dst] { dst.copy_(src); };
      } else {
        constexpr int64_t dim = 64, bags = 8192, pooling = 20;
        const int64_t rows = bytes / (dim * 4);
        const at::Tensor table = at::rand({rows, dim});
        const at::Tensor indices = at::randint(rows, {bags * pooling}, at::kLong);
        const at::Tensor offsets = at::arange(0, bags * pooling, pooling, at::kLong);
        const at::Tensor grad = at::ones({bags, dim});
        op = [=] {
          const auto f = at::embedding_bag(table, indices, offsets, false, 0, false, {}, false);
          at::_embedding_bag_backward(grad, indices, offsets, std::get<1>(f), std::get<2>(f), std::get<3>(f), rows,
                                      false, 0, false, {}, -1);
        };
        reps = 8;
      }
      auto seconds = [&] {
        std::vector<double> each;
        for (int k = 0; k < reps; ++k)
          if (const double t = seconds_of(op); k >= 2) each.push_back(t);
        return median(each);
      };
      for (int k : counts) {
        std::vector<double> ratios;
        for (int round = 0; round < (quick ? 3 : 5); ++round) {
          world.exchange("");
          const double alone = world.rank() == 0 ? seconds() : 0;
          world.exchange("");  // the others waited for rank 0; now the first k start together
          const double together = world.rank() < k ? seconds() : 0;
          std::vector<double> all;
          for (const std::string& x : world.exchange(std::to_string(together)))
            if (std::stod(x) > 0) all.push_back(std::stod(x));
          if (alone > 0 && !all.empty()) ratios.push_back(median(all) / alone);
        }
        if (world.rank() != 0 || ratios.empty()) continue;
        const double set = static_cast<double>(bytes) * (std::string(family) == "embedding" ? 2 : 1);
        out.push_back({family, k, set, std::max(1.0, median(ratios))});
        if (progress)
          std::fprintf(stderr, "reprise: contention: %s over %.0f MiB a rank, %d ranks at once: x%.2f\n", family,
                       set / (1 << 20), k, out.back().factor);
      }
    }
  }
  return out;
}

// The machine's noise as a bulk-synchronous step meets it: every rank runs the same block of work (copies of a 1 MiB
// buffer its caches hold, as many as last about 1 ms, then 10 ms, on rank 0 alone), at once from a barrier, 60 and
// 20 rounds (--quick: 15 and 5); per round, the slowest rank's time over the ranks' mean, less 1, and its mean over
// the rounds: what a collective waiting for its last member adds to a segment of that length. Rank 0's figures;
// none elsewhere. CPU only.
std::vector<Jitter> measure_jitter(comms::Communicator& world, bool quick, bool progress) {
  const at::Tensor src = at::rand({int64_t{1} << 18}), dst = at::empty_like(src);
  int64_t copies = 0;  // for 1 ms, from rank 0's timing
  {
    const double each = seconds_of([&] {
                          for (int k = 0; k < 200; ++k) dst.copy_(src);
                        }) /
                        200;
    const std::vector<std::string> all = world.exchange(std::to_string(each));
    copies = std::max<int64_t>(1, static_cast<int64_t>(1e-3 / std::max(std::stod(all.front()), 1e-9)));
  }
  std::vector<Jitter> out;
  for (const auto& [scale, rounds] : {std::pair<int64_t, int>{1, quick ? 15 : 60}, {10, quick ? 5 : 20}}) {
    std::vector<double> excess, block;
    for (int round = 0; round < rounds; ++round) {
      world.exchange("");
      const double mine = seconds_of([&, n = copies * scale] {
        for (int64_t k = 0; k < n; ++k) dst.copy_(src);
      });
      double most = 0, sum = 0;
      const std::vector<std::string> all = world.exchange(std::to_string(mine));
      for (const std::string& x : all) most = std::max(most, std::stod(x)), sum += std::stod(x);
      const double mean = sum / static_cast<double>(all.size());
      if (mean > 0) excess.push_back(most / mean - 1), block.push_back(mean);
    }
    if (world.rank() != 0 || excess.empty()) continue;
    double e = 0;
    for (double x : excess) e += x;
    out.push_back({world.size(), median(block), e / static_cast<double>(excess.size())});
    if (progress)
      std::fprintf(stderr, "reprise: jitter: %d ranks, blocks of %s: the slowest %.1f%% above their mean\n",
                   world.size(), human_seconds(out.back().seconds).c_str(), 100 * out.back().excess);
  }
  return out;
}

}  // namespace

int cmd_calibrate(int argc, char** argv) {
  po::options_description opts(
      "usage: reprise calibrate --out FILE [options]\n\n"
      "Measures this machine for `reprise predict`: a sweep of microbenchmarks (GEMMs over shapes, elementwise,\n"
      "reductions and normalizations from one element to 16 MiB, embedding lookups over table sizes and pooling,\n"
      "convolutions) replayed op by op through LibTorch, each op's median over --passes; the fits (achieved rates by\n"
      "shape, per-op host overheads, residuals, collective bandwidth curves from `reprise comms --json` files) go\n"
      "to FILE (docs/predict.md). --from-replay fits from replays written with --per-op instead (measured results\n"
      "fed back into the model). --host-from adds a GPU's host overheads measured from Kineto traces (per op and\n"
      "shape: the gap before it, start to first launch, the launch calls and the gaps between them, last launch to\n"
      "its end; with --family none alone). --cluster-out also writes the measured machine as a cluster description.\n"
      "On a CPU the sweep's memory all comes from the heap and what a fresh page costs a byte is timed apart (a\n"
      "replay maps each output of 32 MiB or more afresh; predict adds those pages by size). Under mpirun -np K or\n"
      "srun -n K (one rank per core) every rank runs the sweep at once (the machine as busy as a K-rank replay keeps\n"
      "it); then a CPU's memory contention is measured (a copy and an embedding lookup on every rank at once against\n"
      "one alone, over 8 to 64 MiB a rank), and its jitter (the slowest rank's excess on a block of 1 and 10 ms), and\n"
      "every collective is swept at K ranks (MPI on CPUs, NCCL on GPUs); rank 0 writes the files.\n\noptions");
  std::string out, cluster_out, device = "cpu", dtype = "float", comms_max_text = "16M";
  std::vector<std::string> from_replay, comms, families, host_from;
  int threads = 1, passes = 5;
  bool quick = false;
  opts.add_options()("help,h", "show this help")("out,o", po::value(&out), "calibration file to write (JSON)")(
      "cluster-out", po::value(&cluster_out), "also write this machine's cluster description (YAML)")(
      "device", po::value(&device)->default_value("cpu"), "cpu, cuda or cuda:N")(
      "dtype", po::value(&dtype)->default_value("float"), "float, bfloat16 or half: the sweep's floating-point type")(
      "threads", po::value(&threads)->default_value(1), "intra-op threads (CPU); predict what replays with as many")(
      "passes", po::value(&passes)->default_value(5), "per-op passes; each op's time is its median")(
      "quick", po::bool_switch(&quick), "a few sizes per op (a first look, tests)")(
      "family", po::value(&families)->composing(),
      "sweep only these (gemm, memory, embedding, conv, view; repeatable; none: no sweep)")(
      "host-from", po::value(&host_from)->multitoken()->composing(),
      "Kineto traces of GPU steps (with their ETs, or folders): measure the ops' host overheads from them")(
      "from-replay", po::value(&from_replay)->composing(), "fit from these replay results (--per-op) instead")(
      "comms", po::value(&comms)->composing(), "`reprise comms --json` results: collective bandwidth curves")(
      "comms-max-bytes", po::value(&comms_max_text)->default_value("16M"),
      "under a launcher of several ranks, also sweep each collective up to this size (0: none)")("quiet,q",
                                                                                                 "no progress");
  auto vm = parse(argc, argv, opts, {});
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (out.empty()) throw UserError("calibrate: --out FILE is required (see reprise calibrate --help)");
  if (threads < 1 || threads > 1024) throw UserError("calibrate: --threads must be between 1 and 1024");
  if (passes < 1 || passes > 1000) throw UserError("calibrate: --passes must be between 1 and 1000");
  // A calibration times real work: meta runs nothing, and any other name is not a device.
  if (!is_device_name(device, false))
    throw UserError("calibrate: --device must be cpu, cuda or cuda:N, not '" + device + "'");
  const size_t comms_max = parse_bytes(comms_max_text, "calibrate: --comms-max-bytes");
  const std::map<std::string, std::string> dtypes{
      {"float", "float"}, {"bfloat16", "c10::BFloat16"}, {"half", "c10::Half"}};
  if (!dtypes.count(dtype)) throw UserError("calibrate: --dtype must be float, bfloat16 or half");
  const bool no_sweep = !families.empty() &&
                        std::all_of(families.begin(), families.end(), [](const std::string& f) { return f == "none"; });
  for (const std::string& f : families) {
    const std::vector<std::string> known = sweep_families();
    if (f != "none" && std::find(known.begin(), known.end(), f) == known.end())
      throw UserError("calibrate: unknown --family '" + f + "' (gemm, memory, embedding, conv, view, none)");
    if (f == "none" && !no_sweep) throw UserError("calibrate: --family none sweeps nothing: it takes no other family");
  }
  // --from-replay fits the replays' times instead of a sweep: the sweep's options would be passed over in silence.
  if (!from_replay.empty() &&
      ((!families.empty() && !no_sweep) || quick || !vm["passes"].defaulted() || !vm["dtype"].defaulted()))
    throw UserError(
        "calibrate: --family, --quick, --passes and --dtype shape a sweep; --from-replay fits the "
        "replays' op times instead: give one or the other");
  if (no_sweep && host_from.empty() && from_replay.empty())
    throw UserError("calibrate: --family none sweeps nothing: give --host-from (or --from-replay) to fit");
  if (no_sweep && from_replay.empty() && !cluster_out.empty())
    throw UserError("calibrate: --cluster-out describes the machine a sweep measured: --family none measures none");
  for (const std::string* p : {&out, &cluster_out})
    if (!p->empty()) check_output_path(*p);
  try {
    std::vector<std::string> inputs = from_replay;
    inputs.insert(inputs.end(), host_from.begin(), host_from.end());
    check_outputs_apart(inputs, {{"--out", out}, {"--cluster-out", cluster_out}});
  } catch (const UserError& e) {
    throw UserError(std::string("calibrate: ") + e.what());
  }
  at::set_num_threads(threads);
  // Under mpirun/srun every rank runs the sweep at once, so each op is measured with the machine as busy as a replay
  // of that many ranks keeps it (memory bandwidth and caches shared); rank 0 writes the results.
  const comms::Launch launch = comms::detect_launch();
  const bool reporter = launch.rank == 0;
  if (launch.size > 1 && !from_replay.empty())
    throw UserError("calibrate: --from-replay fits files; run it as one process, not under a launcher");
  ProgressLine line;

  Calibration cal;
  std::vector<OpSample> samples;
  HostOverheads host;
  if (!host_from.empty()) {  // read first: a bad trace stops the run before a sweep of minutes
    size_t calls = 0;
    host = measure_host_overheads(host_from, &calls);
    if (!host.launched() && reporter)  // a host timeline (a CPU capture's), not a GPU step's Kineto trace
      line.message("warning: " + host.source +
                   ": no op launched GPU work: each op's host side is its whole duration, which a GPU "
                   "prediction then spends on the host");
    if (reporter && !vm.count("quiet"))
      line.message("host overheads: " + std::to_string(calls) + " op call(s), " + std::to_string(host.by_op.size()) +
                   " op(s), " + std::to_string(host.by_shape.size()) + " op shape(s) from " + host.source);
  }
  // A CPU's fresh pages, timed under replay's allocator settings before the sweep (on every rank at once under a
  // launcher, as the sweep runs), which keeps those settings.
  if (device == "cpu" && (!from_replay.empty() || !no_sweep)) {
    device::install_memory_tracking();
    cal.fresh_page_seconds_per_byte = fresh_page_seconds_per_byte();
  }
  if (!from_replay.empty()) {
    // A replay's outputs of 32 MiB and more were mapped afresh: their pages come out of its ops' times.
    samples = samples_from_replays(from_replay, cal.source, cal.concurrent_ranks, cal.fresh_page_seconds_per_byte);
    cal.device = device;
  } else if (no_sweep) {
    cal.source = "no microbenchmarks";
    cal.device = device;
  } else {
    SweepOptions so;
    so.device = device == "cuda" ? "cuda:0" : device;
    so.dtype = dtypes.at(dtype);
    so.quick = quick;
    so.families = families;
    Trace sweep = calibration_sweep(so);
    // The sweep's ops take all their memory from the heap, trimmed only past 1 GiB (replay's settings, installed
    // above, and no mappings at all): after its first pass none faults in fresh pages, so its times hold none. A
    // replay maps an output of 32 MiB or more afresh each call (unless a free heap chunk as large serves it): the cost
    // model adds those pages back by size (OpWork::fresh_bytes).
    if (device == "cpu") mallopt(M_MMAP_MAX, 0);
    replay::ReplayOptions ro;
    ro.device = device;
    ro.per_op = true;
    ro.per_op_passes = passes;
    ro.iterations = 1;
    ro.warmup = 1;
    ro.threads = threads;
    if (!vm.count("quiet") && reporter) ro.progress = [&line](const replay::Progress& p) { line.update(p); };
    replay::ReplayResult r = replay::replay_trace(sweep, ro);
    if (!r.failed.empty() && reporter)
      line.message("warning: " + std::to_string(r.failed.size()) + " sweep op(s) failed, first " + r.failed.front().op +
                   ": " + r.failed.front().reason);
    samples = samples_of(sweep, r.op_times, r.op_host_times, 0);
    cal.source = "microbenchmarks (" + std::to_string(samples.size()) + " ops, " + std::to_string(passes) + " passes)";
    cal.device = r.device;
  }
  std::vector<CommPoint> points = read_comm_sweeps(comms);
  std::vector<Contention> contention;
  std::vector<Jitter> jitter;
  if (launch.size > 1) {
    std::unique_ptr<comms::Communicator> world = comms::make_world();
    const bool gpu = device.rfind("cuda", 0) == 0;
    if (!gpu) {
      contention = measure_contention(*world, std::min(launch.local_size, launch.size), quick, !vm.count("quiet"));
      jitter = measure_jitter(*world, quick, !vm.count("quiet"));
    }
    if (comms_max > 0) {
      std::vector<CommPoint> swept = sweep_collectives(*world, comms_max, gpu, launch.local_rank, !vm.count("quiet"));
      points.insert(points.end(), swept.begin(), swept.end());
    }
    world.reset();
    comms::finalize();
  }
  if (!reporter) return 0;
  Calibration fitted;  // host overheads alone fit no rates
  if (!samples.empty() || !points.empty() || host.empty()) fitted = fit_calibration(std::move(samples), points);
  fitted.source = cal.source;
  fitted.device = cal.device;
  fitted.host = std::move(host);
  fitted.machine = no_sweep && from_replay.empty() ? "" : cal.device.rfind("cuda", 0) == 0 ? cal.device : cpu_model();
  fitted.torch_version = TORCH_VERSION;
  fitted.threads = threads;
  // The ranks that measured the ops at once: this launch's on the node, or the fitted replays' (taken to have shared
  // one machine, as a CPU replay's ranks do here).
  fitted.concurrent_ranks = std::max({launch.local_size, cal.concurrent_ranks, 1});
  fitted.contention = std::move(contention);
  fitted.jitter = std::move(jitter);
  fitted.fresh_page_seconds_per_byte = cal.fresh_page_seconds_per_byte;
  write_calibration(fitted, out);
  std::FILE* report = report_stream({out, cluster_out});
  print_calibration(report, fitted);
  std::fprintf(report, "calibration: %s\n", out.c_str());
  if (!cluster_out.empty()) {
    // A CPU's devices are its cores over the threads an op uses; a GPU machine's, its GPUs (one here: a calibration
    // measures one device, and more GPUs of a node are written in by hand).
    int64_t devices = 1;
    if (fitted.device.rfind("cuda", 0) != 0)
      devices = std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()) / threads);
    Cluster measured = measured_cluster(fitted, "measured", devices);
    if (measured.device.kind == "cpu" && from_replay.empty()) describe_this_cpu(measured.device);  // swept here
    write_text_file(cluster_out, cluster_yaml(measured));
    std::fprintf(report, "cluster: %s\n", cluster_out.c_str());
  }
  return 0;
}

}  // namespace reprise::cli
