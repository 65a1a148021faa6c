// Ingest benchmark: reads each ET given (one core) and reports seconds, MB/s and the process's peak RSS.
// Usage: bench_ingest [--repeat N] FILE...   (prints one JSON object per file)
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "reprise/common/clock.h"
#include "reprise/trace/read.h"

int main(int argc, char** argv) {
  int repeat = 1;
  int first = 1;
  if (argc > 2 && std::strcmp(argv[1], "--repeat") == 0) {
    repeat = std::atoi(argv[2]);
    first = 3;
  }
  if (first >= argc) {
    std::fprintf(stderr, "usage: bench_ingest [--repeat N] FILE...\n");
    return 2;
  }
  for (int i = first; i < argc; ++i) {
    double best = 1e30;
    size_t nodes = 0, model = 0;
    for (int r = 0; r < repeat; ++r) {
      double t0 = reprise::now_seconds();
      reprise::TraceSet set = reprise::load_traces({argv[i]});
      double s = reprise::now_seconds() - t0;
      best = std::min(best, s);
      nodes = 0;
      model = 0;
      for (auto& t : set.ranks) {
        nodes += t.nodes.size();
        model += t.memory_bytes();
      }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double mb = static_cast<double>(std::filesystem::file_size(argv[i])) / 1e6;
    std::printf(
        "{\"file\": \"%s\", \"bytes\": %.0f, \"nodes\": %zu, \"seconds\": %.4f, \"mb_per_s\": %.1f, "
        "\"model_bytes\": %zu, \"peak_rss_bytes\": %ld}\n",
        argv[i], mb * 1e6, nodes, best, mb / best, model, ru.ru_maxrss * 1024L);
  }
  return 0;
}
