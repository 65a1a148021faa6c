#include "input_file.h"

#include <fstream>
#include <sstream>

#include "reprise/common/error.h"

namespace reprise::predict::detail {

std::string read_input(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot read");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json parse_json(const std::string& text, const std::string& path) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(path + ": not JSON (" + std::string(e.what()) + ")");
  }
}

}  // namespace reprise::predict::detail
