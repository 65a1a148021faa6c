// Fuzz target: fbgemm's table-batched lookups and their fused-optimizer backward nodes, emulated (--emulate-tbe).
// The bytes are a program that builds a step of lookups (the split op by its schema, by fbgemm's positions without
// one, the dense op, the _pt2 op's lists and the _cpu op's host weights) with fuzzed tables (device or UVM half,
// rows, widths, dtypes, D_offsets, total_D), indices, offsets, pooling modes, output sizes and optimizer state, and
// backward nodes of fuzzed optimizers whose gradients are shaped like a lookup's output or not, some with recorded
// children. The step is replayed with the emulation on meta, and on the CPU when its tensors are small, so the
// emulated ops run on real data. Half the inputs go through the ET writer and reader first. A UserError or an op
// that fails is an answer; a crash, an abort or undefined behaviour is a bug.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fuzz_target.h"
#include "reprise/common/error.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"
#include "tbe_schema.h"

namespace {

using namespace reprise;

const int64_t kTables[] = {1, 2, 3, 4, 1, 2, 0, 7};
const int64_t kWidths[] = {1, 2, 4, 8, 16, 3, 4, 8};
const int64_t kRows[] = {1, 5, 100, 4000, 7, 0, 1, int64_t{1} << 40};
const int64_t kBatches[] = {1, 2, 16, 3, 0, 2};
const int64_t kLookups[] = {0, 1, 5, 80, 3, 17, 2, int64_t{1} << 33};
const int64_t kOdd[] = {0, 1, -1, 2, 7, INT64_MAX, INT64_MIN, 1 << 20};
const int64_t kPooling[] = {0, 1, 2, 0, 1, 3, -1, INT64_MAX};
struct DtypeRow {
  const char* name;
  int itemsize;
};
const DtypeRow kFloats[] = {{"float", 4},         {"float", 4},  {"c10::Half", 2}, {"c10::BFloat16", 2},
                            {"unsigned char", 1}, {"double", 8}, {"long int", 8},  {"bogus", 4}};
const DtypeRow kIndexTypes[] = {{"long int", 8}, {"long int", 8}, {"int", 4}, {"float", 4}, {"bool", 1}};
const char* const kOptimizers[] = {"adagrad", "rowwise_adagrad",      "sgd",  "Dense", "dense",
                                   "adam",    "partial_rowwise_adam", "none", "bogus"};

const char* kPt2Schema =
    "fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function_pt2(Tensor placeholder_autograd_tensor, "
    "Tensor[] weights, Tensor D_offsets, int total_D, int max_D, Tensor hash_size_cumsum, int total_hash_size_bits, "
    "Tensor indices, Tensor offsets, int pooling_mode, Tensor? indice_weights, Tensor? feature_requires_grad, "
    "Tensor[] momentum1) -> Tensor";
const char* kCpuSchema =
    "fbgemm::split_embedding_codegen_lookup_sgd_function_cpu(Tensor host_weights, Tensor weights_placements, Tensor "
    "weights_offsets, Tensor D_offsets, int total_D, int max_D, Tensor hash_size_cumsum, int total_hash_size_bits, "
    "Tensor indices, Tensor offsets, int pooling_mode, Tensor? indice_weights, Tensor? feature_requires_grad) -> "
    "Tensor";

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
// a * b for sizes (both at least 0), kMax when it overflows.
int64_t saturating_mul(int64_t a, int64_t b) { return b != 0 && a > kMax / b ? kMax : a * b; }

class StepProgram {
 public:
  explicit StepProgram(FuzzBytes& in) : in_(in), b_("fuzz-tbe.json") {}

  Trace build() {
    const int64_t thread = b_.roots();
    b_.set_parent(b_.annotation("ProfilerStep#0", thread));
    for (int k = 1 + in_.next() % 6; k > 0 && in_.more(); --k) {
      const int what = in_.next() % 8;
      if (what < 4)
        lookup(what);
      else if (what < 7)
        backward();
      else
        b_.op("aten::relu(Tensor self) -> Tensor", {outputs_.empty() ? tensor({4}) : outputs_.back().value},
              {tensor({4})});
    }
    return b_.finish();
  }

