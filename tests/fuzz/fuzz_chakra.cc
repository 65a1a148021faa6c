// Fuzz target: the Chakra decoder on arbitrary bytes; what it decodes encodes to bytes that decode to the same.
#include <cstdlib>
#include <string>

#include "fuzz_target.h"
#include "reprise/common/error.h"
#include "reprise/predict/chakra.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const std::string once = reprise::predict::encode_chakra(reprise::predict::decode_chakra(bytes, "fuzz.et"));
    const std::string twice = reprise::predict::encode_chakra(reprise::predict::decode_chakra(once, "fuzz-again.et"));
    if (once != twice) std::abort();
  } catch (const reprise::UserError&) {
  }
  return 0;
}
