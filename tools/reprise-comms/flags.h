// `reprise comms`' command line: the option table and the checks that turn it into a sweep, all before MPI starts,
// so that a usage error is one line and exit 2 on every rank instead of an MPI abort. Fuzzed (tests/fuzz).
#pragma once

#include <boost/program_options.hpp>
#include <string>

#include "reprise/comms/communicator.h"
#include "reprise/comms/sweep.h"

namespace reprise::cli {

struct CommsFlags {
  std::string op, dtype, redop, min_bytes, max_bytes, backend, json;
  int device = -1;
  comms::SweepOptions sweep;  // the checked result
};

boost::program_options::options_description comms_options(CommsFlags& f);

// Checks every option against the others and the launch (a root must be one of its ranks) and fills f.sweep.
// A size left at its default follows the other: `-e 4` alone sweeps 4 bytes, `-b 1G` alone sweeps 1 GiB.
// Throws UserError naming the option.
void check_comms_flags(CommsFlags& f, const boost::program_options::variables_map& vm, const comms::Launch& launch);

// Refuses a sweep whose buffers, times the ranks sharing this node, exceed the host memory left (`available` bytes,
// -1 when unknown: no check). `on_device`: the buffers are in GPU memory and only the checks' host copies count.
void check_comms_memory(const comms::SweepOptions& o, const comms::Launch& launch, bool on_device, int64_t available);

}  // namespace reprise::cli
