// Bad input: every error is one UserError naming the file and the place, never a crash.
#include <gtest/gtest.h>
#include <zlib.h>

#include "reprise/trace/read.h"
#include "test_util.h"

namespace reprise {
namespace {

std::string with_nodes(const std::string& nodes) {
  return R"J({"schema": "1.1.0-chakra.0.0.4", "nodes": [)J" + nodes + "]}";
}

TEST(Errors, EmptyFile) {
  EXPECT_EQ(test::et_read_error(""), "bad.json: byte 0: empty file");
  EXPECT_NE(test::et_read_error("   \n").find("bad.json"), std::string::npos);
}

TEST(Errors, TruncatedJson) {
  std::string full = with_nodes(test::kEtRootNode + ", " + test::kEtRootNode);
  for (size_t cut : {size_t(10), full.size() / 2, full.size() - 3, full.size() - 1}) {
    std::string e = test::et_read_error(full.substr(0, cut));
    EXPECT_NE(e.find("bad.json: byte "), std::string::npos) << cut << ": " << e;
  }
  EXPECT_NE(test::et_read_error(with_nodes(test::kEtRootNode).substr(0, 60)).find("truncated"), std::string::npos);
}

TEST(Errors, NotJsonOrNotAnEt) {
  EXPECT_NE(test::et_read_error("hello").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(test::et_read_error(R"J({"traceEvents": []})J").find("no \"nodes\" array"), std::string::npos);
  EXPECT_NE(test::et_read_error(R"J({"nodes": [1, 2]})J").find("expected a node object"), std::string::npos);
  EXPECT_NE(test::et_read_error(R"J({"nodes": []} trailing)J").find("unexpected data after"), std::string::npos);
}

TEST(Errors, InvalidJsonInsideNodeNamesTheByte) {
  std::string bad =
      with_nodes(test::kEtRootNode + R"J(, {"id": 2, "name": "x", "ctrl_deps": 1, "inputs": {"values": [1,,2]}})J");
  std::string e = test::et_read_error(bad);
  EXPECT_NE(e.find("bad.json: byte "), std::string::npos) << e;
  EXPECT_NE(e.find("invalid JSON"), std::string::npos) << e;
}

// Structural errors simdjson finds before it reads a value, without a place: the byte is found all the same (it was
// the first node's, or 0 for a Kineto trace), and a number cut by the end of the file is quoted as it is.
TEST(Errors, StructuralErrorsNameTheirByte) {
  // A control character inside the second node's name: the byte after `head`.
  const std::string head =
      R"J({"schema": "1.1.0-chakra.0.0.4", "nodes": [)J" + test::kEtRootNode + R"J(, {"id": 2, "name": "re)J";
  std::string e = test::et_read_error(head + "\x01" + R"J(lu", "ctrl_deps": 1}]})J");
  EXPECT_NE(e.find("bad.json: byte " + std::to_string(head.size()) + ": invalid JSON"), std::string::npos) << e;
  e = test::et_read_error(R"J({"nodes": [], "finish_ts": 12)J");
  EXPECT_EQ(e.find("nodes\": [], \"finish"), std::string::npos) << "quotes bytes that are not the value: " << e;

  Trace t;
  const std::string kineto = R"J({"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 12)J";
  try {
    read_kineto_text(kineto.substr(0, kineto.size() - 6) + "\"unclosed", "k.json", t);
    ADD_FAILURE() << "a cut Kineto trace was read";
  } catch (const UserError& x) {
    const std::string m = x.what();
    EXPECT_EQ(m.find("k.json: byte 0:"), std::string::npos) << m;
    EXPECT_NE(m.find("k.json: byte "), std::string::npos) << m;
  }
}

