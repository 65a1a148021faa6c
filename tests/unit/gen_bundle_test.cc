// Bundles: generation from traces and configs, the manifest round trip, rank-role dedup, select and scale on
// traces built in code and on the shared DLRM, and config mistakes reported at their YAML place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "reprise/common/error.h"
#include "reprise/common/files.h"
#include "reprise/generators/bundle.h"
#include "reprise/generators/generate.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace reprise::gen {
namespace {

// A folder of `world` synthetic data-parallel ranks (rank-N.et.json.gz).
std::string synthetic_job(int world, int iterations = 2) {
  const std::string dir = test::temp_dir() + "/job" + std::to_string(world) + "_" + std::to_string(iterations);
  fs::create_directories(dir);
  for (int r = 0; r < world; ++r) {
    SyntheticSpec s;
    s.world_size = world;
    s.rank = r;
    s.iterations = iterations;
    s.layers = 2;
    s.batch = 8;
    s.hidden = 16;
    write_et(synthetic_trace(s), dir + "/rank-" + std::to_string(r) + ".et.json.gz");
  }
  return dir;
}

GenerateOptions quiet(const std::string& out) {
  GenerateOptions o;
  o.out = out;
  return o;
}

std::string config(const std::string& name, const std::string& text) {
  return test::write_file(test::temp_dir() + "/" + name + ".yaml", text);
}

// The error a config gives, and that nothing was written.
std::string config_error(const std::string& name, const std::string& text) {
  const std::string out = test::temp_dir() + "/never_" + name;
  try {
    generate_from_config(config(name, text), quiet(out));
  } catch (const UserError& e) {
    EXPECT_FALSE(fs::exists(out)) << name;
    return e.what();
  }
  ADD_FAILURE() << name << ": accepted";
  return "";
}

std::map<std::string, int64_t> collectives_by_name(const Trace& t) {
  std::map<std::string, int64_t> m;
  for (const Collective& c : t.collectives)
    if (!c.is_wait) ++m[c.name];
  return m;
}

TEST(Bundle, DataParallelRanksShareOneRoleAndKeepTheirIds) {
  const std::string job = synthetic_job(4);
  const std::string out = test::temp_dir() + "/dp4";
  GenerateReport r = generate_from_trace(job, quiet(out));
  EXPECT_EQ(r.bundle.world_size, 4);
  ASSERT_EQ(r.bundle.roles.size(), 1u) << "data-parallel ranks differ only in their rank ids";
  EXPECT_EQ(r.bundle.roles[0].ranks, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(std::distance(fs::directory_iterator(out + "/traces"), fs::directory_iterator()), 1);

  // Moved elsewhere, it still reads, and each rank gets its own ids back.
  const std::string moved = test::temp_dir() + "/dp4_moved";
  fs::rename(out, moved);
  Bundle b = read_bundle(moved);
  EXPECT_TRUE(check_hashes(b).empty());
  EXPECT_EQ(b.world_size, 4);
  ASSERT_EQ(b.sources.size(), 1u);
  EXPECT_EQ(b.sources[0].ranks, 4);
  EXPECT_EQ(b.sources[0].sha256.size(), 64u);
  for (int64_t rank = 0; rank < 4; ++rank) {
    Trace t = load_bundle_rank(b, rank);
    EXPECT_EQ(t.rank, rank);
    ASSERT_FALSE(t.collectives.empty());
    for (const Collective& c : t.collectives) {
      if (!c.is_wait) {
        EXPECT_EQ(c.rank, rank);
      }
    }
  }
  EXPECT_THROW(load_bundle_rank(b, 4), UserError);
  check_bundle_ranks(b);
}

// A job's files numbered otherwise (rank-0 and rank-5 of a job of 2) become the bundle's ranks 0 and 1, with a
// warning. (Some ranks of a larger job are refused: their process
// groups name ranks outside the world.)
TEST(Bundle, RanksNumberedOtherwiseAreNumberedAgainAndSaidToBe) {
  const std::string job = synthetic_job(2);
  const std::string odd = test::test_dir() + "/odd";
  fs::create_directories(odd);
  fs::copy_file(job + "/rank-0.et.json.gz", odd + "/rank-0.et.json.gz");
  fs::copy_file(job + "/rank-1.et.json.gz", odd + "/rank-5.et.json.gz");
  GenerateOptions o = quiet(test::test_dir() + "/odd_bundle");
  std::vector<std::string> warnings;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  GenerateReport r = generate_from_trace(odd, o);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("its traces are ranks 0, 5, not 0 to 1"), std::string::npos) << warnings[0];
  EXPECT_EQ(r.bundle.world_size, 2);  // data parallel: one role, whose ranks take their ids back

  warnings.clear();
  o.out = test::test_dir() + "/all_ranks";
  generate_from_trace(job, o);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
}

TEST(Bundle, ManifestRoundTripsEveryField) {
  const std::string job = synthetic_job(2);
  const std::string out = test::temp_dir() + "/rt";
  const std::string cfg = config("rt", "name: round-trip\ndescription: \"a: colon, and 'quotes'\"\nsource: " + job +
                                           "\ntransforms:\n  - select: {iterations: 1, comms: keep}\n"
                                           "replay: {device: cpu, iterations: 3, warmup: 2}\n");
  GenerateReport r = generate_from_config(cfg, quiet(out));
  Bundle b = read_bundle(out);
  EXPECT_EQ(b.name, "round-trip");
  EXPECT_EQ(b.description, "a: colon, and 'quotes'");
  EXPECT_EQ(b.version, kBundleVersion);
  EXPECT_EQ(b.replay.iterations, 3);
  EXPECT_EQ(b.replay.warmup, 2);
  ASSERT_EQ(b.transforms.size(), 1u);
  EXPECT_EQ(b.transforms[0].name, "select");
  EXPECT_NE(b.transforms[0].params.find("iterations"), std::string::npos);
  EXPECT_EQ(manifest_yaml(b), manifest_yaml(r.bundle)) << "what is read is what was written";
  ASSERT_EQ(b.roles.size(), r.bundle.roles.size());
  EXPECT_EQ(b.roles[0].sha256, r.bundle.roles[0].sha256);
  EXPECT_EQ(b.process_groups.size(), r.bundle.process_groups.size());
}

TEST(Bundle, ExistingFolderIsNotReplacedWithoutForce) {
  const std::string job = synthetic_job(2);
  const std::string out = test::temp_dir() + "/twice";
  generate_from_trace(job, quiet(out));
  EXPECT_THROW(generate_from_trace(job, quiet(out)), UserError);
  GenerateOptions o = quiet(out);
  o.force = true;
  test::write_file(out + "/stale", "from the old bundle");
  EXPECT_NO_THROW(generate_from_trace(job, o));
  EXPECT_FALSE(fs::exists(out + "/stale")) << "the old bundle is replaced as a whole";
  EXPECT_NO_THROW(read_bundle(out));
  for (const auto& e : fs::directory_iterator(test::temp_dir()))
    EXPECT_EQ(e.path().filename().string().find("twice.tmp-"), std::string::npos) << "left behind: " << e.path();
  const std::string plain = test::temp_dir() + "/not_a_bundle";
  fs::create_directories(plain);
  o.out = plain;
  EXPECT_THROW(generate_from_trace(job, o), UserError) << "a folder that is no bundle is never replaced";
}

TEST(Bundle, TamperedRoleFailsItsHash) {
  const std::string out = test::temp_dir() + "/tamper";
  generate_from_trace(synthetic_job(2), quiet(out));
  Bundle b = read_bundle(out);
  test::write_file(out + "/" + b.roles[0].file, "not gzip");
  const std::vector<std::string> problems = check_hashes(b);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find(b.roles[0].file), std::string::npos);
  // A folder where the role file was is there, and is said to be (it was "missing").
  fs::remove(out + "/" + b.roles[0].file);
  fs::create_directory(out + "/" + b.roles[0].file);
  const std::vector<std::string> folder = check_hashes(b);
  ASSERT_EQ(folder.size(), 1u);
  EXPECT_EQ(folder[0], (fs::path(out) / b.roles[0].file).string() + ": a folder, not the role file");
}

