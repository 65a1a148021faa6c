// Fuzz target: `reprise predict` over an ET trace of arbitrary bytes: the op families (fbgemm's table-batched lookups
// and their backward among them, read by schema argument names), the step's ops, the program, the simulator and the
// prediction's JSON, on a fixed CPU cluster.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "fuzz_target.h"
#include "reprise/common/error.h"
#include "reprise/predict/predict.h"

namespace {

const char* kCluster = R"Y(name: fuzz-cpu
device:
  kind: cpu
  peak_flops:
    vector:
      fp32: 100e9
  memory_bandwidth: 20e9
topology:
  devices_per_node: 2
  nodes: 2
  levels:
    - {name: shm, span: 2, bandwidth: 5e9, latency: 1e-6}
    - {name: net, span: 4, bandwidth: 1e9, latency: 5e-6}
)Y";

// Left allocated on purpose: the exit handler that removes the file runs after function-local statics are gone.
const std::string& trace_path() {
  static const std::string* path = [] {
    const char* dir = std::getenv("TMPDIR");
    auto* p = new std::string(std::string(dir && *dir ? dir : "/tmp") + "/reprise-fuzz-predict-" +
                              std::to_string(getpid()) + ".json");
    std::atexit([] { std::remove(trace_path().c_str()); });
    return p;
  }();
  return *path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reprise::predict;
  static const PredictOptions options = [] {
    PredictOptions o;
    o.cluster = parse_cluster(kCluster, "fuzz-cluster.yaml");
    return o;
  }();
  {
    std::ofstream f(trace_path(), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const Prediction p = predict(trace_path(), options);
    (void)prediction_json(p);
  } catch (const reprise::UserError&) {
  }
  return 0;
}
