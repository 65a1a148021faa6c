// A bootstrap for torchrun-style launches (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) without MPI: rank 0 listens,
// the others connect, and exchange() relays every rank's bytes through rank 0. It carries no collectives itself:
// it is what NCCL's unique id travels on.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "reprise/common/clock.h"
#include "reprise/comms/communicator.h"

namespace reprise::comms {
namespace {

void send_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0) throw CommError(std::string("tcp bootstrap: send failed: ") + std::strerror(errno));
    c += k;
    n -= static_cast<size_t>(k);
  }
}

void recv_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = ::recv(fd, c, n, 0);
    if (k <= 0) throw CommError("tcp bootstrap: a rank disconnected");
    c += k;
    n -= static_cast<size_t>(k);
  }
}

void send_blob(int fd, const std::string& s) {
  uint64_t n = s.size();
  send_all(fd, &n, sizeof n);
  send_all(fd, s.data(), s.size());
}

std::string recv_blob(int fd) {
  uint64_t n = 0;
  recv_all(fd, &n, sizeof n);
  if (n > (uint64_t{1} << 32)) throw CommError("tcp bootstrap: message too large");
  std::string s(n, '\0');
  recv_all(fd, s.data(), n);
  return s;
}

class TcpWorld : public Communicator {
 public:
  TcpWorld(int rank, int size, const std::string& addr, int port, double timeout_s) : rank_(rank), size_(size) {
    if (rank_ == 0) {
      int ls = ::socket(AF_INET, SOCK_STREAM, 0);
      int one = 1;
      setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(static_cast<uint16_t>(port));
      if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(ls, size_) != 0)
        throw CommError("tcp bootstrap: cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno));
      peers_.assign(static_cast<size_t>(size_), -1);
      for (int k = 1; k < size_; ++k) {
        int fd = ::accept(ls, nullptr, nullptr);
        if (fd < 0) throw CommError(std::string("tcp bootstrap: accept failed: ") + std::strerror(errno));
        int32_t r = -1;
        recv_all(fd, &r, sizeof r);
        if (r <= 0 || r >= size_ || peers_[static_cast<size_t>(r)] >= 0)
          throw CommError("tcp bootstrap: unexpected rank " + std::to_string(r) + " connected");
        peers_[static_cast<size_t>(r)] = fd;
      }
      ::close(ls);
    } else {
      addrinfo hints{}, *res = nullptr;
      hints.ai_family = AF_INET;
      hints.ai_socktype = SOCK_STREAM;
      if (getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
        throw CommError("tcp bootstrap: cannot resolve MASTER_ADDR " + addr);
      const double deadline = now_seconds() + timeout_s;
      int fd = -1;
      while (true) {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) break;
        ::close(fd);
        if (now_seconds() > deadline) {
          freeaddrinfo(res);
          throw CommError("tcp bootstrap: rank 0 at " + addr + ":" + std::to_string(port) + " did not answer within " +
                          std::to_string(static_cast<int>(timeout_s)) + " s");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      freeaddrinfo(res);
      int32_t r = rank_;
      send_all(fd, &r, sizeof r);
      server_ = fd;
    }
  }
  ~TcpWorld() override {
    for (int fd : peers_)
      if (fd >= 0) ::close(fd);
    if (server_ >= 0) ::close(server_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "tcp"; }
  std::unique_ptr<Communicator> split(const std::vector<int>&) override {
    throw CommError("tcp bootstrap: no sub-groups (it only carries NCCL's bootstrap)");
  }
  std::unique_ptr<Request> start(const Args& a) override {
    throw CommError(std::string("a torchrun-style launch has no CPU collectives (") + describe(a.kind).name +
                    "): use GPUs (NCCL) or launch with mpirun/srun");
  }
  std::vector<std::string> exchange(const std::string& mine) override {
    std::vector<std::string> all(static_cast<size_t>(size_));
    if (rank_ == 0) {
      all[0] = mine;
      for (int r = 1; r < size_; ++r) all[static_cast<size_t>(r)] = recv_blob(peers_[static_cast<size_t>(r)]);
      for (int r = 1; r < size_; ++r)
        for (const std::string& s : all) send_blob(peers_[static_cast<size_t>(r)], s);
    } else {
      send_blob(server_, mine);
      for (int r = 0; r < size_; ++r) all[static_cast<size_t>(r)] = recv_blob(server_);
    }
    return all;
  }
  [[noreturn]] void abort(int code) override {
    // Closing the sockets ends the other ranks' waits with "a rank disconnected".
    for (int fd : peers_)
      if (fd >= 0) ::close(fd);
    if (server_ >= 0) ::close(server_);
    std::_Exit(code);
  }

 private:
  int rank_, size_;
  std::vector<int> peers_;
  int server_ = -1;
};

}  // namespace

std::unique_ptr<Communicator> make_tcp_world(const Launch& l) {
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (!addr || !port) throw CommError("torchrun-style launch: MASTER_ADDR and MASTER_PORT must be set");
  return std::make_unique<TcpWorld>(l.rank, l.size, addr, std::atoi(port), 120);
}

std::unique_ptr<Communicator> make_world() {
  Launch l = detect_launch();
  if (l.size > 1 && !l.mpi) return make_tcp_world(l);
  return make_mpi_world();
}

}  // namespace reprise::comms
