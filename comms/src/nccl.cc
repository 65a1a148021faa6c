// The NCCL backend: GPU buffers, collectives on a CUDA stream, timed by CUDA events. Bootstrapped through another
// communicator (MPI, or any with exchange()) that carries the unique id.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>

#include "reprise/comms/communicator.h"

namespace reprise::comms {
namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CommError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}
void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw CommError(std::string("NCCL: ") + what + ": " + ncclGetErrorString(r));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat32;
    case DType::F64:
      return ncclFloat64;
    case DType::F16:
      return ncclFloat16;
    case DType::BF16:
      return ncclBfloat16;
    case DType::I8:
      return ncclInt8;
    case DType::U8:
    case DType::Bool:
      return ncclUint8;
    case DType::I32:
      return ncclInt32;
    case DType::I64:
      return ncclInt64;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Prod:
      return ncclProd;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Avg:
      return ncclAvg;
  }
  return ncclSum;
}

class NcclRequest : public Request {
 public:
  cudaEvent_t begin = nullptr, end = nullptr;
  double secs = -1;
  ~NcclRequest() override {
    if (begin) cudaEventDestroy(begin);
    if (end) cudaEventDestroy(end);
  }
  void wait() override {
    if (secs >= 0) return;
    cuda_check(cudaEventSynchronize(end), "wait");
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, begin, end), "elapsed time");
    secs = ms / 1e3;
  }
  void wait_on(void* stream) override {
    cuda_check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), end, 0), "stream wait");
  }
  double seconds() const override {
    if (secs >= 0) return secs;
    float ms = 0;
    if (cudaEventQuery(end) == cudaSuccess && cudaEventElapsedTime(&ms, begin, end) == cudaSuccess) return ms / 1e3;
    return -1;
  }
};

class NcclComm : public Communicator {
 public:
  // `boot` is the world (MPI or TCP), which carries the unique ids. `ranks`: the world ranks of this
  // communicator, ascending; empty = the whole world. Constructing one is collective over the world: every world
  // rank takes part in the exchange, members then initialize NCCL.
  NcclComm(Communicator& boot, std::vector<int> ranks, int device)
      : boot_(boot), ranks_(std::move(ranks)), device_(device) {
    if (ranks_.empty())
      for (int r = 0; r < boot_.size(); ++r) ranks_.push_back(r);
    auto me = std::find(ranks_.begin(), ranks_.end(), boot_.rank());
    member_ = me != ranks_.end();
    rank_ = member_ ? static_cast<int>(me - ranks_.begin()) : -1;
    cuda_check(cudaSetDevice(device_), "set device");
    ncclUniqueId id;
    std::string mine;
    if (rank_ == 0) {
      nccl_check(ncclGetUniqueId(&id), "unique id");
      mine.assign(reinterpret_cast<const char*>(&id), sizeof id);
    }
    std::vector<std::string> all = boot_.exchange(mine);
    const std::string& leader = all.at(static_cast<size_t>(ranks_.front()));
    if (leader.size() != sizeof id) throw CommError("NCCL: bootstrap did not carry the unique id");
    if (!member_) return;
    std::memcpy(&id, leader.data(), sizeof id);
    nccl_check(ncclCommInitRank(&comm_, static_cast<int>(ranks_.size()), id, rank_), "init");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  }
  ~NcclComm() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  std::string backend() const override { return "nccl"; }

  std::unique_ptr<Communicator> split(const std::vector<int>& ranks) override {
    std::vector<int> world_ranks;
    for (int r : ranks) world_ranks.push_back(ranks_.at(static_cast<size_t>(r)));
    auto sub = std::make_unique<NcclComm>(boot_, world_ranks, device_);
    if (!sub->member_) return nullptr;
    return sub;
  }

  std::unique_ptr<Request> start(const Args& a) override { return start_group({a}); }

  // One group call: NCCL defers the operations to ncclGroupEnd, so the events go around the whole group.
  std::unique_ptr<Request> start_group(const std::vector<Args>& ops) override {
    if (ops.empty()) throw CommError("NCCL: an empty group of operations");
    cuda_check(cudaSetDevice(device_), "set device");
    cudaStream_t s = ops.front().stream ? static_cast<cudaStream_t>(ops.front().stream) : stream_;
    auto r = std::make_unique<NcclRequest>();
    cuda_check(cudaEventCreate(&r->begin), "event");
    cuda_check(cudaEventCreate(&r->end), "event");
    cuda_check(cudaEventRecord(r->begin, s), "event record");
    nccl_check(ncclGroupStart(), "group");
    for (const Args& a : ops) issue(a, s);
    nccl_check(ncclGroupEnd(), "group");
    cuda_check(cudaEventRecord(r->end, s), "event record");
    return r;
  }

  std::vector<std::string> exchange(const std::string& mine) override {
    if (static_cast<int>(ranks_.size()) != boot_.size())
      throw CommError("NCCL: exchange() is for the world communicator");
    return boot_.exchange(mine);
  }
  [[noreturn]] void abort(int code) override {
    if (comm_) ncclCommAbort(comm_);
    boot_.abort(code);
    std::_Exit(code);
  }

