// perturb: jitter, insert, collective and streams (dtype is in perturb_casts.cc).
#include "perturb_ops.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "perturb_edit.h"
#include "reprise/common/error.h"
#include "select_nodes.h"
#include "workspace.h"

namespace reprise::gen {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
  return h;
}

// A factor in [1 - fraction, 1 + fraction] from a 64-bit draw.
double factor(uint64_t draw, double fraction) {
  const double u = static_cast<double>(draw >> 11) / static_cast<double>(uint64_t{1} << 53);
  return 1.0 + fraction * (2.0 * u - 1.0);
}

int64_t scaled(int64_t v, double f) { return std::max<int64_t>(1, std::llround(static_cast<double>(v) * f)); }

std::vector<int64_t> shape_of(const Trace& t, const Value& v) {
  return std::vector<int64_t>(t.dims(t.tensors[v.ref]).begin(), t.dims(t.tensors[v.ref]).end());
}

// The letters of each tensor argument of a GEMM-like op and of its output: B batch, M rows, N columns, K the
// reduced size. A bias broadcasts: its letters follow its rank.
struct GemmForm {
  const char* name;
  std::vector<std::string> inputs;  // per input position; "" = not a tensor of the product
  std::string output;
};
const std::vector<GemmForm>& gemm_forms() {
  static const std::vector<GemmForm> forms = {
      {"aten::mm", {"MK", "KN"}, "MN"},
      {"aten::matmul", {"MK", "KN"}, "MN"},
      {"aten::bmm", {"BMK", "BKN"}, "BMN"},
      {"aten::addmm", {"bias", "MK", "KN"}, "MN"},
      {"aten::linear", {"MK", "NK", "bias"}, "MN"},
  };
  return forms;
}

std::string letters(const std::string& form, size_t rank) {
  if (form != "bias") return form;
  return rank == 1 ? "N" : "MN";
}

// Jitters one standalone GEMM-like op: fresh tensors of the new sizes for its inputs and output. False when the
// recorded shapes do not fit its form.
bool jitter_gemm(Trace& t, uint32_t i, const GemmForm& form, const double f[3], const JitterSpec& s) {
  struct Slot {
    uint32_t value;
    std::string letters;
    bool bias;  // a size-1 dimension of a bias broadcasts
  };
  const Node& n = t.nodes[i];
  std::vector<Slot> slots;
  for (size_t k = 0; k < form.inputs.size() && k < n.num_inputs; ++k) {
    const Value& v = t.values[n.inputs + k];
    if (v.kind != ValueKind::Tensor) continue;
    const bool bias = form.inputs[k] == "bias";
    slots.push_back({n.inputs + static_cast<uint32_t>(k), letters(form.inputs[k], t.tensors[v.ref].rank), bias});
  }
  if (n.num_outputs != 1 || t.values[n.outputs].kind != ValueKind::Tensor) return false;
  slots.push_back({n.outputs, form.output, false});
  std::stable_sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) { return a.bias < b.bias; });
  int64_t size[128] = {};
  for (const Slot& x : slots) {
    const std::vector<int64_t> d = shape_of(t, t.values[x.value]);
    if (d.size() != x.letters.size()) return false;
    for (size_t k = 0; k < d.size(); ++k) {
      int64_t& want = size[static_cast<unsigned char>(x.letters[k])];
      if (x.bias && d[k] == 1) continue;
      if (want != 0 && want != d[k]) return false;
      want = d[k];
    }
  }
  constexpr int M = 'M', N = 'N', K = 'K';
  if (s.m) size[M] = scaled(size[M], f[0]);
  if (s.n) size[N] = scaled(size[N], f[1]);
  if (s.k) size[K] = scaled(size[K], f[2]);
  for (const Slot& x : slots) {
    const Tensor& old = t.tensors[t.values[x.value].ref];
    NewTensor spec{std::string(t.str(old.dtype)), old.itemsize, old.has_device ? old.device : 0, {}};
    const std::vector<int64_t> d = shape_of(t, t.values[x.value]);
    for (size_t k = 0; k < d.size(); ++k)
      spec.shape.push_back(x.bias && d[k] == 1 ? 1 : size[static_cast<unsigned char>(x.letters[k])]);
    t.values[x.value].ref = add_tensor(t, spec).ref;
  }
  return true;
}

