// The predictions and measurement readers on text already in memory: the fuzz target's way in. read_predictions()
// and read_measurement() read the file, then call these; `path` only names the input in errors.
#pragma once

#include <string>
#include <vector>

#include "reprise/predict/validate.h"

namespace reprise::predict::detail {

std::vector<Timing> predictions_from_text(const std::string& text, const std::string& path);
Timing measurement_from_text(const std::string& text, const std::string& path);

}  // namespace reprise::predict::detail
