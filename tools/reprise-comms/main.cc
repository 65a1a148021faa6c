// reprise-comms: `reprise comms`, an nccl-tests-like sweep of one collective over message sizes, on MPI (CPU) or
// NCCL (GPU). No LibTorch. Launch it with mpirun/srun for several ranks.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "flags.h"
#include "reprise/common/memory.h"
#include "reprise/comms/communicator.h"
#include "reprise/comms/sweep.h"
#include "reprise/trace/write.h"

namespace po = boost::program_options;
using namespace reprise::comms;
using reprise::UserError;

namespace {

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

int run_sweep(reprise::cli::CommsFlags& f) {
  std::unique_ptr<Communicator> world, comm;
  std::string json;
  int64_t wrong = 0;
  int failed = 0;
  try {
    Launch launch = detect_launch();
    if (launch.rank == 0 && !f.json.empty()) reprise::cli::check_output_path(f.json);  // rank 0 writes it
    world = make_world();
    f.sweep.device = f.device >= 0 ? f.device : launch.local_rank;
    if (f.backend == "nccl" || (f.backend == "auto" && nccl_available())) comm = make_nccl(*world, f.sweep.device);
    wrong = sweep_and_print(comm ? *comm : *world, f.sweep, json);
  } catch (const CommError& e) {
    std::string what = "comms: " + (world ? "rank " + std::to_string(world->rank()) + ": " : "") + e.what();
    const int status = dynamic_cast<const CommOutOfMemory*>(&e) ? reprise::cli::kOutOfMemory : reprise::cli::kBadInput;
    std::cerr << "reprise: " + what + "\n";                // one write: ranks' lines do not interleave
    if (world && world->size() > 1) world->abort(status);  // the other ranks would wait for this one forever
    failed = status;
  }
  comm.reset();
  world.reset();
  finalize();
  if (failed) return failed;
  // After finalize, so that a file that cannot be written fails this rank alone, not MPI's shutdown.
  if (!f.json.empty() && !json.empty()) reprise::write_text_file(f.json, json);
  return wrong ? 1 : 0;
}

int run(int argc, char** argv) {
  reprise::cli::CommsFlags f;
  po::options_description opts = reprise::cli::comms_options(f);
  po::variables_map vm = reprise::cli::parse(argc, argv, opts);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  const Launch launch = detect_launch();
  reprise::cli::check_comms_flags(f, vm, launch);
  const bool on_device = f.backend == "nccl" || (f.backend == "auto" && nccl_available());
  reprise::cli::check_comms_memory(f.sweep, launch, on_device, reprise::available_host_memory());
  if (!f.json.empty()) reprise::cli::check_output_path(f.json);
  return run_sweep(f);
}

}  // namespace

int main(int argc, char** argv) {
  const int sub = argc > 1 && std::string(argv[1]) == "comms";  // run as `reprise comms` or on its own
  return reprise::cli::guarded([&] { return run(argc - sub, argv + sub); });
}
