#include "serve/serve_util.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <thread>

namespace mtp::test {

std::vector<int32_t> ByteTokenizer::encode(std::string_view t, bool add_special) const {
  std::vector<int32_t> ids;
  if (add_special) ids.push_back(1);
  for (unsigned char c : t) ids.push_back(int32_t(c) + 3);
  return ids;
}

std::string ByteTokenizer::token_bytes(int32_t id, int32_t) const {
  return id >= 3 && id < 259 ? std::string(1, char(id - 3)) : std::string();
}

std::vector<int32_t> ByteTokenizer::eos_ids() const {
  return eos_ ? std::vector<int32_t>{2} : std::vector<int32_t>{};
}

int connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ADD_FAILURE() << "cannot connect to 127.0.0.1:" << port;
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

std::string http_post(const std::string& path, const std::string& json_body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         "Content-Length: " + std::to_string(json_body.size()) + "\r\n\r\n" + json_body;
}

double metric(const std::string& exposition, const std::string& series) {
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return -1;
}

std::string poll_until(const std::function<std::string()>& get,
                       const std::function<bool(const std::string&)>& pred,
                       std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  std::string s = get();
  while (!pred(s) && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s = get();
  }
  return s;
}

std::unique_ptr<serve::Engine> make_engine(bool batched, const model::Model& m,
                                           const io::Tokenizer& tok, ThreadPool* pool,
                                           const drafter::Drafter* drafter, int draft_k,
                                           const std::string& model_id, int ctx, int parallel) {
  serve::EngineInfo info;
  info.model_id = model_id;
  speculative::SchedulerOptions sched;
  sched.parallel = batched ? parallel : 1;
  sched.ctx = ctx;
  sched.draft_k = draft_k;
  sched.adaptive = !batched;  // one slot: the budget on, as `mtpspec serve --serial` runs
  return serve::make_engine(m, tok, pool, drafter, info, sched);
}

}  // namespace mtp::test
