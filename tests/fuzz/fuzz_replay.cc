// Fuzz target: generated traces through replay's compiler and a meta-device replay. The bytes are a program that
// builds a small trace (tensors with fuzzed shapes, strides, offsets, dtypes, devices and shared storages; ops from
// a table of schemas, broken ones included, with fuzzed arguments; collectives with fuzzed sizes and groups), which
// is compiled with a world of one (so collectives are planned) and replayed on meta. Half the inputs go through the
// ET writer and reader first. A UserError is an answer; a crash, an abort or undefined behaviour is a bug.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_target.h"
#include "plan.h"
#include "reprise/comms/communicator.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"

namespace {

using namespace reprise;

const int64_t kDims[] = {0,        1, 2, 3, 4, 5, 8, 16, 1, 2, -1, int64_t{1} << 20, int64_t{1} << 31, 1000000000000,
                         INT64_MAX};
const int64_t kInts[] = {0, 1, 2, -1, -2, 3, 4, 8, int64_t{1} << 40, INT64_MIN, INT64_MAX, 16};
const double kReals[] = {
    0.5, -1.0, 0.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(), 1e300};
struct DtypeRow {
  const char* name;
  int itemsize;
};
const DtypeRow kDtypes[] = {{"float", 4},
                            {"float", 4},
                            {"c10::Half", 2},
                            {"double", 8},
                            {"long int", 8},
                            {"int", 4},
                            {"bool", 1},
                            {"c10::BFloat16", 2},
                            {"unsigned char", 1},
                            {"c10::complex<float>", 8},
                            {"nullptr (uninitialized)", 0},
                            {"float", 3},
                            {"bogus", 4}};
const char* const kDevices[] = {"cpu", "cpu", "cuda:0", "meta", "", "cuda:7"};

// Argument kinds of a schema: T tensor, I int, L int list, B bool, S scalar, N none, V tensor list.
struct OpRow {
  const char* schema;
  const char* args;
};
const OpRow kOps[] = {
    {"aten::relu(Tensor self) -> Tensor", "T"},
    {"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", "TTS"},
    {"aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", "TTS"},
    {"aten::mm(Tensor self, Tensor mat2) -> Tensor", "TT"},
    {"aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", "TTTSS"},
    {"aten::view(Tensor(a) self, int[] size) -> Tensor(a)", "TL"},
    {"aten::reshape(Tensor(a) self, int[] shape) -> Tensor(a)", "TL"},
    {"aten::expand(Tensor(a) self, int[] size, *, bool implicit=False) -> Tensor(a)", "TLB"},
    {"aten::as_strided(Tensor(a) self, int[] size, int[] stride, int? storage_offset=None) -> Tensor(a)", "TLLI"},
    {"aten::t(Tensor(a) self) -> Tensor(a)", "T"},
    {"aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
     "TLBN"},
    {"aten::cat(Tensor[] tensors, int dim=0) -> Tensor", "VI"},
    {"aten::stack(Tensor[] tensors, int dim=0) -> Tensor", "VI"},
    {"aten::embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False, bool "
     "sparse=False) -> Tensor",
     "TTIBB"},
    {"aten::index_select(Tensor self, int dim, Tensor index) -> Tensor", "TIT"},
    {"aten::zeros(int[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
     "pin_memory=None) -> Tensor",
     "LNNNN"},
    {"aten::empty.memory_format(int[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
     "bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
     "LNNNNN"},
    {"aten::narrow(Tensor(a) self, int dim, int start, int length) -> Tensor(a)", "TIII"},
    {"aten::select.int(Tensor(a) self, int dim, int index) -> Tensor(a)", "TII"},
    {"aten::slice.Tensor(Tensor(a) self, int dim=0, int? start=None, int? end=None, int step=1) -> Tensor(a)", "TIIII"},
    {"aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", "TIN"},
    {"aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)", "TTB"},
    {"aten::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", "TSS"},
    // aten::split is left out: on meta, splitting a dim of 10^12 by 1 makes 10^12 views (hours, not a crash)
    {"aten::relu(Tensor self) -> Tensor this is", "T"},
    {"aten::nonexistent_op(Tensor self) -> Tensor", "T"},
    {"aten::mul", "TT"},  // no schema recorded: the compiler picks an overload
    {"aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, int[2] "
     "dilation=1, int groups=1) -> Tensor",
     "TTNLLLI"},
};
const char* const kCollectives[] = {"allreduce",  "allgather",   "_allgather_base", "reduce_scatter",
                                    "all_to_all", "all_to_allv", "broadcast",       "wait",
                                    "send",       "recv",        "barrier",         "bogus"};
const char* const kCommDtypes[] = {"Float", "Half", "Long", "BFloat16", "Bogus", ""};
const char* const kSplits[] = {"[]", "[1, 1]", "[2, 0]", "[-1]", "[99999999999999999999]", "[4611686018427387904]"};

class TraceProgram {
 public:
  explicit TraceProgram(FuzzBytes& in) : in_(in), b_("fuzz.json") {}

  Trace build() {
    int world = 1 + in_.next() % 3;
    int64_t thread = b_.roots();
    b_.annotation("## process_group:init ##", thread,
                  {b_.string("[{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cpu:gloo\", "
                             "\"ranks\": [], \"group_size\": " +
                             std::to_string(world) + ", \"group_count\": 1}]")});
    int steps = 1 + in_.next() % 2;
    for (int s = 0; s < steps && in_.more(); ++s) {
      b_.set_parent(b_.annotation("ProfilerStep#" + std::to_string(s), thread));
      int ops = 1 + in_.next() % 12;
      for (int k = 0; k < ops && in_.more(); ++k) (in_.next() % 5 == 0) ? collective(world) : op();
    }
    return b_.finish();
  }

