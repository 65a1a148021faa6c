// Fuzz target: the Kineto reader, nesting and node building on arbitrary bytes, and the host overheads `calibrate
// --host-from` measures from what it read (the five kinds per op, their fit).
#include <string>

#include "fuzz_target.h"
#include "reprise/predict/host_overheads.h"
#include "reprise/trace/read.h"
#include "reprise/trace/summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    reprise::TraceSet set;
    set.ranks.emplace_back();
    reprise::read_kineto_text(text, "fuzz.json", set.ranks[0]);
    reprise::summarize(set);
    const reprise::predict::HostOverheads h =
        reprise::predict::fit_host_overheads(reprise::predict::host_samples(set.ranks[0]));
    for (const auto& [op, k] : h.by_op)
      if (!(k.host_seconds() >= 0 && k.host_seconds() <= 2 * 3600)) __builtin_trap();  // negative, NaN, past an hour
  } catch (const reprise::UserError&) {
  }
  return 0;
}