// A string simdjson cannot unescape (a bad escape, a lone surrogate) is named as such, at its byte: it was "is not a
// string", at the node's start.
TEST(Errors, BadEscapesNameTheirByte) {
  const std::string head = R"J({"schema": "1.1.0-chakra.0.0.4", "nodes": [)J" + test::kEtRootNode +
                           R"J(, {"id": 2, "ctrl_deps": 1, "name": "re)J";
  std::string e = test::et_read_error(head + R"J(\q"}]})J");  // the byte after the backslash
  EXPECT_NE(e.find("bad.json: byte " + std::to_string(head.size() + 1) + ": node 2: \"name\": invalid JSON"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("forbidden character after backslash"), std::string::npos) << e;
  e = test::et_read_error(
      with_nodes(test::kEtRootNode + R"J(, {"id": 2, "ctrl_deps": 1, "name": "x", "attrs": [{"name": "\ud800x"}]})J"));
  EXPECT_NE(e.find("node 2: \"attr name\": invalid JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("surrogate"), std::string::npos) << e;
  EXPECT_EQ(e.find("is not a string"), std::string::npos) << e;

  Trace t;
  const std::string kineto = R"J({"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "aten::m)J";
  try {
    read_kineto_text(kineto + R"J(\qm", "ts": 12, "dur": 3, "pid": 1, "tid": 1}]})J", "k.json", t);
    ADD_FAILURE() << "a bad escape was read";
  } catch (const UserError& x) {
    EXPECT_NE(std::string(x.what()).find("k.json: byte " + std::to_string(kineto.size() + 1) + ": invalid Kineto JSON"),
              std::string::npos)
        << x.what();
  }
}

TEST(Errors, WrongTypesAndMissingFields) {
  EXPECT_NE(test::et_read_error(with_nodes(R"J({"id": "one", "name": "x", "ctrl_deps": 1})J"))
                .find("\"id\" is not an integer"),
            std::string::npos);
  EXPECT_NE(
      test::et_read_error(with_nodes(R"J({"id": 1, "name": 5, "ctrl_deps": 1})J")).find("\"name\" is not a string"),
      std::string::npos);
  EXPECT_NE(test::et_read_error(with_nodes(R"J({"name": "x", "ctrl_deps": 1})J")).find("missing \"id\""),
            std::string::npos);
  EXPECT_NE(test::et_read_error(with_nodes(R"J({"id": 3, "ctrl_deps": 1})J")).find("node 3: missing \"name\""),
            std::string::npos);
  EXPECT_NE(test::et_read_error(with_nodes(R"J({"id": 3, "name": "x"})J")).find("node 3: missing \"ctrl_deps\""),
            std::string::npos);
  EXPECT_NE(
      test::et_read_error(
          with_nodes(
              R"J({"id": 3, "name": "x", "ctrl_deps": 3, "attrs": [{"name": "rf_id", "type": "uint64", "value": "7"}]})J"))
          .find("attr rf_id is not an integer"),
      std::string::npos);
  EXPECT_NE(
      test::et_read_error(
          with_nodes(R"J({"id": 3, "name": "x", "ctrl_deps": 3, "inputs": {"values": [1, 2], "types": ["Int"]}})J"))
          .find("2 values but 1 types"),
      std::string::npos);
  EXPECT_NE(test::et_read_error(with_nodes(R"J({"id": 3, "name": "x", "ctrl_deps": 3, "inputs": {"values": 5}})J"))
                .find("values are not a list"),
            std::string::npos);
}

TEST(Errors, DanglingParentsCyclesDuplicates) {
  EXPECT_EQ(test::et_read_error(with_nodes(test::kEtRootNode + R"J(, {"id": 2, "name": "x", "ctrl_deps": 99})J")),
            "bad.json: node 2: parent 99 does not exist");
  std::string e = test::et_read_error(with_nodes(
      test::kEtRootNode + R"J(, {"id": 2, "name": "a", "ctrl_deps": 3}, {"id": 3, "name": "b", "ctrl_deps": 2})J"));
  EXPECT_NE(e.find("parents form a cycle"), std::string::npos) << e;
  EXPECT_EQ(test::et_read_error(with_nodes(test::kEtRootNode + ", " + test::kEtRootNode)),
            "bad.json: node 1: id appears twice");
}

