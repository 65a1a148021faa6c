// How much host memory a run may still take, so that work which cannot fit is refused with the figures up front
// rather than ending in the kernel's out-of-memory killer.
#pragma once

#include <cstdint>

namespace reprise {

// Bytes this process can still allocate without swapping: the kernel's MemAvailable, lowered to what the cgroup
// (a container's or a Slurm job's memory limit) has left; -1 when neither can be read.
int64_t available_host_memory();

}  // namespace reprise
