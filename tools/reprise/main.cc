// reprise: one command, a subcommand per capability. Each parses its options and calls one library function.
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli.h"
#include "commands.h"
#include "reprise/common/clock.h"
#include "reprise/generators/bundle.h"
#include "reprise/predict/chakra.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/read.h"
#include "reprise/trace/summary.h"
#include "reprise/trace/write.h"
#include "reprise/version.h"

namespace po = boost::program_options;

namespace {

using reprise::cli::kBadInput;

const char* kTopHelp =
    "usage: reprise <command> [options]\n"
    "\n"
    "Turns captured PyTorch training traces into portable benchmarks.\n"
    "\n"
    "commands:\n"
    "  inspect TRACE...      summarize traces: ops, collectives, process groups, iterations, GPU time\n"
    "  convert IN OUT        rewrite any readable ET in the current schema (1.1.1-chakra.0.0.4), or export it\n"
    "                        as Chakra protobuf for ASTRA-sim (--to chakra)\n"
    "  synth --out FILE      write a synthetic data-parallel MLP trace (demos, tests, benchmarks)\n"
    "  generate CONFIG|TRACE make a benchmark bundle: select, scale, perturb (--out DIR; reprise-torch)\n"
    "  verify BUNDLE         check a bundle's hashes and ranks, and dry-run every role on meta (reprise-torch)\n"
    "  replay TRACE|BUNDLE   re-issue a trace's ops through LibTorch and measure them (reprise-torch)\n"
    "  capture --workload W  run a built-in workload (mlp, dlrm, gpt) and record its trace (reprise-torch)\n"
    "  comms --op OP         nccl-tests-like sweep of a collective over message sizes (MPI or NCCL)\n"
    "  calibrate --out FILE  measure this machine's op rates and overheads for predict (reprise-torch)\n"
    "  predict BUNDLE|TRACE  predict the iteration time on a described cluster (--cluster FILE): models + simulator\n"
    "  validate -p P -m M    predictions (reprise, ASTRA-sim, others) against measured replays: errors, plots\n"
    "  analyze TRACE...      find performance anti-patterns in Kineto traces: findings, savings, HTML, Perfetto\n"
    "\n"
    "TRACE is a PyTorch ET (.json, .json.gz; any schema from 1.0.1), a Kineto trace, a folder of per-rank\n"
    "files, or a .tar/.tar.gz/.tgz of them. `reprise <command> --help` describes each command;\n"
    "`reprise --version` prints the version.\n";

using reprise::UserError;
using reprise::cli::parse;

reprise::ReadOptions read_options(bool quiet) {
  reprise::ReadOptions o;
  if (!quiet) o.warn = [](const std::string& w) { std::cerr << "reprise: warning: " << w << "\n"; };
  return o;
}

// A bundle: its manifest, then each role's summary (the role's first rank stands for it).
int inspect_bundle(const std::string& dir, size_t top, bool json, const std::string& json_out,
                   const reprise::ReadOptions& ro) {
  const reprise::gen::Bundle b = reprise::gen::read_bundle(dir);
  reprise::TraceSet set;
  for (const reprise::gen::BundleRole& r : b.roles)
    set.ranks.push_back(reprise::gen::load_bundle_rank(b, r.ranks.front(), ro));
  const reprise::Summary s = reprise::summarize(set, top);
  const std::string text =
      "{\"bundle\": " + reprise::gen::bundle_json(b) + ", \"roles\": " + reprise::summary_json(s) + "}";
  if (!json_out.empty()) reprise::write_text_file(json_out, text + "\n");
  if (json) {
    std::cout << text << "\n";
    return 0;
  }
  std::FILE* report = reprise::cli::report_stream({json_out});
  reprise::gen::print_bundle(report, b);
  std::fflush(report);
  std::ostream& os = reprise::cli::report_ostream({json_out});
  os << "\n";
  reprise::print_summary(os, s);
  return 0;
}

int cmd_inspect(int argc, char** argv) {
  po::options_description opts(
      "usage: reprise inspect TRACE... [options]\n"
      "       reprise inspect BUNDLE [options]\n\n"
      "Summarizes traces: nodes by kind, top ops by count (and by GPU time when a Kineto trace is linked),\n"
      "collectives by type and bytes, process groups (short names: the trace's description, else pg0, pg1, ... in\n"
      "order of appearance), iterations (ProfilerStep#N), other annotations, tensor bytes, devices. ETs and\n"
      "Kineto traces of the same rank are linked. A BUNDLE (reprise generate) shows its manifest, then each "
      "role.\nChakra files (*.et, reprise convert --to chakra) show their metadata, nodes by type, dependencies and\n"
      "collectives.\n\noptions");
  std::vector<std::string> traces;
  int top = 15;
  std::string json_out;
  opts.add_options()("help,h", "show this help")("json", "print the summary as JSON instead of a table")(
      "json-out", po::value(&json_out), "also write the JSON summary to this file")(
      "top", po::value(&top)->default_value(15), "how many ops to list")("quiet,q", "no warnings")(
      "trace", po::value(&traces)->composing(), "trace files, folders or archives");
  po::positional_options_description pos;
  pos.add("trace", -1);
  auto vm = parse(argc, argv, opts, pos);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (traces.empty()) throw UserError("inspect: no trace given (see reprise inspect --help)");
  if (top < 0 || top > 1000000) throw UserError("inspect: --top " + std::to_string(top) + ": must be 0 to 1000000");
  const bool json = vm.count("json") > 0;
  if (!json_out.empty()) {
    reprise::check_outputs_apart(traces, {{"--json-out", json_out}});
    reprise::cli::check_json_alone(json, "--json-out", json_out);
    reprise::cli::check_output_path(json_out);
  }
  std::ostream& report = reprise::cli::report_ostream({json_out});
  double t0 = reprise::now_seconds();
  if (std::all_of(traces.begin(), traces.end(),
                  [](const std::string& p) { return p.size() > 3 && p.substr(p.size() - 3) == ".et"; })) {
    // Every file read before anything is printed: a bad one is the only line.
    std::vector<reprise::predict::ChakraTrace> graphs;
    for (const std::string& p : traces) graphs.push_back(reprise::predict::read_chakra(p));
    if (json || !json_out.empty()) {
      // One file's summary is an object, several files' an array of them.
      std::string all;
      for (size_t i = 0; i < traces.size(); ++i)
        all += (i ? ",\n" : "") + reprise::predict::chakra_summary_json(graphs[i], traces[i]);
      all = traces.size() == 1 ? all + "\n" : "[\n" + all + "\n]\n";
      if (!json_out.empty()) reprise::write_text_file(json_out, all);
      if (json) {
        std::cout << all;
        return 0;
      }
    }
    for (size_t i = 0; i < traces.size(); ++i) {
      report << "== " << traces[i] << "\n";
      reprise::predict::print_chakra(report, graphs[i]);
    }
    return 0;
  }
  if (traces.size() == 1 && reprise::gen::is_bundle(traces[0]))
    return inspect_bundle(traces[0], static_cast<size_t>(top), vm.count("json") > 0, json_out,
                          read_options(vm.count("quiet") > 0));
  reprise::TraceSet set = reprise::load_traces(traces, read_options(vm.count("quiet") > 0));
  reprise::Summary s = reprise::summarize(set, static_cast<size_t>(top));
  double secs = reprise::now_seconds() - t0;
  if (!json_out.empty()) {
    reprise::write_text_file(json_out, reprise::summary_json(s) + "\n");
  }
  if (json) {
    std::cout << reprise::summary_json(s) << "\n";
  } else {
    reprise::print_summary(report, s);
    report << "read " << set.ranks.size() << " rank(s) in " << reprise::human_seconds(secs) << "\n";
  }
  return 0;
}

int convert_chakra(const std::string& in, const std::string& out, const std::string& prefix,
                   const reprise::predict::ChakraOptions& o, bool quiet) {
  for (const auto& f : reprise::predict::convert_to_chakra(in, out, prefix, o, read_options(quiet))) {
    std::cout << "wrote " << f.path << " (" << f.nodes << " nodes: " << f.comp << " compute, " << f.comm
              << " communication; " << f.data_deps << " data deps, " << f.ctrl_deps << " ctrl deps";
    if (f.skipped) std::cout << "; " << f.skipped << " communication ops without a Chakra type left out";
    std::cout << ")\n";
  }
  return 0;
}

int cmd_convert(int argc, char** argv) {
  po::options_description opts(
      "usage: reprise convert IN OUT [options]\n\n"
      "--to et (default): rewrites a trace in the current ET schema (1.1.1-chakra.0.0.4); gzip when OUT ends in .gz.\n"
      "With several ranks in IN (a folder or archive), OUT is a folder that gets rank-N.json[.gz] files.\n\n"
      "--to chakra: exports IN (a trace, a folder of per-rank traces or a bundle) as MLCommons Chakra protobuf,\n"
      "ASTRA-sim's input: OUT/PREFIX.N.et for every rank, and OUT/PREFIX.json (communicator groups) when the\n"
      "traces name them. Nodes are the ops a replay issues in the first complete ProfilerStep (see --step,\n"
      "--all-steps); docs/chakra.md describes the fields and dependencies.\n\n"
      "options");
  std::string in, out, to = "et", prefix = "workload";
  bool gz = false;
  reprise::predict::ChakraOptions co;
  opts.add_options()("help,h", "show this help")("to", po::value(&to), "output format: et or chakra")(
      "gzip", po::bool_switch(&gz), "compress the per-rank files written into a folder OUT (et)")(
      "prefix", po::value(&prefix), "chakra: file name prefix (PREFIX.N.et), default workload")(
      "step", po::value(&co.steps)->composing(), "chakra: a ProfilerStep number to export (repeat for more)")(
      "all-steps", po::bool_switch(&co.all_steps), "chakra: every ProfilerStep")(
      "ctrl-as-data", po::bool_switch(&co.ctrl_as_data),
      "chakra: write host and stream order into data_deps too (ASTRA-sim's feeder reads only data_deps)")(
      "quiet,q", "no warnings")("in", po::value(&in), "input trace")("out,o", po::value(&out), "output file or folder");
  po::positional_options_description pos;
  pos.add("in", 1).add("out", 1);
  auto vm = parse(argc, argv, opts, pos);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (in.empty() || out.empty()) throw UserError("convert: needs IN and OUT (see reprise convert --help)");
  while (out.size() > 1 && out.back() == '/') out.pop_back();  // "newdir/" is the folder newdir
  // Options of the other format are mistakes, not something to pass over in silence.
  if (to == "et" && (vm.count("prefix") || vm.count("step") || co.all_steps || co.ctrl_as_data))
    throw UserError("convert: --prefix, --step, --all-steps and --ctrl-as-data are for --to chakra");
  if (to == "chakra" && gz) throw UserError("convert: --gzip is for --to et");
  reprise::cli::check_step_choice("convert", "--step", co.steps, "--all-steps", co.all_steps);
  if (to == "chakra" && (prefix.empty() || prefix.find('/') != std::string::npos || prefix == "." || prefix == ".."))
    throw UserError("convert: --prefix '" + prefix + "' is not a file name (PREFIX.N.et is written inside OUT)");
  if (to != "et" && to != "chakra") throw UserError("convert: --to takes et or chakra, not '" + to + "'");
  // OUT is never IN (a trace rewritten over itself, per-rank files written into the folder read), and a folder OUT
  // that does not exist yet is made in a folder that does, as a file would be.
  reprise::check_outputs_apart({in}, {{"OUT", out}});
  if (to == "chakra") {
    reprise::cli::check_output_path(std::filesystem::is_directory(out) ? out + "/" + prefix + ".0.et" : out);
    return convert_chakra(in, out, prefix, co, vm.count("quiet") > 0);
  }
  // OUT is a folder when IN holds several ranks, which only reading IN tells; anything else is a file.
  if (!std::filesystem::is_directory(out)) reprise::cli::check_output_path(out);
  reprise::TraceSet set = reprise::load_traces({in}, read_options(vm.count("quiet") > 0));
  for (auto& t : set.ranks)
    if (t.from_kineto_only) throw reprise::UserError(t.source + ": a Kineto trace has no ET to convert");
  if (set.ranks.size() == 1) {
    reprise::write_et(set.ranks[0], out);
    if (out != "-")
      std::cout << "wrote " << out << " (" << set.ranks[0].nodes.size() << " nodes, schema " << reprise::kCurrentSchema
                << ")\n";
    return 0;
  }
  std::error_code ec;
  std::filesystem::create_directory(out, ec);  // its folder exists (checked above)
  if (ec) throw reprise::UserError(out + ": cannot create folder: " + ec.message());
  for (auto& t : set.ranks) {
    std::string path = out + "/rank-" + std::to_string(t.rank) + (gz ? ".json.gz" : ".json");
    reprise::write_et(t, path);
    std::cout << "wrote " << path << " (" << t.nodes.size() << " nodes)\n";
  }
  return 0;
}

int cmd_synth(int argc, char** argv) {
  po::options_description opts(
      "usage: reprise synth --out FILE [options]\n\n"
      "Writes a synthetic data-parallel MLP training trace (ET, current schema): forward, backward with a\n"
      "gradient all_reduce per layer, optimizer step, one ProfilerStep per iteration.\n\noptions");
  reprise::SyntheticSpec s;
  std::string out;
  opts.add_options()("help,h", "show this help")("out,o", po::value(&out), "output file (.json or .json.gz)")(
      "iterations", po::value(&s.iterations)->default_value(2), "ProfilerStep iterations")(
      "layers", po::value(&s.layers)->default_value(4), "linear layers")(
      "batch", po::value(&s.batch)->default_value(64), "batch size")("hidden", po::value(&s.hidden)->default_value(256),
                                                                     "hidden size")(
      "world-size", po::value(&s.world_size)->default_value(2), "data-parallel ranks")(
      "rank", po::value(&s.rank)->default_value(0), "this trace's rank")(
      "device", po::value(&s.device)->default_value("cpu"), "device recorded on tensors");
  po::positional_options_description pos;
  auto vm = parse(argc, argv, opts, pos);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (out.empty()) throw UserError("synth: --out is required (see reprise synth --help)");
  reprise::check_synthetic_spec(s);  // before the output is checked: a usage error first
  reprise::cli::check_output_path(out);
  reprise::Trace t = reprise::synthetic_trace(s);
  reprise::write_et(t, out);
  if (out != "-")
    std::cout << "wrote " << out << " (" << t.nodes.size() << " nodes, " << t.collectives.size() << " collectives)\n";
  return 0;
}

// Subcommands that need LibTorch (reprise-torch) or MPI (reprise-comms) live in binaries beside this one (as git runs
// git-<command>), so the commands that only read traces start in milliseconds.
int exec_tool(const char* name, const char* needs, int argc, char** argv) {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::filesystem::path tool = (ec ? std::filesystem::path(argv[0]) : self).parent_path() / name;
  if (!std::filesystem::exists(tool)) {
    std::cerr << "reprise: " << argv[1] << " needs " << tool.string() << ", which was not built (" << needs
              << " was not found when configuring)\n";
    return kBadInput;
  }
  std::vector<char*> args;
  args.push_back(const_cast<char*>(tool.c_str()));
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(tool.c_str(), args.data());
  std::cerr << "reprise: cannot run " << tool.string() << ": " << std::strerror(errno) << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kTopHelp;
    return kBadInput;
  }
  std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << kTopHelp;
    return 0;
  }
  return reprise::cli::guarded([&]() -> int {
    if (cmd == "inspect") return cmd_inspect(argc - 1, argv + 1);
    if (cmd == "convert") return cmd_convert(argc - 1, argv + 1);
    if (cmd == "synth") return cmd_synth(argc - 1, argv + 1);
    if (cmd == "predict") return reprise::cli::cmd_predict(argc - 1, argv + 1);
    if (cmd == "validate") return reprise::cli::cmd_validate(argc - 1, argv + 1);
    if (cmd == "analyze") {
      // One mode at a time; training the classifier and measuring fixes need LibTorch: reprise-torch does them.
      std::vector<std::string> modes;
      bool torch = false;
      for (int i = 2; i < argc; ++i)
        for (const char* mode : {"--train", "--measure", "--evaluate", "--make-corpus"}) {
          const size_t n = std::strlen(mode);
          if (std::strncmp(argv[i], mode, n) != 0 || (argv[i][n] != '\0' && argv[i][n] != '=')) continue;
          if (std::find(modes.begin(), modes.end(), mode) == modes.end()) modes.push_back(mode);
          torch = torch || mode == std::string_view("--train") || mode == std::string_view("--measure");
        }
      if (modes.size() > 1)
        throw reprise::UserError("analyze: " + modes[0] + " and " + modes[1] +
                                 " are separate modes: give one (see reprise analyze --help)");
      if (torch) return exec_tool("reprise-torch", "LibTorch", argc, argv);
      return reprise::cli::cmd_analyze(argc - 1, argv + 1);
    }
    if (cmd == "replay" || cmd == "capture" || cmd == "generate" || cmd == "verify" || cmd == "calibrate")
      return exec_tool("reprise-torch", "LibTorch", argc, argv);
    if (cmd == "comms") return exec_tool("reprise-comms", "MPI", argc, argv);
    if (cmd == "--version") {
      std::cout << "reprise " REPRISE_VERSION "\n";
      return 0;
    }
    std::cerr << "reprise: unknown command '" << cmd << "' (see reprise --help)\n";
    return kBadInput;
  });
}
