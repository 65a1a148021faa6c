#include "reprise/common/memory.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace reprise {
namespace {

// A cgroup v2 file's single number; -1 for "max", an absent file or anything else.
int64_t read_cgroup_value(const std::string& path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v == "max") return -1;
  try {
    return std::stoll(v);
  } catch (const std::exception&) {
    return -1;
  }
}

// The memory limit left to this process's cgroup (v2 unified hierarchy), or -1 without one.
int64_t cgroup_room() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, dir;
  while (std::getline(self, line))
    if (line.rfind("0::", 0) == 0) dir = line.substr(3);
  if (dir.empty()) return -1;
  const std::string base = "/sys/fs/cgroup" + (dir == "/" ? std::string() : dir);
  int64_t max = read_cgroup_value(base + "/memory.max"), cur = read_cgroup_value(base + "/memory.current");
  if (max < 0 || cur < 0) return -1;
  return max > cur ? max - cur : 0;
}

}  // namespace

int64_t available_host_memory() {
  int64_t avail = -1;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") {
      avail = kib * 1024;
      break;
    }
  }
  if (avail < 0) {  // no /proc: what the C library says is free
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) avail = static_cast<int64_t>(pages) * page;
  }
  int64_t room = cgroup_room();
  if (room >= 0 && (avail < 0 || room < avail)) avail = room;
  return avail;
}

}  // namespace reprise
