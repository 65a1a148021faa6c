// Integer inputs that index into another tensor get values in range: from the trace's tensor_range when it has
// one ({"<input position>": [min, max]}), else from the consuming op's argument names (index, indices,
// offsets, target, num_classes).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "compiler.h"

namespace reprise::replay::detail {
namespace {

bool is_integer(at::ScalarType t) { return at::isIntegralType(t, /*includeBool=*/false); }

// The ranges one op's arguments imply for the plan's input tensors it reads.
class IndexRanges {
 public:
  IndexRanges(const Trace& t, Plan& p, const std::vector<uint32_t>& input_of, const c10::FunctionSchema& schema,
              Span<Value> inputs)
      : t_(t), p_(p), input_of_(input_of), formal_(schema.arguments()), inputs_(inputs), op_(schema.name()) {}

  void from_tensor_range(const Node& n);
  void for_index();
  void for_indices();
  void for_offsets();
  void for_classes();

 private:
  // Position of the argument called `name` among the recorded inputs, -1 when absent.
  int arg(const char* name) const {
    for (size_t k = 0; k < formal_.size() && k < inputs_.size(); ++k)
      if (formal_[k].name() == name) return static_cast<int>(k);
    return -1;
  }
  std::vector<int64_t> dims(int k) const {
    if (k < 0 || inputs_[k].kind != ValueKind::Tensor) return {};
    Span<int64_t> d = t_.dims(t_.tensors[inputs_[k].ref]);
    return {d.begin(), d.end()};
  }
  int64_t int_arg(int k, int64_t dflt) const {
    return k >= 0 && inputs_[k].kind == ValueKind::Int ? inputs_[k].i : dflt;
  }
  void limit(const Value& v, int64_t lo, int64_t hi, const std::string& source, bool sorted = false);

  const Trace& t_;
  Plan& p_;
  const std::vector<uint32_t>& input_of_;
  const std::vector<c10::Argument>& formal_;
  Span<Value> inputs_;
  std::string op_;
};

// Narrows the range of `v` when it is an integer input tensor. A tensor_range wins over names; embedding-bag
// offsets (`sorted`) are non-decreasing from 0, whatever range was recorded.
void IndexRanges::limit(const Value& v, int64_t lo, int64_t hi, const std::string& source, bool sorted) {
  if (v.kind != ValueKind::Tensor || input_of_[v.ref] == kNoSlot) return;
  InputTensorSpec& e = p_.inputs[input_of_[v.ref]];
  if (!is_integer(p_.storage_groups[e.storage_group].dtype)) return;
  if (sorted) {
    e.has_range = true;
    e.sorted = true;
    e.lo = lo;
    e.hi = hi;
    e.range_source = source;
    return;
  }
  if (e.has_range && (e.range_source == "tensor_range" || e.sorted)) return;
  if (hi < lo) hi = lo;
  if (!e.has_range || source == "tensor_range") {
    e.has_range = true;
    e.lo = lo;
    e.hi = hi;
    e.range_source = source;
  } else {
    e.lo = std::max(e.lo, lo);
    e.hi = std::max(e.lo, std::min(e.hi, hi));
  }
}

void IndexRanges::from_tensor_range(const Node& n) {
  if (n.tensor_range == 0) return;
  try {
    auto j = nlohmann::json::parse(t_.str(n.tensor_range));
    for (auto& [key, range] : j.items()) {
      size_t k = std::stoul(key);
      if (k < inputs_.size() && range.is_array() && range.size() == 2)
        limit(inputs_[k], range[0].get<int64_t>(), range[1].get<int64_t>(), "tensor_range");
    }
  } catch (const std::exception&) {
    p_.warnings.push_back("node " + std::to_string(n.id) + ": unreadable tensor_range '" +
                          std::string(t_.str(n.tensor_range)) + "'");
  }
}

// index_select, gather, scatter, index_add...: `index` into self's dim, or into self's elements without one.
void IndexRanges::for_index() {
  int self = arg("self"), dim = arg("dim"), index = arg("index");
  if (index < 0) return;
  std::vector<int64_t> sd = dims(self);
  if (dim >= 0 && !sd.empty()) {
    int64_t d = int_arg(dim, 0);
    if (d < 0) d += static_cast<int64_t>(sd.size());
    if (d >= 0 && d < static_cast<int64_t>(sd.size())) limit(inputs_[index], 0, sd[d] - 1, op_ + " self.size(dim)");
  } else if (self >= 0 && dim < 0) {
    int64_t numel = 1;
    for (int64_t s : sd) numel *= s;
    limit(inputs_[index], 0, numel - 1, op_ + " self.numel()");
  }
}

// index.Tensor's list of per-dim indices, embedding's indices into weight rows (or num_weights).
void IndexRanges::for_indices() {
  int indices = arg("indices");
  if (indices < 0) return;
  int self = arg("self"), weight = arg("weight"), num_weights = arg("num_weights");
  if (inputs_[indices].kind == ValueKind::List && self >= 0) {
    std::vector<int64_t> sd = dims(self);
    size_t k = 0;
    for (const Value& e : t_.items(inputs_[indices])) {
      if (k < sd.size()) limit(e, 0, sd[k] - 1, op_ + " self.size(" + std::to_string(k) + ")");
      ++k;
    }
  } else if (weight >= 0 && !dims(weight).empty()) {
    limit(inputs_[indices], 0, dims(weight)[0] - 1, op_ + " weight rows");
  } else if (num_weights >= 0) {
    limit(inputs_[indices], 0, int_arg(num_weights, 1) - 1, op_ + " num_weights");
  }
}

// embedding_bag's offsets into its indices.
void IndexRanges::for_offsets() {
  int indices = arg("indices"), offsets = arg("offsets");
  if (indices < 0 || offsets < 0) return;
  if (inputs_[offsets].kind != ValueKind::Tensor || inputs_[indices].kind != ValueKind::Tensor) return;
  int64_t total = t_.tensors[inputs_[indices].ref].numel;
  limit(inputs_[offsets], 0, total, op_ + " offsets into indices", /*sorted=*/true);
  if (input_of_[inputs_[offsets].ref] != kNoSlot) p_.inputs[input_of_[inputs_[offsets].ref]].sorted_total = total;
}

// Losses' class targets, one_hot's classes.
void IndexRanges::for_classes() {
  int self = arg("self"), target = arg("target"), num_classes = arg("num_classes");
  if (target >= 0 && self >= 0) {
    std::vector<int64_t> sd = dims(self);
    if (!sd.empty()) limit(inputs_[target], 0, (sd.size() == 1 ? sd[0] : sd[1]) - 1, op_ + " classes");
  }
  if (num_classes >= 0 && self >= 0 && int_arg(num_classes, -1) > 0)
    limit(inputs_[self], 0, int_arg(num_classes, 1) - 1, op_ + " num_classes");
}

}  // namespace

void Compiler::note_ranges(const Node& n, const c10::FunctionSchema& schema, Span<Value> inputs) {
  IndexRanges r(t_, p_, input_of_, schema, inputs);
  r.from_tensor_range(n);
  r.for_index();
  r.for_indices();
  r.for_offsets();
  r.for_classes();
}

}  // namespace reprise::replay::detail
