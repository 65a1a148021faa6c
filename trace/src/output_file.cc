#include "output_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "byte_source.h"
#include "reprise/common/error.h"
#include "reprise/trace/read.h"

namespace reprise {
namespace {

// What a name leads to once its symbolic links are followed.
struct Target {
  std::string path;
  bool exists = false;
  struct stat st = {};
};

constexpr int kMaxLinks = 40;  // as the kernel's own limit on a path walk

std::string folder_of(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

Target follow_links(const std::string& path) {
  Target t;
  t.path = path;
  for (int hops = 0;; ++hops) {
    if (lstat(t.path.c_str(), &t.st) != 0) {
      if (errno == ENOENT) return t;  // a new file, or the target of a dangling link
      throw UserError(path + ": cannot write: " + std::strerror(errno));
    }
    t.exists = true;
    if (!S_ISLNK(t.st.st_mode)) return t;
    if (hops == kMaxLinks) throw UserError(path + ": cannot write: too many levels of symbolic links");
    char link[PATH_MAX];
    const ssize_t n = readlink(t.path.c_str(), link, sizeof link - 1);
    if (n < 0) throw UserError(path + ": cannot write: " + std::strerror(errno));
    link[n] = 0;
    t.path = link[0] == '/' ? std::string(link) : folder_of(t.path) + "/" + link;
    t.exists = false;
  }
}

// Root may write anything, but a file or folder without a single write bit was made read-only on purpose.
bool writable(const std::string& path, const struct stat& st) {
  return access(path.c_str(), W_OK) == 0 && (geteuid() != 0 || (st.st_mode & 0222) != 0);
}

// The target of `path`, checked as check_output_file promises.
Target checked_target(const std::string& path) {
  Target t = follow_links(path);
  const std::string shown = path + (t.path == path ? "" : " (a link to " + t.path + ")");
  if (t.exists) {
    if (S_ISDIR(t.st.st_mode)) throw UserError(shown + ": is a folder");
    if (!writable(t.path, t.st)) throw UserError(shown + ": is read-only: not replaced");
    if (!S_ISREG(t.st.st_mode)) return t;  // a device, FIFO or socket is written in place: its folder does not matter
  }
  const std::string dir = folder_of(t.path);
  struct stat ds = {};
  if (stat(dir.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode))
    throw UserError(shown + ": folder " + dir + " does not exist");
  if (!writable(dir, ds)) throw UserError(shown + ": folder " + dir + " is not writable");
  return t;
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

void check_output_file(const std::string& path) {
  if (path != "-") checked_target(path);
}

namespace {

// Where a path leads, whether or not it exists yet (its links and `..` resolved as far as they go).
std::filesystem::path resolved(const std::string& path) {
  // Absolute first: weakly_canonical leaves a relative path none of whose parts exist as it is ("x.json"), so it
  // would differ from the same file spelt "./x.json".
  std::error_code ec;
  const std::filesystem::path a = std::filesystem::absolute(path, ec).lexically_normal();
  std::filesystem::path p = std::filesystem::weakly_canonical(a, ec);
  return ec ? a : p;
}

bool inside(const std::filesystem::path& file, const std::filesystem::path& folder) {
  const auto [f, d] = std::mismatch(file.begin(), file.end(), folder.begin(), folder.end());
  return d == folder.end() && f != file.end();
}

// Whether the existing file at `path` is one a load of its folder reads: a trace (by its first bytes, as
// detect_format tells), a capture's manifest or a bundle's.
bool read_with_its_folder(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  if (name == "manifest.json" || name == "benchmark.yaml") return true;
  if (path.parent_path().filename() == "traces") return true;  // a bundle's role files
  std::string head(4096, '\0');
  try {
    const std::unique_ptr<detail::ByteSource> src = detail::open_file(path.string());  // gzip or plain
    head.resize(detail::read_full(*src, head.data(), head.size()));
  } catch (const UserError&) {
    return false;  // unreadable or not gzip after all: not something a load reads
  }
  return detect_format(head, name) != TraceFormat::Unknown;
}

}  // namespace

void check_outputs_apart(const std::vector<std::string>& inputs,
                         const std::vector<std::pair<std::string, std::string>>& outputs) {
  namespace fs = std::filesystem;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [option, out] = outputs[i];
    if (out == "-")
      for (size_t j = 0; j < i; ++j)
        if (outputs[j].second == "-")
          throw UserError(outputs[j].first + " - and " + option + " -: both write to standard output; give one");
    if (out.empty() || out == "-") continue;
    const fs::path o = resolved(out);
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].second.empty() && outputs[j].second != "-" && resolved(outputs[j].second) == o)
        throw UserError(outputs[j].first + " and " + option + " name the same file, " + out +
                        ": one would be written over the other");
    std::error_code ec;
    for (const std::string& in : inputs) {
      const fs::path p = resolved(in);
      if (p == o) throw UserError(option + " " + out + " is the input " + in + ": writing it would destroy it");
      // An ET file's Kineto trace beside it is read with it (load_traces).
      if (const std::string beside = fs::is_regular_file(p, ec) ? kineto_beside(p.string()) : "";
          !beside.empty() && resolved(beside) == o)
        throw UserError(option + " " + out + " is the Kineto trace read with the input " + in +
                        ": writing it would destroy it");
      if (fs::is_directory(p, ec) && inside(o, p) && fs::is_regular_file(o, ec) && read_with_its_folder(o))
        throw UserError(option + " " + out + " is a file of the input " + in + ": writing it would destroy it");
    }
  }
}

OutputFile::OutputFile(const std::string& path, int gzip_level) : path_(path) {
  if (path == "-") {
    is_stdout_ = true;
    file_ = stdout;
    return;
  }
  const Target t = checked_target(path);
  target_ = t.path;
  int fd = -1;
  if (t.exists && !S_ISREG(t.st.st_mode)) {
    fd = open(target_.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) throw UserError(path_ + ": cannot open: " + std::strerror(errno));
  } else {
    tmp_ = target_ + ".tmp-" + std::to_string(getpid());
    guard_ = std::make_unique<RemovedOnSignal>(tmp_);  // before the file exists, so no moment leaves it unguarded
    fd = open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
      const int err = errno;
      guard_.reset();
      throw UserError(path_ + ": cannot create: " + std::strerror(err));
    }
    // The replacement keeps the permissions of the file it replaces (a private file stays private).
    if (t.exists && fchmod(fd, t.st.st_mode & 07777) != 0) {
      const int err = errno;
      ::close(fd);
      fail("cannot set permissions", err);
    }
  }
  if (ends_with(path, ".gz"))
    gz_ = gzdopen(fd, ("wb" + std::to_string(std::clamp(gzip_level, 1, 9))).c_str());
  else
    file_ = fdopen(fd, "wb");
  if (!gz_ && !file_) {
    const int err = errno ? errno : ENOMEM;
    ::close(fd);
    fail("cannot open", err);
  }
}

