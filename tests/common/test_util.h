// Helpers shared by the tests: where the shared traces are, model comparison, temporary files.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "reprise/common/error.h"
#include "reprise/trace/trace.h"

namespace reprise::test {

// ../shared/traces relative to the source tree, or REPRISE_SHARED_TRACES; empty when absent.
std::string shared_traces();

#define REPRISE_NEED_SHARED(path_var, rel)                                                       \
  std::string path_var = ::reprise::test::shared_traces();                                       \
  if (path_var.empty() || !std::filesystem::exists(path_var + "/" + (rel)))                      \
    GTEST_SKIP() << "shared trace " << (rel) << " not found (../shared/traces absent): skipped"; \
  path_var += "/" + std::string(rel)

// Empty when the two models hold the same trace (the schema string and whether strides were recorded
// aside); otherwise the first difference.
std::string model_difference(const Trace& a, const Trace& b);

// A fresh temporary folder, removed at the end of the test program.
std::string temp_dir();
// A folder of the running test's own under temp_dir() (Suite.Test), created: file names other tests use too.
std::string test_dir();

std::string write_file(const std::string& path, const std::string& text);

// The process root node an ET starts with, as JSON text: tests build traces around it.
inline const std::string kEtRootNode =
    R"J({"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1, "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []})J";

// The message of the UserError reading `text` as an ET throws ("" when it reads).
std::string et_read_error(const std::string& text, const std::string& name = "bad.json");

// The message of the UserError `f` throws ("" when it throws none).
template <typename F>
std::string user_error(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// What `print(FILE*)` writes (a command's table, a summary), as text.
template <typename F>
std::string printed(F&& print) {
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buf, &size);
  print(out);
  std::fclose(out);
  std::string text(buf, size);
  std::free(buf);
  return text;
}

}  // namespace reprise::test
