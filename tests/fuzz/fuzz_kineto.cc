// Fuzz target: the Kineto reader, nesting and node building on arbitrary bytes.
#include <string>

#include "fuzz_target.h"
#include "reprise/trace/read.h"
#include "reprise/trace/summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    reprise::TraceSet set;
    set.ranks.emplace_back();
    reprise::read_kineto_text(text, "fuzz.json", set.ranks[0]);
    reprise::summarize(set);
  } catch (const reprise::UserError&) {
  }
  return 0;
}
