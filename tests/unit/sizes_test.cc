// Impossible sizes and the parser's edges: every one is a one-line UserError naming the file and the place.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "reprise/trace/builder.h"
#include "reprise/trace/read.h"
#include "reprise/trace/summary.h"
#include "reprise/trace/write.h"
#include "test_util.h"

namespace reprise {
namespace {

std::string with_nodes(const std::string& nodes, const std::string& header = "") {
  return R"J({"schema": "1.1.1-chakra.0.0.4", )J" + header + R"J("nodes": [)J" + nodes + "]}";
}

// A relu node whose input tensor is `tuple` with `shape` and `strides` (raw JSON).
std::string relu(const std::string& tuple, const std::string& shape, const std::string& strides = "[]") {
  return test::kEtRootNode +
         R"J(, {"id": 7, "name": "aten::relu", "ctrl_deps": 1, "op_schema": "aten::relu(Tensor self) -> Tensor",
    "inputs": {"values": [)J" +
         tuple + R"J(], "shapes": [)J" + shape + R"J(], "types": ["Tensor(float)"], "strides": [)J" + strides +
         R"J(]}, "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []})J";
}

void expect_one_line(const std::string& e, const std::string& part) {
  EXPECT_NE(e.find(part), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(Sizes, ReaderRefusesNegativeSizesStridesAndOffsets) {
  std::string e = test::et_read_error(with_nodes(relu("[2, 3, 0, 6, 4, \"cpu\"]", "[2, -3]", "[3, 1]")));
  expect_one_line(e, "bad.json: byte ");
  expect_one_line(e, "node 7: inputs 0: tensor of sizes [2, -3]: size -3 is negative");
  e = test::et_read_error(with_nodes(relu("[2, 3, 0, 6, 4, \"cpu\"]", "[2, 3]", "[-3, 1]")));
  expect_one_line(e, "stride -3 in strides [-3, 1] is negative");
  e = test::et_read_error(with_nodes(relu("[2, 3, -1, 6, 4, \"cpu\"]", "[2, 3]", "[3, 1]")));
  expect_one_line(e, "storage offset -1 is negative");
  e = test::et_read_error(with_nodes(relu("[2, 3, 0, -6, 4, \"cpu\"]", "[2, 3]", "[3, 1]")));
  expect_one_line(e, "element count -6 is negative");
  e = test::et_read_error(with_nodes(relu("[2, 3, 0, 6, -4, \"cpu\"]", "[2, 3]", "[3, 1]")));
  expect_one_line(e, "item size -4 is out of range");
  e = test::et_read_error(with_nodes(relu("[2, 3, 0, 6, 4, \"cpu\"]", "[18446744073709551615]")));
  expect_one_line(e, "tensor size 18446744073709551615 is past int64");
}

TEST(Sizes, ReaderRefusesSizesPastInt64) {
  // 10^12 x 10^12 elements: the count wraps int64
  std::string e = test::et_read_error(with_nodes(relu("[2, 3, 0, 6, 4, \"cpu\"]", "[1000000000000, 1000000000000]")));
  expect_one_line(e,
                  "node 7: inputs 0: tensor of sizes [1000000000000, 1000000000000]: its element count is past int64");
  // the count fits, its bytes do not
  e = test::et_read_error(with_nodes(relu("[2, 3, 0, 4000000000000000000, 4, \"cpu\"]", "[4000000000000000000]")));
  expect_one_line(e, "past int64 bytes");
  // strides that reach past int64
  e = test::et_read_error(with_nodes(relu("[2, 3, 0, 4, 4, \"cpu\"]", "[2, 2]", "[9223372036854775807, 1]")));
  expect_one_line(e, "reach past int64");
  // a huge offset
  e = test::et_read_error(with_nodes(relu("[2, 3, 9223372036854775807, 4, 4, \"cpu\"]", "[4]", "[1]")));
  expect_one_line(e, "storage offset 9223372036854775807 and strides reach past int64");
}

TEST(Sizes, ReaderKeepsLegalExtremes) {
  // an empty tensor with a huge stride and a large (but possible) one are read as they are
  Trace t = read_et_text(with_nodes(relu("[2, 3, 0, 0, 4, \"cpu\"]", "[0, 5]", "[9223372036854775807, 1]")), "ok");
  EXPECT_EQ(tensor_extent(t, t.tensors[0]).elements, 0);
  t = read_et_text(with_nodes(relu("[2, 3, 5, 1000000000000, 4, \"cpu\"]", "[1000000, 1000000]", "[1000000, 1]")),
                   "ok");
  TensorExtent e = tensor_extent(t, t.tensors[0]);
  EXPECT_TRUE(e.problem.empty()) << e.problem;
  EXPECT_EQ(e.elements, 1000000000005);
  EXPECT_EQ(e.bytes, 4000000000020);
  // -1 in an int argument (dim=-1) is an argument, not a size
  read_et_text(with_nodes(test::kEtRootNode + R"J(, {"id": 7, "name": "aten::sum", "ctrl_deps": 1,
    "inputs": {"values": [-1], "shapes": [[]], "types": ["Int"]}, "outputs": {"values": [], "shapes": [], "types": []}})J"),
               "ok");
}

TEST(Sizes, CollectiveSizesAreChecked) {
  auto comm = [](const std::string& nelems) {
    return with_nodes(test::kEtRootNode + R"J(, {"id": 7, "name": "record_param_comms", "ctrl_deps": 1,
      "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []},
      "attrs": [{"name": "collective_name", "type": "string", "value": "allreduce"},
                {"name": "dtype", "type": "string", "value": "Float"},
                {"name": "in_msg_nelems", "type": "uint64", "value": )J" +
                      nelems + R"J(}, {"name": "out_msg_nelems", "type": "uint64", "value": 4}]})J");
  };
  expect_one_line(test::et_read_error(comm("-5")),
                  "bad.json: node 7: collective allreduce: input element count -5 is negative");
  expect_one_line(test::et_read_error(comm("4611686018427387904")), "past int64 bytes");
  read_et_text(comm("4"), "ok");
}

TEST(Sizes, NonFiniteHeaderNumbersAreRefused) {
  for (const char* bad : {"NaN", "Infinity", "-Infinity", "nan"}) {
    std::string text = with_nodes(test::kEtRootNode, std::string("\"start_ts\": ") + bad + ", ");
    std::string e = test::et_read_error(text);
    expect_one_line(e, "\"start_ts\": '" + std::string(bad) + "' is not a JSON value (JSON has no NaN");
    // at the value's own byte
    expect_one_line(e, "bad.json: byte " + std::to_string(text.find(bad, text.find("start_ts"))) + ":");
  }
  // the same in a trace large enough to be read in pieces
  ReadOptions small;
  small.chunk_bytes = 64;
  std::string e;
  try {
    read_et_text(with_nodes(test::kEtRootNode + ", " + test::kEtRootNode, "\"finish_ts\": Infinity, "), "bad.json",
                 small);
  } catch (const UserError& x) {
    e = x.what();
  }
  expect_one_line(e, "\"finish_ts\": 'Infinity' is not a JSON value");
  // what is read is written back as JSON
  Trace t = read_et_text(with_nodes(test::kEtRootNode, "\"start_ts\": 1.5e3, \"info\": {\"a\": [1, null]}, "), "ok");
  EXPECT_NO_THROW(read_et_text(et_json(t), "again"));
}

TEST(Sizes, NonUtf8ByteIsReportedAtItsOwnOffset) {
  for (std::string header : {std::string(), std::string("\"note\": \"caf\xE9 latte\", ")}) {
    std::string text = with_nodes(test::kEtRootNode + R"J(, {"id": 2, "name": "x)J" +
                                      std::string(header.empty() ? "\xFF" : "") + R"J(y", "ctrl_deps": 1})J",
                                  header);
    size_t bad = text.find(header.empty() ? '\xFF' : '\xE9');
    std::string e = test::et_read_error(text);
    expect_one_line(e, "bad.json: byte " + std::to_string(bad) + ": ");
    expect_one_line(e, "not UTF-8");
  }
  // an overlong form and a surrogate are not UTF-8 either; a 4-byte character is
  for (const char* seq : {"\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80"}) {
    std::string text =
        with_nodes(test::kEtRootNode + R"J(, {"id": 2, "name": "x)J" + std::string(seq) + R"J(", "ctrl_deps": 1})J");
    expect_one_line(test::et_read_error(text), "bad.json: byte " + std::to_string(text.find(seq)) + ": ");
  }
  read_et_text(with_nodes(test::kEtRootNode + R"J(, {"id": 2, "name": "x)J" + std::string("\xF0\x9F\x98\x80") +
                          R"J(", "ctrl_deps": 1})J"),
               "ok");
}

