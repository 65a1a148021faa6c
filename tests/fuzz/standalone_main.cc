// Drives a fuzz target without libFuzzer (gcc builds): runs each seed, then a fixed number of
// deterministic mutations of them (byte flips, cuts, inserted structural characters, spliced seeds).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_target.h"

int main(int argc, char** argv) {
  long runs = 10000;
  std::vector<std::string> seeds;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--runs=", 0) == 0) {
      runs = std::strtol(a.c_str() + 7, nullptr, 10);
      continue;
    }
    std::vector<std::string> files;
    if (std::filesystem::is_directory(a)) {
      for (auto& e : std::filesystem::directory_iterator(a)) files.push_back(e.path().string());
    } else {
      files.push_back(a);
    }
    for (auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      seeds.push_back(ss.str());
    }
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "usage: %s [--runs=N] SEED_FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  for (auto& s : seeds) LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  uint64_t state = 0x9E3779B97F4A7C15ULL;
  auto rnd = [&]() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const char structural[] = "{}[]\",:-0123456789.eE\\ntf";
  for (long r = 0; r < runs; ++r) {
    std::string s = seeds[rnd() % seeds.size()];
    int edits = 1 + static_cast<int>(rnd() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t pos = rnd() % s.size();
      switch (rnd() % 6) {
        case 0:
          s[pos] = static_cast<char>(rnd());
          break;
        case 1:
          s[pos] = structural[rnd() % (sizeof structural - 1)];
          break;
        case 2:
          s.resize(pos);
          break;
        case 3:
          s.insert(pos, 1, structural[rnd() % (sizeof structural - 1)]);
          break;
        case 4:
          s.erase(pos, 1 + rnd() % 16);
          break;
        case 5: {
          const std::string& other = seeds[rnd() % seeds.size()];
          size_t from = rnd() % (other.size() + 1);
          s.insert(pos, other.substr(from, rnd() % 64));
          break;
        }
      }
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  std::printf("%ld mutated inputs over %zu seeds: no crash\n", runs, seeds.size());
  return 0;
}
