#include "serve/intake.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/core.h>

namespace mtp::serve {

namespace {

using Clock = std::chrono::steady_clock;

int ms_until(Clock::time_point t) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return int(std::clamp<int64_t>(d, 0, 1 << 30));
}

bool wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    return r > 0 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
  }
}

std::string address(const sockaddr_storage& a, int& port) {
  char buf[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
    port = ntohs(v6->sin6_port);
  }
  return buf;
}

std::string peer_of(int fd, int& port) {
  sockaddr_storage a{};
  socklen_t n = sizeof a;
  port = 0;
  return ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0 ? address(a, port) : "";
}

std::string reason(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    default: return "Service Unavailable";
  }
}

// A request received by the intake, or being served; owns its socket.
struct Conn {
  int fd = -1;
  std::string addr;
  std::string buf;          // bytes read and not yet consumed
  Clock::time_point since;  // when the server began waiting for this request
  size_t requests = 0;      // requests served on this connection
  bool continued = false;   // "100 Continue" sent for this request
  bool dirty = true;        // bytes arrived since the last parse
  bool closing = false;     // answered with an error: the rest is read and dropped, then closed
};

// How long a refused connection is drained before it is closed: closing a
// socket with unread bytes sends a reset, which can destroy the refusal
// before the client reads it.
constexpr int kLingerMs = 1000;

// Whether `buf` holds a whole request: its end offset, 0 when not yet, or an
// HTTP status (>= 400, in `status`) to answer with.
struct Parsed {
  size_t end = 0;
  int status = 0;
  bool expects_continue = false;
};

bool iequals_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(uint8_t(line[i])) != std::tolower(uint8_t(name[i]))) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The end of a chunked body starting at `at`: 0 when incomplete, SIZE_MAX when malformed
// or larger than max_body (`too_big` tells which).
size_t chunked_end(const std::string& b, size_t at, size_t max_body, bool& too_big) {
  size_t total = 0;
  for (;;) {
    const size_t eol = b.find('\n', at);
    if (eol == std::string::npos) return b.size() - at > 32 ? SIZE_MAX : 0;
    std::string_view line = trim(std::string_view(b).substr(at, eol - at));
    line = line.substr(0, line.find(';'));
    if (line.empty() || line.size() > 15 ||
        line.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos) {
      return SIZE_MAX;
    }
    const size_t n = std::stoull(std::string(line), nullptr, 16);
    at = eol + 1;
    if (n == 0) {  // trailers, then an empty line
      for (;;) {
        const size_t e = b.find('\n', at);
        if (e == std::string::npos) return 0;
        const bool empty = trim(std::string_view(b).substr(at, e - at)).empty();
        at = e + 1;
        if (empty) return at;
      }
    }
    total += n;
    if (total > max_body) {
      too_big = true;
      return SIZE_MAX;
    }
    if (b.size() < at + n + 2) return 0;
    at += n;
    at = b[at] == '\r' ? at + 2 : at + 1;
  }
}

Parsed parse(const std::string& b, size_t max_body) {
  Parsed p;
  size_t head_end = b.find("\r\n\r\n");
  head_end = head_end == std::string::npos ? b.find("\n\n") : head_end;
  if (head_end == std::string::npos) {
    if (b.size() > kMaxHead) p.status = 431;
    return p;
  }
  const size_t body = b.compare(head_end, 4, "\r\n\r\n") == 0 ? head_end + 4 : head_end + 2;
  if (head_end > kMaxHead) {
    p.status = 431;
    return p;
  }
  uint64_t length = 0;
  bool has_length = false, chunked = false;
  for (size_t at = b.find('\n'); at < head_end;) {
    const size_t eol = std::min(b.find('\n', at + 1), head_end);
    const std::string_view line = std::string_view(b).substr(at + 1, eol - at - 1);
    if (iequals_prefix(line, "content-length:")) {
      const std::string_view v = trim(line.substr(15));
      if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string_view::npos ||
          (has_length && std::stoull(std::string(v)) != length)) {
        p.status = 400;
        return p;
      }
      length = std::stoull(std::string(v));
      has_length = true;
    } else if (iequals_prefix(line, "transfer-encoding:")) {
      chunked = trim(line.substr(18)).find("chunked") != std::string_view::npos;
    } else if (iequals_prefix(line, "expect:")) {
      p.expects_continue = iequals_prefix(trim(line.substr(7)), "100-continue");
    }
    at = eol;
  }
  if (chunked) {
    bool too_big = false;
    const size_t e = chunked_end(b, body, max_body, too_big);
    if (e == SIZE_MAX) p.status = too_big ? 413 : 400;
    p.end = e == SIZE_MAX ? 0 : e;
    return p;
  }
  if (length > max_body) {
    p.status = 413;
    return p;
  }
  if (b.size() >= body + length) p.end = size_t(body + length);
  return p;
}

