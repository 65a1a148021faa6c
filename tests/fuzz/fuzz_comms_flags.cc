// Fuzz target: `reprise comms`' command line (tools/reprise-comms/flags.cc) on arbitrary arguments. The first byte
// picks the launch (1-64 ranks), the rest is split into arguments at newlines. Whatever it accepts must be a sweep
// that can run: sizes ordered, a factor above 1, a bounded number of rows, a root that is a rank, and a memory
// estimate that does not overflow.
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.h"
#include "flags.h"
#include "fuzz_target.h"
#include "reprise/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  reprise::comms::Launch launch;
  launch.size = 1 + data[0] % 64;
  launch.local_size = 1 + data[0] % 8;
  std::vector<std::string> args = {"comms"};
  std::string cur;
  for (size_t i = 1; i < size; ++i) {
    if (data[i] == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  args.push_back(cur);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  reprise::cli::CommsFlags f;
  try {
    auto opts = reprise::cli::comms_options(f);
    auto vm = reprise::cli::parse(static_cast<int>(argv.size()), argv.data(), opts);
    reprise::cli::check_comms_flags(f, vm, launch);
    reprise::cli::check_comms_memory(f.sweep, launch, false, int64_t(1) << 40);
  } catch (const reprise::UserError&) {
    return 0;
  }
  const reprise::comms::SweepOptions& o = f.sweep;
  if (o.min_bytes > o.max_bytes || !(o.factor > 1) || o.iters < 1 || o.warmup < 0) std::abort();
  if (reprise::comms::describe(o.kind).rooted && (o.root < 0 || o.root >= launch.size)) std::abort();
  reprise::comms::SweepMemory m = reprise::comms::sweep_memory(o, launch.size);
  if (m.buffers + m.host_copy > (size_t(1) << 40)) std::abort();  // accepted under 1 TiB available
  return 0;
}
