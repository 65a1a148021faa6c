// Built without MPI: a single process only.
#include "reprise/comms/communicator.h"

namespace reprise::comms {

std::unique_ptr<Communicator> make_mpi_world() {
  Launch l = detect_launch();
  if (l.size > 1)
    throw CommError("launched with " + std::to_string(l.size) +
                    " ranks, but this build has no MPI (install Open MPI "
                    "and reconfigure)");
  return make_self();
}

void finalize() {}

}  // namespace reprise::comms
