// How well the host side of GPU ops is predicted from Kineto traces (docs/performance.md, "Host overheads"): the
// seed's five kinds fitted on some ranks' traces (reprise calibrate --host-from), judged on other ranks' steps
// against what Kineto measured there, beside the constant per-op and per-launch overheads of a cluster file.
//
//   bench_host_overheads --fit ET0 KINETO0 ET1 KINETO1 ... --test ET4 KINETO4 ...   [--op 5e-6 --launch 4e-6]
#include "reprise/predict/host_overheads.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "reprise/common/error.h"
#include "reprise/trace/read.h"

using namespace reprise;
using namespace reprise::predict;

namespace {

// What Kineto measured of one call: its gap (none before a step's first op) and its duration.
double measured(const HostKinds& k) {
  const double op = k.host_seconds() - k.gap_before;
  return op + std::max(k.gap_before, 0.0);
}

struct Model {
  double total = 0;
  std::vector<double> errors;  // per call: |predicted / measured - 1|
};

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> fit, test;
  double op_overhead = 5e-6, launch_overhead = 4e-6;  // clusters/h100-sxm-8.yaml's figures
  std::vector<std::string>* into = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--fit")
      into = &fit;
    else if (a == "--test")
      into = &test;
    else if (a == "--op" && i + 1 < argc)
      op_overhead = std::atof(argv[++i]);
    else if (a == "--launch" && i + 1 < argc)
      launch_overhead = std::atof(argv[++i]);
    else if (into)
      into->push_back(a);
    else {
      std::fprintf(stderr, "usage: bench_host_overheads --fit TRACE... --test TRACE... [--op S] [--launch S]\n");
      return 2;
    }
  }
  try {
    size_t calls = 0;
    const HostOverheads shaped = measure_host_overheads(fit, &calls);
    HostOverheads named = shaped;
    named.by_shape.clear();
    std::printf("fitted on %zu op calls (%zu ops, %zu op shapes)\n\n", calls, shaped.by_op.size(),
                shaped.by_shape.size());
    std::printf("%-6s %6s %12s | %-22s | %-22s | %-22s | %s\n", "rank", "calls", "measured", "five kinds by shape",
                "five kinds by op", "constant overheads", "calls unseen");
    for (const Trace& t : load_traces(test).ranks) {
      Model m[3];  // by shape, by op, constant
      double real = 0;
      size_t unseen = 0;
      const std::vector<HostSample> samples = host_samples(t);
      for (const HostSample& s : samples) {
        const double x = measured(s.kinds);
        real += x;
        const HostKinds* a = shaped.find(s.op, s.shape);
        const HostKinds* b = named.find(s.op, "");
        if (!a) ++unseen;
        const double c = op_overhead + (s.kinds.launches > 0 ? launch_overhead : 0);
        const double p[3] = {a ? a->host_seconds() : c, b ? b->host_seconds() : c, c};
        for (int i = 0; i < 3; ++i) {
          m[i].total += p[i];
          if (x > 0) m[i].errors.push_back(std::fabs(p[i] / x - 1));
        }
      }
      std::printf("%-6lld %6zu %9.3f ms", static_cast<long long>(t.rank), samples.size(), real * 1e3);
      for (const Model& k : m)
        std::printf(" | %7.3f ms %+6.1f%% %4.0f%%", k.total * 1e3, 100 * (k.total / real - 1), 100 * median(k.errors));
      std::printf(" | %zu\n", unseen);
    }
    std::printf("\neach model: the step's host time, its error, and the median per-call error\n");
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_host_overheads: %s\n", e.what());
    return 1;
  }
  return 0;
}