// A manifest edited by hand: a device that is not one, or a process group with ranks outside the world, is refused
// at its place when the bundle is read (verify, replay and predict read it so).
TEST(Bundle, ManifestMistakesNameTheirPlace) {
  const std::string out = test::temp_dir() + "/edited";
  generate_from_trace(synthetic_job(2), quiet(out));
  const std::string manifest = out + "/benchmark.yaml";
  const std::string good = read_text_file(manifest);
  auto refused = [&](const std::string& from, const std::string& to, const std::string& says) {
    std::string text = good;
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from << " in " << good;
    text.replace(at, from.size(), to);
    test::write_file(manifest, text);
    try {
      read_bundle(out);
      ADD_FAILURE() << "accepted: " << to;
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(manifest + ":", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused("device: cpu", "device: tpu", "device: expected cpu, cuda, cuda:N or meta, not tpu");
  refused("ranks: all", "ranks: 0-3", "ranks: process group 0's rank 2 is outside the world of 2");
  refused("world_size: 2", "world_size: 2\nworld_size: 3", "world_size: given twice in one map");
}

// Ranks that do not belong to one job: the mismatch names each rank's file and the collective's node.
TEST(Bundle, RanksThatDisagreeNameTheirFilesAndNodes) {
  const std::string dir = test::test_dir() + "/mixed";
  fs::create_directories(dir);
  for (int r = 0; r < 2; ++r) {
    SyntheticSpec s;
    s.world_size = 2;
    s.rank = r;
    s.layers = 2;
    s.batch = 8;
    s.hidden = r == 0 ? 16 : 32;
    write_et(synthetic_trace(s), dir + "/rank-" + std::to_string(r) + ".et.json.gz");
  }
  try {
    generate_from_trace(dir, quiet(test::test_dir() + "/never"));
    ADD_FAILURE() << "ranks of two jobs were bundled";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(std::regex_search(m, std::regex("collective #1 is all_reduce .* on rank 0 \\(" + dir +
                                                "/rank-0.et.json.gz, node [0-9]+\\) but all_reduce .* on rank 1 \\(" +
                                                dir + "/rank-1.et.json.gz, node [0-9]+\\)")))
        << m;
  }
}

// A one-rank job whose ET has its op times beside it (as a Python capture writes them), for replay's --host-time;
// the nodes named in `untimed` without times (an op Kineto did not link).
std::string timed_job(const std::set<int64_t>& untimed = {}) {
  const std::string dir = test::temp_dir() + "/timed_job" + std::to_string(untimed.size());
  fs::create_directories(dir);
  SyntheticSpec s;
  s.world_size = 1;
  s.iterations = 2;
  s.layers = 2;
  s.batch = 8;
  s.hidden = 16;
  Trace t = synthetic_trace(s);
  t.kineto.emplace();
  t.kineto->producer = "python profiler";
  for (Node& n : t.nodes)
    if ((n.kind == NodeKind::Operator || n.kind == NodeKind::Annotation) && !untimed.count(n.id)) {
      n.ts_us = 10.0 * static_cast<double>(n.id);
      n.dur_us = 5;
    }
  write_et(t, dir + "/rank-0.et.json.gz");
  write_text_file(dir + "/rank-0.kineto.json", host_timeline_json(t));
  return dir;
}

TEST(Bundle, KeepsTheOpTimesUnlessATransformChangesTheOps) {
  const std::string job = timed_job();
  const std::string out = test::temp_dir() + "/timed";
  GenerateReport r = generate_from_config(
      config("timed", "source: " + job + "\ntransforms:\n  - select: {iterations: 1}\n"), quiet(out));
  Bundle b = read_bundle(out);
  ASSERT_EQ(b.roles.size(), 1u);
  EXPECT_EQ(b.roles[0].timeline, "traces/role-0.kineto.json.gz");
  EXPECT_TRUE(check_hashes(b).empty());
  EXPECT_FALSE(b.expected.empty()) << "whole iterations: the original's times still describe them";
  Trace t = load_bundle_rank(b, 0);
  ASSERT_TRUE(t.kineto);
  EXPECT_EQ(t.kineto->producer, "python profiler");
  EXPECT_EQ(t.kineto->link_method, "rf_id");
  int64_t timed = 0;
  for (const Node& n : t.nodes)
    if (n.kind == NodeKind::Operator) {
      EXPECT_EQ(n.ts_us, 10.0 * static_cast<double>(n.id)) << n.id;
      timed += n.dur_us == 5;
    }
  EXPECT_GT(timed, 10);
  test::write_file(out + "/" + b.roles[0].timeline, "changed");
  EXPECT_EQ(check_hashes(b).size(), 1u);

  // perturb: drop keeps them, closed over the dropped ops and the host's time that issued each (the gap before it,
  // from the end of the op before it on its thread in its step, when that op has times): between two kept ops with
  // ops dropped between them, the gap is the source's less what went; elsewhere the gaps and every op's span stay as
  // they were. relu and sum: two of them in a row; one op without times (its neighbours' gaps are unknown).
  {
    auto outermost = [](const Trace& tr) {  // operators not called by an operator, by id
      std::vector<const Node*> top;
      for (const Node& n : tr.nodes)
        if (n.kind == NodeKind::Operator && (n.parent == kNone32 || tr.nodes[n.parent].kind != NodeKind::Operator))
          top.push_back(&n);
      std::sort(top.begin(), top.end(), [](const Node* x, const Node* y) { return x->id < y->id; });
      return top;
    };
    const TraceSet plain = load_traces({job});
    int64_t untimed = -1;  // the op right before the second relu
    {
      const std::vector<const Node*> ops = outermost(plain.ranks[0]);
      int relus = 0;
      for (size_t k = 1; k < ops.size() && untimed < 0; ++k)
        if (plain.ranks[0].name(*ops[k]) == "aten::relu" && ++relus == 2) untimed = ops[k - 1]->id;
    }
    ASSERT_GE(untimed, 0);
    const std::string job2 = timed_job({untimed});
    const TraceSet source = load_traces({job2});
    const Trace& before = source.ranks[0];
    const std::string out3 = test::temp_dir() + "/dropped";
    r = generate_from_config(
        config("dropped", "source: " + job2 + "\ntransforms:\n  - perturb: {drop: '^aten::(relu|sum)$'}\n"),
        quiet(out3));
    Bundle d = read_bundle(out3);
    EXPECT_EQ(d.roles[0].timeline, "traces/role-0.kineto.json.gz");
    Trace dt = load_bundle_rank(d, 0);
    const std::vector<StepSpan> steps = profiler_steps(before);
    auto step = [&](const Node& n) {
      int64_t s = -1;
      for (size_t k = 0; k < steps.size(); ++k)
        if (n.id >= steps[k].first_id) s = int64_t(k);
      return s;
    };
    auto dropped = [&](const Node& n) { return before.name(n) == "aten::relu" || before.name(n) == "aten::sum"; };
    std::map<int64_t, const Node*> kept;
    for (const Node* n : outermost(dt)) {
      EXPECT_FALSE(dt.name(*n) == "aten::relu" || dt.name(*n) == "aten::sum");
      if (n->ts_us >= 0) {
        EXPECT_EQ(n->dur_us, 5) << n->id;
      }
      kept[n->id] = n;
    }
    const std::vector<const Node*> src = outermost(before);
    int64_t checked = 0, after_drops = 0, in_a_row = 0, after_untimed = 0;
    for (size_t k = 1; k < src.size(); ++k) {
      if (dropped(*src[k]) || src[k]->ts_us < 0) continue;
      size_t a = k - 1;  // the timed kept op before it, past what was dropped or has no times
      while (a > 0 && (dropped(*src[a]) || src[a]->ts_us < 0)) --a;
      if (dropped(*src[a]) || src[a]->ts_us < 0) continue;
      double want = src[k]->ts_us - (src[a]->ts_us + 5);
      for (size_t x = a + 1; x < k; ++x) {
        if (!dropped(*src[x])) continue;
        const Node& prev = *src[x - 1];
        const bool gap_known = prev.ts_us >= 0 && step(prev) == step(*src[x]);
        want -= 5 + (gap_known ? src[x]->ts_us - (prev.ts_us + 5) : 0);
        after_drops += 1;
        in_a_row += dropped(prev);
        after_untimed += prev.ts_us < 0;
      }
      EXPECT_DOUBLE_EQ(kept[src[k]->id]->ts_us - (kept[src[a]->id]->ts_us + 5), want)
          << src[a]->id << " -> " << src[k]->id;
      ++checked;
    }
    EXPECT_GT(checked, 10);
    EXPECT_GT(after_drops, 2);
    EXPECT_GT(in_a_row, 0);
    EXPECT_EQ(after_untimed, 1);
  }

  // A dtype, across the trace or for some ops with casts at their seams, keeps them: the same ops, the host's gaps
  // between them as they were (a cast is timed at its op's start, in no time). The original's iteration times go;
  // the capture's plain step stays for host time's observers' share (plain_step_seconds).
  {
    const std::string cap = test::temp_dir() + "/timed_capture";
    fs::create_directories(cap);
    for (const char* f : {"rank-0.et.json.gz", "rank-0.kineto.json"})
      fs::copy_file(fs::path(job) / f, fs::path(cap) / f, fs::copy_options::overwrite_existing);
    write_text_file(cap + "/manifest.json", R"({"reprise_capture": 1, "world_size": 1, "ranks": [{"rank": 0, )"
                                            R"("trace": "rank-0.et.json.gz", "iteration_seconds": [0.004, 0.006], )"
                                            R"("data_loader_seconds": [0.001, 0.003, 0.002]}]})");
    for (const std::string transform :
         {"perturb: {dtype: {to: bf16}}", "perturb: {dtype: {to: bf16, ops: '^aten::mm$'}}"}) {
      const std::string out4 = test::temp_dir() + "/retyped";
      GenerateOptions o = quiet(out4);
      o.force = true;
      r = generate_from_config(config("retyped", "source: " + cap + "\ntransforms:\n  - " + transform + "\n"), o);
      const Bundle d = read_bundle(out4);
      EXPECT_EQ(d.roles[0].timeline, "traces/role-0.kineto.json.gz") << transform;
      EXPECT_TRUE(d.expected.empty()) << transform << ": the original's times are of other work";
      EXPECT_TRUE(std::none_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
        return n.rfind("host time: ", 0) == 0;
      })) << transform;
      EXPECT_EQ(capture_plain_steps({job, cap, cap + "/rank-0.kineto.json"}), (std::map<int64_t, double>{{0, 0.005}}))
          << "the capture folder's median; a bare file and a folder without a manifest say nothing";
      EXPECT_NEAR(plain_step_seconds(d, read_capture_manifest(d.capture_manifest, "manifest"), 0), 0.005, 1e-12)
          << transform;
      EXPECT_NEAR(plain_data_loader_seconds(d, read_capture_manifest(d.capture_manifest, "manifest"), 0), 0.002, 1e-12)
          << transform << ": the loader's calls are the same work";
      const Trace dt = load_bundle_rank(d, 0);
      int64_t kept = 0, casts = 0;
      for (const Node& n : dt.nodes) {
        if (n.kind != NodeKind::Operator) continue;
        if (dt.name(n) == "aten::to") {
          const Node& op = dt.nodes[dt.find(n.id + 1)];  // the op it casts for follows it
          EXPECT_EQ(n.ts_us, op.ts_us) << transform << ": node " << n.id;
          EXPECT_EQ(n.dur_us, op.timed() ? 0 : -1)
              << transform << ": node " << n.id << " (untimed before an untimed op)";
          casts += op.timed();
        } else {
          kept += n.dur_us == 5;
        }
      }
      EXPECT_GT(kept, 10) << transform;
      EXPECT_EQ(casts > 0, transform.find("ops") != std::string::npos) << transform;
    }
    // Without the capture's manifest, or with the original's times, there is no plain step to take.
    Bundle d = read_bundle(test::temp_dir() + "/retyped");
    EXPECT_EQ(plain_step_seconds(d, CaptureFacts{}, 0), 0);
    EXPECT_EQ(plain_data_loader_seconds(d, CaptureFacts{}, 0), 0);
    d.expected.push_back({0, {0.01}});
    EXPECT_EQ(plain_step_seconds(d, read_capture_manifest(d.capture_manifest, "manifest"), 0), 0);
  }

  // Dropping ops of the kept step (or changing them) leaves the times behind, with a note.
  for (const char* transform : {"select: {ops: [\"aten::mm\"]}", "perturb: {jitter: {seed: 7, fraction: 0.5}}"}) {
    const std::string out2 = test::temp_dir() + "/untimed";
    GenerateOptions o = quiet(out2);
    o.force = true;
    r = generate_from_config(config("untimed", "source: " + job + "\ntransforms:\n  - " + transform + "\n"), o);
    EXPECT_TRUE(read_bundle(out2).roles[0].timeline.empty()) << transform;
    EXPECT_TRUE(read_bundle(out2).expected.empty()) << transform << ": the original's times are of other work";
    EXPECT_EQ(std::count_if(r.notes.begin(), r.notes.end(),
                            [](const std::string& n) { return n.rfind("host time: ", 0) == 0; }),
              1)
        << transform;
  }
}

TEST(Select, IterationsAndCommsDrop) {
  const std::string job = synthetic_job(2, 3);
  const std::string out = test::temp_dir() + "/sel";
  generate_from_config(config("sel", "source: " + job + "\ntransforms:\n  - select: {iterations: 2, comms: drop}\n"),
                       quiet(out));
  Bundle b = read_bundle(out);
  Trace t = load_bundle_rank(b, 0);
  EXPECT_TRUE(t.collectives.empty());
  int steps = 0;
  for (const Iteration& it : t.iterations) steps += it.profiler_step;
  EXPECT_EQ(steps, 1);
}

TEST(Select, RanksRestrictTheJob) {
  const std::string out = test::temp_dir() + "/ranks";
  generate_from_config(config("ranks", "source: " + synthetic_job(4) + "\ntransforms:\n  - select: {ranks: 0-1}\n"),
                       quiet(out));
  Bundle b = read_bundle(out);
  EXPECT_EQ(b.world_size, 2);
  check_bundle_ranks(b);
  for (const Collective& c : load_bundle_rank(b, 1).collectives) {
    if (!c.is_wait) {
      EXPECT_EQ(c.pg_size, 2);
    }
  }
}

TEST(Scale, WeakDataParallelKeepsSizesAndWritesOneRole) {
  const std::string out = test::temp_dir() + "/dp1024";
  generate_from_config(
      config("dp1024", "source: " + synthetic_job(2) + "\ntransforms:\n  - scale: {world_size: 1024}\n"), quiet(out));
  Bundle b = read_bundle(out);
  EXPECT_EQ(b.world_size, 1024);
  EXPECT_EQ(b.roles.size(), 1u) << "O(roles) files, not one per rank";
  Trace src = read_et(synthetic_job(2) + "/rank-0.et.json.gz");
  Trace t = load_bundle_rank(b, 777);
  ASSERT_EQ(t.collectives.size(), src.collectives.size());
  for (size_t k = 0; k < t.collectives.size(); ++k) {
    if (t.collectives[k].is_wait) continue;
    EXPECT_EQ(t.collectives[k].in_elems, src.collectives[k].in_elems)
        << "all_reduce: every rank holds the whole buffer";
    EXPECT_EQ(t.collectives[k].pg_size, 1024);
    EXPECT_EQ(t.collectives[k].rank, 777);
  }
}

TEST(Scale, MessagesGrowByTheFactor) {
  const std::string job = synthetic_job(2);
  const std::string out = test::temp_dir() + "/msg";
  generate_from_config(config("msg", "source: " + job + "\ntransforms:\n  - scale: {messages: 2.5}\n"), quiet(out));
  Trace src = read_et(job + "/rank-0.et.json.gz");
  Trace t = load_bundle_rank(read_bundle(out), 0);
  ASSERT_EQ(t.collectives.size(), src.collectives.size());
  for (size_t k = 0; k < t.collectives.size(); ++k) {
    if (!t.collectives[k].is_wait) {
      EXPECT_EQ(t.collectives[k].in_elems, (src.collectives[k].in_elems * 5 + 1) / 2);
    }
  }
}

// The rule (docs/configs.md, scale): an all_to_all(v) rank sends the rows it sent before (weak), spread evenly over
// the new group: ceil(rows / M) to each peer, so every receiver expects what each sender sends.
void expect_dlrm_rule(int world, const std::string& mode) {
  REPRISE_NEED_SHARED(dlrm, "param/dlrm_pytorch_et.tar.gz");
  TraceSet src = load_traces({dlrm});
  const std::string out = test::temp_dir() + "/dlrm_" + mode + std::to_string(world);
  generate_from_config(config("dlrm" + mode + std::to_string(world),
                              "source: " + dlrm + "\ntransforms:\n  - scale: {world_size: " + std::to_string(world) +
                                  ", mode: " + mode + "}\n"),
                       quiet(out));
  Bundle b = read_bundle(out);
  ASSERT_EQ(b.world_size, world);
  EXPECT_LE(b.roles.size(), 8u);
  check_bundle_ranks(b);
  const double s = mode == "strong" ? 8.0 / world : 1.0;
  for (int r = 0; r < world; ++r) {
    const Trace& from = src.ranks[static_cast<size_t>(r % 8)];
    Trace t = load_bundle_rank(b, r);
    EXPECT_EQ(collectives_by_name(t), collectives_by_name(from)) << "rank " << r;
    ASSERT_EQ(t.collectives.size(), from.collectives.size());
    for (size_t k = 0; k < t.collectives.size(); ++k) {
      const Collective& a = from.collectives[k];
      const Collective& c = t.collectives[k];
      if (c.is_wait) continue;
      if (c.name == "all_reduce") {
        EXPECT_EQ(c.in_elems, a.in_elems);
        continue;
      }
      if (c.name != "all_to_all" && c.name != "all_to_allv") continue;
      int64_t rows = 0;
      for (int64_t x : a.in_splits) rows += x;
      const int64_t width = a.in_splits.size() == 8 && rows > 0 ? a.in_elems / rows : 1;
      if (a.in_splits.size() != 8 || rows == 0) rows = a.in_elems;
      const int64_t chunk = (static_cast<int64_t>(std::llround(rows * s)) + world - 1) / world;
      ASSERT_EQ(c.in_splits.size(), static_cast<size_t>(world)) << c.name << " #" << k << " rank " << r;
      for (int64_t x : c.in_splits) EXPECT_EQ(x, chunk);
      EXPECT_EQ(c.in_elems, chunk * world * width);
      EXPECT_EQ(c.pg_size, world);
    }
  }
}

TEST(Scale, DlrmWeakTo4And16FollowTheRule) {
  expect_dlrm_rule(4, "weak");
  expect_dlrm_rule(16, "weak");
}

TEST(Scale, DlrmStrongTo16FollowsTheRule) { expect_dlrm_rule(16, "strong"); }

TEST(Config, MistakesNameTheirPlaceAndWriteNothing) {
  const std::string job = synthetic_job(2);
  struct Case {
    const char* name;
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"unknown_key", "source: " + job + "\nsoruce: x\n", ":2:1: config: unknown key 'soruce'"},
      {"unknown_transform", "source: " + job + "\ntransforms:\n  - scael: {world_size: 2}\n",
       ":3:5: transforms: unknown transform 'scael'"},
      {"wrong_type", "source: " + job + "\ntransforms:\n  - scale: {world_size: many}\n",
       ":3:25: world_size: expected"},
      {"zero_ranks", "source: " + job + "\ntransforms:\n  - scale: {world_size: 0}\n", ":3:25: world_size:"},
      {"bad_regex", "source: " + job + "\ntransforms:\n  - select: {ops: \"aten::(mm\"}\n",
       ":3:19: ops: not a regular expression"},
      {"regex_matches_nothing", "source: " + job + "\ntransforms:\n  - select: {scopes: \"## nowhere ##\"}\n",
       ":3:22: scopes: '## nowhere ##' matches no"},
      {"missing_iteration", "source: " + job + "\ntransforms:\n  - select: {iterations: 9}\n", ":3:26: iterations:"},
      {"missing_source", "name: x\n", ":1:1: config: expected 'source'"},
      {"source_not_found", "source: /no/such/trace.json\n", ":1:9: source: no such file"},
      {"not_a_map", "source: " + job + "\ntransforms: {select: {}}\n", ":2:13: transforms: expected a list"},
      {"syntax", "source: [" + job + "\n", ".yaml:"},
      {"bad_device", "source: " + job + "\nreplay: {device: tpu}\n", ":2:18: device: expected cpu"},
      {"mode_alone", "source: " + job + "\ntransforms:\n  - scale: {mode: weak, messages: 2}\n",
       ":3:19: mode: goes with world_size"},
      // yaml-cpp would keep these bytes, and write them back as U+FFFD (generators/src/yaml_check.cc)
      {"not_utf8", "source: " + job + "\nname: x\xff\n", ":2:8: the byte 0xFF is not UTF-8"},
      {"byte_escape", "source: " + job + "\nname: \"a\\_b\"\n", ":2:9: the escape \\_ is read as the byte 0xA0"},
      // yaml-cpp keeps both and finds the first, so the second would be dropped without a word
      {"repeated_key", "source: " + job + "\nname: a\nname: b\n",
       ":3:1: name: given twice in one map (first at line 2)"},
      {"repeated_nested", "source: " + job + "\nreplay: {iterations: 2, iterations: 3}\n",
       ":2:25: iterations: given twice"},
      {"empty_source", "source: \"\"\n", ":1:9: source: expected a path, not an empty string"},
      {"bad_ordinal", "source: " + job + "\nreplay: {device: cuda:x}\n",
       ":2:18: device: expected cpu, cuda, cuda:N or meta, not cuda:x"},
      // yaml-cpp's own message for this is "bad file"
      {"too_deep", "source: " + job + "\ntransforms: " + std::string(600, '[') + std::string(600, ']') + "\n",
       "nested 500 levels deep, more than the YAML reader takes"},
      // what only the traces reveal is said at the transform's place
      {"nothing_left", "source: " + job + "\ntransforms:\n  - select: {exclude: '.'}\n",
       ":3:5: select: nothing is left of"},
  };
  for (const Case& c : cases) {
    const std::string e = config_error(c.name, c.text);
    EXPECT_NE(e.find(c.name + std::string(".yaml")), std::string::npos) << c.name << ": " << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.name << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << c.name << ": one line: " << e;
  }
  EXPECT_THROW(generate_from_config(test::temp_dir() + "/no_such_config.yaml", quiet(test::temp_dir() + "/never")),
               UserError);
}

}  // namespace
}  // namespace reprise::gen