// Ops that read or write a tensor (by storage, else by index), in `outer` order: first and last.
struct Uses {
  std::vector<uint32_t> producer;   // per tensor index: the outer op that first wrote it, or kNone32
  std::vector<uint32_t> last_read;  // per tensor index: the last outer op that read its storage
};
Uses tensor_uses(const Trace& t, const std::vector<uint32_t>& outer) {
  Uses u{std::vector<uint32_t>(t.tensors.size(), kNone32), std::vector<uint32_t>(t.tensors.size(), kNone32)};
  std::unordered_map<int64_t, uint32_t> last_by_storage;
  const std::vector<uint32_t> same = same_tensor(t);
  for (uint32_t i : outer) {
    each_arg_tensor(t, t.nodes[i], false, [&](uint32_t x) {
      last_by_storage[t.tensors[x].storage_id > 0 ? t.tensors[x].storage_id : -1 - int64_t{x}] = i;
    });
    each_arg_tensor(t, t.nodes[i], true, [&](uint32_t x) {
      if (u.producer[same[x]] == kNone32) u.producer[same[x]] = i;
    });
  }
  for (uint32_t x = 0; x < t.tensors.size(); ++x) u.producer[x] = u.producer[same[x]];
  for (uint32_t x = 0; x < t.tensors.size(); ++x) {
    auto it = last_by_storage.find(t.tensors[x].storage_id > 0 ? t.tensors[x].storage_id : -1 - int64_t{x});
    if (it != last_by_storage.end()) u.last_read[x] = it->second;
  }
  return u;
}

std::string jitter_gemms(Trace& t, const JitterSpec& s) {
  const std::vector<uint32_t> outer = outermost_ops(t);
  const Uses u = tensor_uses(t, outer);
  std::mt19937_64 rng(s.seed);
  size_t done = 0;
  for (uint32_t i : outer) {
    const GemmForm* form = nullptr;
    for (const GemmForm& g : gemm_forms())
      if (t.name(t.nodes[i]) == g.name) form = &g;
    if (!form) continue;
    const double f[3] = {factor(rng(), s.fraction), factor(rng(), s.fraction), factor(rng(), s.fraction)};
    bool standalone = true;
    each_arg_tensor(t, t.nodes[i], false, [&](uint32_t x) { standalone = standalone && u.producer[x] == kNone32; });
    each_arg_tensor(t, t.nodes[i], true,
                    [&](uint32_t x) { standalone = standalone && (u.last_read[x] == kNone32 || u.last_read[x] < i); });
    if (standalone && jitter_gemm(t, i, *form, f, s)) ++done;
  }
  return std::to_string(done) + " standalone GEMMs";
}

// The same factor on every rank: drawn from the seed, the group and the collective's sequence number.
std::string jitter_messages(Trace& t, const JitterSpec& s) {
  size_t done = 0;
  for (const Collective& c : std::vector<Collective>(t.collectives)) {
    if (c.is_wait || c.p2p || !c.in_splits.empty() || !c.out_splits.empty() || c.name == "barrier") continue;
    if (c.in_elems <= 0 && c.out_elems <= 0) continue;
    const double f =
        factor(splitmix(s.seed ^ splitmix(static_cast<uint64_t>(c.seq)) ^ fnv1a(c.pg_name + "/" + c.name)), s.fraction);
    int64_t in = c.in_elems, out = c.out_elems;
    if (in > 0 && out > in && out % in == 0) {
      in = scaled(c.in_elems, f);
      out = in * (c.out_elems / c.in_elems);
    } else if (out > 0 && in > out && in % out == 0) {
      out = scaled(c.out_elems, f);
      in = out * (c.in_elems / c.out_elems);
    } else {
      in = in > 0 ? scaled(in, f) : in;
      out = out > 0 ? scaled(out, f) : out;
    }
    set_collective_sizes(t, c, in, out, c.in_splits, c.out_splits);
    ++done;
  }
  return std::to_string(done) + " collective messages";
}

// Renames a record_param_comms node's positional collective name (the first string argument).
void rename_positional(Trace& t, uint32_t node, std::string_view raw) {
  const Node& n = t.nodes[node];
  for (uint32_t k = n.inputs; k < n.inputs + n.num_inputs; ++k)
    if (t.values[k].kind == ValueKind::String) {
      t.values[k].ref = t.strings.intern(raw);
      return;
    }
}

