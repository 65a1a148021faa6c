// What every reprise binary's command line shares: option parsing that turns Boost errors into usage errors, and
// the one place where errors become one line on stderr and an exit status.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iostream>
#include <new>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "reprise/common/error.h"
#include "reprise/trace/output.h"

namespace reprise::cli {

namespace po = boost::program_options;

constexpr int kBadInput = 2;
constexpr int kOutOfMemory = 3;

inline po::variables_map parse(int argc, char** argv, const po::options_description& opts,
                               const po::positional_options_description& pos = {}) {
  // Boost's error messages substitute %name% placeholders until none is left, so an argument that holds one
  // (`--%canonical_option%`) makes building the message loop forever: refuse such arguments first.
  static const std::regex placeholder("%[a-z_]+%");
  for (int i = 1; i < argc; ++i)
    if (std::regex_search(argv[i], placeholder))
      throw UserError(std::string("argument '") + argv[i] + "': a %name% sequence is not accepted in arguments");
  po::variables_map vm;
  try {
    po::parsed_options parsed = po::command_line_parser(argc, argv).options(opts).positional(pos).run();
    // Boost reads "-1" as an unsigned number by wrapping it (--seed -1 was 18446744073709551615): refuse it.
    for (const po::option& o : parsed.options) {
      const po::option_description* d = opts.find_nothrow(o.string_key, false);
      const po::value_semantic* v = d ? d->semantic().get() : nullptr;
      const bool is_unsigned = dynamic_cast<const po::typed_value<unsigned>*>(v) ||
                               dynamic_cast<const po::typed_value<unsigned long>*>(v) ||
                               dynamic_cast<const po::typed_value<unsigned long long>*>(v);
      for (const std::string& value : o.value)
        if (is_unsigned && value.find('-') != std::string::npos)
          throw UserError("--" + o.string_key + " " + value + ": must be 0 or more");
    }
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(e.what());
  }
  return vm;
}

// Runs `body`; usage errors and bad input exit 2, out of memory 3, anything else 1, each as one line.
// An error's message as one line: control characters (a byte of the input quoted in it) shown as spaces, and a
// library's message cut at its first line break (LibTorch's carry a C++ backtrace after it).
inline std::string error_text(const char* what, bool cut) {
  std::string s = what;
  if (cut) s = s.substr(0, s.find('\n'));
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return s;
}

inline int guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const UserError& e) {
    std::cerr << "reprise: " + error_text(e.what(), false) + "\n";  // one write: ranks' lines do not interleave
    return kBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << "reprise: out of memory\n";
    return kOutOfMemory;
  } catch (const std::exception& e) {
    std::cerr << "reprise: " + error_text(e.what(), true) + "\n";  // one write: ranks' lines do not interleave
    return 1;
  }
}

// A size as people write it: 8, 64K, 256M, 1G (K = 1024); `what` names the option in the error.
inline size_t parse_bytes(const std::string& s, const std::string& what) {
  const std::string bad = what + ": bad size '" + s + "' (use 8, 64K, 256M, 1G)";
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw UserError(bad);
  }
  const std::string unit = s.substr(pos);
  double mult = 1;
  if (unit == "K" || unit == "k" || unit == "KB" || unit == "KiB")
    mult = 1024;
  else if (unit == "M" || unit == "MB" || unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B")
    throw UserError(bad);
  if (!(v >= 0) || v * mult > 1e18) throw UserError(bad);
  return static_cast<size_t>(v * mult);
}

// A list of integers as people write it: 0,1,1,0 (no spaces needed, none allowed inside a number); `what` names the
// option in the error.
inline std::vector<int64_t> parse_int_list(const std::string& s, const std::string& what) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t end = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, end - at);
    size_t pos = 0;
    try {
      out.push_back(std::stoll(item, &pos));
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || item.find_first_not_of(" ", pos) != std::string::npos)
      throw UserError(what + ": bad list '" + s + "' (integers separated by commas, e.g. 0,1,1,0)");
    at = end + 1;
  }
  return out;
}

// --host-time's value (replay, analyze --measure, predict), or another option's of the same form (`option`, such as
// --data-loader): none 0, recorded 1, else a scale in (0, 1000]; otherwise a UserError that `command` begins.
inline double parse_host_time(const std::string& text, const std::string& command,
                              const std::string& option = "--host-time") {
  if (text == "none") return 0;
  if (text == "recorded") return 1;
  double scale = 0;
  size_t used = 0;
  try {
    scale = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const bool decimal = text.find_first_of("xXpP") == std::string::npos;  // stod reads 0x10 as 16
  if (!(decimal && used > 0 && used == text.size() && std::isfinite(scale) && scale > 0 && scale <= 1000))
    throw UserError(command + ": " + option +
                    " must be none, recorded or a scale above 0, at most 1000 (such as 0.5), not '" + text + "'");
  return scale;
}

// An output file is checked before any work starts, so a long run is not lost at the end: its folder exists and is
// writable, it is not read-only or a folder; a device, FIFO or `-` is fine, a link is checked at its target.
inline void check_output_path(const std::string& path) { check_output_file(path); }

// Where a command's table and its "wrote ..." lines go: standard output, unless one of its outputs is `-`, which
// then has standard output to itself (JSON a script can read); the table goes to standard error.
inline std::FILE* report_stream(const std::vector<std::string>& outputs) {
  return std::find(outputs.begin(), outputs.end(), "-") == outputs.end() ? stdout : stderr;
}
inline std::ostream& report_ostream(const std::vector<std::string>& outputs) {
  return report_stream(outputs) == stdout ? std::cout : std::cerr;
}

// A choice of steps: `option` N, repeatable with each step once, or `every_option`, not both ("predict: --iteration
// N and --all-iterations: give one", "predict: --iteration 3 is given twice").
inline void check_step_choice(const std::string& command, const std::string& option, const std::vector<int64_t>& steps,
                              const std::string& every_option, bool every) {
  if (!steps.empty() && every) throw UserError(command + ": " + option + " N and " + every_option + ": give one");
  for (size_t i = 0; i < steps.size(); ++i)
    if (std::count(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(i), steps[i]))
      throw UserError(command + ": " + option + " " + std::to_string(steps[i]) + " is given twice");
}

// `--json` prints to standard output: with an output given as `-` too, the JSON would come twice, or two documents
// would run into each other.
inline void check_json_alone(bool json, const std::string& option, const std::string& path) {
  if (json && path == "-") throw UserError("--json and " + option + " -: both write to standard output; give one");
}

}  // namespace reprise::cli
