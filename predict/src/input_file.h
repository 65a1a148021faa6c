// Reading the files predict takes in (calibrations, replay results, predictions, comms sweeps, Chakra traces): a
// file that cannot be read, or is not JSON, is one line naming it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace reprise::predict::detail {

std::string read_input(const std::string& path);  // UserError "PATH: cannot read (why)" or "PATH: is a folder, ..."
nlohmann::json parse_json(const std::string& text, const std::string& path);  // UserError "PATH: not JSON (why)"
inline nlohmann::json read_json(const std::string& path) { return parse_json(read_input(path), path); }

// Member `key` of the object `j`, which is at `where` ("FILE: collectives[2]"): a number from lo to hi (finite),
// `fallback` when it is absent (none: it is required). Anything else is UserError "WHERE: KEY: expected ..., got V".
double json_number(const nlohmann::json& j, const char* key, const std::string& where, double lo, double hi,
                   std::optional<double> fallback = std::nullopt);
// The same for an integer.
int64_t json_integer(const nlohmann::json& j, const char* key, const std::string& where, int64_t lo, int64_t hi,
                     std::optional<int64_t> fallback = std::nullopt);
// The same for a string.
std::string json_string(const nlohmann::json& j, const char* key, const std::string& where,
                        std::optional<std::string> fallback = std::nullopt);
// A value (not a member) at `where` as a number from lo to hi.
double json_value_number(const nlohmann::json& v, const std::string& where, double lo, double hi);

}  // namespace reprise::predict::detail
