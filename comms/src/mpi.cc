// The MPI backend: CPU buffers, non-blocking MPI-3 collectives.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "reprise/common/clock.h"
#include "reprise/comms/communicator.h"

namespace reprise::comms {
namespace {

bool g_we_initialized = false;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw CommError(std::string("MPI: ") + what + ": " + std::string(msg, static_cast<size_t>(len)));
}

int as_int(size_t n, const char* what) {
  if (n > static_cast<size_t>(INT_MAX))
    throw CommError(std::string("MPI: ") + what + ": " + std::to_string(n) + " elements exceed MPI's int counts");
  return static_cast<int>(n);
}

// IEEE half and bfloat16 <-> float, for the reductions MPI has no type for.
float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, f;
  if (exp == 0) {
    if (man == 0) {
      f = sign;
    } else {  // subnormal
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400u));
      f = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    f = sign | 0x7f800000u | (man << 13);
  } else {
    f = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float out;
  std::memcpy(&out, &f, 4);
  return out;
}

uint16_t float_to_half(float x) {
  uint32_t f;
  std::memcpy(&f, &x, 4);
  uint32_t sign = (f >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((f >> 23) & 0xff) - 127 + 15;
  uint32_t man = f & 0x7fffffu;
  if (((f >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (man ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t h = man >> shift;
    if ((man >> (shift - 1)) & 1u) ++h;  // round half up
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (man >> 13);
  if (man & 0x1000u) ++h;  // round half up (carries into the exponent correctly)
  return static_cast<uint16_t>(h);
}

float bf16_to_float(uint16_t b) {
  uint32_t f = static_cast<uint32_t>(b) << 16;
  float out;
  std::memcpy(&out, &f, 4);
  return out;
}

uint16_t float_to_bf16(float x) {
  uint32_t f;
  std::memcpy(&f, &x, 4);
  f += 0x7fffu + ((f >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(f >> 16);
}

template <float (*To)(uint16_t), uint16_t (*From)(float), int Op>
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = To(a[i]), y = To(b[i]);
    float r = Op == 0 ? x + y : Op == 1 ? x * y : Op == 2 ? (x > y ? x : y) : (x < y ? x : y);
    b[i] = From(r);
  }
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::F64:
      return MPI_DOUBLE;
    case DType::F16:
    case DType::BF16:
      return MPI_UINT16_T;
    case DType::I8:
      return MPI_INT8_T;
    case DType::U8:
      return MPI_UINT8_T;
    case DType::I32:
      return MPI_INT32_T;
    case DType::I64:
      return MPI_INT64_T;
    case DType::Bool:
      return MPI_C_BOOL;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op, DType t) {
  if (t == DType::F16 || t == DType::BF16) {
    static MPI_Op ops[2][4];
    static bool made = false;
    if (!made) {
      MPI_Op_create(&reduce16<half_to_float, float_to_half, 0>, 1, &ops[0][0]);
      MPI_Op_create(&reduce16<half_to_float, float_to_half, 1>, 1, &ops[0][1]);
      MPI_Op_create(&reduce16<half_to_float, float_to_half, 2>, 1, &ops[0][2]);
      MPI_Op_create(&reduce16<half_to_float, float_to_half, 3>, 1, &ops[0][3]);
      MPI_Op_create(&reduce16<bf16_to_float, float_to_bf16, 0>, 1, &ops[1][0]);
      MPI_Op_create(&reduce16<bf16_to_float, float_to_bf16, 1>, 1, &ops[1][1]);
      MPI_Op_create(&reduce16<bf16_to_float, float_to_bf16, 2>, 1, &ops[1][2]);
      MPI_Op_create(&reduce16<bf16_to_float, float_to_bf16, 3>, 1, &ops[1][3]);
      made = true;
    }
    int k = op == ReduceOp::Prod ? 1 : op == ReduceOp::Max ? 2 : op == ReduceOp::Min ? 3 : 0;
    return ops[t == DType::BF16][k];
  }
  if (t == DType::Bool) return op == ReduceOp::Min || op == ReduceOp::Prod ? MPI_LAND : MPI_LOR;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return MPI_SUM;
    case ReduceOp::Prod:
      return MPI_PROD;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

class MpiRequest : public Request {
 public:
  std::vector<MPI_Request> reqs;
  double t0 = 0, secs = -1;
  std::function<void()> after;  // Avg: divide by the group size
  void wait() override {
    if (secs >= 0) return;
    check(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "wait");
    if (after) after();
    secs = now_seconds() - t0;
  }
  double seconds() const override { return secs; }
};

template <typename T>
void divide(void* p, size_t n, int by) {
  T* x = static_cast<T*>(p);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<T>(x[i] / by);
}

class MpiComm : public Communicator {
 public:
  MpiComm(MPI_Comm c, bool owned) : comm_(c), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  std::unique_ptr<Communicator> split(const std::vector<int>& ranks) override {
    bool member = std::find(ranks.begin(), ranks.end(), rank_) != ranks.end();
    MPI_Comm sub = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, member ? 0 : MPI_UNDEFINED, rank_, &sub), "split");
    if (sub == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiComm>(sub, true);
  }

  std::unique_ptr<Request> start(const Args& a) override {
    auto r = std::make_unique<MpiRequest>();
    r->t0 = now_seconds();
    MPI_Datatype t = mpi_type(a.dtype);
    MPI_Op op = mpi_op(a.op, a.dtype);
    MPI_Request q = MPI_REQUEST_NULL;
    int n = as_int(a.count, describe(a.kind).name);
    const void* in = a.in;
    auto peer_ok = [&](int p) {
      if (p < 0 || p >= size_)
        throw CommError("MPI: peer/root " + std::to_string(p) + " is not a rank of a group of " +
                        std::to_string(size_));
    };
    switch (a.kind) {
      case Kind::AllReduce:
        check(MPI_Iallreduce(in == a.out ? MPI_IN_PLACE : in, a.out, n, t, op, comm_, &q), "all_reduce");
        break;
      case Kind::AllGather:
        check(MPI_Iallgather(in, n, t, a.out, n, t, comm_, &q), "all_gather");
        break;
      case Kind::ReduceScatter:
        check(MPI_Ireduce_scatter_block(in, a.out, n, t, op, comm_, &q), "reduce_scatter");
        break;
      case Kind::AllToAll:
        check(MPI_Ialltoall(in, n, t, a.out, n, t, comm_, &q), "all_to_all");
        break;
      case Kind::AllToAllV: {
        if (a.in_counts.size() != size_t(size_) || a.out_counts.size() != size_t(size_) ||
            a.in_displs.size() != size_t(size_) || a.out_displs.size() != size_t(size_))
          throw CommError("MPI: all_to_allv needs one count and displacement per rank (" + std::to_string(size_) + ")");
        auto ints = [&](const std::vector<size_t>& v) {
          std::vector<int> o;
          for (size_t x : v) o.push_back(as_int(x, "all_to_allv"));
          return o;
        };
        // The arrays must outlive the call: keep them with the request.
        auto arrays = std::make_shared<std::vector<std::vector<int>>>(std::vector<std::vector<int>>{
            ints(a.in_counts), ints(a.in_displs), ints(a.out_counts), ints(a.out_displs)});
        check(MPI_Ialltoallv(in, (*arrays)[0].data(), (*arrays)[1].data(), t, a.out, (*arrays)[2].data(),
                             (*arrays)[3].data(), t, comm_, &q),
              "all_to_allv");
        r->after = [arrays] {};
        break;
      }
      case Kind::Broadcast:
        peer_ok(a.root);
        if (rank_ == a.root && in != a.out && in) std::memcpy(a.out, in, a.count * dtype_size(a.dtype));
        check(MPI_Ibcast(a.out, n, t, a.root, comm_, &q), "broadcast");
        break;
      case Kind::Reduce:
        peer_ok(a.root);
        check(MPI_Ireduce(rank_ == a.root && in == a.out ? MPI_IN_PLACE : in, a.out, n, t, op, a.root, comm_, &q),
              "reduce");
        break;
      case Kind::Gather:
        peer_ok(a.root);
        check(MPI_Igather(in, n, t, a.out, n, t, a.root, comm_, &q), "gather");
        break;
      case Kind::Scatter:
        peer_ok(a.root);
        check(MPI_Iscatter(in, n, t, a.out, n, t, a.root, comm_, &q), "scatter");
        break;
      case Kind::Send:
        peer_ok(a.peer);
        check(MPI_Isend(in, n, t, a.peer, 7, comm_, &q), "send");
        break;
      case Kind::Recv:
        peer_ok(a.peer);
        check(MPI_Irecv(a.out, n, t, a.peer, 7, comm_, &q), "recv");
        break;
      case Kind::Barrier:
        check(MPI_Ibarrier(comm_, &q), "barrier");
        break;
    }
    r->reqs.push_back(q);
    if (a.op == ReduceOp::Avg && describe(a.kind).reduces) {
      void* out = a.out;
      size_t cnt = a.count;
      int by = size_;
      bool here = a.kind != Kind::Reduce || rank_ == a.root;
      if (!here) {
      } else if (a.dtype == DType::F32) {
        r->after = [out, cnt, by] { divide<float>(out, cnt, by); };
      } else if (a.dtype == DType::F64) {
        r->after = [out, cnt, by] { divide<double>(out, cnt, by); };
      } else {
        throw CommError("MPI: avg is supported for float and double");
      }
    }
    return r;
  }

  std::vector<std::string> exchange(const std::string& mine) override {
    int len = as_int(mine.size(), "exchange");
    std::vector<int> lens(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_), "exchange");
    size_t total = 0;
    for (int i = 0; i < size_; ++i) {
      displs[static_cast<size_t>(i)] = static_cast<int>(total);
      total += static_cast<size_t>(lens[static_cast<size_t>(i)]);
    }
    std::string all(total, '\0');
    check(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, comm_),
          "exchange");
    std::vector<std::string> out;
    for (int i = 0; i < size_; ++i)
      out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(i)]),
                               static_cast<size_t>(lens[static_cast<size_t>(i)])));
    return out;
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_world() {
  Launch l = detect_launch();
  if (!l.mpi) {
    if (l.size > 1)
      throw CommError("launched by " + l.launcher + " with " + std::to_string(l.size) +
                      " ranks, but CPU collectives need an MPI launch (mpirun or srun)");
    return make_self();
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "init");
    g_we_initialized = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return std::make_unique<MpiComm>(MPI_COMM_WORLD, false);
}

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_we_initialized && !finalized) MPI_Finalize();
}

}  // namespace reprise::comms
