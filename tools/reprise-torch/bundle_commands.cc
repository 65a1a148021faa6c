// reprise generate and reprise verify: bundles made and checked, with every role dry-run on the meta device.
#include "bundle_commands.h"

#include <boost/program_options.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "progress.h"
#include "reprise/comms/communicator.h"
#include "reprise/generators/generate.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/summary.h"

namespace po = boost::program_options;

namespace reprise::cli {
namespace {

std::string transform_help() {
  std::string s;
  for (const gen::TransformInfo& t : gen::transform_infos()) {
    s += "  " + t.name + ": " + t.summary + "\n    keys:";
    for (const std::string& k : t.keys) s += " " + k;
    s += "\n";
  }
  return s;
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  gen::GenerateOptions o;
  std::string input;
  std::vector<std::string> libraries;
  po::options_description opts(
      "usage: reprise generate CONFIG.yaml --out DIR [options]\n"
      "       reprise generate TRACE --out DIR [options]\n\n"
      "Makes a benchmark bundle: a folder with benchmark.yaml and one ET per role that replays on any machine with\n"
      "`reprise replay DIR` (under mpirun -np WORLD when its world is larger than 1). A CONFIG (docs/configs.md)\n"
      "names a source and the transforms applied to it, in order; a TRACE (file, folder, archive, capture folder\n"
      "or bundle) is bundled as it is. The config is checked before any work, the ranks against each other after\n"
      "the transforms, and every role is dry-run on the meta device; nothing is written unless all pass.\n\n"
      "transforms:\n" +
      transform_help() + "\noptions");
  opts.add_options()("help,h", "show this help")("out,o", po::value(&o.out), "required: the bundle folder")(
      "force", po::bool_switch(&o.force), "replace an existing bundle at --out")(
      "no-dry-run", "skip the meta dry run (the structural checks still run)")(
      "json", "print the bundle's manifest as JSON")("quiet,q", "no progress lines or warnings")(
      "load-library", po::value(&libraries)->composing(),
      "a shared library that registers ops (FBGEMM's fbgemm_gpu_py.so, a custom op library), loaded first so "
      "that the dry run and shape inference run its ops; repeatable")("input", po::value(&input),
                                                                      "the config or trace");
  po::positional_options_description pos;
  pos.add("input", 1);
  auto vm = parse(argc, argv, opts, pos);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (input.empty()) throw UserError("generate: no config or trace given (see reprise generate --help)");
  if (o.out.empty()) throw UserError("generate: --out DIR is required (see reprise generate --help)");
  while (o.out.size() > 1 && o.out.back() == '/') o.out.pop_back();  // "out/" names the folder out
  ProgressLine line;
  if (!vm.count("quiet")) {
    o.warn = [&line](const std::string& w) { line.message("warning: " + w); };
    o.progress = [&line](const std::string& s) { line.message(s); };
  }
  if (!vm.count("no-dry-run"))
    o.dry_run = [](const Trace& t, const std::string& role, const std::vector<int64_t>& steps) {
      replay::dry_run(t, role, steps);
    };
  o.infer_shapes = replay::infer_shapes;
  replay::load_op_libraries(libraries);
  gen::GenerateReport r =
      gen::is_config(input) ? gen::generate_from_config(input, o) : gen::generate_from_trace(input, o);
  if (vm.count("json")) {
    std::cout << gen::bundle_json(r.bundle) << "\n";
    return 0;
  }
  for (const std::string& n : r.notes) std::cout << n << "\n";
  std::cout << "wrote " << o.out << ": " << r.bundle.world_size << " rank(s), " << r.bundle.roles.size()
            << " role file(s), " << r.bundle.transforms.size() << " transform(s) in " << human_seconds(r.seconds)
            << "\n";
  std::cout << "replay: "
            << (r.bundle.world_size > 1 ? comms::launch_command(comms::detect_launch(), r.bundle.world_size) + " " : "")
            << "reprise replay " << o.out << "\n";
  return 0;
}

int cmd_verify(int argc, char** argv) {
  std::string dir;
  po::options_description opts(
      "usage: reprise verify BUNDLE [options]\n\n"
      "Checks a bundle: every role file against its sha256 in benchmark.yaml, the ranks against each other\n"
      "(collective sequences, all_to_allv splits, groups), and every role dry-run on the meta device (every op\n"
      "must accept its inputs). Exit 0 when all pass, 1 when something does not, 2 for what is not a bundle.\n\n"
      "options");
  opts.add_options()("help,h", "show this help")("json", "print the findings as JSON")("quiet,q", "no progress lines")(
      "bundle", po::value(&dir), "the bundle folder");
  po::positional_options_description pos;
  pos.add("bundle", 1);
  auto vm = parse(argc, argv, opts, pos);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (dir.empty()) throw UserError("verify: no bundle given (see reprise verify --help)");
  ProgressLine line;
  auto say = [&](const std::string& s) {
    if (!vm.count("quiet")) line.message(s);
  };
  const gen::Bundle b = gen::read_bundle(dir);
  nlohmann::json j;
  j["bundle"] = dir;
  std::vector<std::string> problems = gen::check_hashes(b);
  j["hashes_ok"] = problems.empty();
  if (problems.empty()) {
    say("checking " + std::to_string(b.world_size) + " rank(s) against each other");
    try {
      gen::check_bundle_ranks(b);
    } catch (const UserError& e) {
      problems.push_back(e.what());
    }
  }
  j["roles"] = nlohmann::json::array();
  for (size_t k = 0; k < b.roles.size() && j["hashes_ok"].get<bool>(); ++k) {
    const gen::BundleRole& role = b.roles[k];
    say("dry run of " + role.file + " on the meta device");
    nlohmann::json e{{"file", role.file}, {"ranks", gen::rank_ranges(role.ranks)}};
    try {
      const Trace t = gen::load_bundle_rank(b, role.ranks.front());
      const replay::ReplayResult r = replay::dry_run(t, role.file, gen::distinct_steps(t));
      e["ops_selected"] = r.compute_selected;
      e["ops_accepted"] = r.compute_replayed;
      e["without_meta_kernel"] = r.compute_selected - r.compute_replayed;
      if (!vm.count("json")) {  // with --json, standard output holds the JSON alone
        std::cout << role.file << " (ranks " << gen::rank_ranges(role.ranks) << "): " << r.compute_replayed << " of "
                  << r.compute_selected << " compute ops accepted on meta";
        if (r.compute_selected > r.compute_replayed)
          std::cout << " (the rest have no meta kernel or no operator in this LibTorch)";
        std::cout << "\n";
      }
    } catch (const UserError& err) {
      e["error"] = err.what();
      // The rank check above may have read this role already and said the same.
      if (std::find(problems.begin(), problems.end(), err.what()) == problems.end()) problems.push_back(err.what());
    }
    j["roles"].push_back(e);
  }
  j["problems"] = problems;
  j["ok"] = problems.empty();
  if (vm.count("json")) std::cout << j.dump(2) << "\n";
  for (const std::string& p : problems) std::cerr << "reprise: verify: " << p << "\n";
  if (!vm.count("json"))
    std::cout << (problems.empty() ? "verified " : "NOT verified ") << dir << ": " << b.roles.size() << " role(s), "
              << b.world_size << " rank(s)\n";
  return problems.empty() ? 0 : 1;
}

}  // namespace reprise::cli
