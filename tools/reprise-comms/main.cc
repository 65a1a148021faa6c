// reprise-comms: `reprise comms`, an nccl-tests-like sweep of one collective over message sizes, on MPI (CPU) or
// NCCL (GPU). No LibTorch. Launch it with mpirun/srun for several ranks.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "reprise/comms/communicator.h"
#include "reprise/comms/sweep.h"
#include "reprise/trace/write.h"

namespace po = boost::program_options;
using namespace reprise::comms;
using reprise::UserError;

namespace {

const char* kUsage =
    "usage: reprise comms --op OP [options]   (under mpirun/srun for several ranks)\n\n"
    "Sweeps one collective over message sizes on the current launch, as nccl-tests does: time per operation\n"
    "(slowest rank), algorithm bandwidth and bus bandwidth (busbw = algbw x the collective's factor, e.g.\n"
    "2(n-1)/n for all_reduce), and #wrong, the elements that differ from the expected result. The results are\n"
    "the calibration source for performance models.\n\n"
    "OP: all_reduce, all_gather, reduce_scatter, all_to_all, all_to_allv, broadcast, reduce, gather, scatter,\n"
    "send (a ring of send/recv), barrier.\n\noptions";

// The command line as given, and the sweep it asks for once checked.
struct Flags {
  std::string op, dtype, redop, min_bytes, max_bytes, backend, json;
  int device = -1;
  SweepOptions sweep;
};

po::options_description flag_table(Flags& f) {
  po::options_description opts(kUsage);
  SweepOptions& o = f.sweep;
  opts.add_options()("help,h", "show this help")("op", po::value(&f.op)->default_value("all_reduce"), "the collective")(
      "min-bytes,b", po::value(&f.min_bytes)->default_value("8"), "smallest message (8, 64K, 1M, ...)")(
      "max-bytes,e", po::value(&f.max_bytes)->default_value("64M"), "largest message")(
      "step-factor,f", po::value(&o.factor)->default_value(2), "size multiplier between rows")(
      "dtype,d", po::value(&f.dtype)->default_value("float"),
      "float, double, half, bfloat16, int8, uint8, int32, int64")("redop,o", po::value(&f.redop)->default_value("sum"),
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

void check_flags(Flags& f) {
  SweepOptions& o = f.sweep;
  if (!parse_kind(f.op, o.kind) || o.kind == Kind::Recv)
    throw UserError("comms: --op " + f.op + ": not a collective (see --help)");
  if (!parse_dtype(f.dtype, o.dtype)) throw UserError("comms: --dtype " + f.dtype + ": unknown");
  if (!parse_reduce_op(f.redop, o.op)) throw UserError("comms: --redop " + f.redop + ": unknown");
  if (o.iters < 1 || o.warmup < 0) throw UserError("comms: --iters must be >= 1 and --warmup >= 0");
  o.min_bytes = reprise::cli::parse_bytes(f.min_bytes, "comms: --min-bytes");
  o.max_bytes = reprise::cli::parse_bytes(f.max_bytes, "comms: --max-bytes");
  if (f.backend != "auto" && f.backend != "mpi" && f.backend != "nccl")
    throw UserError("comms: --backend " + f.backend + ": mpi, nccl or auto");
}

// Runs the sweep on `c`, printing the table on rank 0; the number of wrong elements over all sizes.
int64_t sweep_and_print(Communicator& c, const SweepOptions& o, std::string& json) {
  if (c.rank() == 0) print_header(stdout, c, o);
  std::vector<SweepRow> rows = sweep(c, o, [&](const SweepRow& r) {
    if (c.rank() == 0) {
      print_row(stdout, o, r);
      std::fflush(stdout);
    }
  });
  int64_t wrong = 0;
  for (const SweepRow& r : rows) wrong += std::max<int64_t>(r.wrong, 0);
  if (c.rank() != 0) return wrong;
  double avg = 0;
  for (const SweepRow& r : rows) avg += r.busbw;
  std::printf("# out of bounds values: %lld %s\n# avg bus bandwidth: %.3f GB/s\n", static_cast<long long>(wrong),
              wrong ? "FAILED" : "OK", rows.empty() ? 0.0 : avg / static_cast<double>(rows.size()));
  json = sweep_json(c, o, rows);
  return wrong;
}

int run_sweep(Flags& f) {
  std::unique_ptr<Communicator> world, comm;
  std::string json;
  int64_t wrong = 0;
  try {
    Launch launch = detect_launch();
    if (launch.rank == 0 && !f.json.empty()) reprise::cli::check_output_path(f.json);  // rank 0 writes it
    world = make_world();
    f.sweep.device = f.device >= 0 ? f.device : launch.local_rank;
    if (f.backend == "nccl" || (f.backend == "auto" && nccl_available())) comm = make_nccl(*world, f.sweep.device);
    wrong = sweep_and_print(comm ? *comm : *world, f.sweep, json);
  } catch (const CommError& e) {
    std::string what = "comms: " + (world ? "rank " + std::to_string(world->rank()) + ": " : "") + e.what();
    if (!world || world->size() == 1) throw UserError(what);
    std::cerr << "reprise: " << what << "\n";
    world->abort(reprise::cli::kBadInput);  // the other ranks would wait for this one forever
  }
  comm.reset();
  world.reset();
  finalize();
  // After finalize, so that a file that cannot be written fails this rank alone, not MPI's shutdown.
  if (!f.json.empty() && !json.empty()) reprise::write_text_file(f.json, json);
  return wrong ? 1 : 0;
}

int run(int argc, char** argv) {
  Flags f;
  po::options_description opts = flag_table(f);
  po::variables_map vm = reprise::cli::parse(argc, argv, opts);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  check_flags(f);
  return run_sweep(f);
}

}  // namespace

int main(int argc, char** argv) {
  const int sub = argc > 1 && std::string(argv[1]) == "comms";  // run as `reprise comms` or on its own
  return reprise::cli::guarded([&] { return run(argc - sub, argv + sub); });
}
