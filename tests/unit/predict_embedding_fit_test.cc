// The embedding family's fits per swept table (predict/src/embedding_fit.h): a table's coefficients recovered from
// samples made with known ones, interpolated between tables (the per-call cost a byte of table) and widths, and
// nothing fitted from too few samples (the rate index times those).
#include <gtest/gtest.h>

#include <cmath>

#include "embedding_fit.h"

namespace reprise::predict::detail {
namespace {

const char* kOp = "aten::_embedding_bag_backward";

// Samples over the sweep's bag counts and pooling for one table: busy = c0 + c1 lookups + c2 bags, plus a 2 us
// overhead taken out again.
void table(std::vector<OpSample>& out, std::vector<double>& overhead, double dim, double bytes, double c0, double c1,
           double c2) {
  for (double bags : {64.0, 512.0, 2048.0, 16384.0})
    for (double pooling : {1.0, 16.0}) {
      OpSample s;
      s.op = kOp;
      s.family = OpFamily::Embedding;
      s.dtype = "Float";
      s.key = {bags * pooling, dim, bytes, bags};
      s.seconds = 2e-6 + c0 + c1 * bags * pooling + c2 * bags;
      out.push_back(s);
      overhead.push_back(2e-6);
    }
}

TEST(EmbeddingFit, RecoversATablesCoefficientsAndInterpolatesBetweenTables) {
  std::vector<OpSample> samples;
  std::vector<double> overhead;
  const double mb = 1e6;
  table(samples, overhead, 64, 4 * mb, 4e-4, 100e-9, 20e-9);    // 100 ns a lookup; 0.1 ns a byte of table
  table(samples, overhead, 64, 64 * mb, 64e-4, 140e-9, 20e-9);  // the same per byte, a lookup 140 ns
  EmbeddingFit f;
  f.build(samples, overhead);
  double busy = 0;
  ASSERT_TRUE(f.estimate(kOp, "Float", {81920, 64, 4 * mb, 4096}, busy));
  EXPECT_NEAR(busy, 4e-4 + 81920 * 100e-9 + 4096 * 20e-9, 1e-9);  // a swept table: exact at any size
  // 16 MB, halfway in log table between 4 and 64: the per-call cost still 0.1 ns a byte, a lookup 120 ns.
  ASSERT_TRUE(f.estimate(kOp, "Float", {81920, 64, 16 * mb, 4096}, busy));
  EXPECT_NEAR(busy, 16e-4 + 81920 * 120e-9 + 4096 * 20e-9, 1e-9);
  // Past the largest table, held there (the per-call cost a byte, the lookups' rate).
  ASSERT_TRUE(f.estimate(kOp, "Float", {1000, 64, 256 * mb, 100}, busy));
  EXPECT_NEAR(busy, 256e-4 + 1000 * 140e-9 + 100 * 20e-9, 1e-9);
  // A width past the swept one moves rows twice as wide: its lookups and bags cost twice as much.
  ASSERT_TRUE(f.estimate(kOp, "Float", {1000, 128, 4 * mb, 100}, busy));
  EXPECT_NEAR(busy, 4e-4 + 2 * (1000 * 100e-9 + 100 * 20e-9), 1e-9);
  // No fit for another op or dtype: the rate index's.
  EXPECT_FALSE(f.estimate("aten::embedding_bag", "Float", {1000, 64, 4 * mb, 100}, busy));
  EXPECT_FALSE(f.estimate(kOp, "BFloat16", {1000, 64, 4 * mb, 100}, busy));
}

TEST(EmbeddingFit, TablesWithTooFewSamplesFitNothing) {
  std::vector<OpSample> samples;
  std::vector<double> overhead;
  table(samples, overhead, 64, 4e6, 4e-4, 100e-9, 20e-9);
  samples.resize(3);  // a replay's few shapes, not a sweep's grid
  overhead.resize(3);
  EmbeddingFit f;
  f.build(samples, overhead);
  double busy = 0;
  EXPECT_FALSE(f.estimate(kOp, "Float", {1000, 64, 4e6, 100}, busy));
}

}  // namespace
}  // namespace reprise::predict::detail
