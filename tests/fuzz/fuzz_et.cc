// Fuzz target: the ET reader (and, through it, finalize and the writer) on arbitrary bytes.
#include <string>

#include "fuzz_target.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  reprise::ReadOptions small;
  small.chunk_bytes = 64;  // exercise the cuts between pieces too
  try {
    reprise::Trace t = reprise::read_et_text(text, "fuzz.json", small);
    std::string again = reprise::et_json(t);
    reprise::read_et_text(again, "fuzz-again.json");  // whatever we write, we read
  } catch (const reprise::UserError&) {
  }
  return 0;
}