 private:
  void issue(const Args& a, cudaStream_t s) {
    ncclDataType_t t = nccl_type(a.dtype);
    size_t es = dtype_size(a.dtype);
    const char* in = static_cast<const char*>(a.in);
    char* out = static_cast<char*>(a.out);
    int n = size();
    auto peer_ok = [&](int p) {
      if (p < 0 || p >= n)
        throw CommError("NCCL: peer/root " + std::to_string(p) + " is not a rank of a group of " + std::to_string(n));
    };
    switch (a.kind) {
      case Kind::AllReduce:
        nccl_check(ncclAllReduce(in, out, a.count, t, nccl_op(a.op), comm_, s), "all_reduce");
        break;
      case Kind::AllGather:
        nccl_check(ncclAllGather(in, out, a.count, t, comm_, s), "all_gather");
        break;
      case Kind::ReduceScatter:
        nccl_check(ncclReduceScatter(in, out, a.count, t, nccl_op(a.op), comm_, s), "reduce_scatter");
        break;
      case Kind::AllToAll:
      case Kind::AllToAllV:
        nccl_check(ncclGroupStart(), "group");
        for (int p = 0; p < n; ++p) {
          size_t sc = a.kind == Kind::AllToAll ? a.count : a.in_counts.at(static_cast<size_t>(p));
          size_t so =
              a.kind == Kind::AllToAll ? a.count * static_cast<size_t>(p) : a.in_displs.at(static_cast<size_t>(p));
          size_t rc = a.kind == Kind::AllToAll ? a.count : a.out_counts.at(static_cast<size_t>(p));
          size_t ro =
              a.kind == Kind::AllToAll ? a.count * static_cast<size_t>(p) : a.out_displs.at(static_cast<size_t>(p));
          nccl_check(ncclSend(in + so * es, sc, t, p, comm_, s), "all_to_all send");
          nccl_check(ncclRecv(out + ro * es, rc, t, p, comm_, s), "all_to_all recv");
        }
        nccl_check(ncclGroupEnd(), "group");
        break;
      case Kind::Broadcast:
        peer_ok(a.root);
        nccl_check(ncclBroadcast(in ? in : out, out, a.count, t, a.root, comm_, s), "broadcast");
        break;
      case Kind::Reduce:
        peer_ok(a.root);
        nccl_check(ncclReduce(in, out, a.count, t, nccl_op(a.op), a.root, comm_, s), "reduce");
        break;
      case Kind::Gather:
      case Kind::Scatter: {
        peer_ok(a.root);
        bool gather = a.kind == Kind::Gather;
        nccl_check(ncclGroupStart(), "group");
        if (rank() == a.root)
          for (int p = 0; p < n; ++p) {
            if (gather)
              nccl_check(ncclRecv(out + a.count * es * p, a.count, t, p, comm_, s), "gather recv");
            else
              nccl_check(ncclSend(in + a.count * es * p, a.count, t, p, comm_, s), "scatter send");
          }
        if (gather)
          nccl_check(ncclSend(in, a.count, t, a.root, comm_, s), "gather send");
        else
          nccl_check(ncclRecv(out, a.count, t, a.root, comm_, s), "scatter recv");
        nccl_check(ncclGroupEnd(), "group");
        break;
      }
      case Kind::Send:
        peer_ok(a.peer);
        nccl_check(ncclSend(in, a.count, t, a.peer, comm_, s), "send");
        break;
      case Kind::Recv:
        peer_ok(a.peer);
        nccl_check(ncclRecv(out, a.count, t, a.peer, comm_, s), "recv");
        break;
      case Kind::Barrier: {
        if (!barrier_buf_) cuda_check(cudaMalloc(&barrier_buf_, sizeof(float)), "barrier buffer");
        nccl_check(ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, s), "barrier");
        break;
      }
    }
  }

  Communicator& boot_;
  std::vector<int> ranks_;
  int device_;
  bool member_ = false;
  int rank_ = -1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* barrier_buf_ = nullptr;
};

}  // namespace

Buffer::~Buffer() {
  if (!ptr) return;
  if (device)
    cudaFree(ptr);
  else
    std::free(ptr);
}

std::unique_ptr<Buffer> allocate(const Communicator& c, size_t bytes, int dev) {
  auto b = std::make_unique<Buffer>();
  b->bytes = bytes;
  b->device = c.backend() == "nccl";
  b->dev = dev;
  if (b->device) {
    cuda_check(cudaSetDevice(dev), "set device");
    cudaError_t e = cudaMalloc(&b->ptr, std::max<size_t>(bytes, 1));
    if (e == cudaErrorMemoryAllocation)
      throw CommOutOfMemory("GPU " + std::to_string(dev) + " out of memory allocating " + std::to_string(bytes) +
                            " bytes");
    cuda_check(e, "allocate");
  } else {
    b->ptr = std::malloc(std::max<size_t>(bytes, 1));
    if (!b->ptr) throw CommOutOfMemory("out of memory allocating " + std::to_string(bytes) + " bytes");
  }
  return b;
}

void copy_in(Buffer& b, const void* host, size_t bytes) {
  if (b.device)
    cuda_check(cudaMemcpy(b.ptr, host, bytes, cudaMemcpyHostToDevice), "copy to device");
  else
    std::memcpy(b.ptr, host, bytes);
}

void copy_out(const Buffer& b, void* host, size_t bytes) {
  if (b.device)
    cuda_check(cudaMemcpy(host, b.ptr, bytes, cudaMemcpyDeviceToHost), "copy to host");
  else
    std::memcpy(host, b.ptr, bytes);
}

void device_synchronize(const Communicator& c, int dev) {
  if (c.backend() != "nccl") return;
  cuda_check(cudaSetDevice(dev), "set device");
  cuda_check(cudaDeviceSynchronize(), "synchronize");
}

bool nccl_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::unique_ptr<Communicator> make_nccl(Communicator& bootstrap, int device) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) throw CommError("NCCL: no usable GPU on this machine");
  if (device < 0 || device >= n)
    throw CommError("NCCL: device " + std::to_string(device) + " does not exist (" + std::to_string(n) + " GPUs)");
  return std::make_unique<NcclComm>(bootstrap, std::vector<int>{}, device);
}

}  // namespace reprise::comms
