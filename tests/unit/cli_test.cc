// End-to-end: the reprise binary's exit codes, messages and outputs.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "kineto_builder.h"
#include "reprise/common/error.h"
#include "reprise/common/files.h"
#include "reprise/predict/calibration.h"
#include "test_util.h"

namespace {

struct Result {
  int status;
  std::string out;
};

// `streams` "2>&1": what the command writes to both; "2>/dev/null": its standard output alone.
Result run(const std::string& args, const std::string& streams = "2>&1") {
  std::string cmd = std::string(REPRISE_BIN) + " " + args + " " + streams;
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST(Cli, HelpForEveryCommand) {
  EXPECT_EQ(run("--help").status, 0);
  std::vector<std::string> commands = {"inspect", "convert", "synth", "predict", "validate", "analyze"};
#ifdef REPRISE_HAVE_REPLAY
  commands.push_back("calibrate");
  commands.push_back("replay");
  commands.push_back("capture");
  commands.push_back("generate");
  commands.push_back("verify");
#endif
#ifdef REPRISE_HAVE_COMMS
  commands.push_back("comms");
#endif
  for (const std::string& c : commands) {
    Result r = run(std::string(c) + " --help");
    EXPECT_EQ(r.status, 0) << c;
    EXPECT_NE(r.out.find("usage: reprise"), std::string::npos) << c;
    // Defaults as a person writes them: "(=0.9)", not the double's "(=0.90000000000000002)".
    EXPECT_FALSE(std::regex_search(r.out, std::regex("\\(=[-0-9.e]{9,}\\)"))) << c;
  }
  EXPECT_EQ(run("frobnicate").status, 2);
  EXPECT_EQ(run("inspect --no-such-flag x").status, 2);
}

// reprise analyze end to end on a Kineto file: the table, every output file, and bad input as one line.
TEST(Cli, AnalyzeWritesItsReportsAndRefusesBadInputInOneLine) {
  const std::string dir = reprise::test::temp_dir();
  std::string events =
      R"({"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 5000})";
  // A sync drains the GPU at 2000; the next kernel is launched 800 us later.
  events +=
      R"(, {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"correlation": 1}})";
  events +=
      R"(, {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 1980, "args": {"correlation": 1, "stream": 7}})";
  events +=
      R"(, {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1, "ts": 100, "dur": 1900, "args": {"correlation": 2}})";
  events +=
      R"(, {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2790, "dur": 5, "args": {"correlation": 3}})";
  events +=
      R"(, {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 2800, "dur": 2100, "args": {"correlation": 3, "stream": 7}})";
  const std::string trace = reprise::test::write_file(dir + "/k.json", "{\"traceEvents\": [" + events + "]}");
  Result r =
      run("analyze " + trace + " --json " + dir + "/a.json --html " + dir + "/a.html --perfetto " + dir + "/p.json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("host_sync"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(std::ifstream(dir + "/a.json"));
  EXPECT_EQ(j["format"], "reprise-analysis/1");
  ASSERT_FALSE(j["findings"].empty());
  EXPECT_EQ(j["findings"][0]["detector"], "host_sync");
  EXPECT_NEAR(j["findings"][0]["saving_us"].get<double>(), 800, 1e-6);
  EXPECT_TRUE(nlohmann::json::accept(std::ifstream(dir + "/p.json")));
  EXPECT_TRUE(std::filesystem::file_size(dir + "/a.html") > 1000);
  Result list = run("analyze --list");
  EXPECT_EQ(list.status, 0);
  EXPECT_NE(list.out.find("single_tensor_optimizer"), std::string::npos);

  auto one_line = [](const Result& bad, const std::string& says) {
    EXPECT_EQ(bad.status, 2) << bad.out;
    EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
    EXPECT_NE(bad.out.find(says), std::string::npos) << bad.out;
  };
  one_line(run("analyze " + dir + "/missing.json -q"), "missing.json");
  one_line(run("analyze -q"), "no trace given");
  one_line(run("analyze " + trace + " --only nope -q"), "unknown detector 'nope'");
  one_line(run("analyze " + trace + " --window -5 -q"), "--window must be a positive number of microseconds");
  one_line(run("analyze " + trace + " --window 0 -q"), "--window must be a positive number of microseconds");
  one_line(run("analyze " + trace + " --json /no/such/dir/a.json -q"), "/no/such/dir");
  const std::string et = reprise::test::write_file(dir + "/et.json", R"({"schema": "1.0.1", "nodes": []})");
  one_line(run("analyze " + et + " -q"), "no Kineto timeline");
  const std::string cut = reprise::test::write_file(dir + "/cut.json", "{\"traceEvents\": [" + events.substr(0, 90));
  one_line(run("analyze " + cut + " -q"), "cut.json");
}

// Every command's -x means the same long option wherever it exists (-o is --out, never --redop), and every command
// with --out has -o (docs/cli.md says so).
TEST(Cli, OneLetterMeansOneOptionAcrossCommands) {
  std::vector<std::string> commands = {"inspect", "convert", "synth", "predict", "validate", "analyze"};
#ifdef REPRISE_HAVE_REPLAY
  for (const char* c : {"calibrate", "replay", "capture", "generate", "verify"}) commands.push_back(c);
#endif
#ifdef REPRISE_HAVE_COMMS
  commands.push_back("comms");
#endif
  std::map<char, std::pair<std::string, std::string>> seen;  // letter -> (long option, first command)
  const std::regex short_long(R"(  -([A-Za-z]) \[ --([a-z0-9-]+) \])");
  const std::regex out_alone(R"((^|\n)  --out )");
  for (const std::string& c : commands) {
    std::string help = run(c + " --help").out;
    EXPECT_FALSE(std::regex_search(help, out_alone)) << c << " has --out without -o";
    for (std::sregex_iterator it(help.begin(), help.end(), short_long), end; it != end; ++it) {
      char letter = (*it)[1].str()[0];
      std::string name = (*it)[2];
      auto [at, fresh] = seen.emplace(letter, std::make_pair(name, c));
      EXPECT_TRUE(fresh || at->second.first == name) << "-" << letter << " is --" << at->second.first << " in "
                                                     << at->second.second << " but --" << name << " in " << c;
    }
  }
  EXPECT_EQ(seen['o'].first, "out");
}

#ifdef REPRISE_HAVE_COMMS
// Usage errors of `reprise comms` are one line, exit 2, found before MPI starts, and name only options the user gave.
TEST(Cli, CommsUsageErrorsAreOneLineExitTwo) {
  struct Case {
    std::string args, says;
  } cases[] = {
      {"--dtype banana", "--dtype banana: unknown"},
      {"--op broadcast --root 5", "--root 5: not a rank of this launch of 1"},
      {"-b 1M -e 8", "--min-bytes 1M is larger than --max-bytes 8"},
      {"-f abc", "('abc') for option '--step-factor' is invalid"},
      {"-f 1.000001", "sizes from 8 to 64M (at most 1000)"},
      {"-n -3", "--iters -3: must be 1 to"},
      {"-w -1", "--warmup -1: must be 0 to"},
      {"-o sum", "unrecognised option '-o'"},
      {"--redop avg --dtype bool", "avg is not defined for bool"},
      {"-b 4096G", "host memory per rank"},
      {"--backend tcp", "--backend tcp: mpi, nccl or auto"},
      {"-e 0",
       "--min-bytes 0 to --max-bytes 0 (x2) gives each of 1 rank(s) an element of all_reduce of float: the "
       "smallest that does is 4 bytes"},
      {"-b 1 -e 7 -d double", "the smallest that does is 8 bytes"},
      // Boost builds its message by substituting %name% until none is left: this one looped forever.
      {"-%canonical_option%fr", "a %name% sequence is not accepted"},
  };
  for (const Case& c : cases) {
    Result r = run("comms " + c.args);
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << ": " << r.out;
    if (c.args == "-b 4096G") {
      EXPECT_EQ(r.out.find("--max-bytes"), std::string::npos) << r.out;
    }
  }
  // A size left at its default follows the one given: -e 4 alone sweeps 4 bytes, not "8 > 4".
  Result small = run("comms -e 4 -n 1 -w 0");
  EXPECT_EQ(small.status, 0) << small.out;
}
#endif

TEST(Cli, SynthInspectConvert) {
  std::string dir = reprise::test::temp_dir();
  Result s = run("synth --out " + dir + "/s.json.gz --iterations 2 --layers 3");
  ASSERT_EQ(s.status, 0) << s.out;
  Result i = run("inspect --json " + dir + "/s.json.gz");
  ASSERT_EQ(i.status, 0) << i.out;
  auto j = nlohmann::json::parse(i.out);
  EXPECT_EQ(j["ranks"][0]["collectives"], 6);
  EXPECT_EQ(j["ranks"][0]["schema"], "1.1.1-chakra.0.0.4");
  Result c = run("convert " + dir + "/s.json.gz " + dir + "/c.json");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/c.json"));
  Result t = run("inspect " + dir + "/c.json");
  EXPECT_NE(t.out.find("all_reduce"), std::string::npos) << t.out;
}

TEST(Cli, ConvertToChakraThenInspect) {
  std::string dir = reprise::test::temp_dir();
  ASSERT_EQ(run("synth --out " + dir + "/s.json.gz --iterations 2 --layers 3 --world-size 2").status, 0);
  Result bad = run("convert --to xml " + dir + "/s.json.gz " + dir + "/x");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("--to takes et or chakra"), std::string::npos) << bad.out;
#ifndef REPRISE_HAVE_CHAKRA
  GTEST_SKIP() << "built without protobuf: no Chakra files";
#endif
  Result c = run("convert --to chakra " + dir + "/s.json.gz " + dir + "/et --prefix mlp");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_NE(c.out.find("wrote " + dir + "/et/mlp.0.et ("), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("3 communication"), std::string::npos) << c.out;  // 3 layers' all_reduce in the first step
  EXPECT_TRUE(std::filesystem::exists(dir + "/et/mlp.json"));
  Result i = run("inspect " + dir + "/et/mlp.0.et");
  ASSERT_EQ(i.status, 0) << i.out;
  EXPECT_NE(i.out.find("ALL_REDUCE x3"), std::string::npos) << i.out;
  // --json and --json-out summarize a Chakra file too.
  Result j = run("inspect " + dir + "/et/mlp.0.et --json --json-out " + dir + "/summary.json");
  ASSERT_EQ(j.status, 0) << j.out;
  const auto summary = nlohmann::json::parse(j.out);
  EXPECT_EQ(summary.at("format"), "reprise-chakra-summary/1");
  EXPECT_EQ(summary.at("comms").at("ALL_REDUCE").at("count"), 3);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir + "/summary.json")), summary);
  // convert writes no Chakra file into the folder it reads.
  std::filesystem::create_directories(dir + "/cap");
  ASSERT_EQ(run("synth --out " + dir + "/cap/rank-0.json --iterations 1 --layers 1").status, 0);
  Result into = run("convert --to chakra " + dir + "/cap " + dir + "/cap");
  EXPECT_EQ(into.status, 2) << into.out;
  EXPECT_NE(into.out.find("is the input"), std::string::npos) << into.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/cap/workload.0.et"));
}

