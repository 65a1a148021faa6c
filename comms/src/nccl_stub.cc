// Built when NCCL or the CUDA toolkit is absent: GPU collectives are reported as unavailable.
#include <cstdlib>
#include <cstring>

#include "reprise/comms/communicator.h"

namespace reprise::comms {

bool nccl_available() { return false; }

Buffer::~Buffer() { std::free(ptr); }

std::unique_ptr<Buffer> allocate(const Communicator&, size_t bytes, int dev) {
  auto b = std::make_unique<Buffer>();
  b->bytes = bytes;
  b->dev = dev;
  b->ptr = std::malloc(bytes ? bytes : 1);
  if (!b->ptr) throw CommOutOfMemory("out of memory allocating " + std::to_string(bytes) + " bytes");
  return b;
}

void copy_in(Buffer& b, const void* host, size_t bytes) { std::memcpy(b.ptr, host, bytes); }
void copy_out(const Buffer& b, void* host, size_t bytes) { std::memcpy(host, b.ptr, bytes); }
void device_synchronize(const Communicator&, int) {}

std::unique_ptr<Communicator> make_nccl(Communicator&, int) {
  throw CommError("NCCL: this build has no NCCL (configure with CUDA and NCCL present)");
}

}  // namespace reprise::comms
