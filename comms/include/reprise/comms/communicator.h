// Collectives for replay and for `reprise comms`, behind one interface that knows nothing of LibTorch: raw
// buffers, element counts, dtypes, reduce ops and an opaque stream. Two backends: MPI (CPU buffers, non-blocking
// calls) and NCCL (GPU buffers, on a CUDA stream).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reprise/common/error.h"
#include "reprise/comms/collective.h"

namespace reprise::comms {

// A collective that cannot run: bad arguments (a root or peer outside the group, a dtype or op the backend lacks),
// a launch the build cannot serve, or an MPI, NCCL or bootstrap failure. Each is for the user to fix (the options,
// the launch, the machine), so it is a reprise::UserError.
class CommError : public UserError {
 public:
  using UserError::UserError;
};

// A buffer the host or the GPU could not give: exit status 3, as every out-of-memory failure in reprise.
class CommOutOfMemory : public CommError {
 public:
  using CommError::CommError;
};

// An operation in flight.
class Request {
 public:
  virtual ~Request() = default;
  // Blocks the calling thread until the operation is done.
  virtual void wait() = 0;
  // Orders `stream` (NCCL: a cudaStream_t) after the operation without blocking the host; MPI: waits.
  virtual void wait_on(void* stream) {
    (void)stream;
    wait();
  }
  // Seconds the operation took on the device (NCCL: between events around it; MPI: start to completion as
  // seen by wait()), valid after wait(); -1 when unknown.
  virtual double seconds() const { return -1; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "nccl", "self"
  // A communicator over `ranks` (ranks of this communicator, ascending). Every member of this communicator calls
  // it with the same list in the same order (non-members too: it is collective); non-members get nullptr.
  virtual std::unique_ptr<Communicator> split(const std::vector<int>& ranks) = 0;
  // Starts a collective. Throws CommError on bad arguments (unsupported dtype/op, a peer out of range).
  virtual std::unique_ptr<Request> start(const Args& a) = 0;
  void run(const Args& a) { start(a)->wait(); }
  // Starts `ops` as one operation, so that sends and receives between the same ranks cannot deadlock in whatever
  // order each rank lists them (PyTorch's batch_isend_irecv, a 1F1B pipeline's paired send and recv): NCCL issues
  // them in one group call on ops.front().stream; the default starts each (MPI: non-blocking) and waits for all.
  // Its seconds() is the longest member's.
  virtual std::unique_ptr<Request> start_group(const std::vector<Args>& ops);
  // Host-side exchange between all members (bootstrap, result gathering): everyone gets everyone's bytes.
  virtual std::vector<std::string> exchange(const std::string& mine) = 0;
  // Ends the whole job on every rank (a rank failed); does not return.
  [[noreturn]] virtual void abort(int code) = 0;
};

// The launch this process is part of, from the launcher's environment: mpirun (OMPI_COMM_WORLD_*), a Slurm job
// step started by srun (SLURM_STEP_NUM_TASKS, SLURM_PROCID, SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE), another
// PMI launcher (PMI_RANK/PMI_SIZE, PMIX_RANK), torchrun (RANK, WORLD_SIZE, LOCAL_RANK), or a single process. An
// sbatch script or salloc shell is a single process: Slurm sets SLURM_PROCID and SLURM_NTASKS there too, but only
// a step's tasks are ranks.
struct Launch {
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::string launcher = "single";  // "mpirun", "srun", "torchrun", "single"
  bool mpi = false;                 // launched by an MPI launcher: MPI can bootstrap
  bool slurm_job = false;           // inside a Slurm allocation (SLURM_JOB_ID): srun is the way to start ranks
};
Launch detect_launch();
// How to start `ranks` processes with the launcher in use, for hints: "mpirun -np 2", "srun -n 2" (under srun or
// inside a Slurm allocation), "torchrun --nproc-per-node 2 --no-python"; mpirun where there is none.
std::string launch_command(const Launch& launch, const std::string& ranks);
std::string launch_command(const Launch& launch, int ranks);

// MPI (CPU buffers). Initializes MPI on first use when the launch is an MPI one; size-1 world otherwise.
std::unique_ptr<Communicator> make_mpi_world();
// NCCL (GPU buffers) over `device`, bootstrapped through `bootstrap` (its exchange() carries the unique id).
// Throws CommError where NCCL is not built in or no GPU is usable.
std::unique_ptr<Communicator> make_nccl(Communicator& bootstrap, int device);
bool nccl_available();
// A torchrun-style world (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) without MPI: exchange() only, over TCP
// through rank 0; enough to bootstrap NCCL. Its start() refuses CPU collectives.
std::unique_ptr<Communicator> make_tcp_world(const Launch& launch);
// The launch's world: MPI for mpirun/srun, TCP for torchrun-style variables, a world of one otherwise.
std::unique_ptr<Communicator> make_world();
// A world of one (no launcher): collectives copy input to output.
std::unique_ptr<Communicator> make_self();
// Finalizes MPI if this process initialized it.
void finalize();

// Memory for a communicator's buffers: host memory for MPI and self, device memory (on `device`) for NCCL.
struct Buffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  bool device = false;
  int dev = 0;
  ~Buffer();
};
std::unique_ptr<Buffer> allocate(const Communicator& c, size_t bytes, int device);
void copy_in(Buffer& b, const void* host, size_t bytes);
void copy_out(const Buffer& b, void* host, size_t bytes);
// Waits for the device's work when the communicator runs on one.
void device_synchronize(const Communicator& c, int device);

}  // namespace reprise::comms