TEST(Errors, HugeNumbers) {
  // beyond uint64: simdjson rejects it; we report where
  std::string e = test::et_read_error(with_nodes(
      R"J({"id": 1, "name": "x", "ctrl_deps": 1, "inputs": {"values": [123456789012345678901234567890], "types": ["Int"]}})J"));
  EXPECT_NE(e.find("bad.json: byte "), std::string::npos) << e;
  std::string big = with_nodes(R"J({"id": 99999999999999999999, "name": "x", "ctrl_deps": 1})J");
  EXPECT_NE(test::et_read_error(big).find("bad.json"), std::string::npos);
  // a uint64 above INT64_MAX in a value is kept as a double, not an error
  Trace t = read_et_text(
      with_nodes(
          R"J({"id": 1, "name": "x", "ctrl_deps": 1, "inputs": {"values": [18446744073709551615], "types": ["Int"]}})J"),
      "ok.json");
  EXPECT_EQ(t.inputs(t.nodes[0])[0].kind, ValueKind::Double);
}

TEST(Errors, DeepNesting) {
  std::string deep(200, '[');
  deep += std::string(200, ']');
  std::string e = test::et_read_error(
      with_nodes(R"J({"id": 1, "name": "x", "ctrl_deps": 1, "inputs": {"values": )J" + deep + "}}"));
  EXPECT_NE(e.find("nested more than 64 deep"), std::string::npos) << e;
}

TEST(Errors, MissingFileAndCorruptGzip) {
  try {
    read_et("/nonexistent/trace.json");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/trace.json: cannot open"), std::string::npos);
  }
  // a gzip stream cut in half
  std::string text = with_nodes(test::kEtRootNode);
  for (int i = 0; i < 200; ++i) text += "                                                            ";
  std::string path = test::temp_dir() + "/cut.json.gz";
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  std::string bytes;
  {
    FILE* in = std::fopen(path.c_str(), "rb");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) bytes.append(buf, n);
    std::fclose(in);
  }
  test::write_file(path, bytes.substr(0, bytes.size() / 2));
  try {
    read_et(path);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(Errors, LoadTracesReportsUnknownFormats) {
  std::string p = test::write_file(test::temp_dir() + "/what.json", R"J({"hello": 1})J");
  try {
    load_traces({p});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("neither a PyTorch ET"), std::string::npos) << e.what();
  }
  try {
    load_traces({test::temp_dir() + "/missing.json"});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos);
  }
  // A bundle given where a trace is expected (convert BUNDLE said "no traces found").
  const std::string bundle = test::test_dir();
  test::write_file(bundle + "/benchmark.yaml", "format: reprise-bundle\n");
  try {
    load_traces({bundle});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), bundle +
                                         ": a Reprise bundle, not a trace or a folder of traces (replay, inspect, "
                                         "predict, verify and convert --to chakra take bundles)");
  }
}

// Two files naming one rank: ranks in file order, as before, but said (rank-0.json beside rank-0.json.gz was rank 1
// without a word).
TEST(Errors, TwoFilesNamingOneRankAreSaidToBe) {
  const std::string dir = test::test_dir();
  const std::string et = with_nodes(test::kEtRootNode);
  test::write_file(dir + "/rank-0.json", et);
  test::write_file(dir + "/rank-0.trace.json", et);
  std::vector<std::string> warnings;
  ReadOptions o;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  const TraceSet set = load_traces({dir}, o);
  ASSERT_EQ(set.ranks.size(), 2u);
  EXPECT_EQ(set.ranks[1].rank, 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("rank-0.json and " + dir +
                             "/rank-0.trace.json both name rank 0: ranks are taken in the "
                             "order of the files instead"),
            std::string::npos)
      << warnings[0];
}

}  // namespace
}  // namespace reprise
