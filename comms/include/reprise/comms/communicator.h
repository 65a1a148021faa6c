// Collectives for replay and for `reprise comms`, behind one interface that knows nothing of LibTorch: raw
// buffers, element counts, dtypes, reduce ops and an opaque stream. Two backends: MPI (CPU buffers, non-blocking
// calls) and NCCL (GPU buffers, on a CUDA stream).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace reprise::comms {

class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class DType : uint8_t { F32, F64, F16, BF16, I8, U8, I32, I64, Bool };
size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "float", "half", ... (nccl-tests names)
// Accepts trace spellings ("Float", "c10::Half", "long int") and nccl-tests ones ("float", "half", "int64").
bool parse_dtype(std::string_view name, DType& out);

enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, Avg };
const char* reduce_op_name(ReduceOp op);
bool parse_reduce_op(std::string_view name, ReduceOp& out);

enum class Kind : uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  AllToAllV,
  Broadcast,
  Reduce,
  Gather,
  Scatter,
  Send,
  Recv,
  Barrier,
};

// One description per collective (as nccl-tests has one file per collective): its name, buffer sizes for a
// message, and the bus-bandwidth factor that turns algorithm bandwidth into what the links carried.
struct Descriptor {
  Kind kind;
  const char* name;  // normalized trace name: all_reduce, all_gather, ...
  // Elements of the send and receive buffers of one rank, for `count` elements as nccl-tests counts them
  // (all_gather/reduce_scatter/all_to_all/gather/scatter: count = elements of the whole large buffer).
  size_t (*in_elems)(size_t count, int nranks);
  size_t (*out_elems)(size_t count, int nranks);
  // busbw = algbw * factor; nccl-tests' formulas (all_reduce: 2(n-1)/n, all_gather: (n-1)/n, ...).
  double (*busbw_factor)(int nranks);
  bool reduces;  // takes a reduce op
  bool rooted;   // takes a root
};
const Descriptor& describe(Kind k);
// Normalized trace names ("all_reduce", "all_to_allv", ...) and the raw spellings the trace model maps to them.
bool parse_kind(std::string_view name, Kind& out);
const std::vector<Kind>& all_kinds();

// What to run. Counts are elements of `dtype`.
struct Args {
  Kind kind = Kind::AllReduce;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  const void* in = nullptr;
  void* out = nullptr;  // may equal `in` where the collective allows in-place (all_reduce, broadcast)
  size_t count = 0;     // all_reduce/broadcast/reduce/send/recv: buffer elements; all_gather: per-rank
                        // input; reduce_scatter: per-rank output; all_to_all/gather/scatter: per-peer chunk
  std::vector<size_t> in_counts, in_displs, out_counts, out_displs;  // all_to_allv, per peer (elements)
  int root = 0;                                                      // broadcast/reduce/gather/scatter
  int peer = -1;                                                     // send/recv
  void* stream = nullptr;  // NCCL: the cudaStream_t to run on (nullptr: the communicator's own); MPI: unused
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
  // Host-side exchange between all members (bootstrap, result gathering): everyone gets everyone's bytes.
  virtual std::vector<std::string> exchange(const std::string& mine) = 0;
  // Ends the whole job on every rank (a rank failed); does not return.
  [[noreturn]] virtual void abort(int code) = 0;
};

// The launch this process is part of, from the launcher's environment: mpirun (OMPI_COMM_WORLD_*), srun
// (SLURM_*/PMI_*), torchrun (RANK, WORLD_SIZE, LOCAL_RANK), or a single process.
struct Launch {
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::string launcher = "single";  // "mpirun", "srun", "torchrun", "single"
  bool mpi = false;                 // launched by an MPI launcher: MPI can bootstrap
};
Launch detect_launch();

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
