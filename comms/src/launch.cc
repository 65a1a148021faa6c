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

}  // namespace

Launch detect_launch() {
  Launch l;
  if (std::getenv("OMPI_COMM_WORLD_SIZE")) {
    l.launcher = "mpirun";
    l.mpi = true;
    l.rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    l.size = env_int("OMPI_COMM_WORLD_SIZE", 1);
    l.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    l.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  } else if (std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK") || std::getenv("SLURM_NTASKS")) {
    l.launcher = std::getenv("SLURM_NTASKS") ? "srun" : "mpirun";
    l.mpi = true;
    l.rank = env_int("PMI_RANK", env_int("PMIX_RANK", env_int("SLURM_PROCID", 0)));
    l.size = env_int("PMI_SIZE", env_int("SLURM_NTASKS", 1));
    l.local_rank = env_int("MPI_LOCALRANKID", env_int("SLURM_LOCALID", 0));
    l.local_size = env_int("MPI_LOCALNRANKS", env_int("SLURM_NTASKS_PER_NODE", 1));
  } else if (std::getenv("WORLD_SIZE") && std::getenv("RANK")) {
    l.launcher = "torchrun";
    l.rank = env_int("RANK", 0);
    l.size = env_int("WORLD_SIZE", 1);
    l.local_rank = env_int("LOCAL_RANK", 0);
    l.local_size = env_int("LOCAL_WORLD_SIZE", 1);
  }
  return l;
}

std::unique_ptr<Communicator> make_self() { return std::make_unique<SelfComm>(); }

}  // namespace reprise::comms
