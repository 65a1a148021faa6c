#include "flags.h"

#include <cmath>
#include <sstream>

#include "cli.h"
#include "reprise/trace/summary.h"

namespace reprise::cli {

namespace po = boost::program_options;
using comms::Kind;

namespace {

constexpr int kMaxIterations = 1000000;
constexpr double kMaxRows = 1000;  // a sweep longer than this is a mistyped factor, not a measurement

std::string text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

po::options_description comms_options(CommsFlags& f) {
  po::options_description opts(
      "usage: reprise comms --op OP [options]   (under mpirun/srun for several ranks)\n\n"
      "Sweeps one collective over message sizes on the current launch, as nccl-tests does: time per operation\n"
      "(slowest rank), algorithm bandwidth and bus bandwidth (busbw = algbw x the collective's factor, e.g.\n"
      "2(n-1)/n for all_reduce), and #wrong, the elements that differ from the expected result. The results are\n"
      "the calibration source for performance models. The one-letter options are nccl-tests' (but --redop has\n"
      "none: -o means --out everywhere in reprise).\n\n"
      "OP: all_reduce, all_gather, reduce_scatter, all_to_all, all_to_allv, broadcast, reduce, gather, scatter,\n"
      "send (a ring of send/recv), barrier.\n\noptions");
  comms::SweepOptions& o = f.sweep;
  opts.add_options()("help,h", "show this help")("op", po::value(&f.op)->default_value("all_reduce"), "the collective")(
      "min-bytes,b", po::value(&f.min_bytes)->default_value("8"), "smallest message (8, 64K, 1M, ...)")(
      "max-bytes,e", po::value(&f.max_bytes)->default_value("64M"), "largest message")(
      "step-factor,f", po::value(&o.factor)->default_value(2), "size multiplier between rows (> 1)")(
      "dtype,d", po::value(&f.dtype)->default_value("float"),
      "float, double, half, bfloat16, int8, uint8, int32, int64")("redop", po::value(&f.redop)->default_value("sum"),
                                                                  "sum, prod, max, min, avg")(
      "root,r", po::value(&o.root)->default_value(0), "root of broadcast/reduce/gather/scatter")(
      "iters,n", po::value(&o.iters)->default_value(20), "timed iterations per size")(
      "warmup,w", po::value(&o.warmup)->default_value(5), "warm-up iterations per size")(
      "check,c", po::value(&o.check)->default_value(true), "check the results (1/0)")(
      "backend", po::value(&f.backend)->default_value("auto"), "mpi, nccl, or auto (nccl when a GPU is usable)")(
      "device", po::value(&f.device)->default_value(-1), "GPU for NCCL (default: the local rank)")(
      "json", po::value(&f.json), "also write the results as JSON to this file (rank 0)");
  return opts;
}

void check_comms_flags(CommsFlags& f, const po::variables_map& vm, const comms::Launch& launch) {
  comms::SweepOptions& o = f.sweep;
  if (!comms::parse_kind(f.op, o.kind) || o.kind == Kind::Recv)
    throw UserError("comms: --op " + f.op + ": not a collective (see --help)");
  if (!comms::parse_dtype(f.dtype, o.dtype))
    throw UserError("comms: --dtype " + f.dtype +
                    ": unknown (float, double, half, bfloat16, int8, uint8, int32, int64)");
  if (!comms::parse_reduce_op(f.redop, o.op))
    throw UserError("comms: --redop " + f.redop + ": unknown (sum, prod, max, min, avg)");
  const comms::Descriptor& d = comms::describe(o.kind);
  if (d.reduces && o.dtype == comms::DType::Bool && o.op == comms::ReduceOp::Avg)
    throw UserError("comms: --redop avg is not defined for bool");
  if (o.iters < 1 || o.iters > kMaxIterations)
    throw UserError("comms: --iters " + std::to_string(o.iters) + ": must be 1 to " + std::to_string(kMaxIterations));
  if (o.warmup < 0 || o.warmup > kMaxIterations)
    throw UserError("comms: --warmup " + std::to_string(o.warmup) + ": must be 0 to " + std::to_string(kMaxIterations));
  if (!(o.factor > 1) || !std::isfinite(o.factor))
    throw UserError("comms: --step-factor " + text(o.factor) + ": must be greater than 1");
  if (d.rooted && (o.root < 0 || o.root >= launch.size))
    throw UserError("comms: --root " + std::to_string(o.root) + ": not a rank of this launch of " +
                    std::to_string(launch.size));
  if (f.device < -1) throw UserError("comms: --device " + std::to_string(f.device) + ": a GPU index, or -1");
  if (f.backend != "auto" && f.backend != "mpi" && f.backend != "nccl")
    throw UserError("comms: --backend " + f.backend + ": mpi, nccl or auto");

  o.min_bytes = parse_bytes(f.min_bytes, "comms: --min-bytes");
  o.max_bytes = parse_bytes(f.max_bytes, "comms: --max-bytes");
  const bool min_given = !vm["min-bytes"].defaulted(), max_given = !vm["max-bytes"].defaulted();
  if (o.min_bytes > o.max_bytes) {
    if (min_given && max_given)
      throw UserError("comms: --min-bytes " + f.min_bytes + " is larger than --max-bytes " + f.max_bytes);
    if (max_given)
      o.min_bytes = o.max_bytes;
    else
      o.max_bytes = o.min_bytes;
  }
  if (comms::sweep_counts(o, launch.size).empty()) {
    // The smallest message that gives every rank an element, for the message to name.
    comms::SweepOptions one = o;
    const size_t es = comms::dtype_size(o.dtype);
    one.min_bytes = one.max_bytes = es;
    while (comms::sweep_counts(one, launch.size).empty() && one.max_bytes < (size_t{1} << 40))
      one.min_bytes = one.max_bytes += es;
    const std::string lo = min_given ? f.min_bytes : std::to_string(o.min_bytes);
    const std::string hi = max_given ? f.max_bytes : std::to_string(o.max_bytes);
    throw UserError("comms: no message of --min-bytes " + lo + " to --max-bytes " + hi + " (x" + text(o.factor) +
                    ") gives each of " + std::to_string(launch.size) + " rank(s) an element of " + d.name + " of " +
                    f.dtype + ": the smallest that does is " + std::to_string(one.max_bytes) + " bytes");
  }
  const double lo = std::max<double>(static_cast<double>(o.min_bytes), 1);
  const double rows = std::floor(std::log(static_cast<double>(o.max_bytes) / lo) / std::log(o.factor)) + 1;
  if (rows > kMaxRows)
    throw UserError("comms: --step-factor " + text(o.factor) + " makes " + text(rows) + " sizes from " + f.min_bytes +
                    " to " + f.max_bytes + " (at most " + text(kMaxRows) + "): raise it");
}

void check_comms_memory(const comms::SweepOptions& o, const comms::Launch& launch, bool on_device, int64_t available) {
  if (available < 0) return;
  comms::SweepMemory m = comms::sweep_memory(o, launch.size);
  const double per_rank = static_cast<double>(m.host_copy + (on_device ? 0 : m.buffers));
  const double node = per_rank * std::max(launch.local_size, 1);
  if (node <= static_cast<double>(available)) return;
  std::string who = launch.local_size > 1
                        ? " x " + std::to_string(launch.local_size) + " ranks on this node = " + human_bytes(node)
                        : "";
  throw UserError("comms: messages up to " + human_bytes(static_cast<double>(o.max_bytes)) + " need " +
                  human_bytes(per_rank) + " of host memory per rank (send, receive and check buffers)" + who +
                  ", but " + human_bytes(static_cast<double>(available)) + " is available");
}

}  // namespace reprise::cli
