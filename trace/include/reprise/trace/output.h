// How Reprise writes an output (write_et and write_text_file follow these rules; docs/cli.md, "Outputs"):
//
//   check_output_file("results.json");   // before any work: throws UserError if it could not be written
//   RemovedOnSignal guard(tmp_folder);   // SIGINT/SIGTERM/SIGHUP now remove tmp_folder before the process dies
//
// A regular file (or a new name) is written beside itself and renamed over itself, so it appears whole or not at
// all. A symbolic link is followed to its final target (created when the link dangles), and the link stays. A
// device, FIFO or socket, and "-" (standard output), are written in place. An existing output without write
// permission (as root too: no write bit) is refused, not replaced.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace reprise {

// Throws UserError, naming `path`, when writing it would fail for a reason known now: its folder is missing or not
// writable, it is a folder, it is read-only, or its links loop.
void check_output_file(const std::string& path);

// Throws UserError when an output (its option, "--out", and path) would write over an input (a trace file, or a
// trace, manifest or role file inside an input folder: a capture, a bundle) or over another output: the results
// written over the trace they came from lose the trace. Checked before any work, as check_output_file is.
void check_outputs_apart(const std::vector<std::string>& inputs,
                         const std::vector<std::pair<std::string, std::string>>& outputs);

// While it lives, `path` (a file, or a folder with what it holds) is removed when SIGINT, SIGTERM or SIGHUP ends the
// process; the process then dies of that signal (or the handler that was there before runs). Handlers are in place
// only while some path is registered, and a signal that was ignored stays ignored.
class RemovedOnSignal {
 public:
  explicit RemovedOnSignal(const std::string& path);
  ~RemovedOnSignal();
  RemovedOnSignal(const RemovedOnSignal&) = delete;
  RemovedOnSignal& operator=(const RemovedOnSignal&) = delete;

 private:
  int slot_;
};

// Removes every path a RemovedOnSignal guards, now, with async-signal-safe calls only: for a process about to end
// without unwinding (a watchdog's _Exit), which would otherwise leave them behind.
void remove_registered_now();

}  // namespace reprise
