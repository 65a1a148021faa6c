// One output being written, by the rules in reprise/trace/output.h: a temporary beside the final target renamed over
// it on commit(), or the target itself for a device, FIFO, socket or "-". Gzip when the name ends in .gz ("-" is
// plain). Every failure is a UserError naming the path and the system's reason; a temporary never outlives the
// object, nor a SIGINT/SIGTERM/SIGHUP.
#pragma once

#include <zlib.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "reprise/trace/output.h"

namespace reprise {

class OutputFile {
 public:
  explicit OutputFile(const std::string& path, int gzip_level = 6);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Keeps the first failure and ignores what follows it; throw_if_failed() or commit() reports it. One writer thread
  // at a time.
  void write(std::string_view s);
  void throw_if_failed() const;
  // Flushes and closes, then renames the temporary into place. Throws on any failure, the temporary removed.
  void commit();

 private:
  bool close();
  [[noreturn]] void fail(const std::string& what, int err);

  std::string path_;    // as given: errors name it
  std::string target_;  // where the bytes end up, links followed
  std::string tmp_;     // empty when written in place
  std::unique_ptr<RemovedOnSignal> guard_;
  gzFile gz_ = nullptr;
  std::FILE* file_ = nullptr;
  bool is_stdout_ = false;
  bool done_ = false;
  std::atomic<int> error_{0};  // the errno of the first failed write
};

}  // namespace reprise