OutputFile::~OutputFile() {
  if (done_) return;
  close();
  if (!tmp_.empty()) unlink(tmp_.c_str());
}

void OutputFile::write(std::string_view s) {
  // gzwrite takes an unsigned count: large texts go in pieces.
  constexpr size_t kPiece = size_t{1} << 30;
  while (!s.empty() && error_.load(std::memory_order_relaxed) == 0) {
    const size_t n = std::min(s.size(), kPiece);
    errno = 0;
    const bool ok = gz_ ? gzwrite(gz_, s.data(), static_cast<unsigned>(n)) == static_cast<int>(n)
                        : std::fwrite(s.data(), 1, n, file_) == n;
    if (!ok) error_.store(errno ? errno : EIO);
    s.remove_prefix(n);
  }
}

void OutputFile::throw_if_failed() const {
  if (const int err = error_.load()) throw UserError(path_ + ": cannot write: " + std::strerror(err));
}

void OutputFile::commit() {
  if (const int err = error_.load()) fail("cannot write", err);
  if (!close()) fail("cannot write", error_.load());
  if (!tmp_.empty() && std::rename(tmp_.c_str(), target_.c_str()) != 0) fail("cannot replace", errno);
  done_ = true;
  guard_.reset();
}

bool OutputFile::close() {
  int err = 0;
  if (gz_) {
    errno = 0;
    if (gzclose(gz_) != Z_OK) err = errno ? errno : EIO;
    gz_ = nullptr;
  }
  if (file_) {
    if ((is_stdout_ ? std::fflush(file_) : std::fclose(file_)) != 0) err = errno ? errno : EIO;
    file_ = nullptr;
  }
  if (err && error_.load() == 0) error_.store(err);
  return err == 0;
}

void OutputFile::fail(const std::string& what, int err) {
  close();
  if (!tmp_.empty()) unlink(tmp_.c_str());
  done_ = true;
  guard_.reset();
  throw UserError(path_ + ": " + what + ": " + std::strerror(err));
}

}  // namespace reprise
