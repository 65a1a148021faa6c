#include "reprise/common/files.h"

#include <ftw.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

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

}  // namespace reprise
