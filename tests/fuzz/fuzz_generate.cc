// Fuzz target: generate's transforms. The bytes are a config's text; each entry of its `transforms:` list is parsed
// by its descriptor and applied, in order, to a 2-rank job with shape inference on `meta`, as `reprise generate` has
// it. The job is a synthetic data-parallel MLP (2 iterations of 2 layers), or with `job: dlrm` a DLRM-like step whose
// rank 0 holds 4 embedding tables and rank 1 none, with `job: dlrm_shared` one whose ranks hold 4 tables each
// (tests/common/dlrm_trace.h: for `scale: tables`). A job the transforms accept must pass the ranks' checks, dry-run
// on `meta` and read back from the ET it writes. A UserError is an answer; a crash, an abort, an other exception
// or undefined behaviour is a bug.
//
// Paths stay out of it: a config naming a file (`splice: concat`) would load whatever the bytes name, so inputs with
// '/' or '$' are skipped and relative paths resolve against a folder that does not exist.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "dlrm_trace.h"
#include "fuzz_target.h"
#include "invariants.h"
#include "reprise/common/error.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"
#include "transform.h"
#include "workspace.h"

namespace {

using namespace reprise;

const std::vector<Trace>& mlp() {
  static const std::vector<Trace> roles = [] {
    std::vector<Trace> r;
    for (int rank = 0; rank < 2; ++rank) {
      SyntheticSpec s;
      s.layers = 2;
      s.batch = 8;
      s.hidden = 16;
      s.rank = rank;
      r.push_back(synthetic_trace(s));
    }
    return r;
  }();
  return roles;
}

void run(const std::string& text) {
  const gen::YamlFile f("fuzz.yaml", text);
  if (!f.root().IsMap()) return;  // generate's own check (expect_map), not the transforms'
  const YAML::Node ts = f.root()["transforms"];
  if (!ts || !ts.IsSequence()) return;
  const gen::ConfigContext cx{f, "/nonexistent-reprise-fuzz"};
  std::vector<gen::TransformStep> steps;
  for (const YAML::Node& t : ts) {
    if (!t.IsMap() || t.size() != 1) return;
    const gen::TransformDescriptor* d = gen::find_transform(t.begin()->first.Scalar());
    if (!d) return;
    steps.push_back(d->parse(t.begin()->second, cx));
  }
  gen::Workspace ws;
  const std::string job = f.root()["job"] && f.root()["job"].IsScalar() ? f.root()["job"].Scalar() : "mlp";
  if (job == "dlrm_shared") {  // one role for both ranks
    ws.roles.push_back(test::dlrm(4).t);
    ws.source_rank = {0};
    ws.role_of_rank = {0, 0};
  } else {
    if (job == "dlrm") {
      ws.roles.push_back(test::dlrm(4, 4).t);
      ws.roles.push_back(test::no_tables(4));
    } else {
      for (const Trace& t : mlp()) ws.roles.push_back(clone(t));
    }
    ws.source_rank = {0, 1};
    ws.role_of_rank = {0, 1};
  }
  ws.infer_shapes = replay::infer_shapes;
  for (const gen::TransformStep& step : steps) step(ws);
  gen::check_ranks(ws);
  for (size_t r = 0; r < ws.roles.size(); ++r) {
    replay::dry_run(ws.roles[r], "role " + std::to_string(r));
    read_et_text(et_json(ws.roles[r]), "written");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (text.find_first_of("/$") != std::string::npos) return 0;
  try {
    run(text);
  } catch (const UserError& e) {
    if (std::getenv("REPRISE_FUZZ_VERBOSE")) std::fprintf(stderr, "%s\n", e.what());  // why a seed is refused
  }
  return 0;
}