TEST(Cli, BadInputIsOneLineExitTwoAndNoOutputFile) {
  std::string dir = reprise::test::temp_dir();
  std::string bad = reprise::test::write_file(dir + "/bad.json", R"J({"schema": "1.0.1", "nodes": [{"id": 1, )J");
  Result r = run("convert " + bad + " " + dir + "/out.json");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find(bad + ": byte "), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.json"));
  for (auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find("out.json"), std::string::npos) << "left behind: " << e.path();
  Result missing = run("inspect " + dir + "/nope.json");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.out.find("nope.json: no such file"), std::string::npos);
  Result empty = run("inspect " + reprise::test::write_file(dir + "/empty.json", ""));
  EXPECT_EQ(empty.status, 2);
}

TEST(Cli, InspectSharedArchive) {
  REPRISE_NEED_SHARED(path, "param/dlrm_pytorch_et.tar.gz");
  Result r = run("inspect --json " + path);
  ASSERT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["ranks"].size(), 8u);
  for (auto& rank : j["ranks"]) EXPECT_EQ(rank["collectives"].get<int>() + rank["waits"].get<int>(), 13);
}

// A node of a hand-written ET (schema 1.1.0) under `parent`, without arguments unless `inputs` says.
std::string et_node(int id, const std::string& name, int parent,
                    const std::string& inputs = R"({"values": [], "shapes": [], "types": []})") {
  return R"({"id": )" + std::to_string(id) + R"(, "name": ")" + name + R"(", "ctrl_deps": )" + std::to_string(parent) +
         R"(, "inputs": )" + inputs + ", " + R"("outputs": {"values": [], "shapes": [], "types": []}, "attrs": []})";
}

std::string et_trace(const std::vector<std::string>& nodes) {
  std::string j = R"({"schema": "1.1.0-chakra.0.0.4", "nodes": [)";
  for (size_t k = 0; k < nodes.size(); ++k) j += (k ? ",\n" : "\n") + nodes[k];
  return j + "]}";
}