namespace reprise::gen {
namespace {

TEST(Splice, RepeatIterationsAddsProfilerStepsWithFreshTensors) {
  const std::string job = synthetic_job(1, 1);
  const std::string out = test::temp_dir() + "/splice_it";
  generate_from_config(config("splice_it", "source: " + job + "\ntransforms:\n  - splice: {repeat: {iterations: 3}}\n"),
                       quiet(out));
  Trace src = read_et(job + "/rank-0.et.json.gz");
  Trace t = load_bundle_rank(read_bundle(out), 0);
  int steps = 0;
  for (const Iteration& it : t.iterations) steps += it.profiler_step;
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(t.collectives.size(), 3 * src.collectives.size());
  std::map<std::string, int> ops, src_ops;
  for (const Node& n : t.nodes) ops[std::string(t.name(n))] += n.kind == NodeKind::Operator;
  for (const Node& n : src.nodes) src_ops[std::string(src.name(n))] += n.kind == NodeKind::Operator;
  for (const auto& [name, count] : src_ops) EXPECT_EQ(ops[name], 3 * count) << name;
  for (size_t i = 1; i < t.nodes.size(); ++i) EXPECT_LT(t.nodes[i - 1].id, t.nodes[i].id);
}

TEST(Splice, MistakesNameTheirPlace) {
  const std::string job = synthetic_job(1, 1);
  EXPECT_NE(
      config_error("splice_times", "source: " + job + "\ntransforms:\n  - splice: {repeat: {scope: x, times: 1}}\n")
          .find(":3:40: times:"),
      std::string::npos);
  EXPECT_NE(
      config_error("splice_scope",
                   "source: " + job + "\ntransforms:\n  - splice: {repeat: {scope: \"## nowhere ##\", times: 2}}\n")
          .find(":3:30: scope: '## nowhere ##' matches no"),
      std::string::npos);
  EXPECT_NE(config_error("splice_key", "source: " + job + "\ntransforms:\n  - splice: {nonsense: {}}\n")
                .find(":3:14: splice: unknown key 'nonsense'"),
            std::string::npos);
  // A Kineto trace alone has no arguments to splice in (it was accepted, and its ops then skipped in a replay).
  const std::string kineto = test::write_file(
      test::test_dir() + "/k.json",
      R"({"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
          "ts": 0, "dur": 5}]})");
  const std::string e = config_error(
      "splice_kineto", "source: " + job + "\ntransforms:\n  - splice: {concat: {sources: [" + kineto + "]}}\n");
  EXPECT_NE(e.find("k.json: a Kineto trace alone has no operator arguments to splice in"), std::string::npos) << e;

  // A repeat past what a bundle may hold is refused before it copies (it took an hour and tens of GB).
  SyntheticSpec deep;
  deep.iterations = 1;
  deep.layers = 200;
  const std::string big = test::test_dir() + "/deep.et.json.gz";
  write_et(synthetic_trace(deep), big);
  const std::string r =
      config_error("splice_many", "source: " + big + "\ntransforms:\n  - splice: {repeat: {iterations: 100000}}\n");
  EXPECT_NE(r.find(":3:22: repeat: iterations: its first iteration of "), std::string::npos) << r;
  EXPECT_NE(r.find("more than the 16,000,000 a bundle may hold: ask for fewer copies"), std::string::npos) << r;
}

}  // namespace
}  // namespace reprise::gen

