// Compute on the GPU streams the original used: each instruction gets the stream its kernels ran on (from the
// linked Kineto trace), and a consumer of a tensor produced on another stream waits for an event recorded after its
// producer. Only data dependencies are ordered across streams (what the trace implies); within a stream, issue order
// orders everything.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "plan.h"

namespace reprise::replay::detail {
namespace {

// node -> the stream of the GPU work it launched itself, and each stream's share of that work.
struct KernelStreams {
  std::unordered_map<uint32_t, int64_t> of_node;
  std::map<int64_t, size_t> work;
};

KernelStreams kernel_streams(const Trace& t) {
  KernelStreams k;
  if (!t.kineto) return k;
  for (const KinetoEvent& e : t.kineto->events)
    if (is_gpu_work(e.cat) && e.node != kNone32 && e.stream >= 0) {
      k.of_node.emplace(e.node, e.stream);
      ++k.work[e.stream];
    }
  return k;
}

// The stream of the first GPU work `node` or, depth first, one of its callees launched; -1 when none did.
int64_t stream_below(const Trace& t, const KernelStreams& k, uint32_t node, int depth = 0) {
  auto it = k.of_node.find(node);
  if (it != k.of_node.end()) return it->second;
  if (depth > 64) return -1;
  for (uint32_t c : t.children(t.nodes[node]))
    if (int64_t s = stream_below(t, k, c, depth + 1); s >= 0) return s;
  return -1;
}

// The slots an instruction reads (aliases read their base's slot).
template <typename F>
void each_slot_read(const Plan& p, const Instr& in, F f) {
  for (uint32_t a = in.args; a < in.args + in.num_args; ++a) {
    const ArgSpec& arg = p.args[a];
    if (arg.kind == ArgSpec::Const) continue;
    const uint32_t n = arg.kind == ArgSpec::Tensor ? 1 : arg.count;
    for (uint32_t r = arg.index; r < arg.index + n; ++r) {
      const TensorRef& ref = p.refs[r];
      if (ref.kind == TensorRef::Slot) f(ref.index);
      if (ref.kind == TensorRef::Alias) f(p.aliases[ref.index].slot);
    }
  }
}

template <typename F>
void each_slot_written(const Plan& p, const Instr& in, F f) {
  for (uint32_t o = in.outs; o < in.outs + in.num_outs; ++o)
    for (uint32_t e = 0; e < p.outs[o].count; ++e)
      if (uint32_t s = p.out_slots[p.outs[o].first + e]; s != kNoSlot) f(s);
}

}  // namespace

void assign_compute_streams(const Trace& trace, Plan& plan) {
  const KernelStreams k = kernel_streams(trace);
  if (k.work.size() < 2) return;
  // [0]: the busiest stream, which the replay's current stream plays; then by id.
  plan.streams.clear();
  auto busiest =
      std::max_element(k.work.begin(), k.work.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  plan.streams.push_back(busiest->first);
  for (const auto& [id, n] : k.work)
    if (id != busiest->first && plan.streams.size() < kMaxStreams) plan.streams.push_back(id);
  auto index_of = [&](int64_t id) -> int16_t {
    auto it = std::find(plan.streams.begin(), plan.streams.end(), id);
    return it == plan.streams.end() ? 0 : static_cast<int16_t>(it - plan.streams.begin());
  };

  const size_t S = plan.streams.size();
  std::unordered_map<int64_t, int16_t> thread_stream;  // trace thread -> its current stream
  std::vector<uint32_t> producer(plan.num_slots, UINT32_MAX);
  // waited[consumer * S + producer stream]: the last producing instruction that consumer stream has waited for
  std::vector<int64_t> waited(S * S, -1);
  for (uint32_t i = 0; i < plan.instrs.size(); ++i) {
    Instr& in = plan.instrs[i];
    const Node& n = trace.nodes[in.node];
    int16_t s = 0;
    if (in.comm < 0) {
      const int64_t id = stream_below(trace, k, in.node);
      auto cur = thread_stream.find(n.tid);
      s = id >= 0 ? index_of(id) : cur != thread_stream.end() ? cur->second : 0;
    }
    thread_stream[n.tid] = s;
    in.stream = s;
    in.waits = static_cast<uint32_t>(plan.stream_waits.size());
    std::map<int16_t, uint32_t> latest;  // producer stream -> the latest producer this instruction reads from it
    each_slot_read(plan, in, [&](uint32_t slot) {
      const uint32_t p = producer[slot];
      if (p == UINT32_MAX || plan.instrs[p].stream == s) return;
      uint32_t& l = latest.try_emplace(plan.instrs[p].stream, p).first->second;
      l = std::max(l, p);
    });
    for (const auto& [from_stream, p] : latest) {
      int64_t& last = waited[static_cast<size_t>(s) * S + static_cast<size_t>(from_stream)];
      if (static_cast<int64_t>(p) <= last) continue;  // an event at or after it on that stream was waited for
      Instr& from = plan.instrs[p];
      if (from.event < 0) {
        from.event = static_cast<int32_t>(plan.event_streams.size());
        plan.event_streams.push_back(0);
      }
      plan.event_streams[static_cast<size_t>(from.event)] |= uint64_t{1} << s;
      plan.stream_waits.push_back(static_cast<uint32_t>(from.event));
      ++in.num_waits;
      ++plan.cross_stream_waits;
      last = p;
    }
    each_slot_written(plan, in, [&](uint32_t slot) { producer[slot] = i; });
  }
}

}  // namespace reprise::replay::detail