TEST(Cli, InspectListsProfilerStepsAsIterationsAndAnnotationsApart) {
  std::string dir = reprise::test::temp_dir();
  std::string path = reprise::test::write_file(
      dir + "/a.json",
      et_trace({et_node(1, "[pytorch|profiler|execution_trace|process]", 1), et_node(2, "## forward ##", 1),
                et_node(3, "aten::relu", 2), et_node(4, "## backward ##", 1), et_node(5, "## forward ##", 1)}));
  Result r = run("inspect --json " + path);
  ASSERT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(r.out)["ranks"][0];
  EXPECT_TRUE(j["iterations"].empty()) << j["iterations"];
  EXPECT_EQ(j["annotations"], (std::vector<std::string>{"## forward ##", "## backward ##", "## forward ##"}));
  Result text = run("inspect " + path);
  EXPECT_EQ(text.out.find("iterations"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("annotations ## forward ## x2, ## backward ##\n"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("read 1 rank(s) in 0.0"), std::string::npos) << text.out;  // a unit, not 0.000697239 s
}

TEST(Cli, InspectNamesProcessGroupsShortly) {
  // Groups named by raw backend ids (as older PyTorch writes them) and without a description become pg0, pg1;
  // a described group goes by its description. The JSON keeps the raw names.
  std::string groups =
      R"(["[{\"pg_name\": \"94594108284448\", \"backend_config\": \"cpu:gloo\", \"ranks\": [], \"group_size\": 2},)"
      R"( {\"pg_name\": \"94594108290000\", \"backend_config\": \"cpu:gloo\", \"ranks\": [0], \"group_size\": 1},)"
      R"( {\"pg_name\": \"7\", \"pg_desc\": \"tp\", \"backend_config\": \"cpu:gloo\", \"ranks\": [1], \"group_size\": 1}]"])";
  std::string inputs = R"({"values": )" + groups + R"(, "shapes": [[]], "types": ["String"]})";
  std::string dir = reprise::test::temp_dir();
  std::string path =
      reprise::test::write_file(dir + "/pg.json", et_trace({et_node(1, "[pytorch|profiler|execution_trace|process]", 1),
                                                            et_node(2, "## process_group:init ##", 1, inputs)}));
  Result r = run("inspect " + path);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("94594108284448"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  pg0    cpu:gloo"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  pg1    cpu:gloo"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  tp     cpu:gloo"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(run("inspect --json " + path).out)["ranks"][0]["process_groups"];
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["name"], "94594108284448");
  EXPECT_EQ(j[0]["label"], "pg0");
  EXPECT_EQ(j[2]["label"], "tp");
}

TEST(Cli, ValidateTableFilesAndBadInput) {
  Result help = run("validate --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("usage: reprise validate"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("docs/validate.md"), std::string::npos) << help.out;

  std::string dir = reprise::test::temp_dir();
  std::string pred = reprise::test::write_file(dir + "/p.csv", "workload,rank,iteration_seconds\ngpt,,0.011\n");
  std::string astra = reprise::test::write_file(dir + "/a.log", "[workload] [info] sys[0] finished, 9000000 cycles\n");
  std::string meas = reprise::test::write_file(
      dir + "/gpt.replay.json",
      R"({"reprise_replay": 1, "iteration_seconds": [0.01], "median_iteration_seconds": 0.01})");
  Result r = run("validate -p " + pred + " " + astra + " -m " + meas + " " + meas + " --json " + dir +
                 "/v.json --html " + dir + "/v.html --svg " + dir + "/v.svg");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("+10.0%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-10.0%"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(std::ifstream(dir + "/v.json"));
  EXPECT_EQ(j["workloads"].size(), 2u);
  EXPECT_EQ(j["workloads"][1]["predicted"]["simulator"], "astra-sim");
  EXPECT_TRUE(std::filesystem::exists(dir + "/v.html"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/v.svg"));

  std::string bad = reprise::test::write_file(dir + "/bad.csv", "workload,rank,iteration_seconds\ngpt,0,x\n");
  Result e = run("validate -p " + bad + " -m " + meas);
  EXPECT_EQ(e.status, 2) << e.out;
  EXPECT_EQ(std::count(e.out.begin(), e.out.end(), '\n'), 1) << e.out;
  EXPECT_NE(e.out.find(bad + ":2:"), std::string::npos) << e.out;
  EXPECT_EQ(run("validate -p " + pred).status, 2);
}

TEST(Cli, InspectDlrmGroupsAndAnnotations) {
  REPRISE_NEED_SHARED(path, "param/dlrm_pytorch_et.tar.gz");
  Result r = run("inspect -q " + path);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("iterations"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  all_reduce       pg0    Float"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(run("inspect --json -q " + path).out)["ranks"][0];
  EXPECT_TRUE(j["iterations"].empty());
  EXPECT_EQ(j["annotations"].size(), 26u);
  EXPECT_EQ(j["collectives_by_type"][0]["pg"], "94594108284448");
  EXPECT_EQ(j["collectives_by_type"][0]["pg_label"], "pg0");
}

// --emulate-tbe and --load-library reach the replay: the seed trace of fbgemm's table-batched lookups replays whole
// only with the first; a library that cannot load is one line and exit 2.
TEST(Cli, ReplayEmulatesTableBatchedLookupsAndLoadsOpLibraries) {
#ifndef REPRISE_HAVE_REPLAY
  GTEST_SKIP() << "reprise-torch was not built (no LibTorch): skipped";
#else
  const std::string dir = reprise::test::temp_dir();
  const std::string trace = std::string(REPRISE_SOURCE_DIR) + "/tests/fuzz/corpus/predict/table_batched_lookups.json";
  EXPECT_EQ(run("replay " + trace + " --device cpu --iterations 1 --strict -q").status, 1);
  Result r = run("replay " + trace + " --device cpu --iterations 1 --strict -q --emulate-tbe --out " + dir + "/r.json");
  ASSERT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(std::ifstream(dir + "/r.json"));
  EXPECT_EQ(j["coverage"], 1.0);
  EXPECT_EQ(j["compute"]["replayed"], 4) << j["compute"];
  Result lib = run("replay " + trace + " -q --load-library " + dir + "/missing.so");
  EXPECT_EQ(lib.status, 2);
  EXPECT_EQ(lib.out, "reprise: " + dir + "/missing.so: cannot load it as an op library: no such file\n");
#endif
}

TEST(Cli, ReplayWritesResultsAndTimeline) {
#ifndef REPRISE_HAVE_REPLAY
  GTEST_SKIP() << "reprise-torch was not built (no LibTorch): skipped";
#else
  std::string dir = reprise::test::temp_dir();
  ASSERT_EQ(run("synth --out " + dir + "/s.json.gz --iterations 2 --layers 2 --hidden 32 --batch 8").status, 0);
  Result r = run("replay " + dir + "/s.json.gz --device cpu --iterations 3 --warmup 0 --out " + dir +
                 "/r.json --timeline " + dir + "/t.json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("coverage"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(std::ifstream(dir + "/r.json"));
  EXPECT_EQ(j["iteration_seconds"].size(), 3u);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_GT(j["ops_replayed"].get<int>(), 0);
  auto tl = nlohmann::json::parse(std::ifstream(dir + "/t.json"));
  EXPECT_GT(tl["traceEvents"].size(), 10u);

  // --strict: the skipped collectives make it fail, after writing the results.
  Result strict = run("replay " + dir + "/s.json.gz --device cpu --iterations 1 --strict -q --out " + dir + "/s.json");
  EXPECT_EQ(strict.status, 1) << strict.out;
  EXPECT_NE(strict.out.find("--strict: 2 selected op(s) not replayed"), std::string::npos) << strict.out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/s.json"));

  Result missing = run("replay " + dir + "/nope.json");
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(std::count(missing.out.begin(), missing.out.end(), '\n'), 1) << missing.out;
  Result bad_iter = run("replay " + dir + "/s.json.gz --iteration 9 -q");
  EXPECT_EQ(bad_iter.status, 2);
  EXPECT_NE(bad_iter.out.find("no ProfilerStep#9"), std::string::npos) << bad_iter.out;
  Result bad_dev = run("replay " + dir + "/s.json.gz --device tpu -q");
  EXPECT_EQ(bad_dev.status, 2);
  EXPECT_NE(bad_dev.out.find("device 'tpu'"), std::string::npos) << bad_dev.out;
  Result bad_rank = run("replay " + dir + "/s.json.gz --rank 5 -q");
  EXPECT_EQ(bad_rank.status, 2) << bad_rank.out;
  for (const char* host : {"banana", "0", "2x"}) {
    Result bad_host = run("replay " + dir + "/s.json.gz --host-time=" + host + " -q");
    EXPECT_EQ(bad_host.status, 2) << host << ": " << bad_host.out;
    EXPECT_EQ(std::count(bad_host.out.begin(), bad_host.out.end(), '\n'), 1) << bad_host.out;
    EXPECT_NE(bad_host.out.find("--host-time must be none, recorded or a scale"), std::string::npos) << bad_host.out;
  }

  // capture: malformed options are one line and exit 2, and write nothing.
  for (const std::string& args : std::vector<std::string>{
           "--workload resnet --out " + dir + "/c1", "--workload mlp --out " + dir + "/c2 --batch -4", "--workload mlp",
           "--workload mlp --out " + dir + "/c5 --device tpu", "--workload gpt --out " + dir + "/c6 --tp 2"}) {
    Result c = run("capture " + args + " -q");
    EXPECT_EQ(c.status, 2) << args << ": " << c.out;
    EXPECT_EQ(std::count(c.out.begin(), c.out.end(), '\n'), 1) << args << ": " << c.out;
    EXPECT_FALSE(std::filesystem::exists(dir + "/c1/manifest.json"));
  }
#endif
}

TEST(Cli, ReplayProgressIsOneLinePerPhaseOffATerminal) {
#ifndef REPRISE_HAVE_REPLAY
  GTEST_SKIP() << "reprise-torch was not built (no LibTorch): skipped";
#else
  std::string dir = reprise::test::temp_dir();
  ASSERT_EQ(run("synth --out " + dir + "/s.json.gz --iterations 2 --layers 2 --hidden 32 --batch 8").status, 0);
  const std::string args = "replay " + dir + "/s.json.gz --device cpu --iterations 2 --per-op --out " + dir + "/r.json";
  Result r = run(args);
  ASSERT_EQ(r.status, 0) << r.out;
  auto count = [&r](const std::string& s) {
    size_t n = 0;
    for (size_t at = r.out.find(s); at != std::string::npos; at = r.out.find(s, at + 1)) ++n;
    return n;
  };
  for (const char* phase : {"compile", "inputs", "validate", "warm-up", "measure", "per-op", "write"})
    EXPECT_EQ(count(std::string("reprise: ") + phase + ": "), 1u) << phase << " in:\n" << r.out;
  EXPECT_EQ(count("reprise: measure: 2 iterations in "), 1u) << r.out;
  EXPECT_EQ(count("\r"), 0u) << "redrawn lines off a terminal:\n" << r.out;
  Result quiet = run(args + " -q");
  ASSERT_EQ(quiet.status, 0) << quiet.out;
  EXPECT_EQ(quiet.out.find("reprise: "), std::string::npos) << quiet.out;
#endif
}

TEST(Cli, CaptureHelpNamesEveryFileAndItsRequiredOptions) {
#ifndef REPRISE_HAVE_REPLAY
  GTEST_SKIP() << "reprise-torch was not built (no LibTorch): skipped";
#else
  Result r = run("capture --help");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* file : {"rank-N.json.gz", "rank-N.kineto.json.gz", "manifest.json"})
    EXPECT_NE(r.out.find(file), std::string::npos) << file << " in:\n" << r.out;
  EXPECT_EQ(r.out.find("(=mlp)"), std::string::npos) << "a default for a required option:\n" << r.out;
  Result missing = run("capture --out " + reprise::test::temp_dir() + "/c -q");
  EXPECT_EQ(missing.status, 2) << missing.out;
  EXPECT_NE(missing.out.find("--workload NAME is required"), std::string::npos) << missing.out;
  // dlrm's lists: integers separated by commas, one per table, each one line naming the option when it is not.
  const std::string dlrm = "capture --workload dlrm --out " + reprise::test::temp_dir() + "/d -q ";
  for (const char* list : {"0,,1", "", "99999999999999999999"}) {
    Result bad = run(dlrm + "--shards '" + list + "'");
    EXPECT_EQ(bad.status, 2) << list << ": " << bad.out;
    EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
    EXPECT_NE(bad.out.find("capture: --shards: bad list '" + std::string(list) + "'"), std::string::npos) << bad.out;
  }
  Result wrong = run(dlrm + "--tables 4 --table-rows 10,20");
  EXPECT_EQ(wrong.status, 2) << wrong.out;
  EXPECT_NE(wrong.out.find("--table-rows has 2 entries for 4 tables"), std::string::npos) << wrong.out;
#endif
}

#ifdef REPRISE_HAVE_REPLAY
// A bundle end to end: generate from a config, move it, inspect it, verify it, replay it; a tampered role fails
// verify; a bad config is one line with its place, exit 2, and no folder.
TEST(Cli, GenerateInspectVerifyReplayABundle) {
  const std::string dir = reprise::test::temp_dir() + "/cli_bundle";
  std::filesystem::create_directories(dir);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(run("synth --out " + dir + "/rank-" + std::to_string(r) +
                  ".json.gz --world-size 2 --layers 2 --hidden 32 "
                  "--batch 8 --rank " +
                  std::to_string(r))
                  .status,
              0);
  reprise::test::write_file(dir + "/c.yaml",
                            "name: tiny\nsource: .\ntransforms:\n  - select: {iterations: 1}\n"
                            "  - perturb: {dtype: {to: bf16}}\nreplay: {iterations: 2, warmup: 0}\n");
  Result g = run("generate " + dir + "/c.yaml --out " + dir + "/b -q");
  ASSERT_EQ(g.status, 0) << g.out;
  EXPECT_NE(g.out.find("mpirun -np 2 reprise replay"), std::string::npos) << g.out;
  std::filesystem::rename(dir + "/b", dir + "/moved");

  Result i = run("inspect " + dir + "/moved");
  ASSERT_EQ(i.status, 0) << i.out;
  EXPECT_NE(i.out.find("tiny"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("BFloat16"), std::string::npos) << "inspect shows bf16 collectives: " << i.out;
  Result ij = run("inspect --json " + dir + "/moved");
  ASSERT_EQ(ij.status, 0) << ij.out;
  auto j = nlohmann::json::parse(ij.out);
  EXPECT_EQ(j["bundle"]["world_size"], 2);
  EXPECT_EQ(j["bundle"]["roles"].size(), 1u);

  Result v = run("verify " + dir + "/moved");
  EXPECT_EQ(v.status, 0) << v.out;
  EXPECT_NE(v.out.find("verified"), std::string::npos) << v.out;
  Result vj = run("verify " + dir + "/moved --json -q", "2>/dev/null");  // standard output: the JSON alone
  ASSERT_EQ(vj.status, 0) << vj.out;
  EXPECT_EQ(nlohmann::json::parse(vj.out).at("ok"), true) << vj.out;

  // World size 2: a single process replays rank 0 and skips the collectives of a larger job.
  Result rp = run("replay " + dir + "/moved --out " + dir + "/r.json -q");
  ASSERT_EQ(rp.status, 0) << rp.out;
  auto rj = nlohmann::json::parse(std::ifstream(dir + "/r.json"));
  EXPECT_GT(rj["ops_replayed"].get<int64_t>(), 0);
  EXPECT_EQ(rj["iteration_seconds"].size(), 2u) << "the bundle's replay defaults";

  const std::string role = dir + "/moved/traces/role-0.et.json.gz";
  std::ofstream(role, std::ios::app) << "x";
  Result bad = run("verify " + dir + "/moved");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("role-0.et.json.gz"), std::string::npos) << bad.out;
  // A role without a hash that does not read: the rank check and the dry run both fail on it, said once.
  const std::string manifest = dir + "/moved/benchmark.yaml";
  const std::string unhashed = std::regex_replace(reprise::read_text_file(manifest),
                                                  std::regex("(role-0.et.json.gz\n +sha256: )[0-9a-f]+"), "$1\"\"");
  ASSERT_NE(unhashed, reprise::read_text_file(manifest));
  reprise::test::write_file(manifest, unhashed);
  reprise::test::write_file(role, "{\"nodes\": [");
  Result cut = run("verify " + dir + "/moved -q");
  EXPECT_EQ(cut.status, 1) << cut.out;
  const std::string said = "reprise: verify: " + role + ": byte 11: unexpected end of file";
  EXPECT_NE(cut.out.find(said), std::string::npos) << cut.out;
  EXPECT_EQ(cut.out.find(said, cut.out.find(said) + 1), std::string::npos) << "said twice: " << cut.out;

  reprise::test::write_file(dir + "/bad.yaml", "source: .\ntransforms:\n  - scale: {world_size: -3}\n");
  Result e = run("generate " + dir + "/bad.yaml --out " + dir + "/never");
  EXPECT_EQ(e.status, 2) << e.out;
  EXPECT_NE(e.out.find("bad.yaml:3:25: world_size:"), std::string::npos) << e.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/never"));
  EXPECT_EQ(run("verify " + dir).status, 2) << "a folder that is no bundle";
}
#endif

#ifdef REPRISE_HAVE_REPLAY
// analyze --measure on the built-in mlp with dtype churn built in: the detector's fix (the casts dropped) is built by
// the generators, kept with --keep (a bundle), and replayed against the capture; the JSON says what was measured. The
// saving's size is the benchmark's (bench/analyze_measure.py), not a test's.
// The fixes a GPU replay makes (a CUDA graph, pinned copies) on PARAM's linear GPU trace replayed on the CPU: found,
// planned with their transforms, and not measured, with the reason, rather than measured as nothing.
TEST(Cli, AnalyzeMeasureSaysWhyAGpuOnlyFixIsNotMeasuredOnTheCpu) {
  REPRISE_NEED_SHARED(et, "param/linear_et.json.gz");
  REPRISE_NEED_SHARED(kineto, "param/linear_kineto.json.gz");
  const std::string dir = reprise::test::temp_dir() + "/gpu_only_fixes";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(et, dir + "/linear.json.gz", std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(kineto, dir + "/linear.kineto.json.gz", std::filesystem::copy_options::overwrite_existing);
  const Result m = run("analyze " + dir +
                       "/linear.json.gz --measure --only launch_bound --pairs 1 --iterations 1 "
                       "--warmup 0 --device cpu --json " +
                       dir + "/m.json");
  ASSERT_EQ(m.status, 0) << m.out;
  const auto j = nlohmann::json::parse(std::ifstream(dir + "/m.json"));
  ASSERT_EQ(j["measured"].size(), 1u) << j.dump(1);
  EXPECT_EQ(j["measured"][0]["transform"], "replay: {cuda_graph: true}");
  EXPECT_EQ(j["measured"][0]["pairs"], 0);
  EXPECT_EQ(j["measured"][0]["note"], "not measured: a CUDA graph is a GPU replay's (this one runs on cpu)")
      << j.dump(1);
}

TEST(Cli, AnalyzeMeasureReplaysEachFixAgainstTheOriginal) {
  const std::string dir = reprise::test::temp_dir() + "/cli_measure";
  Result c =
      run("capture --workload mlp --anti-pattern casts --batch 64 --hidden 256 --layers 3 --warmup 0 --steps 1 "
          "--threads 1 --out " +
          dir + "/cap -q");
  ASSERT_EQ(c.status, 0) << c.out;
  Result m = run("analyze " + dir + "/cap --measure --pairs 1 --iterations 1 --warmup 0 --only dtype_churn --keep " +
                 dir + "/variants --json " + dir + "/m.json --html " + dir + "/m.html");
  ASSERT_EQ(m.status, 0) << m.out;
  EXPECT_NE(m.out.find("measured savings per step"), std::string::npos) << m.out;
  auto j = nlohmann::json::parse(std::ifstream(dir + "/m.json"));
  ASSERT_EQ(j["measured"].size(), 1u) << j.dump(1);
  const auto& x = j["measured"][0];
  EXPECT_EQ(x["detector"], "dtype_churn");
  EXPECT_EQ(x["pairs"], 1);
  EXPECT_EQ(x["device"], "cpu");
  EXPECT_GT(x["original_us"].get<double>(), 0);
  EXPECT_GT(x["fixed_us"].get<double>(), 0);
  // Two hidden activations, each cast there and back, and autograd's two casts back for each: 8 ops dropped.
  EXPECT_EQ(x["note"], "8 op(s) dropped per pass") << x.dump();
  EXPECT_EQ(x["resolved"], false) << "one pair resolves nothing";
  const std::string html = reprise::read_text_file(dir + "/m.html");
  EXPECT_NE(html.find("<h2>Measured savings per step</h2>"), std::string::npos);
  EXPECT_NE(html.find("<td>dtype_churn</td><td>0</td>"), std::string::npos) << html.substr(0, 4000);
  EXPECT_NE(m.out.find("report: " + dir + "/m.html"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("dtype_churn: 1 pair(s) give no 90% interval of the median"), std::string::npos) << m.out;
  for (const char* b : {"/variants/original/benchmark.yaml", "/variants/fixed-dtype_churn/benchmark.yaml"})
    EXPECT_TRUE(std::filesystem::exists(dir + b)) << b;

  // A fix made from the trace's own sizes: the unaligned hidden size padded to a multiple of 8 (scale: dims).
  c =
      run("capture --workload mlp --anti-pattern unaligned --batch 256 --hidden 256 --layers 2 --warmup 0 --steps 1 "
          "--threads 1 --out " +
          dir + "/unaligned -q");
  ASSERT_EQ(c.status, 0) << c.out;
  m = run("analyze " + dir + "/unaligned --measure --pairs 1 --iterations 1 --warmup 0 --only unaligned_gemm --keep " +
          dir + "/padded --json " + dir + "/u.json");
  ASSERT_EQ(m.status, 0) << m.out;
  j = nlohmann::json::parse(std::ifstream(dir + "/u.json"));
  ASSERT_EQ(j["measured"].size(), 1u) << j.dump(1);
  EXPECT_EQ(j["measured"][0]["transform"], "scale: {dims: {d255: {from: 255, to: 256}}}") << j.dump(1);
  EXPECT_EQ(j["measured"][0]["pairs"], 1) << j.dump(1);
  EXPECT_TRUE(std::filesystem::exists(dir + "/padded/fixed-unaligned_gemm/benchmark.yaml"));

  // A fix the replay makes: the batch made in a DataLoader scope, its time re-spent on the original side only; no
  // bundle of its own.
  c =
      run("capture --workload mlp --anti-pattern loader --batch 256 --hidden 256 --layers 2 --warmup 0 --steps 1 "
          "--threads 1 --out " +
          dir + "/loader -q");
  ASSERT_EQ(c.status, 0) << c.out;
  Result r = run("replay " + dir + "/loader --iterations 1 --warmup 0 -q");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("data loader  left out: the trace's DataLoader calls took "), std::string::npos) << r.out;
  // The capture timed the loader's calls without the observers; replay re-spends that.
  const auto loader_rank = nlohmann::json::parse(std::ifstream(dir + "/loader/manifest.json"))["ranks"][0];
  ASSERT_EQ(loader_rank["data_loader_seconds"].size(), 1u) << loader_rank.dump();
  const double plain_loader = loader_rank["data_loader_seconds"][0].get<double>();
  EXPECT_GT(plain_loader, 0);
  EXPECT_LT(plain_loader, loader_rank["iteration_seconds"][0].get<double>());
  r = run("replay " + dir + "/loader --iterations 1 --warmup 0 -q --data-loader recorded --out " + dir + "/lr.json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NEAR(nlohmann::json::parse(std::ifstream(dir + "/lr.json"))["host_time"]["data_loader_seconds_per_iteration"]
                  .get<double>(),
              plain_loader, 1e-9);
  m = run("analyze " + dir + "/loader --measure --pairs 1 --iterations 1 --warmup 0 --only data_loader --keep " + dir +
          "/loaded --json " + dir + "/l.json");
  ASSERT_EQ(m.status, 0) << m.out;
  j = nlohmann::json::parse(std::ifstream(dir + "/l.json"));
  ASSERT_EQ(j["measured"].size(), 1u) << j.dump(1);
  EXPECT_EQ(j["measured"][0]["transform"], "replay: {data_loader: none}") << j.dump(1);
  EXPECT_EQ(j["measured"][0]["pairs"], 1) << j.dump(1);
  EXPECT_NE(j["measured"][0]["note"].get<std::string>().find("the original re-spends its DataLoader calls' "),
            std::string::npos)
      << j.dump(1);
  EXPECT_FALSE(std::filesystem::exists(dir + "/loaded/fixed-data_loader")) << "the replay's fix has no bundle";

  // Nothing found, nothing to measure (host_sync fires on GPU timelines only); bad input is one line, exit 2.
  Result none = run("analyze " + dir + "/cap --measure --only host_sync");
  EXPECT_EQ(none.status, 0) << none.out;
  EXPECT_NE(none.out.find("nothing to measure"), std::string::npos) << none.out;
  reprise::test::write_file(dir + "/kineto-only.json",
                            R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, )"
                            R"("tid": 1, "ts": 0, "dur": 5000}]})");
  auto one_line = [](const Result& bad, const std::string& says) {
    EXPECT_EQ(bad.status, 2) << bad.out;
    EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
    EXPECT_NE(bad.out.find(says), std::string::npos) << bad.out;
  };
  one_line(run("analyze " + dir + "/cap " + dir + "/cap --measure -q"), "--measure takes one trace");
  one_line(run("analyze " + dir + "/kineto-only.json --measure -q"), "a Kineto trace alone");
  one_line(run("analyze " + dir + "/cap --measure --pairs 0 -q"), "--pairs must be from 1 to 1000");
  one_line(run("capture --workload mlp --anti-pattern slow --out " + dir + "/x -q"), "anti-pattern 'slow': unknown");
}
#endif

// predict on a synthetic trace and a shipped cluster; a missing --cluster or a malformed cluster file is one line,
// exit 2, the file's place named.
TEST(Cli, PredictASynthTraceOnAShippedCluster) {
  const std::string dir = reprise::test::test_dir();
  ASSERT_EQ(run("synth --out " + dir + "/s.json.gz --world-size 2 --iterations 2 --layers 2").status, 0);
  const std::string cluster = std::string(REPRISE_SOURCE_DIR) + "/clusters/cpu-2core-example.yaml";
  Result p = run("predict " + dir + "/s.json.gz --cluster " + cluster + " --out " + dir + "/p.json -q");
  ASSERT_EQ(p.status, 0) << p.out;
  auto j = nlohmann::json::parse(std::ifstream(dir + "/p.json"));
  EXPECT_EQ(j["format"], "reprise-prediction/1");
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_GT(j["iteration_seconds"].get<double>(), 0);
  EXPECT_NE(p.out.find("prediction: " + dir + "/p.json"), std::string::npos) << p.out;

  Result no_cluster = run("predict " + dir + "/s.json.gz");
  EXPECT_EQ(no_cluster.status, 2);
  EXPECT_EQ(std::count(no_cluster.out.begin(), no_cluster.out.end(), '\n'), 1) << no_cluster.out;
  EXPECT_NE(no_cluster.out.find("--cluster is required"), std::string::npos) << no_cluster.out;

  const std::string bad = reprise::test::write_file(dir + "/bad.yaml", "name: bad\ndevice:\n  kind: tpu\n");
  Result b = run("predict " + dir + "/s.json.gz --cluster " + bad + " --out " + dir + "/never.json");
  EXPECT_EQ(b.status, 2) << b.out;
  EXPECT_EQ(std::count(b.out.begin(), b.out.end(), '\n'), 1) << b.out;
  const size_t at = b.out.find(bad + ":");
  ASSERT_NE(at, std::string::npos) << b.out;
  EXPECT_TRUE(std::regex_search(b.out.substr(at + bad.size()), std::regex("^:[0-9]+:[0-9]+: "))) << b.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/never.json"));

  Result missing = run("predict " + dir + "/nope.json --cluster " + cluster);
  EXPECT_EQ(missing.status, 2) << missing.out;
  EXPECT_NE(missing.out.find(dir + "/nope.json"), std::string::npos) << missing.out;

  // A calibration or op-times file of the wrong kind, an impossible confidence: one line each, naming what.
  const std::string other = reprise::test::write_file(dir + "/other.json", "{\"format\": \"something-else/1\"}\n");
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--calibration " + other, other + ": not a Reprise calibration"},
           {"--op-times " + other, other + ": not a reprise replay results file"},
           {"--confidence 1.5", "--confidence"}}) {
    Result e = run("predict " + dir + "/s.json.gz --cluster " + cluster + " " + args + " --out " + dir + "/never.json");
    EXPECT_EQ(e.status, 2) << args << ": " << e.out;
    EXPECT_EQ(std::count(e.out.begin(), e.out.end(), '\n'), 1) << args << ": " << e.out;
    EXPECT_NE(e.out.find(says), std::string::npos) << args << ": " << e.out;
    EXPECT_FALSE(std::filesystem::exists(dir + "/never.json")) << args;
  }

  // --timeline-rank picks the ranks drawn (the default 0 is replaced, not kept; the critical path is drawn on the
  // ranks it crosses); a rank the world lacks is refused.
  Result one = run("predict " + dir + "/s.json.gz --cluster " + cluster + " --timeline-rank 1 --timeline " + dir +
                   "/t1.json -q");
  ASSERT_EQ(one.status, 0) << one.out;
  std::set<int> pids;
  const auto timeline = nlohmann::json::parse(std::ifstream(dir + "/t1.json"));
  for (const auto& e : timeline["traceEvents"])
    if (e.value("ph", "") == "X" && e.value("cat", "") != "critical") pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, std::set<int>{1});
  Result far = run("predict " + dir + "/s.json.gz --cluster " + cluster + " --timeline-rank 7 --timeline " + dir +
                   "/t7.json -q");
  EXPECT_EQ(far.status, 2) << far.out;
  EXPECT_NE(far.out.find("timeline rank 7 is not one of its 2 rank(s)"), std::string::npos) << far.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/t7.json"));
}

#ifdef REPRISE_HAVE_REPLAY
// calibrate --host-from: a GPU step's host side from its Kineto trace, alone with --family none (no sweep).
TEST(Cli, CalibrateHostOverheadsFromKineto) {
  const std::string dir = reprise::test::test_dir();
  reprise::test::Kineto k;
  k.op("ProfilerStep#1", 0, 100);
  k.op("aten::addmm", 10, 40, R"({"Input Dims": [[8], [4, 16], [16, 8]], "Input type": ["float", "float", "float"]})");
  k.gpu("gemm", 20, 5, 30, 10);
  k.op("aten::view", 60, 10);
  std::ofstream(dir + "/k.json") << k.text();
  Result c = run("calibrate --family none --host-from " + dir + "/k.json --out " + dir + "/c.json");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_NE(c.out.find("host overheads: 2 op call(s), 2 op(s), 1 op shape(s)"), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find("warning"), std::string::npos) << c.out;
  // The table of the most called ops: calls, launches, then the kinds.
  EXPECT_TRUE(std::regex_search(c.out, std::regex(R"(aten::addmm +1 +1\.0 +0\.0 us +10\.0 us +5\.0 us)"))) << c.out;
  const reprise::predict::Calibration cal = reprise::predict::read_calibration(dir + "/c.json");
  EXPECT_TRUE(cal.samples.empty());
  ASSERT_EQ(cal.host.by_op.count("aten::addmm"), 1u);
  EXPECT_DOUBLE_EQ(cal.host.by_op.at("aten::addmm").launches, 1);
  EXPECT_NEAR(cal.host.by_op.at("aten::view").gap_before, 10e-6, 1e-12);
  EXPECT_EQ(cal.host.by_shape.count("aten::addmm [8] [4,16] [16,8]"), 1u);

  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--family none", "calibrate: --family none sweeps nothing: give --host-from (or --from-replay) to fit"},
           {"--family none --family memory --host-from " + dir + "/k.json", "it takes no other family"},
           {"--family none --host-from " + dir + "/missing.json", "missing.json"},
           {"--family none --host-from " + dir + "/c.json", "c.json"},
           {"--family none --host-from " + dir + "/k.json --cluster-out " + dir + "/m.yaml",
            "--cluster-out describes the machine a sweep measured: --family none measures none"}}) {
    Result r = run("calibrate " + args + " --out " + dir + "/d.json -q");
    EXPECT_EQ(r.status, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/d.json"));
  // A host timeline without launch calls is measured, and said to be one.
  reprise::test::Kineto host;
  host.op("ProfilerStep#1", 0, 100);
  host.op("aten::add", 10, 40);
  std::ofstream(dir + "/h.json") << host.text();
  Result h = run("calibrate --family none --host-from " + dir + "/h.json --out " + dir + "/h-cal.json -q");
  EXPECT_EQ(h.status, 0) << h.out;
  EXPECT_NE(h.out.find("h.json: no op launched GPU work"), std::string::npos) << h.out;
}

// calibrate: the memory family's quick sweep, one pass, writes a calibration read_calibration accepts.
TEST(Cli, CalibrateQuickMemorySweep) {
  const std::string dir = reprise::test::test_dir();
  Result c =
      run("calibrate --quick --passes 1 --family memory --out " + dir + "/c.json --cluster-out " + dir + "/m.yaml -q");
  ASSERT_EQ(c.status, 0) << c.out;
  // The machine as a cluster: its memory, and its caches where Linux lists them.
  const reprise::predict::Cluster machine = reprise::predict::load_cluster(dir + "/m.yaml");
  EXPECT_EQ(machine.device.kind, "cpu");
  EXPECT_GT(machine.device.memory_bytes, 0);
  if (std::filesystem::exists("/sys/devices/system/cpu/cpu0/cache/index2/size")) {
    EXPECT_GT(machine.device.largest_cache(), 0);
  }
  const reprise::predict::Calibration cal = reprise::predict::read_calibration(dir + "/c.json");
  EXPECT_EQ(cal.device, "cpu");
  EXPECT_FALSE(cal.samples.empty());
  for (const reprise::predict::OpSample& s : cal.samples) {
    EXPECT_EQ(s.family, reprise::predict::OpFamily::Memory) << s.op;
    EXPECT_GT(s.seconds, 0) << s.op;
  }
  EXPECT_TRUE(cal.overheads.count("aten::add"));
  EXPECT_TRUE(cal.sigma.count("memory"));
  // A 64 MiB tensor made afresh costs more than the same fill of one kept: the pages the kernel faults in and zeroes.
  EXPECT_GT(cal.fresh_page_seconds_per_byte, 0);
  EXPECT_NE(c.out.find("fresh pages"), std::string::npos) << c.out;

  // The calibration times the predictions it is given to.
  const std::string cluster = std::string(REPRISE_SOURCE_DIR) + "/clusters/cpu-2core-example.yaml";
  ASSERT_EQ(
      run("synth --out " + dir + "/s.json.gz --world-size 1 --iterations 2 --layers 2 --hidden 32 --batch 8").status,
      0);
  Result p = run("predict " + dir + "/s.json.gz --cluster " + cluster + " --calibration " + dir + "/c.json --out " +
                 dir + "/p.json -q");
  ASSERT_EQ(p.status, 0) << p.out;
  auto pj = nlohmann::json::parse(std::ifstream(dir + "/p.json"));
  EXPECT_EQ(pj["calibration"], dir + "/c.json");
  EXPECT_GT(pj["iteration_seconds"].get<double>(), 0);

  Result t = run("calibrate --threads 0 --out " + dir + "/t.json");
  EXPECT_EQ(t.status, 2) << t.out;
  EXPECT_EQ(std::count(t.out.begin(), t.out.end(), '\n'), 1) << t.out;
  EXPECT_NE(t.out.find("--threads"), std::string::npos) << t.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/t.json"));
}

// A replay's per-op times feed predict (--op-times: every op measured) and calibrate (--from-replay).
TEST(Cli, ReplayPerOpTimesFeedPredictAndCalibrate) {
  const std::string dir = reprise::test::test_dir();
  const std::string cluster = std::string(REPRISE_SOURCE_DIR) + "/clusters/cpu-2core-example.yaml";
  ASSERT_EQ(
      run("synth --out " + dir + "/s.json.gz --world-size 1 --iterations 2 --layers 2 --hidden 32 --batch 8").status,
      0);
  Result r =
      run("replay " + dir + "/s.json.gz --device cpu --iterations 1 --warmup 0 --per-op --out " + dir + "/r.json -q");
  ASSERT_EQ(r.status, 0) << r.out;
  Result p = run("predict " + dir + "/s.json.gz --cluster " + cluster + " --op-times " + dir + "/r.json --out " + dir +
                 "/p.json -q");
  ASSERT_EQ(p.status, 0) << p.out;
  auto pj = nlohmann::json::parse(std::ifstream(dir + "/p.json"));
  const int64_t ops = pj["coverage"]["ops"], measured = pj["coverage"]["measured"];
  // Every op but the all_reduce calls (a c10d call is timed by the collective model) was measured.
  EXPECT_EQ(measured, ops - 2) << pj["coverage"].dump();

  Result c = run("calibrate --from-replay " + dir + "/r.json --out " + dir + "/c.json -q");
  ASSERT_EQ(c.status, 0) << c.out;
  const reprise::predict::Calibration cal = reprise::predict::read_calibration(dir + "/c.json");
  EXPECT_FALSE(cal.samples.empty());
  EXPECT_NE(cal.source.find(dir + "/r.json"), std::string::npos) << cal.source;
  EXPECT_EQ(cal.concurrent_ranks, 1);
  // A replay's ranks measure their ops at once: the times of a 2-rank replay fit a calibration of 2 concurrent ranks
  // (predict's embedding tables then shared the caches as two ranks' do).
  nlohmann::json two = nlohmann::json::parse(std::ifstream(dir + "/r.json"));
  two["world_size"] = 2;
  std::ofstream(dir + "/r2.json") << two.dump();
  Result c2 = run("calibrate --from-replay " + dir + "/r2.json --out " + dir + "/c2r.json -q");
  ASSERT_EQ(c2.status, 0) << c2.out;
  EXPECT_EQ(reprise::predict::read_calibration(dir + "/c2r.json").concurrent_ranks, 2);

  // A calibration times real work on a real device, and does not write over what it reads.
  for (const std::string device : {"meta", "tpu", "cuda:x"}) {
    Result d = run("calibrate --quick --device " + device + " --out " + dir + "/d.json -q");
    EXPECT_EQ(d.status, 2) << d.out;
    EXPECT_NE(d.out.find("--device must be cpu, cuda or cuda:N, not '" + device + "'"), std::string::npos) << d.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/d.json"));
  Result sweep = run("calibrate --from-replay " + dir + "/r.json --out " + dir + "/c2.json --quick -q");
  EXPECT_EQ(sweep.status, 2) << sweep.out;
  EXPECT_NE(sweep.out.find("--from-replay fits the replays' op times instead: give one or the other"),
            std::string::npos)
      << sweep.out;
  Result same = run("calibrate --from-replay " + dir + "/r.json --out " + dir + "/r.json -q");
  EXPECT_EQ(same.status, 2) << same.out;
  EXPECT_NE(
      same.out.find("calibrate: --out " + dir + "/r.json is the input " + dir + "/r.json: writing it would destroy it"),
      std::string::npos)
      << same.out;
  Result both =
      run("calibrate --from-replay " + dir + "/r.json --out " + dir + "/c.yaml --cluster-out " + dir + "/c.yaml -q");
  EXPECT_EQ(both.status, 2) << both.out;
  EXPECT_NE(both.out.find("--out and --cluster-out name the same file"), std::string::npos) << both.out;
  EXPECT_EQ(reprise::predict::read_op_times(dir + "/r.json").size(), 1u) << "the replay results are as they were";
}
#endif

// An output that would write over an input (or over another output) is refused before any work; a capture
// manifest edited by hand is checked, not obeyed (100,000 threads hung the replay); LibTorch's errors and a YAML's
// NUL stay one line; a bundle's folder must exist.
TEST(Cli, OutputsNeverOverwriteInputsAndErrorsStayOneLine) {
#ifndef REPRISE_HAVE_REPLAY
  GTEST_SKIP() << "built without LibTorch: no replay, capture or generate";
#endif
  const std::string dir = reprise::test::test_dir();
  auto one_line = [](const Result& r, const std::string& says) {
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << r.out;
  };
  const std::string trace = dir + "/s.json";
  ASSERT_EQ(run("synth --out " + trace + " --iterations 2 --layers 2 --batch 4 --hidden 8").status, 0);
  const std::string before = reprise::read_text_file(trace);
  one_line(run("replay " + trace + " -q --iterations 1 --out " + trace),
           "--out " + trace + " is the input " + trace + ": writing it would destroy it");
  one_line(run("replay " + trace + " -q --iterations 1 --per-op --timeline " + trace),
           "--timeline " + trace + " is the input");
  one_line(run("inspect " + trace + " --json-out " + trace), "--json-out " + trace + " is the input");
  one_line(run("replay " + trace + " -q --iterations 1 --out " + dir + "/o.json --timeline " + dir + "/o.json"),
           "--out and --timeline name the same file");
  EXPECT_EQ(reprise::read_text_file(trace), before) << "the trace is as it was";

  // A capture folder: its trace files are inputs, a results file beside them is not (written twice, the second
  // time over the first).
  const std::string cap = dir + "/cap";
  ASSERT_EQ(
      run("capture --workload mlp --out " + cap + " -q --batch 4 --hidden 8 --layers 1 --warmup 0 --steps 1").status,
      0);
  one_line(run("replay " + cap + " -q --iterations 1 --out " + cap + "/rank-0.json.gz"),
           "is a file of the input " + cap + ": writing it would destroy it");
  EXPECT_EQ(run("replay " + cap + " -q --iterations 1 --out " + cap + "/r.json").status, 0);
  EXPECT_EQ(run("replay " + cap + " -q --iterations 1 --out " + cap + "/r.json").status, 0);
  // One rank's ET named alone takes the Kineto trace beside it, as a load of the folder does.
  const Result alone = run("inspect " + cap + "/rank-0.json.gz --json -q", "2>/dev/null");
  ASSERT_EQ(alone.status, 0) << alone.out;
  const auto linked = nlohmann::json::parse(alone.out)["ranks"][0];
  ASSERT_TRUE(linked.contains("kineto")) << alone.out;
  EXPECT_EQ(linked["kineto"]["source"], cap + "/rank-0.kineto.json.gz") << alone.out;
  one_line(run("inspect " + cap + "/rank-0.json.gz --json-out " + cap + "/rank-0.kineto.json.gz"),
           "is the Kineto trace read with the input " + cap + "/rank-0.json.gz");

  // The manifest's threads and times are checked where they are read.
  const std::string manifest = reprise::read_text_file(cap + "/manifest.json");
  nlohmann::json m = nlohmann::json::parse(manifest);
  m["threads"] = 100000;
  reprise::test::write_file(cap + "/manifest.json", m.dump());
  one_line(run("replay " + cap + " -q --iterations 1"),
           "manifest.json: threads: expected an integer from 0 to 1024, got 100000");
  m = nlohmann::json::parse(manifest);
  m["ranks"][0]["iteration_seconds"] = {-1, -2};
  reprise::test::write_file(cap + "/manifest.json", m.dump());
  one_line(run("generate " + cap + " --out " + dir + "/b -q"),
           "manifest.json: ranks[0]: iteration_seconds[0]: expected seconds from 0 to 1e9, got -1");
  EXPECT_FALSE(std::filesystem::exists(dir + "/b"));
  m = nlohmann::json::parse(manifest);
  m["ranks"][0]["data_loader_seconds"] = "fast";
  reprise::test::write_file(cap + "/manifest.json", m.dump());
  one_line(run("replay " + cap + " -q --iterations 1"),
           "manifest.json: ranks[0]: data_loader_seconds: expected a list of seconds");
  reprise::test::write_file(cap + "/manifest.json", "{\"broken\": ");  // not JSON: as replay says it
  one_line(run("generate " + cap + " --out " + dir + "/b -q"), "manifest.json: not JSON");
  EXPECT_FALSE(std::filesystem::exists(dir + "/b"));
  reprise::test::write_file(cap + "/manifest.json", manifest);

  // A bundle's folder is not made up; LibTorch's message without its backtrace; meta captures nothing; a NUL.
  one_line(run("generate " + trace + " --out " + dir + "/no/such/b -q"),
           dir + "/no/such/b: folder " + dir + "/no/such does not exist");
  one_line(run("capture --workload mlp --out " + dir +
               "/c2 -q --batch 4 --hidden 100000000000 --layers 1 --warmup 0 --steps 1"),
           "capture: ");
  one_line(run("capture --workload mlp --out " + dir +
               "/c3 -q --batch 4 --hidden 8 --layers 1 --warmup 0 --steps 1 --device meta"),
           "device 'meta': a capture runs the workload");
  // Values that named nothing: a synthetic device, an empty or indexed meta device, two iteration choices.
  one_line(run("synth --out " + dir + "/x.json --device banana"), "device 'banana' is not one");
  one_line(run("replay " + trace + " -q --device ''"), "--device '': give cpu, cuda, cuda:N or meta");
  one_line(run("replay " + trace + " -q --device meta:1"), "device 'meta:1': meta has no index");
  one_line(run("replay " + trace + " -q --iteration 0 --all-iterations"),
           "--iteration N and --all-iterations: give one");
  reprise::test::write_file(dir + "/nul.yaml", std::string("source: s.json\0\n", 16));
  one_line(run("generate " + dir + "/nul.yaml --out " + dir + "/b2 -q"),
           "nul.yaml:1:15: the byte 0x00 (NUL) has no place");
}

// One mode of analyze at a time, and one format's options for convert: a mistake is one line, exit 2.
TEST(Cli, ConflictingModesAndForeignOptionsAreOneLine) {
  const std::string dir = reprise::test::test_dir();
  auto one_line = [](const Result& r, const std::string& says) {
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << r.out;
  };
  one_line(run("analyze --evaluate " + dir + " --train " + dir + " --out " + dir + "/m.json"),
           "analyze: --evaluate and --train are separate modes: give one");
  one_line(run("analyze --make-corpus " + dir + "/c x.json --evaluate " + dir),
           "analyze: --make-corpus and --evaluate are separate modes");
  // Boost reads "-1" as an unsigned number by wrapping it: the parse refuses a sign on unsigned options.
  one_line(run("analyze --make-corpus " + dir + "/c x.json --seed -1"), "--seed -1: must be 0 or more");
  one_line(run("analyze --make-corpus " + dir + "/c x.json --seed=-1"), "--seed -1: must be 0 or more");
  ASSERT_EQ(run("synth --out " + dir + "/s.json.gz --iterations 1 --layers 1").status, 0);
  one_line(run("convert " + dir + "/s.json.gz " + dir + "/c.json --prefix p"),
           "--prefix, --step, --all-steps and --ctrl-as-data are for --to chakra");
  one_line(run("convert --to chakra " + dir + "/s.json.gz " + dir + "/et --gzip"), "--gzip is for --to et");
  one_line(run("convert --to chakra " + dir + "/s.json.gz " + dir + "/et --prefix ../x"),
           "--prefix '../x' is not a file name");
  one_line(run("convert --to chakra " + dir + "/s.json.gz " + dir + "/et --prefix ''"),
           "--prefix '' is not a file name");
  one_line(run("convert --to chakra " + dir + "/s.json.gz " + dir + "/et --step 0 --all-steps"),
           "convert: --step N and --all-steps: give one");
  one_line(run("convert --to chakra " + dir + "/s.json.gz " + dir + "/et --step 0 --step 0"),
           "convert: --step 0 is given twice");
  const std::string cluster = std::string(REPRISE_SOURCE_DIR) + "/clusters/cpu-2core-example.yaml";
  one_line(run("predict " + dir + "/s.json.gz --cluster " + cluster + " --iteration 0 --all-iterations"),
           "predict: --iteration N and --all-iterations: give one");
  one_line(run("predict " + dir + "/s.json.gz --cluster " + cluster + " --iteration 0 --iteration 0"),
           "predict: --iteration 0 is given twice");
  EXPECT_FALSE(std::filesystem::exists(dir + "/c.json"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/et"));

  // convert never writes over its input, and makes OUT in a folder that exists, not its parents.
  const std::string before = reprise::read_text_file(dir + "/s.json.gz");
  one_line(run("convert " + dir + "/s.json.gz " + dir + "/./s.json.gz"), "is the input");
  one_line(run("convert --to chakra " + dir + "/s.json.gz " + dir + "/no/such/et"), dir + "/no/such/et");
  EXPECT_EQ(reprise::read_text_file(dir + "/s.json.gz"), before);
  EXPECT_FALSE(std::filesystem::exists(dir + "/no"));
}

// `-` is standard output: it then holds that output alone (the table goes to standard error), so a script reads it
// as JSON; two outputs on it, or --json with one, are refused.
TEST(Cli, StandardOutputHoldsOneDocument) {
  const std::string dir = reprise::test::test_dir();
  ASSERT_EQ(run("synth --out " + dir + "/s.json.gz --iterations 1 --layers 2").status, 0);
  const std::string cluster = std::string(REPRISE_SOURCE_DIR) + "/clusters/cpu-2core-example.yaml";
  auto stdout_of = [](const std::string& args) { return run(args, "2>/dev/null"); };
  const std::string predict = "predict " + dir + "/s.json.gz --cluster " + cluster;
  for (const std::string& args : {predict + " --out -", predict + " --out - --timeline " + dir + "/t.json",
                                  "inspect " + dir + "/s.json.gz --json-out -"}) {
    const Result r = stdout_of(args);
    ASSERT_EQ(r.status, 0) << args << ": " << r.out;
    EXPECT_TRUE(nlohmann::json::accept(r.out)) << args << ": " << r.out;
  }
  EXPECT_EQ(nlohmann::json::parse(stdout_of(predict + " --out -").out).at("format"), "reprise-prediction/1");
  const Result json_twice = run(predict + " --json --out -");
  EXPECT_EQ(json_twice.status, 2) << json_twice.out;
  EXPECT_NE(json_twice.out.find("--json and --out -: both write to standard output"), std::string::npos)
      << json_twice.out;
  const Result both = run(predict + " --out - --timeline -");
  EXPECT_EQ(both.status, 2) << both.out;
  EXPECT_NE(both.out.find("--out - and --timeline -: both write to standard output"), std::string::npos) << both.out;
  // One file spelt two ways is one file.
  const Result same = run(predict + " --out " + dir + "/x.json --timeline " + dir + "/./x.json");
  EXPECT_EQ(same.status, 2) << same.out;
  EXPECT_NE(same.out.find("--out and --timeline name the same file"), std::string::npos) << same.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.json"));
}

}  // namespace
