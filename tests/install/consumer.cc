// Reads a trace through the installed Reprise::trace and prints its node count and version.
#include <cstdio>

#include "reprise/trace/builder.h"
#include "reprise/version.h"

int main() {
  reprise::SyntheticSpec spec;
  spec.layers = 2;
  reprise::Trace t = reprise::synthetic_trace(spec);
  std::printf("reprise %s: %zu nodes\n", REPRISE_VERSION, t.nodes.size());
  return t.nodes.empty() ? 1 : 0;
}
