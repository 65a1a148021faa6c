// Where a JSON text first goes wrong, for the readers' messages (reader_internal.h).
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "reader_internal.h"

namespace reprise::detail {
namespace {

// Accepts every event of a SAX parse and keeps nothing but the first error.
struct NoDom : nlohmann::json_sax<nlohmann::json> {
  size_t at = std::string_view::npos;
  std::string why;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::json::exception& e) override {
    at = position, why = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 9: <reason>": the reason
    const size_t colon = why.find(": ", why.find("parse error"));
    if (colon != std::string::npos) why = why.substr(colon + 2);
    return false;
  }
};

}  // namespace

size_t first_json_error(std::string_view text, std::string& why, bool one_value) {
  NoDom sax;
  nlohmann::json::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json, !one_value);
  if (sax.at == std::string_view::npos) return sax.at;
  why = sax.why;
  return sax.at > 0 ? sax.at - 1 : 0;  // nlohmann counts the bytes read, the bad one included
}

}  // namespace reprise::detail
