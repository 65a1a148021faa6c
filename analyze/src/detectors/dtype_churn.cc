// Tensors converted back and forth between dtypes in the step (aten::_to_copy from more than one floating dtype):
// each conversion is a full read and write of the tensor, often undoing the last one.
#include <set>

#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

bool floating(const std::string& d) {
  return d == "float" || d == "double" || d == "c10::Half" || d == "c10::BFloat16" || d == "Float" || d == "Half" ||
         d == "BFloat16" || d == "Double" || d == "half" || d == "bfloat16";
}

bool find(const WindowStats& s, Finding& f) {
  if (s.conversions.size() < 4) return false;
  // With dtypes recorded, the conversions from floating dtypes (casting indices or masks is not churn), and churn
  // when they go both ways (two source dtypes); with none recorded, many conversions are.
  bool known = false;
  for (const Conversion& c : s.conversions) known = known || !c.from.empty();
  std::set<std::string> from;
  double us = 0;
  size_t n = 0;
  std::vector<Instance> all;
  for (const Conversion& c : s.conversions) {
    if (known && !floating(c.from)) continue;
    if (known) from.insert(c.from);
    ++n;
    us += c.device_us;
    all.push_back({c.begin, c.end, "from " + (c.from.empty() ? std::string("?") : c.from)});
  }
  f.score = known ? (from.size() >= 2 ? double(n) / 4 : 0) : double(n) / 8;
  if (n < 4 || (known ? from.size() < 2 : n < 8)) return false;
  if (us < 20) return false;
  std::string list;
  for (const std::string& d : from) list += (list.empty() ? "" : ", ") + d;
  f.saving_us = us;
  f.evidence = std::to_string(n) + " dtype conversions (aten::_to_copy" +
               (list.empty() ? std::string("") : ", from " + list) + ") costing " + time_text(us) +
               (s.tl->gpu ? " of GPU time" : "");
  f.ops = {"aten::_to_copy"};
  keep_instances(f, std::move(all));
  return true;
}

// Eight conversions of a 1024x1024 tensor; with `both_ways`, every other one from bf16 (back to float).
bool conversions(Editor& e, const InjectSite& s, bool both_ways) {
  if (!e.gpu()) {  // a CPU capture: the conversions are the work
    const double t = s.host_point(e);
    if (t < 0) return false;
    const double k = std::max(8.0, 0.004 * s.length());
    e.shift(t, 8 * (k + 2), 0);
    for (int i = 0; i < 8; ++i) {  // x.to(dtype): aten::to, calling _to_copy, calling copy_
      const double h = t + (k + 2) * i;
      e.work("aten::to", h, k);
      const int32_t op = e.op("aten::_to_copy", h + 0.5, k - 1);
      e.inputs(op, {{1024, 1024}}, {both_ways && i % 2 ? "c10::BFloat16" : "float"});
      e.op("aten::copy_", h + 1, k - 2);
    }
    return true;
  }
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  const double k = std::max(8.0, 0.004 * s.length());
  double end = e.drain(t);
  const double delay = (end - t) + 8 * 12 + 8 * k;  // the host as long as the conversions: the queue stays as it was
  e.shift(t, delay, delay);
  for (int i = 0; i < 8; ++i) {
    const double h = t + 12 * i;
    const int32_t op = e.op("aten::_to_copy", h, 11);
    e.inputs(op, {{1024, 1024}}, {both_ways && i % 2 ? "c10::BFloat16" : "float"});
    e.op("aten::copy_", h + 1, 9);
    const int64_t corr = e.runtime("cudaLaunchKernel", h + 2, 5);
    const double start = std::max(h + 8, end);
    e.gpu(KinetoCat::Kernel, "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>", corr,
          start, k);
    end = start + k;
  }
  return true;
}

// Float to bf16 and back.
bool inject(Editor& e, const InjectSite& s) { return conversions(e, s, true); }

// Conversions one way only: inputs cast once to bf16, nothing converted back.
bool decoy(Editor& e, const InjectSite& s) { return conversions(e, s, false); }

}  // namespace

const Detector kDtypeChurn{
    {"dtype_churn", "dtype churn",
     "4 or more aten::_to_copy conversions of floating tensors in the window, from two or more dtypes",
     "keep one dtype through the region (autocast, parameters and inputs in the compute "
     "dtype), convert once at its boundary",
     "the conversions dropped: the tensor keeps its dtype", "perturb: {drop: '^aten::(to|_to_copy)$|ToCopyBackward'}"},
    find,
    inject,
    decoy};

}  // namespace reprise::analyze::detail