namespace reprise::gen {
namespace {

TEST(Splice, ConcatAppendsAnotherSourcesIterations) {
  const std::string a = synthetic_job(1, 1), b = synthetic_job(1, 2);
  const std::string out = test::temp_dir() + "/concat";
  generate_from_config(
      config("concat", "source: " + a + "\ntransforms:\n  - splice: {concat: {sources: [" + b + "]}}\n"), quiet(out));
  Trace ta = read_et(a + "/rank-0.et.json.gz"), tb = read_et(b + "/rank-0.et.json.gz");
  Trace t = load_bundle_rank(read_bundle(out), 0);
  std::vector<std::string> steps;
  for (const Iteration& it : t.iterations)
    if (it.profiler_step) steps.push_back(it.name);
  EXPECT_EQ(steps, (std::vector<std::string>{"ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"}));
  EXPECT_EQ(t.collectives.size(), ta.collectives.size() + tb.collectives.size());
  std::set<int64_t> a_ids;
  for (const Tensor& x : ta.tensors) a_ids.insert(x.id);
  size_t fresh = 0;
  for (const Tensor& x : t.tensors) fresh += a_ids.count(x.id) == 0;
  EXPECT_GE(fresh, tb.tensors.size() / 2) << "the appended ops have tensors of their own";
  for (size_t i = 1; i < t.nodes.size(); ++i) EXPECT_LT(t.nodes[i - 1].id, t.nodes[i].id);
  EXPECT_NE(config_error("concat_ranks", "source: " + a + "\ntransforms:\n  - splice: {concat: {sources: [" +
                                             synthetic_job(2, 1) + "]}}\n")
                .find("has 2 ranks, the job 1"),
            std::string::npos);
}

}  // namespace
}  // namespace reprise::gen