// The stream httplib reads a request from and writes its response to: the
// bytes the intake already read, then the socket (with a deadline).
class BufferedStream final : public httplib::Stream {
 public:
  BufferedStream(int fd, std::string buf, int read_timeout_ms, int write_timeout_ms)
      : fd_(fd), buf_(std::move(buf)), deadline_(Clock::now() +
                                                   std::chrono::milliseconds(read_timeout_ms)),
        write_timeout_ms_(write_timeout_ms) {}
  bool is_readable() const override {
    return pos_ < buf_.size() || wait_for(fd_, POLLIN, ms_until(deadline_));
  }
  bool is_writable() const override {
    if (!wait_for(fd_, POLLOUT, write_timeout_ms_)) return false;
    // Gone: readable with nothing to read (the peer closed).
    if (!wait_for(fd_, POLLIN, 0)) return true;
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
  }
  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < buf_.size()) {
      const size_t n = std::min(size, buf_.size() - pos_);
      std::memcpy(ptr, buf_.data() + pos_, n);
      pos_ += n;
      return ssize_t(n);
    }
    if (!is_readable()) return -1;
    ssize_t n;
    do n = ::recv(fd_, ptr, size, 0); while (n < 0 && errno == EINTR);
    return n;
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!wait_for(fd_, POLLOUT, write_timeout_ms_)) return -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL); while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = peer_of(fd_, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t n = sizeof a;
    port = 0;
    ip = ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n) == 0 ? address(a, port) : "";
  }
  socket_t socket() const override { return fd_; }
  std::string rest() const { return buf_.substr(pos_); }

 private:
  int fd_;
  std::string buf_;
  size_t pos_ = 0;
  Clock::time_point deadline_;
  int write_timeout_ms_;
};

}  // namespace

// The poll loop, the workers and the per-client counts.
class Intake {
 public:
  Intake(HttpServer& server, IntakeOptions o, RenderError render)
      : server_(server), o_(o), render_(std::move(render)) {}
  ~Intake() { stop(); }

  void start();
  void stop();
  void admit(int fd);

 private:
  void poll_loop();
  // One connection after a poll: reads what arrived, hands a whole request
  // to the workers, refuses or closes; true when it stays in the poll loop.
  bool advance(Conn& c, bool readable, Clock::time_point now, std::vector<char>& buf);
  void worker();
  void serve(Conn c);
  // Answers `status` (best effort: a non-blocking send), then lingers.
  void refuse(int fd, int status, const std::string& message);
  // Reads and drops what the client still sends for kLingerMs, then closes
  // (at once when max_pending connections linger already).
  void linger(int fd);
  void close_conn(const Conn& c);
  // The time a connection may wait in the poll loop: a kept-alive one with
  // nothing of its next request keep_alive_ms, a refused one kLingerMs,
  // else request_timeout_ms.
  int limit_ms(const Conn& c) const {
    if (c.closing) return kLingerMs;
    return c.requests > 0 && c.buf.empty() ? o_.keep_alive_ms : o_.request_timeout_ms;
  }
  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }

  HttpServer& server_;
  const IntakeOptions o_;
  RenderError render_;
  std::mutex mu_;
  std::condition_variable ready_cv_;
  std::deque<Conn> admitted_;  // new and kept-alive connections, for the poll loop
  std::deque<Conn> ready_;     // complete requests, for the workers
  std::map<std::string, int> per_client_;
  int waiting_ = 0;            // connections in admitted_ or in the poll loop
  int lingering_ = 0;          // refused connections being drained
  bool stopping_ = false;
  bool started_ = false;
  int wake_fd_ = -1;
  std::thread poller_;
  std::vector<std::thread> workers_;
};

