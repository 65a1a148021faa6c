// End-to-end: the reprise binary's exit codes, messages and outputs.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace {

struct Result {
  int status;
  std::string out;
};

Result run(const std::string& args) {
  std::string cmd = std::string(REPRISE_BIN) + " " + args + " 2>&1";
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
  std::vector<std::string> commands = {"inspect", "convert", "synth"};
#ifdef REPRISE_HAVE_REPLAY
  commands.push_back("replay");
  commands.push_back("capture");
#endif
#ifdef REPRISE_HAVE_COMMS
  commands.push_back("comms");
#endif
  for (const std::string& c : commands) {
    Result r = run(std::string(c) + " --help");
    EXPECT_EQ(r.status, 0) << c;
    EXPECT_NE(r.out.find("usage: reprise"), std::string::npos) << c;
  }
  EXPECT_EQ(run("frobnicate").status, 2);
  EXPECT_EQ(run("inspect --no-such-flag x").status, 2);
}

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

  // capture: malformed options are one line and exit 2, and write nothing.
  for (const std::string& args : std::vector<std::string>{
           "--workload resnet --out " + dir + "/c1", "--workload mlp --out " + dir + "/c2 --batch -4", "--workload mlp",
           "--workload mlp --out " + dir + "/c3 --steps 0",
           "--workload gpt --out " + dir + "/c4 --hidden 100 --heads 3",
           "--workload mlp --out " + dir + "/c5 --device tpu"}) {
    Result c = run("capture " + args + " -q");
    EXPECT_EQ(c.status, 2) << args << ": " << c.out;
    EXPECT_EQ(std::count(c.out.begin(), c.out.end(), '\n'), 1) << args << ": " << c.out;
    EXPECT_FALSE(std::filesystem::exists(dir + "/c1/manifest.json"));
  }
#endif
}

}  // namespace