  // Whether every tensor is small enough to replay on the CPU.
  bool small() const { return bytes_ <= (int64_t{64} << 20); }

 private:
  Value tensor(std::vector<int64_t> shape, const DtypeRow& d = kFloats[0]) {
    TensorSpec s;
    s.id = b_.next_id();
    s.storage_id = s.id;
    s.dtype = d.name;
    s.itemsize = d.itemsize;
    int64_t numel = 1;
    for (int64_t x : shape) numel = x < 0 ? kMax : saturating_mul(numel, x);
    bytes_ = std::min(kMax / 2, bytes_ + std::min(kMax / 4, saturating_mul(numel, d.itemsize)));
    s.shape = std::move(shape);
    return b_.tensor(s);
  }
  // A size as asked, or now and then an odd one.
  int64_t fuzzed(int64_t want) { return in_.next() % 8 == 0 ? in_.pick(kOdd) : want; }
  Value ints(int64_t n, const DtypeRow& d = kIndexTypes[0]) { return tensor({fuzzed(n)}, d); }

  void lookup(int variant) {
    const int64_t tables = in_.pick(kTables), d = in_.pick(kWidths), rows = in_.pick(kRows);
    const int64_t batch = in_.pick(kBatches), lookups = in_.pick(kLookups);
    const DtypeRow& wt = in_.pick(kFloats);
    const int64_t total_d = fuzzed(tables * d), pooling = in_.pick(kPooling);
    const bool on_device = in_.next() & 1;
    Value full = tensor({fuzzed(saturating_mul(saturating_mul(tables, rows), d))}, wt), empty = tensor({0}, wt);
    Value dev = on_device ? full : empty, uvm = on_device ? empty : full;
    Value indices = ints(lookups, in_.pick(kIndexTypes)), offsets = ints(tables * batch + 1, in_.pick(kIndexTypes));
    const int64_t out_rows = pooling == 2 ? lookups : batch;
    std::vector<int64_t> out_shape{fuzzed(out_rows)};
    if (in_.next() % 6 != 0) out_shape.push_back(fuzzed(total_d));
    Value out = tensor(out_shape);
    const int64_t state_numel =
        in_.next() & 1 ? saturating_mul(saturating_mul(tables, rows), d) : saturating_mul(tables, rows);
    Value state = tensor({fuzzed(state_numel)}), placements = ints(tables, kIndexTypes[2]);
    Value w_offsets = ints(tables), d_offsets = ints(tables + 1, kIndexTypes[2]), hash = ints(tables + 1);
    Value total = b_.integer(total_d), max_d = b_.integer(fuzzed(d)), bits = b_.integer(in_.next() % 40);
    // Read before the calls below, whose arguments are evaluated in no set order.
    const std::string optimizer = in_.pick(kOptimizers);
    const int64_t output_dtype = in_.next() % 4;
    const bool dense = in_.next() & 1, short_weights = in_.next() % 4 == 0, short_state = in_.next() % 4 == 0;
    switch (variant) {
      case 0:  // the split op with its schema, or by fbgemm's positions without it
      case 1:
        b_.op(variant == 0 ? test::kSplitAdagradLookupSchema
                           : "fbgemm::split_embedding_codegen_lookup_" + optimizer + "_function",
              {tensor({0}),
               dev,
               uvm,
               tensor({0, 0}),
               placements,
               w_offsets,
               d_offsets,
               total,
               max_d,
               hash,
               bits,
               indices,
               offsets,
               b_.integer(pooling),
               b_.none(),
               b_.none(),
               ints(0, kIndexTypes[2]),
               b_.boolean(false),
               b_.real(1.0),
               b_.boolean(true),
               empty,
               state,
               placements,
               w_offsets,
               b_.real(1e-8),
               b_.real(0.01),
               b_.integer(output_dtype)},
              {out});
        break;
      case 2:
        if (dense) {  // the dense op, positions only (no UVM, no optimizer)
          b_.op("fbgemm::dense_embedding_codegen_lookup_function",
                {full, w_offsets, d_offsets, total, max_d, hash, bits, indices, offsets, b_.integer(pooling), b_.none(),
                 b_.none(), b_.integer(0)},
                {out});
        } else {
          b_.op(kCpuSchema,
                {full, placements, w_offsets, d_offsets, total, max_d, hash, bits, indices, offsets,
                 b_.integer(pooling), b_.none(), b_.none()},
                {out});
        }
        break;
      default:  // _pt2: the halves and the state as list elements, some lists short
        b_.op(kPt2Schema,
              {tensor({0}), b_.list(short_weights ? std::vector<Value>{dev} : std::vector<Value>{dev, uvm, empty}),
               d_offsets, total, max_d, hash, bits, indices, offsets, b_.integer(pooling), b_.none(), b_.none(),
               b_.list(short_state ? std::vector<Value>{} : std::vector<Value>{empty, state})},
              {out});
    }
    const char* const of_variant[] = {"adagrad", optimizer.c_str(), dense ? "Dense" : "sgd", "rowwise_adagrad"};
    lookup_indices_.push_back(indices);
    outputs_.push_back({out, out_shape, of_variant[variant]});
  }