 private:
  Value tensor() {
    if (!pool_.empty() && in_.next() % 3 != 0) return pool_[in_.next() % pool_.size()];
    TensorSpec s;
    s.id = b_.next_id();
    s.storage_id = in_.next() % 4 == 0 ? 0 : 1000 + in_.next() % 6;  // shared storages alias
    const DtypeRow& d = in_.pick(kDtypes);
    s.dtype = d.name;
    s.itemsize = d.itemsize;
    s.device = in_.pick(kDevices);
    int rank = in_.next() % 5;
    for (int k = 0; k < rank; ++k) s.shape.push_back(in_.pick(kDims));
    if (in_.next() % 4 == 0)
      for (int k = 0; k < rank; ++k) s.strides.push_back(in_.pick(kDims));
    s.offset = in_.next() % 5 == 0 ? in_.pick(kInts) : 0;
    Value v = b_.tensor(s);
    pool_.push_back(v);
    return v;
  }

  Value arg(char kind) {
    if (in_.next() % 16 == 0) kind = "TILBSNV"[in_.next() % 7];  // the wrong kind now and then
    switch (kind) {
      case 'T':
        return tensor();
      case 'I':
        return b_.integer(in_.pick(kInts));
      case 'L': {
        std::vector<Value> items;
        for (int k = in_.next() % 5; k > 0; --k) items.push_back(b_.integer(in_.pick(kDims)));
        return b_.list(items);
      }
      case 'B':
        return b_.boolean(in_.next() & 1);
      case 'S':
        return in_.next() & 1 ? b_.integer(in_.pick(kInts)) : b_.real(in_.pick(kReals));
      case 'V': {
        std::vector<Value> items;
        for (int k = in_.next() % 4; k > 0; --k) items.push_back(tensor());
        return b_.list(items);
      }
      default:
        return b_.none();
    }
  }

  void op() {
    const OpRow& row = in_.pick(kOps);
    std::vector<Value> inputs, outputs;
    for (const char* a = row.args; *a; ++a) inputs.push_back(arg(*a));
    for (int k = in_.next() % 3; k > 0; --k) inputs.erase(inputs.end() - (inputs.empty() ? 0 : 1), inputs.end());
    if (in_.next() % 4 == 0) {
      std::vector<Value> items;
      for (int k = in_.next() % 3; k > 0; --k) items.push_back(tensor());
      outputs.push_back(b_.list(items));
    } else {
      outputs.push_back(tensor());
    }
    b_.op(row.schema, inputs, outputs);
  }

  void collective(int world) {
    Value grad = tensor();
    int64_t c10d = b_.op("c10d::allreduce_", {b_.list({grad})}, {});
    const char* name = in_.pick(kCollectives);
    b_.op("record_param_comms",
          {b_.list({grad}), b_.integer(seq_++), b_.tuple({b_.string("0"), b_.string("default_pg")}), b_.integer(0),
           b_.string(name), b_.list({}), b_.list({}), b_.integer(0), b_.integer(1), b_.integer(world)},
          {b_.list({grad})}, c10d);
    b_.add_attr("collective_name", "string", b_.string(name));
    b_.add_attr("dtype", "string", b_.string(in_.pick(kCommDtypes)));
    b_.add_attr("in_msg_nelems", "uint64", b_.integer(in_.pick(kDims)));
    b_.add_attr("out_msg_nelems", "uint64", b_.integer(in_.pick(kDims)));
    b_.add_attr("in_split_size", "string", b_.string(in_.pick(kSplits)));
    b_.add_attr("out_split_size", "string", b_.string(in_.pick(kSplits)));
    b_.add_attr("global_rank_start", "uint64", b_.integer(in_.next() % 3));
    b_.add_attr("global_rank_stride", "uint64", b_.integer(in_.next() % 3));
    b_.add_attr("pg_name", "string", b_.string(in_.next() % 4 == 0 ? "7" : "0"));
    b_.add_attr("pg_size", "uint64", b_.integer(in_.next() % 4 == 0 ? in_.pick(kInts) : world));
  }

  FuzzBytes& in_;
  TraceBuilder b_;
  std::vector<Value> pool_;
  int64_t seq_ = 0;
};

void compile_and_replay(const Trace& t) {
  static std::unique_ptr<comms::Communicator> self = comms::make_self();
  replay::ReplayOptions o;
  o.device = "meta";
  o.all_iterations = true;
  o.warmup = 0;
  o.iterations = 1;
  o.comm = self.get();
  try {
    replay::detail::compile_plan(t, o);  // a world of one: the collectives are planned, not run
  } catch (const UserError&) {
  }
  o.comm = nullptr;
  try {
    replay::replay_trace(t, o);
  } catch (const UserError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzBytes in(data, size);
  const bool through_reader = in.next() & 1;
  Trace t;
  try {
    t = TraceProgram(in).build();
    if (through_reader) t = read_et_text(et_json(t), "fuzz.json");
  } catch (const UserError&) {
    return 0;
  }
  compile_and_replay(t);
  return 0;
}