TEST(Sizes, PercentNeverRoundsALossAway) {
  EXPECT_EQ(human_percent(9885, 9886), "99.99%");
  EXPECT_EQ(human_percent(999999, 1000000), "99.9999%");
  EXPECT_EQ(human_percent(1, 9886), "0.01%");
  EXPECT_EQ(human_percent(9886, 9886), "100.0%");
  EXPECT_EQ(human_percent(0, 9886), "0.0%");
  EXPECT_EQ(human_percent(1, 2), "50.0%");
  EXPECT_EQ(human_percent(2, 3), "66.7%");
  EXPECT_EQ(human_percent(INT64_MAX - 1, INT64_MAX).substr(0, 6), "99.999");
}

TEST(Sizes, SyntheticOptionsAreBounded) {
  auto error = [](SyntheticSpec s) {
    try {
      check_synthetic_spec(s);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  SyntheticSpec s;
  EXPECT_EQ(error(s), "");
  s.hidden = 100000000000;
  expect_one_line(error(s), "synthetic trace: hidden 100000000000 is out of range 1 .. 1073741824");
  s = {};
  s.batch = 0;
  expect_one_line(error(s), "batch 0 is out of range");
  s = {};
  s.layers = 1000;
  s.iterations = 100000;
  expect_one_line(error(s), "layers x iterations 100000000 is out of range");
  s = {};
  s.rank = 2;
  expect_one_line(error(s), "rank 2 is out of range 0 .. 1");
  s = {};
  s.world_size = -1;
  expect_one_line(error(s), "world size -1 is out of range");
  // the largest allowed shapes fit: every tensor's extent is exact
  s = {};
  s.hidden = s.batch = int64_t{1} << 30;
  s.layers = s.iterations = 1;
  Trace t = synthetic_trace(s);
  for (const Tensor& x : t.tensors) EXPECT_TRUE(tensor_extent(t, x).problem.empty());
  EXPECT_THROW(synthetic_trace(SyntheticSpec{1, 1, 1, int64_t{1} << 31}), UserError);
}

}  // namespace
}  // namespace reprise

namespace reprise {
namespace {

// A group size from a trace is a count of ranks to list: one past any real job is refused, not allocated for
// (fuzz_replay asked for 4 GiB).
TEST(Sizes, GroupsBeyondAnyJobAreRefused) {
  Collective c;
  c.pg_size = int64_t(1) << 30;
  EXPECT_NE(
      test::user_error([&] { collective_group_ranks(c, nullptr, 2); }).find("a process group of 1073741824 ranks"),
      std::string::npos);
  c.pg_size = 8;
  EXPECT_EQ(collective_group_ranks(c, nullptr, 8).size(), 8u);
}

}  // namespace
}  // namespace reprise
