#include "reprise/common/files.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "reprise/common/error.h"

namespace reprise {

namespace {

bool g_left = false;  // nftw's callback takes no context: remove_tree is not called from two threads at once

int remove_entry(const char* path, const struct stat*, int type, struct FTW*) {
  const int rc = type == FTW_DP ? ::rmdir(path) : ::unlink(path);
  if (rc != 0 && errno != ENOENT) g_left = true;
  return 0;  // go on: remove what can be removed
}

}  // namespace

bool remove_tree(const std::string& path) noexcept {
  g_left = false;
  // FTW_DEPTH: a folder after its contents; FTW_PHYS: links themselves, never what they point to.
  if (::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT) return false;
  return !g_left;
}

std::string read_text_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError(path + ": cannot read (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw UserError(path + ": is a folder, not a file");
  }
  std::string text;
  if (S_ISREG(st.st_mode) && st.st_size > 0) text.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const int why = errno;
      ::close(fd);
      throw UserError(path + ": cannot read (" + std::strerror(why) + ")");
    }
  }
  ::close(fd);
  return text;
}

}  // namespace reprise
