// Shared libraries that register operators with the dispatcher, loaded before a trace is compiled.
#include <dlfcn.h>

#include <filesystem>

#include "reprise/common/error.h"
#include "reprise/replay/replay.h"

namespace reprise::replay {

void load_op_libraries(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      throw UserError(path + ": cannot load it as an op library: " +
                      (std::filesystem::exists(path, ec) ? "not a file" : "no such file"));
    // Global symbols: a library of ops may be split in several (fbgemm_gpu's), each resolving the others'.
    // By its absolute path: dlopen searches the linker's directories for a bare name, not the one checked above.
    if (!dlopen(std::filesystem::absolute(path, ec).c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      const char* why = dlerror();
      std::string reason = why ? why : "the loader gave no reason";
      if (reason.compare(0, path.size() + 2, path + ": ") == 0) reason.erase(0, path.size() + 2);
      throw UserError(path + ": cannot load it as an op library: " + reason.substr(0, reason.find('\n')));
    }
  }
}

}  // namespace reprise::replay