void Intake::start() {
  std::lock_guard<std::mutex> lk(mu_);
  if (started_) return;
  started_ = true;
  stopping_ = false;
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  poller_ = std::thread([this] { poll_loop(); });
  for (int i = 0; i < std::max(1, o_.workers); ++i) workers_.emplace_back([this] { worker(); });
}

void Intake::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!started_) return;
    stopping_ = true;
  }
  wake();
  ready_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  for (auto& t : workers_) t.join();
  workers_.clear();
  std::lock_guard<std::mutex> lk(mu_);
  for (const Conn& c : admitted_) ::close(c.fd);
  admitted_.clear();
  ::close(wake_fd_);
  started_ = false;
}

void Intake::refuse(int fd, int status, const std::string& message) {
  const std::string body = render_(status, message);
  const std::string r = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "Connection: close\r\n\r\n{}", status, reason(status), body.size(), body);
  [[maybe_unused]] ssize_t n = ::send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  linger(fd);
}

void Intake::linger(int fd) {
  std::unique_lock<std::mutex> lk(mu_);
  if (stopping_ || lingering_ >= o_.max_pending) {
    lk.unlock();
    ::close(fd);
    return;
  }
  ++lingering_;
  Conn c;
  c.fd = fd;
  c.since = Clock::now();
  c.closing = true;
  admitted_.push_back(std::move(c));
  lk.unlock();
  wake();
}

void Intake::close_conn(const Conn& c) {
  ::shutdown(c.fd, SHUT_RDWR);
  ::close(c.fd);
  std::lock_guard<std::mutex> lk(mu_);
  if (--per_client_[c.addr] <= 0) per_client_.erase(c.addr);
}

void Intake::admit(int fd) {
  int port = 0;
  Conn c;
  c.fd = fd;
  c.addr = peer_of(fd, port);
  c.since = Clock::now();
  std::unique_lock<std::mutex> lk(mu_);
  if (stopping_) {
    lk.unlock();
    ::close(fd);
    return;
  }
  int& mine = per_client_[c.addr];
  if (mine >= o_.max_per_client || waiting_ >= o_.max_pending) {
    const bool per_client = mine >= o_.max_per_client;
    if (mine == 0) per_client_.erase(c.addr);
    lk.unlock();
    if (per_client) {
      refuse(fd, 429, fmt::format("too many connections from {} (at most {} at once)", c.addr,
                                  o_.max_per_client));
    } else {
      refuse(fd, 503, "the server is handling too many connections; retry later");
    }
    return;
  }
  ++mine;
  ++waiting_;
  admitted_.push_back(std::move(c));
  lk.unlock();
  wake();
}

void Intake::poll_loop() {
  std::vector<Conn> conns, keep;
  std::vector<pollfd> fds;
  std::vector<char> buf(64 * 1024);
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopping_) break;
      for (Conn& c : admitted_) conns.push_back(std::move(c));
      admitted_.clear();
    }
    int timeout = 1000;
    for (const Conn& c : conns) {
      timeout = std::min(timeout, ms_until(c.since + std::chrono::milliseconds(limit_ms(c))) + 1);
    }
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    for (const Conn& c : conns) fds.push_back(pollfd{c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) break;
    if (fds[0].revents) {
      uint64_t v;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_, &v, sizeof v);
    }
    const auto now = Clock::now();
    keep.clear();
    for (size_t i = 0; i < conns.size(); ++i) {
      if (advance(conns[i], fds[i + 1].revents != 0, now, buf)) keep.push_back(std::move(conns[i]));
    }
    conns.swap(keep);
  }
  std::lock_guard<std::mutex> lk(mu_);
  for (const Conn& c : conns) {
    ::close(c.fd);
    if (c.closing) {
      --lingering_;
      continue;
    }
    --waiting_;
    if (--per_client_[c.addr] <= 0) per_client_.erase(c.addr);
  }
}