void rename_op(Trace& t, Node& n, std::string_view name) {
  n.name = t.strings.intern(name);
  n.op_schema = 0;
  n.fields = static_cast<uint16_t>(n.fields & ~kHasOpSchema);
}

}  // namespace

std::string jitter_sizes(Trace& t, const JitterSpec& s) {
  std::string what;
  if (s.m || s.n || s.k) what = jitter_gemms(t, s);
  if (s.messages) what += (what.empty() ? "" : " and ") + jitter_messages(t, s);
  reindex(t);
  return "sizes of " + what + " jittered by up to " + std::to_string(static_cast<int>(s.fraction * 100 + 0.5)) +
         "% (seed " + std::to_string(s.seed) + ")";
}

std::string insert_ops(Trace& t, const InsertSpec& s) {
  const std::vector<uint32_t> outer = outermost_ops(t);
  std::vector<uint32_t> anchors;
  if (s.has_after) {
    for (uint32_t i : outer)
      if (s.after.matches(t.name(t.nodes[i]))) anchors.push_back(i);
    if (anchors.empty())
      throw UserError(s.after.where + ": insert: after: '" + s.after.text + "' matches no replayed op in " + t.source);
  } else {
    // The last op of each iteration (of the trace, without ProfilerStep markers).
    std::vector<IdRange> steps = step_ranges(t);
    if (steps.empty()) steps.push_back({INT64_MIN, INT64_MAX});
    for (const IdRange& r : steps) {
      uint32_t last = kNone32;
      for (uint32_t i : outer)
        if (t.nodes[i].id >= r.first && t.nodes[i].id <= r.last) last = i;
      if (last != kNone32) anchors.push_back(last);
    }
    if (anchors.empty()) throw UserError(s.where + ": insert: " + t.source + " has no replayed op to follow");
  }
  Value a, b;
  const std::string type = s.gemm ? "Tensor(" + std::string(s.dtype->et_name) + ")" : "";
  const StrId device = main_device(t);
  if (s.gemm) {
    a = add_tensor(t, {std::string(s.dtype->et_name), s.dtype->itemsize, device, {s.m, s.k}});
    b = add_tensor(t, {std::string(s.dtype->et_name), s.dtype->itemsize, device, {s.k, s.n}});
  }
  std::vector<Insertion> ins;
  for (size_t k = static_cast<size_t>(s.every) - 1; k < anchors.size(); k += static_cast<size_t>(s.every)) {
    Insertion x;
    x.anchor = anchors[k];
    if (s.gemm) {
      const Value c = add_tensor(t, {std::string(s.dtype->et_name), s.dtype->itemsize, device, {s.m, s.n}});
      x.nodes.push_back(
          make_op(t, "aten::mm(Tensor self, Tensor mat2) -> Tensor", {{a, type}, {b, type}}, {{c, type}}));
    } else {
      x.nodes.push_back(make_op(t, kHostDelaySchema, {{int_value(s.delay_us), "Int"}}, {}));
    }
    ins.push_back(std::move(x));
  }
  const size_t n = ins.size();
  insert_nodes(t, std::move(ins));
  const std::string what = s.gemm
                               ? "GEMMs [" + std::to_string(s.m) + "," + std::to_string(s.k) + "]x[" +
                                     std::to_string(s.k) + "," + std::to_string(s.n) + "] " + std::string(s.dtype->name)
                               : "host delays of " + std::to_string(s.delay_us) + " us";
  return "inserted " + std::to_string(n) + " " + what + " after " +
         (s.has_after ? "ops matching " + s.after.text : std::string("each iteration")) +
         (s.every > 1 ? " (every " + std::to_string(s.every) + ")" : "");
}

