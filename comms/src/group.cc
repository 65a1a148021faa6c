// The default Communicator::start_group: every operation started on its own, one request for all of them. Enough
// where start() never blocks (MPI's non-blocking calls); NCCL overrides it with one group call.
#include <algorithm>

#include "reprise/comms/communicator.h"

namespace reprise::comms {
namespace {

class GroupRequest : public Request {
 public:
  std::vector<std::unique_ptr<Request>> members;
  void wait() override {
    for (auto& m : members) m->wait();
  }
  void wait_on(void* stream) override {
    for (auto& m : members) m->wait_on(stream);
  }
  double seconds() const override {
    double s = -1;
    for (const auto& m : members) s = std::max(s, m->seconds());
    return s;
  }
};

}  // namespace

std::unique_ptr<Request> Communicator::start_group(const std::vector<Args>& ops) {
  auto r = std::make_unique<GroupRequest>();
  for (const Args& a : ops) r->members.push_back(start(a));
  return r;
}

}  // namespace reprise::comms
