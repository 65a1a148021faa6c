// Progress of a long command on stderr. Every phase leaves one line ("reprise: validate: 1,204 ops in 10.2 s");
// on a terminal, a phase that runs longer than a second also shows a line redrawn in place (\r) four times a
// second with what is done and the time left, so a replay that validates for 16 s is not silent.
#pragma once

#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "reprise/common/clock.h"
#include "reprise/trace/summary.h"

namespace reprise::cli {

// A phase as ProgressLine::update reads it, for commands whose library reports progress its own way.
struct Phase {
  std::string phase, unit;
  int64_t done = 0, total = 0;
  double expected_seconds = 0;
  bool finished = false;
  std::string note;
};

class ProgressLine {
 public:
  explicit ProgressLine(std::FILE* out = stderr) : out_(out), tty_(isatty(fileno(out)) == 1) {}
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      clear_live();
    }
    cv_.notify_all();
    if (ticker_.joinable()) ticker_.join();
  }

  // A phase begins (done = 0), advances, or ends (finished, with what it found in `note`). P has the fields of
  // reprise::replay::Progress: phase, done, total, unit ("op"; "" when nothing is counted), expected_seconds
  // (0 = unknown), finished, note.
  template <class P>
  void update(const P& p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_ || p.phase != phase_) {
      phase_ = p.phase;
      unit_ = p.unit;
      expected_ = p.expected_seconds;
      start_ = now_seconds();
      done_ = 0;
      done_at_ = 0;
      running_ = true;
    }
    if (p.done != done_) done_at_ = now_seconds() - start_;
    done_ = p.done;
    total_ = p.total;
    if (p.finished) {
      clear_live();
      std::fprintf(out_, "%s\n", final_line(p.note).c_str());
      std::fflush(out_);
      running_ = false;
      return;
    }
    if (tty_ && !ticker_.joinable()) ticker_ = std::thread([this] { tick(); });
    if (tty_ && now_seconds() - start_ > 1) draw_live();
  }

  // A line of its own ("reprise: " + text), printed above the live line.
  void message(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    clear_live();
    std::fprintf(out_, "reprise: %s\n", text.c_str());
    std::fflush(out_);
  }

 private:
  static std::string counted(int64_t n, const std::string& unit) {
    return human_count(n) + " " + unit + (n == 1 ? "" : "s");
  }

  // Seconds for a line redrawn four times a second: "6.2 s", "42 s", "3 min 05 s".
  static std::string short_seconds(double s) {
    char buf[32];
    if (s < 10)
      std::snprintf(buf, sizeof buf, "%.1f s", s);
    else if (s < 60)
      std::snprintf(buf, sizeof buf, "%.0f s", s);
    else
      std::snprintf(buf, sizeof buf, "%d min %02d s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
    return buf;
  }

  std::string final_line(const std::string& note) const {
    std::string line = "reprise: " + phase_ + ": " + (unit_.empty() ? note : counted(done_, unit_)) + " in " +
                       human_seconds(now_seconds() - start_);
    if (!unit_.empty() && !note.empty()) line += " (" + note + ")";
    return line;
  }

  void draw_live() {
    const double elapsed = now_seconds() - start_;
    std::string line = "reprise: " + phase_ + ": ";
    if (!unit_.empty())
      line += (total_ > 0 ? human_count(done_) + "/" + counted(total_, unit_) : counted(done_, unit_)) + ", ";
    line += short_seconds(elapsed);
    // The rate so far once something is done, less the time into the unit under way; before that, what the
    // earlier phases let the replay expect.
    double left = 0;
    if (done_ > 0 && total_ > done_)
      left = done_at_ / static_cast<double>(done_) * static_cast<double>(total_ - done_) - (elapsed - done_at_);
    else if (done_ == 0)
      left = expected_ - elapsed;
    if (left >= 0.05) line += ", about " + short_seconds(left) + " left";
    std::fprintf(out_, "\r\033[K%s", line.c_str());
    std::fflush(out_);
    drawn_ = true;
  }

  void clear_live() {
    if (!drawn_) return;
    std::fprintf(out_, "\r\033[K");
    drawn_ = false;
  }

  // Redraws the live line while a phase runs without reporting (one long step).
  void tick() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(250));
      if (!stop_ && running_ && now_seconds() - start_ > 1) draw_live();
    }
  }

  std::FILE* out_;
  bool tty_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread ticker_;
  bool stop_ = false;
  std::string phase_, unit_;
  int64_t done_ = 0, total_ = 0;
  double done_at_ = 0;  // seconds into the phase when done_ last grew
  double expected_ = 0;
  double start_ = 0;
  bool running_ = false;
  bool drawn_ = false;
};

// A library call that reports its progress as text (analyze's corpus readers), shown as one phase of a ProgressLine:
// redrawn in place on a terminal while it runs, one line when finish() is called. Pass `as_callback()`.
class TextPhase {
 public:
  TextPhase(ProgressLine& line, std::string name, bool quiet) : line_(line), quiet_(quiet) {
    p_.phase = std::move(name);
  }
  std::function<void(const std::string&)> as_callback() {
    return [this](const std::string&) {
      if (!quiet_) line_.update(p_);
    };
  }
  void finish(std::string note) {
    p_.finished = true;
    p_.note = std::move(note);
    if (!quiet_) line_.update(p_);
  }

 private:
  ProgressLine& line_;
  bool quiet_;
  Phase p_;
};

}  // namespace reprise::cli