std::string split_all_reduces(Trace& t, int world, const std::string& where) {
  struct Split {
    size_t insertion = 0, rpc = 0;  // the copy's record_param_comms: nodes[rpc] of insertion
    int64_t chunk = 0, group = 0;
  };
  std::vector<Insertion> ins;
  std::vector<Split> splits;
  for (const Collective& c : std::vector<Collective>(t.collectives)) {
    if (c.is_wait || c.name != "all_reduce") continue;
    const int64_t g = static_cast<int64_t>(group_members(t, c, world).size());
    const int64_t n = std::max(c.in_elems, c.out_elems);
    const int64_t chunk = (n + g - 1) / g;
    Collective rs = c;
    rs.raw_name = "_reduce_scatter_base";
    set_collective_sizes(t, rs, chunk * g, chunk, {}, {});
    rename_positional(t, c.node, rs.raw_name);
    const uint32_t p = t.nodes[c.node].parent;
    const bool wrapped = p != kNone32 && t.nodes[p].kind == NodeKind::CommOp;
    Insertion x;
    x.anchor = wrapped ? p : c.node;
    if (wrapped) {
      rename_op(t, t.nodes[p], "c10d::_reduce_scatter_base_");
      x.nodes.push_back(copy_node(t, p));
      rename_op(t, x.nodes.back(), "c10d::_allgather_base_");
      x.parent.push_back(-1);
    }
    x.nodes.push_back(copy_node(t, c.node));
    x.parent.push_back(wrapped ? 0 : -1);
    splits.push_back({ins.size(), x.nodes.size() - 1, chunk, g});
    ins.push_back(std::move(x));
  }
  if (splits.empty()) throw UserError(where + ": collective: " + t.source + " has no all_reduce");
  const std::vector<std::vector<int64_t>> ids = insert_nodes(t, std::move(ins));
  for (const Split& s : splits) {
    const uint32_t node = t.find(ids[s.insertion][s.rpc]);
    Collective ag = t.collectives[static_cast<size_t>(t.nodes[node].collective)];
    ag.raw_name = "_allgather_base";
    set_collective_sizes(t, ag, s.chunk, s.chunk * s.group, {}, {});
    rename_positional(t, node, ag.raw_name);
  }
  reindex(t);
  return std::to_string(splits.size()) + " all_reduces -> reduce_scatter + all_gather";
}

namespace {

// The storages (or ids, for tensors without one) of the tensors in `v`, lists and tuples included.
void storages_of(const Trace& t, const Value& v, std::set<int64_t>& out) {
  if (v.kind == ValueKind::Tensor) {
    const Tensor& x = t.tensors[v.ref];
    out.insert(x.storage_id ? x.storage_id : -x.id - 1);
  } else if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple) {
    for (const Value& item : t.items(v)) storages_of(t, item, out);
  }
}

// Whether `node` or an op it called (an autograd wrapper's accumulation into .grad, say) reads or writes one of
// `storages`.
bool touches(const Trace& t, uint32_t node, const std::set<int64_t>& storages) {
  std::set<int64_t> mine;
  for (const Value& v : t.inputs(t.nodes[node])) storages_of(t, v, mine);
  for (const Value& v : t.outputs(t.nodes[node])) storages_of(t, v, mine);
  if (std::any_of(mine.begin(), mine.end(), [&](int64_t s) { return storages.count(s) > 0; })) return true;
  for (uint32_t c : t.children(t.nodes[node]))
    if (touches(t, c, storages)) return true;
  return false;
}

}  // namespace

int64_t step_of(const Trace& t, const std::vector<StepSpan>& steps, uint32_t i) {
  const int64_t id = t.nodes[i].id;  // the spans are in id order, each ending where the next begins
  const auto s = std::upper_bound(steps.begin(), steps.end(), id,
                                  [](int64_t x, const StepSpan& span) { return x < span.first_id; });
  return s == steps.begin() ? -1 : static_cast<int64_t>(s - steps.begin()) - 1;
}
uint32_t thread_of(const Trace& t, uint32_t i) {
  while (t.nodes[i].kind != NodeKind::Thread && t.nodes[i].parent != kNone32) i = t.nodes[i].parent;
  return i;
}

