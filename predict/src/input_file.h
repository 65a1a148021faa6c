// Reading the files predict takes in (calibrations, replay results, predictions, comms sweeps, Chakra traces): a
// file that cannot be read, or is not JSON, is one line naming it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace reprise::predict::detail {

std::string read_input(const std::string& path);                              // UserError "PATH: cannot read"
nlohmann::json parse_json(const std::string& text, const std::string& path);  // UserError "PATH: not JSON (why)"
inline nlohmann::json read_json(const std::string& path) { return parse_json(read_input(path), path); }

}  // namespace reprise::predict::detail
