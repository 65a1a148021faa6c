// perturb: a variant of the same work: ops dropped or fused (runs of ops as their longest), another floating dtype
// (across the trace, or for some ops with casts at the seams), all_reduce split in two, sizes jittered, GEMMs or host
// delays inserted, ops moved to another stream. The rewrites are in perturb_casts.cc and perturb_ops.cc; this file
// reads the config.
#include <algorithm>
#include <map>
#include <memory>
#include <unordered_map>

#include "perturb_ops.h"
#include "reprise/common/error.h"
#include "reprise/common/intervals.h"
#include "select_nodes.h"
#include "transform.h"

namespace reprise::gen {
namespace {

struct PerturbSpec {
  std::unique_ptr<OpPattern> drop;
  std::unique_ptr<OpPattern> drop_within;   // only ops inside a scope (an enclosing node) of a matching name
  std::unique_ptr<OpPattern> fuse;          // runs of matching ops in a row become their longest member
  std::unique_ptr<OpPattern> fuse_outside;  // ... except ops inside a scope of a matching name
  int64_t fuse_min = 3;
  std::unique_ptr<OpPattern> foreach_scope;  // optimizer steps rewritten as foreach ops
  std::unique_ptr<OpPattern> overlap;        // collectives made asynchronous, waited at their first reader
  const Dtype* from = nullptr;
  const Dtype* to = nullptr;
  std::unique_ptr<OpPattern> dtype_ops;
  std::string collective_where;  // set: all_reduce -> reduce_scatter + all_gather
  std::unique_ptr<JitterSpec> jitter;
  std::vector<InsertSpec> inserts;
  std::unique_ptr<OpPattern> stream_ops;
  int64_t stream = 0;
};

OpPattern pattern(const YamlFile& f, const YAML::Node& n, const std::string& key) {
  OpPattern p;
  p.text = f.string(n, key);
  p.where = f.where(n);
  try {
    p.re = std::regex(p.text, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    f.fail(n, key + ": not a regular expression: " + p.text + " (" + e.what() + ")");
  }
  return p;
}

const Dtype* floating(const YamlFile& f, const YAML::Node& n, const std::string& key) {
  const Dtype* x = find_dtype_ignoring_case(f.string(n, key));
  if (!x) {
    static const std::unordered_map<std::string, std::string> short_names = {
        {"bf16", "BFloat16"}, {"fp16", "Half"}, {"fp32", "Float"}, {"fp64", "Double"}};
    auto it = short_names.find(n.Scalar());
    if (it != short_names.end()) x = find_dtype(it->second);
  }
  if (!x || !(x->name == "Float" || x->name == "Half" || x->name == "BFloat16" || x->name == "Double"))
    f.fail(n, key + ": expected a floating dtype (fp32, fp16, bf16, fp64), not " + n.Scalar());
  return x;
}

void parse_dtype(const YamlFile& f, const YAML::Node& d, PerturbSpec& s) {
  f.expect_map(d, "dtype", {"from", "to", "ops"});
  if (!d["to"]) f.fail(d, "dtype: expected 'to' (bf16, fp16, fp32, ...)");
  s.to = floating(f, d["to"], "to");
  s.from = d["from"] ? floating(f, d["from"], "from") : find_dtype("Float");
  if (s.from == s.to) f.fail(d, "dtype: from and to are the same");
  if (d["ops"]) s.dtype_ops = std::make_unique<OpPattern>(pattern(f, d["ops"], "ops"));
}

void parse_jitter(const YamlFile& f, const YAML::Node& j, PerturbSpec& s) {
  f.expect_map(j, "jitter", {"seed", "fraction", "dims"});
  if (!j["seed"]) f.fail(j, "jitter: expected 'seed' (an integer)");
  if (!j["fraction"]) f.fail(j, "jitter: expected 'fraction' (greater than 0, below 1)");
  auto x = std::make_unique<JitterSpec>();
  x->seed = static_cast<uint64_t>(f.integer(j["seed"], "seed", 0, INT64_MAX));
  x->fraction = f.number(j["fraction"], "fraction", 0, 0.99);
  if (x->fraction <= 0) f.fail(j["fraction"], "fraction: expected a number above 0");
  if (j["dims"]) {
    x->m = x->n = x->k = x->messages = false;
    const YAML::Node dims = j["dims"];
    if (dims.IsSequence() && dims.size() == 0) f.fail(dims, "dims: expected at least one of m, n, k, messages");
    auto one = [&](const YAML::Node& e) {
      const std::string d = f.choice(e, "dims", {"m", "n", "k", "messages"});
      (d == "m" ? x->m : d == "n" ? x->n : d == "k" ? x->k : x->messages) = true;
    };
    if (dims.IsSequence())
      for (const YAML::Node& e : dims) one(e);
    else
      one(dims);
  }
  s.jitter = std::move(x);
}

InsertSpec parse_insert(const YamlFile& f, const YAML::Node& p) {
  f.expect_map(p, "insert", {"op", "m", "n", "k", "dtype", "delay_us", "after", "every"});
  InsertSpec x;
  x.where = f.where(p);
  if (p["op"] && p["delay_us"]) f.fail(p, "insert: expected either op or delay_us, not both");
  if (p["op"]) {
    f.choice(p["op"], "op", {"gemm"});
    x.gemm = true;
    for (const char* key : {"m", "n", "k"})
      if (!p[key]) f.fail(p, std::string("insert: op: gemm needs '") + key + "' (a size)");
    x.m = f.integer(p["m"], "m", 1, int64_t{1} << 20);
    x.n = f.integer(p["n"], "n", 1, int64_t{1} << 20);
    x.k = f.integer(p["k"], "k", 1, int64_t{1} << 20);
    x.dtype = p["dtype"] ? floating(f, p["dtype"], "dtype") : find_dtype("Float");
  } else if (p["delay_us"]) {
    for (const char* key : {"m", "n", "k", "dtype"})
      if (p[key]) f.fail(p[key], std::string("insert: '") + key + "' belongs to op: gemm, not to delay_us");
    x.delay_us = f.integer(p["delay_us"], "delay_us", 1, int64_t{60} * 1000 * 1000);
  } else {
    f.fail(p, "insert: expected op: gemm or delay_us");
  }
  if (p["after"]) {
    x.has_after = true;
    x.after = pattern(f, p["after"], "after");
  }
  if (p["every"]) x.every = f.integer(p["every"], "every", 1, INT32_MAX);
  return x;
}

void parse_collective(const YamlFile& f, const YAML::Node& c, PerturbSpec& s) {
  f.expect_map(c, "collective", {"from", "to"});
  if (!c["from"] || !c["to"]) f.fail(c, "collective: expected 'from' and 'to'");
  f.choice(c["from"], "from", {"all_reduce"});
  f.choice(c["to"], "to", {"reduce_scatter+all_gather"});
  s.collective_where = f.where(c);
}

void parse_streams(const YamlFile& f, const YAML::Node& p, PerturbSpec& s) {
  f.expect_map(p, "streams", {"ops", "stream"});
  if (!p["ops"] || !p["stream"]) f.fail(p, "streams: expected 'ops' (a regular expression) and 'stream'");
  s.stream_ops = std::make_unique<OpPattern>(pattern(f, p["ops"], "ops"));
  s.stream = f.integer(p["stream"], "stream", 0, 1023);
}

// drop: REGEX, or {ops: REGEX, within: SCOPE}: the replayed ops of a matching name (inside a scope of a matching
// name, an enclosing node such as `Optimizer.zero_grad#SGD.zero_grad`), with their subtrees.
void parse_drop(const YamlFile& f, const YAML::Node& d, PerturbSpec& s) {
  if (!d.IsMap()) {
    s.drop = std::make_unique<OpPattern>(pattern(f, d, "drop"));
    return;
  }
  f.expect_map(d, "drop", {"ops", "within"});
  if (!d["ops"]) f.fail(d, "drop: expected 'ops' (a regular expression)");
  s.drop = std::make_unique<OpPattern>(pattern(f, d["ops"], "ops"));
  if (d["within"]) s.drop_within = std::make_unique<OpPattern>(pattern(f, d["within"], "within"));
}

// fuse: {ops: REGEX, min: N, outside: SCOPE}: runs of at least N matching replayed ops in a row on one thread.
void parse_fuse(const YamlFile& f, const YAML::Node& d, PerturbSpec& s) {
  f.expect_map(d, "fuse", {"ops", "min", "outside"});
  if (!d["ops"]) f.fail(d, "fuse: expected 'ops' (a regular expression)");
  s.fuse = std::make_unique<OpPattern>(pattern(f, d["ops"], "ops"));
  if (d["min"]) s.fuse_min = f.integer(d["min"], "min", 2, 1 << 20);
  if (d["outside"]) s.fuse_outside = std::make_unique<OpPattern>(pattern(f, d["outside"], "outside"));
}

bool within(const Trace& t, uint32_t i, const OpPattern& scope) {
  for (uint32_t p = t.nodes[i].parent; p != kNone32; p = t.nodes[p].parent)
    if (scope.matches(t.name(t.nodes[p]))) return true;
  return false;
}

// Each matching op goes with its subtree, and its time with the host's time before it since the op before it on its
// thread in its step (as replay cuts steps) ended, when that op has times: what the framework spent issuing it (Python,
// the argument parsing, autograd's engine reaching a backward node), which a program without the op does not spend
// either. The gap after it stays: it is the next op's.
void drop_ops(Trace& t, const OpPattern& drop, const OpPattern* scope, Workspace& ws) {
  std::vector<bool> keep(t.nodes.size(), true);
  std::vector<std::pair<double, double>> spans;
  size_t dropped = 0;
  struct Last {
    int64_t step = -2;
    double end = -1;  // -1: the op before had no times, so the gap is unknown
  };
  const std::vector<StepSpan> steps = profiler_steps(t);
  std::map<uint32_t, Last> last;  // per thread: the step and end of its latest op (dropped or kept)
  for (uint32_t i : outermost_ops(t)) {
    const Node& n = t.nodes[i];
    const bool timed = n.ts_us >= 0 && n.dur_us >= 0;
    Last& before = last[thread_of(t, i)];
    const int64_t step = step_of(t, steps, i);
    const double issued = before.step == step && before.end >= 0 ? std::min(before.end, n.ts_us) : n.ts_us;
    before = {step, timed ? n.ts_us + n.dur_us : -1.0};
    if (!drop.matches(t.name(n)) || (scope && !within(t, i, *scope))) continue;
    keep[i] = false, ++dropped;
    if (timed && n.ts_us + n.dur_us > issued) spans.emplace_back(issued, n.ts_us + n.dur_us);
  }
  const std::string what = scope ? "'" + drop.text + "' within '" + scope->text + "'" : "'" + drop.text + "'";
  if (dropped == 0) throw UserError(drop.where + ": drop: " + what + " matches no replayed op in " + t.source);
  keep_nodes(t, keep);
  close_dropped_time(t, std::move(spans));
  ws.note("perturb: " + t.source + ": dropped " + std::to_string(dropped) + " ops matching " + what);
}

// Whether an outermost op belongs in a run: a matching op; an autograd wrapper (a backward function) every op of
// which matches (the ops it calls, not those they call in turn; metadata-only ones such as lift_fresh aside), as
// the backward pass issues its elementwise work;
// or neither, a wrapper that calls no op at all (a pass-through such as AddBackward1), which a run goes past.
enum class Member { Yes, No, Neither };
Member run_member(const Trace& t, uint32_t i, const OpPattern& ops) {
  const Node& n = t.nodes[i];
  if (n.kind != NodeKind::Autograd) return ops.matches(t.name(n)) ? Member::Yes : Member::No;
  size_t called = 0;
  std::vector<uint32_t> stack{i};
  while (!stack.empty()) {
    const uint32_t k = stack.back();
    stack.pop_back();
    for (uint32_t c : t.children(t.nodes[k])) {
      const Node& x = t.nodes[c];
      if (x.kind == NodeKind::Autograd) {
        stack.push_back(c);
        continue;
      }
      if (x.kind == NodeKind::Operator && is_metadata_only_op(t.name(x))) continue;  // lift_fresh, a view
      if (x.kind != NodeKind::Operator || !ops.matches(t.name(x))) return Member::No;
      ++called;
    }
  }
  return called > 0 ? Member::Yes : Member::Neither;
}

// Each run of at least `min` matching ops in a row on one thread (no other replayed op of that thread between them)
// becomes the member that took longest (the first, when the trace has no op times); the others go with their
// subtrees. The time closes over the whole run, the host's time between its members included: one fused op issues
// once.
void fuse_runs(Trace& t, const OpPattern& ops, const OpPattern* outside, int64_t min, Workspace& ws) {
  std::vector<bool> keep(t.nodes.size(), true);
  std::vector<std::pair<double, double>> spans;
  std::map<uint32_t, std::vector<uint32_t>> open;  // per thread: the run so far
  size_t runs = 0, dropped = 0;
  auto close = [&](std::vector<uint32_t>& run) {
    if (static_cast<int64_t>(run.size()) >= min) {
      size_t longest = 0;
      for (size_t k = 1; k < run.size(); ++k)
        if (t.nodes[run[k]].dur_us > t.nodes[run[longest]].dur_us) longest = k;
      for (size_t k = 0; k < run.size(); ++k) {
        if (k == longest) continue;
        keep[run[k]] = false, ++dropped;
        const Node& n = t.nodes[run[k]];
        if (n.ts_us < 0 || n.dur_us < 0) continue;
        // Before the kept member: this one and the gap after it; after it: the gap before this one and this one.
        const Node& next = t.nodes[run[k < longest ? k + 1 : k - 1]];
        if (k < longest)
          spans.emplace_back(n.ts_us, std::max(n.ts_us + n.dur_us, next.ts_us));
        else
          spans.emplace_back(std::min(n.ts_us, next.ts_us + std::max(0.0, next.dur_us)), n.ts_us + n.dur_us);
      }
      ++runs;
    }
    run.clear();
  };
  for (uint32_t i : outermost_ops(t)) {
    std::vector<uint32_t>& run = open[thread_of(t, i)];
    const Member m = run_member(t, i, ops);
    if (m == Member::Neither) continue;
    if (m == Member::Yes && !(outside && within(t, i, *outside)))
      run.push_back(i);
    else
      close(run);
  }
  for (auto& [thread, run] : open) close(run);
  const std::string what = "'" + ops.text + "'" + (outside ? " outside '" + outside->text + "'" : "");
  if (runs == 0)
    throw UserError(ops.where + ": fuse: no " + std::to_string(min) + " ops in a row match " + what + " in " +
                    t.source);
  keep_nodes(t, keep);
  close_dropped_time(t, std::move(spans));
  ws.note("perturb: " + t.source + ": fused " + std::to_string(runs) + " runs of ops matching " + what + " (" +
          std::to_string(dropped) + " ops dropped, each run's longest kept)");
}

TransformStep parse_perturb(const YAML::Node& p, const ConfigContext& cx) {
  const YamlFile& f = cx.file;
  f.expect_map(p, "perturb",
               {"dtype", "drop", "fuse", "foreach", "overlap", "jitter", "insert", "collective", "streams"});
  if (p.size() == 0)
    f.fail(p, "perturb: expected dtype, drop, fuse, foreach, overlap, jitter, insert, collective or streams");
  auto s = std::make_shared<PerturbSpec>();
  if (p["dtype"]) parse_dtype(f, p["dtype"], *s);
  if (p["drop"]) parse_drop(f, p["drop"], *s);
  if (p["fuse"]) parse_fuse(f, p["fuse"], *s);
  if (p["foreach"]) s->foreach_scope = std::make_unique<OpPattern>(pattern(f, p["foreach"], "foreach"));
  if (p["overlap"]) s->overlap = std::make_unique<OpPattern>(pattern(f, p["overlap"], "overlap"));
  if (p["jitter"]) parse_jitter(f, p["jitter"], *s);
  if (p["collective"]) parse_collective(f, p["collective"], *s);
  if (p["streams"]) parse_streams(f, p["streams"], *s);
  if (const YAML::Node in = p["insert"]) {
    if (in.IsSequence() && in.size() == 0) f.fail(in, "insert: expected a map or a list of maps");
    if (in.IsSequence())
      for (const YAML::Node& e : in) s->inserts.push_back(parse_insert(f, e));
    else
      s->inserts.push_back(parse_insert(f, in));
  }
  return [s](Workspace& ws) {
    // Dropping, fusing, foreach, overlap or a dtype alone keeps the op times true for host time (closed over what
    // went; a wait issued where its reader was, a cast where its op was, in no time; the gaps between ops are the
    // framework's whatever the dtype); the other keys add or change ops whose times the source does not have.
    ws.work_changed(s->collective_where.empty() && !s->jitter && s->inserts.empty() && !s->stream_ops);
    for (Trace& t : ws.roles) {
      auto note = [&](const std::string& what) { ws.note("perturb: " + t.source + ": " + what); };
      if (s->drop) drop_ops(t, *s->drop, s->drop_within.get(), ws);
      if (s->fuse) fuse_runs(t, *s->fuse, s->fuse_outside.get(), s->fuse_min, ws);
      if (s->foreach_scope) note(foreach_optimizer(t, *s->foreach_scope));
      if (s->overlap) note(overlap_collectives(t, *s->overlap));
      if (s->to && s->dtype_ops) note(convert_ops(t, *s->from, *s->to, *s->dtype_ops));
      if (s->to && !s->dtype_ops) note(change_dtype(t, *s->from, *s->to));
      if (!s->collective_where.empty()) note(split_all_reduces(t, ws.world_size(), s->collective_where));
      if (s->jitter) note(jitter_sizes(t, *s->jitter));
      for (const InsertSpec& x : s->inserts) note(insert_ops(t, x));
      if (s->stream_ops) note(move_to_stream(t, *s->stream_ops, s->stream));
    }
  };
}

}  // namespace

// The op times (a linked Kineto trace's or a capture's) closed over the dropped spans (an op's, with the host's time
// that issued it where the caller says so): each time moves earlier by the time dropped before it, a time inside a
// span to where the span began; the gaps outside the spans (the host time replay's --host-time re-spends) stay as
// they were, and what the spans took, a sync's wait included, is gone. Host waits inside a dropped span go with it.
// Spans that overlap or touch (ops of two threads at once, a fused run's members and the gaps between them) count once.
void close_dropped_time(Trace& t, std::vector<std::pair<double, double>> dropped) {
  if (dropped.empty()) return;
  const std::vector<std::pair<double, double>> spans = merge_intervals(std::move(dropped));  // by begin and by end
  std::vector<double> ends, before;  // before[k]: the time dropped by spans[0..k)
  before.push_back(0);
  for (const auto& [b, e] : spans) {
    ends.push_back(e);
    before.push_back(before.back() + (e - b));
  }
  // Where a time lands: earlier by the spans that end by it, and a time inside a span (an annotation opened in a
  // dropped op's gap, a kept call's end inside one) where that span began.
  auto moved = [&](double x) {
    const size_t k = size_t(std::upper_bound(ends.begin(), ends.end(), x) - ends.begin());
    const double inside = k < spans.size() && spans[k].first < x ? x - spans[k].first : 0;
    return x - before[k] - inside;
  };
  for (Node& n : t.nodes) {
    if (n.ts_us < 0 || n.dur_us < 0) continue;
    const double end = moved(n.ts_us + n.dur_us);
    n.ts_us = moved(n.ts_us);
    n.dur_us = std::max(0.0, end - n.ts_us);
  }
  if (!t.kineto) return;
  for (KinetoEvent& e : t.kineto->events) {
    if (e.dur <= 0 || !is_host_sync(t, e)) continue;
    // Within one span (they are apart and sorted): the first that ends at or after the wait begins.
    const size_t k = size_t(std::lower_bound(ends.begin(), ends.end(), e.ts) - ends.begin());
    const bool inside = k < spans.size() && spans[k].first <= e.ts && e.ts + e.dur <= spans[k].second;
    const double end = moved(e.ts + e.dur);
    e.ts = moved(e.ts);
    e.dur = inside ? 0 : std::max(0.0, end - e.ts);
  }
}

const TransformDescriptor kPerturb{
    "perturb",
    "a variant of the same work: ops dropped or fused, optimizer loops as foreach ops, collectives overlapped with "
    "the work after them, another dtype (with casts at the seams), all_reduce split, sizes jittered, GEMMs or host "
    "delays inserted, ops on another stream",
    {"dtype", "drop", "fuse", "foreach", "overlap", "jitter", "insert", "collective", "streams"},
    parse_perturb};

}  // namespace reprise::gen