std::string overlap_collectives(Trace& t, const OpPattern& which) {
  const std::vector<uint32_t> ops = outermost_ops(t);
  // Each op's step and thread, once.
  const std::vector<StepSpan> steps = profiler_steps(t);
  std::vector<int64_t> op_step(ops.size());
  std::vector<uint32_t> op_thread(ops.size());
  for (size_t k = 0; k < ops.size(); ++k) op_step[k] = step_of(t, steps, ops[k]), op_thread[k] = thread_of(t, ops[k]);
  // A wait names its collective by sequence number and group: one shared by two collectives (no seq recorded, a
  // coalesced block's members) would link to the wrong one.
  std::map<std::pair<int64_t, std::string>, int> uses;
  for (const Collective& c : t.collectives)
    if (!c.is_wait) ++uses[{c.seq, c.pg_name}];
  int64_t next_rf = next_rf_id(t);   // each wait's own rf_id
  std::map<uint32_t, size_t> place;  // outermost op -> its place in `ops`
  for (size_t k = 0; k < ops.size(); ++k) place[ops[k]] = k;
  std::set<int32_t> waited;  // collectives a wait of the trace completes already
  for (const Collective& c : t.collectives)
    if (c.is_wait && c.waits_for >= 0) waited.insert(c.waits_for);
  std::vector<Insertion> ins;
  size_t at_reader = 0, at_end = 0;
  for (size_t ci = 0; ci < t.collectives.size(); ++ci) {
    const Collective& c = t.collectives[ci];
    if (c.is_wait || c.p2p || c.name == "coalesced" || c.name == "barrier" || waited.count(static_cast<int32_t>(ci)) ||
        !which.matches(c.name) || c.seq < 0 || uses[{c.seq, c.pg_name}] != 1)
      continue;
    uint32_t unit = c.node;  // the replayed op the collective is (a c10d wrapper, or itself)
    while (!place.count(unit) && t.nodes[unit].parent != kNone32) unit = t.nodes[unit].parent;
    if (!place.count(unit)) continue;
    std::set<int64_t> storages;
    for (const Value& v : t.inputs(t.nodes[c.node])) storages_of(t, v, storages);
    for (const Value& v : t.outputs(t.nodes[c.node])) storages_of(t, v, storages);
    const size_t at = place[unit];
    // The first later op of its step and thread that reads or writes its tensors: the wait goes before it; with
    // none, after the step's last op on that thread.
    uint32_t last = unit, reader = kNone32;
    for (size_t k = at + 1; k < ops.size(); ++k) {
      const uint32_t op = ops[k];
      if (op_step[k] != op_step[at]) break;
      if (op_thread[k] != op_thread[at]) continue;
      if (touches(t, op, storages)) {
        reader = op;
        break;
      }
      last = op;
    }
    if (reader == kNone32 && last == unit) continue;  // nothing after it to overlap with
    Insertion x;
    x.anchor = reader != kNone32 ? reader : last;
    x.before = reader != kNone32;
    x.nodes.push_back(copy_node(t, c.node));
    time_beside(x.nodes.back(), t.nodes[x.anchor], x.before, next_rf);
    x.parent.push_back(-1);
    ins.push_back(std::move(x));
    ++(reader != kNone32 ? at_reader : at_end);
  }
  if (ins.empty())
    throw UserError(which.where + ": overlap: no collective matching '" + which.text + "' in " + t.source +
                    " has work after it in its step to overlap with");
  const std::vector<std::vector<int64_t>> ids = insert_nodes(t, std::move(ins));
  for (const std::vector<int64_t>& added : ids) {
    const uint32_t node = t.find(added[0]);
    set_attr_string(t, node, "collective_name", "wait");
    rename_positional(t, node, "wait");
  }
  reindex(t);
  return std::to_string(at_reader + at_end) + " collective(s) matching '" + which.text +
         "' made asynchronous: " + std::to_string(at_reader) + " waited before the first op that uses their tensors, " +
         std::to_string(at_end) + " at their step's end";
}

std::string move_to_stream(Trace& t, const OpPattern& ops, int64_t stream) {
  size_t moved = 0;
  for (uint32_t i : replayed_ops(t))  // DDP's all_reduce inside AccumulateGrad's wrapper too
    if (ops.matches(t.name(t.nodes[i]))) set_attr_int(t, i, "stream", "int", stream), ++moved;
  if (moved == 0)
    throw UserError(ops.where + ": streams: ops: '" + ops.text + "' matches no replayed op in " + t.source);
  reindex(t);
  return std::to_string(moved) + " ops matching " + ops.text + " on stream " + std::to_string(stream);
}

}  // namespace reprise::gen
