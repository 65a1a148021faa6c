// A prediction for scripts (reprise-prediction/1 JSON), for Perfetto (a Chrome trace laid out like replay's) and for
// people (a table).
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "reprise/predict/predict.h"
#include "reprise/trace/host_gaps.h"
#include "reprise/trace/summary.h"

namespace reprise::predict {
namespace {

using json = nlohmann::ordered_json;

json events_json(const std::vector<SimEvent>& evs) {
  json a = json::array();
  for (const SimEvent& e : evs)
    a.push_back({{"rank", e.rank},
                 {"resource", e.resource},
                 {"op", e.name},
                 {"start_seconds", e.start},
                 {"seconds", e.end - e.start}});
  return a;
}

}  // namespace

std::string prediction_json(const Prediction& p) {
  json j;
  j["format"] = "reprise-prediction/1";
  j["name"] = p.name;
  j["source"] = p.source;
  j["simulator"] = "reprise";
  j["cluster"] = p.cluster;
  j["calibration"] = p.calibration;
  j["world_size"] = p.world_size;
  j["steps"] = p.steps;
  j["iteration_seconds"] = p.seconds;
  j["interval"] = {{"lo", p.lo}, {"hi", p.hi}, {"confidence", p.confidence}};
  json ranks = json::array();
  for (const RankPrediction& r : p.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"iteration_seconds", r.seconds},
                     {"lo", r.lo},
                     {"hi", r.hi},
                     {"host_busy_seconds", r.sim.host_busy},
                     {"compute_busy_seconds", r.sim.compute_busy},
                     {"comm_busy_seconds", r.sim.comm_busy},
                     {"exposed_comm_seconds", r.sim.exposed_comm},
                     {"streaming_seconds", r.streaming_seconds},
                     {"contention", r.contention},
                     {"working_set_bytes", r.working_set_bytes},
                     {"jitter_seconds", r.jitter_seconds}});
  j["ranks"] = ranks;
  j["host_time"] = {{"mode", host_time_mode(p.host_time_known ? p.host_time_scale : 0)},
                    {"scale", p.host_time_scale},
                    {"seconds_per_iteration", p.host_time_seconds},
                    {"op_floor_seconds_per_iteration", p.op_floor_seconds},
                    {"data_loader_seconds_per_iteration", p.data_loader_seconds}};
  j["launch"] = p.launch;
  json fam = json::object();
  for (const auto& [name, f] : p.families) fam[name] = f.seconds;
  j["families"] = fam;
  j["coverage"] = {{"ops", p.ops},
                   {"modeled", p.modeled},
                   {"measured", p.measured},
                   {"fallback", p.fallback},
                   {"fraction", p.ops > 0 ? static_cast<double>(p.modeled) / static_cast<double>(p.ops) : 1.0},
                   {"unmodeled", p.unmodeled}};
  json ops = json::array();
  for (const Prediction::OpLine& l : p.per_op)
    ops.push_back({{"op", l.op}, {"family", l.family}, {"count", l.count}, {"seconds", l.seconds}});
  j["per_op"] = ops;
  j["critical_path"] = events_json(p.critical_path);
  j["simulation"] = {{"programs", p.programs},
                     {"ops", p.simulated_ops},
                     {"build_seconds", p.build_seconds},
                     {"simulate_seconds", p.simulate_seconds},
                     {"ops_per_second", p.simulate_seconds > 0 ? p.simulated_ops / p.simulate_seconds : 0.0}};
  j["placement"] = {{"ranks_running_per_node", p.ranks_running},
                    {"ranks_resident_per_node", p.ranks_resident},
                    {"oversubscribed", p.oversubscribed}};
  j["warnings"] = p.warnings;
  return j.dump(2) + "\n";
}

