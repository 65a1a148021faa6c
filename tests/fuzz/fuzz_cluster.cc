// Fuzz target: the cluster description parser on arbitrary bytes. A description it accepts must also survive
// cluster_yaml(): what `reprise calibrate` writes has to load again, as the same description.
#include <cstdlib>
#include <string>

#include "fuzz_target.h"
#include "reprise/common/error.h"
#include "reprise/predict/cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  reprise::predict::Cluster c;
  try {
    c = reprise::predict::parse_cluster(text, "fuzz.yaml");
  } catch (const reprise::UserError&) {
    return 0;
  }
  const std::string written = reprise::predict::cluster_yaml(c);
  if (reprise::predict::cluster_yaml(reprise::predict::parse_cluster(written, "written.yaml")) != written) std::abort();
  return 0;
}
