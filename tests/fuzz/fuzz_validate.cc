// Fuzz target: validate's readers (every predictions format, the replay results) on arbitrary bytes, and the reports
// over what they accept.
#include <string>

#include "fuzz_target.h"
#include "reprise/common/error.h"
#include "validate_formats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reprise::predict;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<Timing> predicted, measured;
  for (const char* path : {"fuzz", "fuzz.csv"}) {
    try {
      for (Timing& t : detail::predictions_from_text(text, path)) predicted.push_back(std::move(t));
    } catch (const reprise::UserError&) {
    }
  }
  try {
    measured.push_back(detail::measurement_from_text(text, "fuzz.json"));
  } catch (const reprise::UserError&) {
  }
  if (predicted.empty()) return 0;
  measured.resize(predicted.size(), measured.empty() ? predicted[0] : measured[0]);
  const Validation v = compare(predicted, measured);
  (void)validation_json(v);
  (void)validation_html(v);
  return 0;
}
