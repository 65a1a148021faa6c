// Launch detection (mpirun, srun, torchrun, single) and the world of one. No MPI here.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "reprise/common/clock.h"
#include "reprise/comms/communicator.h"

namespace reprise::comms {
namespace {

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

// A world of one: each collective is a local copy with the right shape.
class SelfRequest : public Request {
 public:
  double secs = 0;
  void wait() override {}
  double seconds() const override { return secs; }
};

class SelfComm : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "self"; }
  std::unique_ptr<Communicator> split(const std::vector<int>& ranks) override {
    if (std::find(ranks.begin(), ranks.end(), 0) == ranks.end()) return nullptr;
    return std::make_unique<SelfComm>();
  }
  std::unique_ptr<Request> start(const Args& a) override {
    auto r = std::make_unique<SelfRequest>();
    double t0 = now_seconds();
    const Descriptor& d = describe(a.kind);
    if ((a.kind == Kind::Send || a.kind == Kind::Recv) && a.peer != 0)
      throw CommError("self: peer " + std::to_string(a.peer) + " is not a rank of a world of 1");
    if (d.rooted && a.root != 0)
      throw CommError("self: root " + std::to_string(a.root) + " is not a rank of a world of 1");
    size_t es = dtype_size(a.dtype);
    if (a.kind == Kind::Send || a.kind == Kind::Recv) {
      // A send to oneself meets the matching receive, whichever was posted first.
      auto& mine = a.kind == Kind::Send ? sends_ : recvs_;
      auto& other = a.kind == Kind::Send ? recvs_ : sends_;
      Pending p{a.kind == Kind::Send ? const_cast<void*>(a.in) : a.out, a.count * es};
      if (other.empty()) {
        mine.push_back(p);
      } else {
        Pending q = other.front();
        other.erase(other.begin());
        void* dst = a.kind == Kind::Send ? q.ptr : p.ptr;
        const void* src = a.kind == Kind::Send ? p.ptr : q.ptr;
        std::memmove(dst, src, std::min(p.bytes, q.bytes));
      }
    } else {
      size_t bytes = std::min(d.in_elems(a.count, 1), d.out_elems(a.count, 1)) * es;
      if (a.kind == Kind::AllToAllV) {
        if (a.in_counts.size() != 1 || a.out_counts.size() != 1)
          throw CommError("self: all_to_allv needs one count and displacement per rank (1)");
        bytes = std::min(a.in_counts[0], a.out_counts[0]) * es;
      }
      if (bytes && a.in && a.out && a.in != a.out) std::memmove(a.out, a.in, bytes);
    }
    r->secs = now_seconds() - t0;
    return r;
  }
  std::vector<std::string> exchange(const std::string& mine) override { return {mine}; }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }

 private:
  struct Pending {
    void* ptr;
    size_t bytes;
  };
  std::vector<Pending> sends_, recvs_;
};

// The tasks on node `node` of a step from Slurm's compressed per-node counts: "2(x3),1" is 2 tasks on each of
// nodes 0-2 and 1 on node 3. 0 when the text is not in that form or has no such node.
int tasks_on_node(const char* counts, int node) {
  constexpr long kMaxCount = 1 << 24;  // far beyond any machine, and no overflow when adding node counts
  int found = 0;
  long first = 0;  // the first node of the current item
  const char* p = counts;
  do {
    char* end = nullptr;
    const long tasks = std::strtol(p, &end, 10);
    if (end == p || tasks <= 0 || tasks > kMaxCount) return 0;
    long repeat = 1;
    if (*end == '(') {
      if (end[1] != 'x') return 0;
      const char* r = end + 2;
      repeat = std::strtol(r, &end, 10);
      if (end == r || repeat <= 0 || repeat > kMaxCount || *end != ')') return 0;
      ++end;
    }
    if (*end && (*end != ',' || !end[1])) return 0;
    if (node >= first && node < first + repeat) found = static_cast<int>(tasks);
    first += repeat;
    p = end + (*end ? 1 : 0);
  } while (*p);
  return found;
}

}  // namespace

Launch detect_launch() {
  Launch l;
  l.slurm_job = std::getenv("SLURM_JOB_ID") != nullptr;
  if (std::getenv("OMPI_COMM_WORLD_SIZE")) {
    // Before Slurm's variables: mpirun inside an allocation starts its daemons as a step of their own.
    l.launcher = "mpirun";
    l.mpi = true;
    l.rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    l.size = env_int("OMPI_COMM_WORLD_SIZE", 1);
    l.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    l.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  } else if (std::getenv("SLURM_STEP_NUM_TASKS") && std::getenv("SLURM_PROCID")) {
    // A task of a step: only srun sets the step's variables (an sbatch script or salloc shell has SLURM_PROCID=0
    // and the job's SLURM_NTASKS, and is one process).
    l.launcher = "srun";
    l.mpi = true;
    l.rank = env_int("SLURM_PROCID", 0);
    l.size = env_int("SLURM_STEP_NUM_TASKS", 1);
    l.local_rank = env_int("SLURM_LOCALID", 0);
    const char* counts = std::getenv("SLURM_STEP_TASKS_PER_NODE");
    l.local_size = std::max(1, counts ? tasks_on_node(counts, env_int("SLURM_NODEID", 0)) : 1);
  } else if (std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK")) {
    l.launcher = "mpirun";  // MPICH's Hydra (PMI), PRRTE (PMIx)
    l.mpi = true;
    l.rank = env_int("PMI_RANK", env_int("PMIX_RANK", 0));
    l.size = env_int("PMI_SIZE", 1);
    l.local_rank = env_int("MPI_LOCALRANKID", 0);
    l.local_size = env_int("MPI_LOCALNRANKS", 1);
  } else if (std::getenv("WORLD_SIZE") && std::getenv("RANK")) {
    l.launcher = "torchrun";
    l.rank = env_int("RANK", 0);
    l.size = env_int("WORLD_SIZE", 1);
    l.local_rank = env_int("LOCAL_RANK", 0);
    l.local_size = env_int("LOCAL_WORLD_SIZE", 1);
  }
  return l;
}

std::string launch_command(const Launch& launch, const std::string& ranks) {
  if (launch.launcher == "srun" || (launch.launcher == "single" && launch.slurm_job)) return "srun -n " + ranks;
  if (launch.launcher == "torchrun") return "torchrun --nproc-per-node " + ranks + " --no-python";
  return "mpirun -np " + ranks;
}

std::string launch_command(const Launch& launch, int ranks) { return launch_command(launch, std::to_string(ranks)); }

std::unique_ptr<Communicator> make_self() { return std::make_unique<SelfComm>(); }

}  // namespace reprise::comms
