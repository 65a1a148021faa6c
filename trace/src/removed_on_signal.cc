// The registry of temporaries that a signal must not leave behind. The handler may only make async-signal-safe
// calls, so the paths live in a fixed table of fixed-size slots that the handler reads without a lock, and a
// folder is emptied with openat/getdents64/unlinkat rather than std::filesystem (which allocates).
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "reprise/trace/output.h"

namespace reprise {
namespace {

enum SlotState : int { kFree, kBusy, kArmed };

struct Slot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};

// More temporaries at once than any command makes; a path that finds no slot is written unguarded.
constexpr int kSlots = 64;
Slot g_slots[kSlots];

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kNumSignals = sizeof kSignals / sizeof kSignals[0];
struct sigaction g_previous[kNumSignals];
bool g_installed[kNumSignals];
std::mutex g_mutex;  // guards g_armed and the installing; never taken by the handler
int g_armed = 0;

// A bundle's temporary folder holds traces/ and its files: a few levels are enough.
constexpr int kMaxDepth = 8;

void remove_path(int at, const char* name, int depth) {
  if (unlinkat(at, name, 0) == 0 || errno != EISDIR) return;
  const int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 && depth > 0) {
    // Removing entries while listing may make the listing skip some: list again until a pass removes nothing.
    for (bool removed = true; removed;) {
      removed = false;
      lseek(fd, 0, SEEK_SET);
      char buf[2048];
      ssize_t n;
      while ((n = getdents64(fd, buf, sizeof buf)) > 0)
        for (ssize_t off = 0; off < n;) {
          const auto* d = reinterpret_cast<const dirent64*>(buf + off);
          off += d->d_reclen;
          if (std::strcmp(d->d_name, ".") == 0 || std::strcmp(d->d_name, "..") == 0) continue;
          remove_path(fd, d->d_name, depth - 1);
          removed = true;
        }
    }
  }
  if (fd >= 0) close(fd);
  unlinkat(at, name, AT_REMOVEDIR);
}

// Set while on_signal chains: a handler installed over ours that chains back to ours must not loop.
volatile sig_atomic_t g_chaining = 0;

void remove_armed() {
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == kArmed) remove_path(AT_FDCWD, s.path, kMaxDepth);
}

void on_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  remove_armed();
  if (g_chaining) {
    errno = saved_errno;
    return;
  }
  g_chaining = 1;
  for (int i = 0; i < kNumSignals; ++i) {
    if (kSignals[i] != sig) continue;
    const struct sigaction& prev = g_previous[i];
    if (prev.sa_flags & SA_SIGINFO) {
      prev.sa_sigaction(sig, info, context);
    } else if (prev.sa_handler == SIG_DFL) {
      // Die of the signal itself, as the parent expects: it is blocked while this runs, so it arrives on return.
      sigaction(sig, &prev, nullptr);
      raise(sig);
    } else if (prev.sa_handler != SIG_IGN) {
      prev.sa_handler(sig);
    }
  }
  g_chaining = 0;
  errno = saved_errno;
}

void install() {
  struct sigaction ours = {};
  ours.sa_sigaction = on_signal;
  ours.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&ours.sa_mask);
  for (int sig : kSignals) sigaddset(&ours.sa_mask, sig);
  for (int i = 0; i < kNumSignals; ++i) {
    struct sigaction current = {};
    sigaction(kSignals[i], nullptr, &current);
    const bool ignored = !(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN;
    const bool ours_already = (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_signal;
    g_installed[i] = !ignored && !ours_already;
    if (!g_installed[i]) continue;  // nohup's SIGHUP, a background job's SIGINT
    g_previous[i] = current;
    sigaction(kSignals[i], &ours, nullptr);
  }
}

void uninstall() {
  for (int i = 0; i < kNumSignals; ++i) {
    if (!g_installed[i]) continue;
    struct sigaction current = {};
    sigaction(kSignals[i], nullptr, &current);
    // A handler installed over ours since stays: it may chain to ours, which is harmless with nothing armed.
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_signal)
      sigaction(kSignals[i], &g_previous[i], nullptr);
    g_installed[i] = false;
  }
}

}  // namespace

RemovedOnSignal::RemovedOnSignal(const std::string& path) : slot_(-1) {
  // The handler may run after a chdir: keep the path absolute.
  std::string full = path;
  if (full.empty() || full[0] != '/') {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return;
    full = std::string(cwd) + "/" + path;
  }
  if (full.size() >= PATH_MAX) return;
  for (int i = 0; i < kSlots && slot_ < 0; ++i) {
    int expected = kFree;
    if (g_slots[i].state.compare_exchange_strong(expected, kBusy)) slot_ = i;
  }
  if (slot_ < 0) return;
  std::memcpy(g_slots[slot_].path, full.c_str(), full.size() + 1);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_armed++ == 0) install();
  g_slots[slot_].state.store(kArmed, std::memory_order_release);
}

RemovedOnSignal::~RemovedOnSignal() {
  if (slot_ < 0) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_slots[slot_].state.store(kFree, std::memory_order_release);
  if (--g_armed == 0) uninstall();
}

void remove_registered_now() { remove_armed(); }

}  // namespace reprise