// One process per rank ("rank N predicted"), one thread per resource: host, stream N, comm <group>; the critical path
// as flow-free instant markers on its own track, so it reads beside a replay's timeline.
std::string prediction_timeline(const Prediction& p) {
  json events = json::array();
  std::map<std::pair<int64_t, std::string>, int> tids;
  auto tid_of = [&](int64_t rank, const std::string& res) {
    auto [it, fresh] = tids.emplace(std::make_pair(rank, res), static_cast<int>(tids.size()) + 1);
    if (fresh) {
      events.push_back(
          {{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", it->second}, {"args", {{"name", res}}}});
    }
    return it->second;
  };
  std::map<int64_t, bool> named;
  auto add = [&](const SimEvent& e, const std::string& track, const char* cat) {
    if (!named[e.rank]) {
      named[e.rank] = true;
      events.push_back({{"name", "process_name"},
                        {"ph", "M"},
                        {"pid", e.rank},
                        {"args", {{"name", "rank " + std::to_string(e.rank) + " predicted (" + p.cluster + ")"}}}});
    }
    events.push_back({{"name", e.name},
                      {"cat", cat},
                      {"ph", "X"},
                      {"ts", e.start * 1e6},
                      {"dur", (e.end - e.start) * 1e6},
                      {"pid", e.rank},
                      {"tid", tid_of(e.rank, track)},
                      {"args", {{"resource", e.resource}}}});
  };
  for (const SimEvent& e : p.timeline) add(e, e.resource, e.resource.rfind("comm", 0) == 0 ? "comm" : "op");
  for (const SimEvent& e : p.critical_path) add(e, "critical path", "critical");
  json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", {{"source", p.source}}}};
  return doc.dump() + "\n";
}

void print_prediction(std::FILE* out, const Prediction& p) {
  std::string steps = p.steps.empty() ? "" : p.steps.front();
  if (p.steps.size() > 1)
    steps += " .. " + p.steps.back() + " (" + std::to_string(p.steps.size()) + " steps, the mean)";
  std::fprintf(out, "  workload     %s (%s), %d rank(s), %s\n", p.name.c_str(), p.source.c_str(), p.world_size,
               steps.c_str());
  std::fprintf(out, "  cluster      %s%s%s\n", p.cluster.c_str(), p.calibration.empty() ? "" : ", calibration ",
               p.calibration.c_str());
  std::fprintf(out, "  iteration    %s  (%s .. %s, %.0f%% interval; slowest rank)\n", human_seconds(p.seconds).c_str(),
               human_seconds(p.lo).c_str(), human_seconds(p.hi).c_str(), 100 * p.confidence);
  const std::string covered = p.ops > 0 ? human_percent(p.modeled, p.ops) : "100.0%";
  std::fprintf(out, "  coverage     %s of %s ops modeled", covered.c_str(), human_count(p.ops).c_str());
  if (p.measured > 0) std::fprintf(out, ", %s timed by a replay", human_count(p.measured).c_str());
  std::fprintf(out, "\n");
  if (!p.ranks.empty()) {
    const RankPrediction& r = p.ranks.front();
    std::fprintf(out, "  rank 0       host %s, compute %s, comm %s (exposed %s)\n",
                 human_seconds(r.sim.host_busy).c_str(), human_seconds(r.sim.compute_busy).c_str(),
                 human_seconds(r.sim.comm_busy).c_str(), human_seconds(r.sim.exposed_comm).c_str());
  }
  if (p.host_time_scale > 0 && p.host_time_known) {
    std::fprintf(out,
                 "  host time    %s (--host-time): %s per iteration between rank 0's ops, as the trace recorded it\n",
                 host_time_mode(p.host_time_scale), human_seconds(p.host_time_seconds).c_str());
    if (p.op_floor_seconds > 0)
      std::fprintf(out, "               and %s per iteration holding ops to their original's own host time\n",
                   human_seconds(p.op_floor_seconds).c_str());
  } else if (p.host_time_scale > 0)
    std::fprintf(out,
                 "  host time    none: the trace has no op times (no Kineto trace or capture timeline linked to it)\n");
  if (p.data_loader_seconds > 0)
    std::fprintf(out, "  data loader  %s per iteration added where rank 0's DataLoader calls were (--data-loader)\n",
                 human_seconds(p.data_loader_seconds).c_str());
  if (p.ranks.size() > 1) {
    auto [fast, slow] =
        std::minmax_element(p.ranks.begin(), p.ranks.end(),
                            [](const RankPrediction& a, const RankPrediction& b) { return a.seconds < b.seconds; });
    std::fprintf(out, "  ranks        fastest %lld: %s, slowest %lld: %s\n", static_cast<long long>(fast->rank),
                 human_seconds(fast->seconds).c_str(), static_cast<long long>(slow->rank),
                 human_seconds(slow->seconds).c_str());
  }
  if (!p.ranks.empty() && p.ranks.front().contention > 1) {
    const RankPrediction& r = p.ranks.front();
    std::fprintf(out,
                 "  contention   rank 0's memory and embedding ops %s alone, x%.2f beside the node's other %lld "
                 "rank(s) (working set %s)\n",
                 human_seconds(r.streaming_seconds).c_str(), r.contention, static_cast<long long>(p.ranks_running - 1),
                 human_bytes(r.working_set_bytes).c_str());
  }
  if (!p.ranks.empty() && p.ranks.front().jitter_seconds > 0)
    std::fprintf(out,
                 "  stragglers   rank 0 waits %s per iteration at its collectives for the slowest member's noise\n",
                 human_seconds(p.ranks.front().jitter_seconds).c_str());
  std::fprintf(out, "  by family (rank 0, op time alone)\n");
  std::vector<std::pair<std::string, FamilyTime>> fams(p.families.begin(), p.families.end());
  std::sort(fams.begin(), fams.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  for (const auto& [name, f] : fams)
    std::fprintf(out, "    %-11s %10s  x%lld\n", name.c_str(), human_seconds(f.seconds).c_str(),
                 static_cast<long long>(f.count));
  std::fprintf(out, "  simulated    %s ops of %d program(s) in %s\n", human_count(p.simulated_ops).c_str(), p.programs,
               human_seconds(p.simulate_seconds).c_str());
  for (const auto& [launcher, command] : p.launch)  // to measure what was predicted, on that cluster
    std::fprintf(out, "  run it       %s\n", command.c_str());
  for (const std::string& w : p.warnings) std::fprintf(out, "  warning      %s\n", w.c_str());
}

}  // namespace reprise::predict