bool Intake::advance(Conn& c, bool readable, Clock::time_point now, std::vector<char>& buf) {
  bool closed = false;
  if (readable) {
    const ssize_t n = ::recv(c.fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0 && !c.closing) {
      c.buf.append(buf.data(), size_t(n));
      c.dirty = true;
    } else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      closed = true;
    }
  }
  const bool expired = now - c.since >= std::chrono::milliseconds(limit_ms(c));
  if (c.closing) {  // a refused connection being drained
    if (!closed && !expired) return true;
    ::close(c.fd);
    std::lock_guard<std::mutex> lk(mu_);
    --lingering_;
    return false;
  }
  const Parsed p = closed || !c.dirty ? Parsed{} : parse(c.buf, o_.max_body);
  c.dirty = false;
  if (!closed && p.end > 0) {  // a whole request: to a worker
    std::lock_guard<std::mutex> lk(mu_);
    --waiting_;
    ready_.push_back(std::move(c));
    ready_cv_.notify_one();
    return false;
  }
  if (!closed && p.status == 0 && !expired) {
    if (p.expects_continue && !c.continued) {
      static constexpr std::string_view k100 = "HTTP/1.1 100 Continue\r\n\r\n";
      [[maybe_unused]] ssize_t n =
          ::send(c.fd, k100.data(), k100.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      c.continued = true;
    }
    return true;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    --waiting_;
    if (--per_client_[c.addr] <= 0) per_client_.erase(c.addr);
  }
  if (closed || (expired && c.buf.empty())) {
    ::close(c.fd);
  } else if (p.status != 0) {
    refuse(c.fd, p.status,
           p.status == 431   ? "the request head is larger than 64 KiB"
           : p.status == 413 ? "the request body is larger than the limit (--max-body)"
                             : "malformed request framing (Content-Length or chunks)");
  } else {
    refuse(c.fd, 408, fmt::format("the request did not arrive within {} s",
                                  o_.request_timeout_ms / 1000.0));
  }
  return false;
}

void Intake::worker() {
  for (;;) {
    Conn c;
    {
      std::unique_lock<std::mutex> lk(mu_);
      ready_cv_.wait(lk, [&] { return stopping_ || !ready_.empty(); });
      if (ready_.empty()) return;  // stopping, and every received request served
      c = std::move(ready_.front());
      ready_.pop_front();
    }
    serve(std::move(c));
  }
}

void Intake::serve(Conn c) {
  ++c.requests;
  bool stopping;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping = stopping_;
  }
  const bool last = c.requests >= o_.max_requests_per_connection || stopping || server_.stopped();
  BufferedStream s(c.fd, std::move(c.buf), o_.request_timeout_ms, o_.write_timeout_ms);
  bool closed = false;
  const bool ok = server_.serve_request(s, last, closed);
  if (!ok || closed || last) {
    close_conn(c);
    return;
  }
  c.buf = s.rest();
  c.since = Clock::now();
  c.continued = false;
  c.dirty = true;
  std::unique_lock<std::mutex> lk(mu_);
  if (stopping_) {
    lk.unlock();
    close_conn(c);
    return;
  }
  ++waiting_;
  admitted_.push_back(std::move(c));
  lk.unlock();
  wake();
}

namespace {
// httplib's task queue: each accepted connection goes to the intake at once
// (on the accept thread); shutdown() waits for the workers.
class IntakeQueue final : public httplib::TaskQueue {
 public:
  explicit IntakeQueue(Intake& in) : in_(in) { in_.start(); }
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override { in_.stop(); }

 private:
  Intake& in_;
};
}  // namespace

HttpServer::HttpServer(IntakeOptions o, RenderError render)
    : intake_(std::make_unique<Intake>(*this, o, std::move(render))) {
  new_task_queue = [this] { return new IntakeQueue(*intake_); };
}

HttpServer::~HttpServer() { intake_->stop(); }

void HttpServer::stop_accepting() {
  const socket_t s = svr_sock_;
  if (s != INVALID_SOCKET) ::shutdown(s, SHUT_RDWR);
}

bool HttpServer::stopped() const { return svr_sock_ == INVALID_SOCKET; }

void HttpServer::raise_backlog() {
  const socket_t s = svr_sock_;
  if (s != INVALID_SOCKET) ::listen(s, SOMAXCONN);
}

bool HttpServer::serve_request(httplib::Stream& strm, bool close_connection,
                               bool& connection_closed) {
  return process_request(strm, close_connection, connection_closed, nullptr);
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  intake_->admit(sock);
  return true;
}

}  // namespace mtp::serve
