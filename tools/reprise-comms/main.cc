// reprise-comms: `reprise comms`, an nccl-tests-like sweep of one collective over message sizes, on MPI (CPU) or
// NCCL (GPU). No LibTorch. Launch it with mpirun/srun for several ranks.
#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>

#include "reprise/comms/communicator.h"
#include "reprise/comms/sweep.h"

namespace po = boost::program_options;
using namespace reprise::comms;

namespace {

size_t parse_size(const std::string& s) {
  size_t pos = 0;
  double v = std::stod(s, &pos);
  std::string unit = s.substr(pos);
  double mult = 1;
  if (unit == "K" || unit == "k" || unit == "KB" || unit == "KiB")
    mult = 1024;
  else if (unit == "M" || unit == "MB" || unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B")
    throw std::invalid_argument("bad size '" + s + "' (use 8, 64K, 256M, 1G)");
  if (v < 0) throw std::invalid_argument("bad size '" + s + "'");
  return static_cast<size_t>(v * mult);
}

int run(int argc, char** argv) {
  po::options_description opts(
      "usage: reprise comms --op OP [options]   (under mpirun/srun for several ranks)\n\n"
      "Sweeps one collective over message sizes on the current launch, as nccl-tests does: time per operation\n"
      "(slowest rank), algorithm bandwidth and bus bandwidth (busbw = algbw x the collective's factor, e.g.\n"
      "2(n-1)/n for all_reduce), and #wrong, the elements that differ from the expected result. The results are\n"
      "the calibration source for performance models.\n\n"
      "OP: all_reduce, all_gather, reduce_scatter, all_to_all, all_to_allv, broadcast, reduce, gather, scatter,\n"
      "send (a ring of send/recv), barrier.\n\noptions");
  std::string op = "all_reduce", dtype = "float", redop = "sum", backend = "auto", min_b = "8", max_b = "64M", json;
  SweepOptions o;
  int device = -1;
  opts.add_options()("help,h", "show this help")("op", po::value(&op)->default_value("all_reduce"), "the collective")(
      "min-bytes,b", po::value(&min_b)->default_value("8"), "smallest message (8, 64K, 1M, ...)")(
      "max-bytes,e", po::value(&max_b)->default_value("64M"), "largest message")(
      "step-factor,f", po::value(&o.factor)->default_value(2), "size multiplier between rows")(
      "dtype,d", po::value(&dtype)->default_value("float"), "float, double, half, bfloat16, int8, uint8, int32, int64")(
      "redop,o", po::value(&redop)->default_value("sum"), "sum, prod, max, min, avg")(
      "root,r", po::value(&o.root)->default_value(0), "root of broadcast/reduce/gather/scatter")(
      "iters,n", po::value(&o.iters)->default_value(20), "timed iterations per size")(
      "warmup,w", po::value(&o.warmup)->default_value(5), "warm-up iterations per size")(
      "check,c", po::value(&o.check)->default_value(true), "check the results (1/0)")(
      "backend", po::value(&backend)->default_value("auto"), "mpi, nccl, or auto (nccl when a GPU is usable)")(
      "device", po::value(&device)->default_value(-1), "GPU for NCCL (default: the local rank)")(
      "json", po::value(&json), "also write the results as JSON to this file (rank 0)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "reprise: comms: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  auto bad = [](const std::string& m) {
    std::cerr << "reprise: comms: " << m << "\n";
    return 2;
  };
  if (!parse_kind(op, o.kind) || o.kind == Kind::Recv) return bad("--op " + op + ": not a collective (see --help)");
  if (!parse_dtype(dtype, o.dtype)) return bad("--dtype " + dtype + ": unknown");
  if (!parse_reduce_op(redop, o.op)) return bad("--redop " + redop + ": unknown");
  if (o.iters < 1 || o.warmup < 0) return bad("--iters must be >= 1 and --warmup >= 0");
  try {
    o.min_bytes = parse_size(min_b);
    o.max_bytes = parse_size(max_b);
  } catch (const std::exception& e) {
    return bad(e.what());
  }
  if (backend != "auto" && backend != "mpi" && backend != "nccl")
    return bad("--backend " + backend + ": mpi, nccl or auto");

  Launch launch = detect_launch();
  std::unique_ptr<Communicator> world = make_world();
  std::unique_ptr<Communicator> comm;
  try {
    bool use_nccl = backend == "nccl" || (backend == "auto" && nccl_available());
    o.device = device >= 0 ? device : launch.local_rank;
    if (use_nccl) comm = make_nccl(*world, o.device);
    Communicator& c = comm ? *comm : *world;
    if (c.rank() == 0) print_header(stdout, c, o);
    std::vector<SweepRow> rows = sweep(c, o, [&](const SweepRow& r) {
      if (c.rank() == 0) {
        print_row(stdout, o, r);
        std::fflush(stdout);
      }
    });
    int64_t wrong = 0;
    for (const SweepRow& r : rows) wrong += std::max<int64_t>(r.wrong, 0);
    if (c.rank() == 0) {
      double avg = 0;
      for (const SweepRow& r : rows) avg += r.busbw;
      std::printf("# out of bounds values: %lld %s\n# avg bus bandwidth: %.3f GB/s\n", static_cast<long long>(wrong),
                  wrong ? "FAILED" : "OK", rows.empty() ? 0.0 : avg / rows.size());
      if (!json.empty()) {
        std::ofstream f(json);
        f << sweep_json(c, o, rows);
        if (!f) return bad(json + ": cannot write");
      }
    }
    comm.reset();
    world.reset();
    finalize();
    return wrong ? 1 : 0;
  } catch (const CommError& e) {
    std::cerr << "reprise: comms: rank " << world->rank() << ": " << e.what() << "\n";
    if (world->size() > 1) world->abort(1);
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc - (argc > 1 && std::string(argv[1]) == "comms"),
               argv + (argc > 1 && std::string(argv[1]) == "comms"));
  } catch (const std::exception& e) {
    std::cerr << "reprise: comms: " << e.what() << "\n";
    return 1;
  }
}