  void backward() {
    std::string opt = in_.pick(kOptimizers);
    const bool nobag = in_.next() % 4 == 0;
    // Mostly a lookup's: its optimizer, and its gradient a tensor shaped like its output (or that output itself);
    // else another optimizer or shape.
    Value grad;
    if (!outputs_.empty() && in_.next() % 4 != 0) {
      const Output& o = outputs_[in_.next() % outputs_.size()];
      if (in_.next() % 4 != 0) opt = o.optimizer;
      grad = in_.next() & 1 ? o.value : tensor(o.shape);
    } else {
      grad = tensor({in_.pick(kBatches), in_.pick(kWidths)});
    }
    const int64_t node =
        b_.op("torch::autograd::CppNode<Split" + std::string(nobag ? "NoBag" : "") + "LookupFunction_" + opt + "_Op>",
              {grad}, {});
    const int64_t child_numel = in_.pick(kLookups);
    if (!lookup_indices_.empty() && in_.next() % 3 == 0)  // a recorded child, as FBGEMM's allocations are
      b_.op(
          "aten::zeros_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
          "pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
          {lookup_indices_.back(), b_.none(), b_.none(), b_.none(), b_.none(), b_.none()},
          {tensor({child_numel}, kIndexTypes[0])}, node);
  }

  FuzzBytes& in_;
  TraceBuilder b_;
  struct Output {
    Value value;
    std::vector<int64_t> shape;
    std::string optimizer;
  };
  std::vector<Output> outputs_;
  std::vector<Value> lookup_indices_;
  int64_t bytes_ = 0;
};

void replay_on(const Trace& t, const char* device, bool count_ops) {
  replay::ReplayOptions o;
  o.device = device;
  o.emulate_tbe = true;
  o.all_iterations = true;
  o.warmup = 0;
  o.iterations = 1;
  if (count_ops) o.max_ops = 2;
  try {
    replay::replay_trace(t, o);
  } catch (const UserError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzBytes in(data, size);
  const uint8_t mode = in.next();
  Trace t;
  bool small = false;
  try {
    StepProgram p(in);
    t = p.build();
    small = p.small();
    if (mode & 1) t = read_et_text(et_json(t), "fuzz-tbe.json");
  } catch (const UserError&) {
    return 0;
  }
  replay_on(t, "meta", mode & 4);
  if (small) replay_on(t, "cpu", mode & 4);
  return 0;
}
