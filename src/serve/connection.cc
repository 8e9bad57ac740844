#include "serve/connection.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

namespace mtp::serve {
namespace {

// An IPv4 or IPv6 address as text and its port; false for other families.
bool address_of(const sockaddr_storage& a, socklen_t len, std::string& ip, int& port) {
  if (a.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
  } else if (a.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
  } else {
    return false;
  }
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof host, nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return false;
  }
  ip = host;
  return true;
}

// Whether fd's own (peer: false) or peer's (true) address is ip:port.
bool has_address(int fd, bool peer, const std::string& ip, int port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  sockaddr* sa = reinterpret_cast<sockaddr*>(&a);
  if ((peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return false;
  std::string got_ip;
  int got_port = -1;
  return address_of(a, len, got_ip, got_port) && got_port == port && got_ip == ip;
}

}  // namespace

int find_connection_socket(const std::string& local, int local_port, const std::string& remote,
                           int remote_port) {
  if (local_port < 0 || remote_port < 0) return -1;
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/self/fd", ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    char* stop = nullptr;
    const long fd = std::strtol(name.c_str(), &stop, 10);
    if (stop == name.c_str() || *stop != '\0' || fd < 0) continue;
    // A non-socket fails getsockname (ENOTSOCK); a listening socket has no peer.
    if (has_address(int(fd), false, local, local_port) &&
        has_address(int(fd), true, remote, remote_port)) {
      return int(fd);
    }
  }
  return -1;
}

bool peer_connected(int fd) {
  pollfd p{fd, short(POLLIN | POLLRDHUP), 0};
  const int r = ::poll(&p, 1, 0);
  if (r < 0) return errno == EINTR;  // EBADF etc.: no connection any more
  if (r == 0) return true;           // nothing to read, no hang-up
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return false;
  // Readable or read-hung-up: bytes still waiting mean a pipelined request.
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return true;
  if (n == 0) return false;  // end of stream: the client closed
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

bool ClientConnection::connected() {
  if (!searched_) {
    searched_ = true;
    fd_ = find_connection_socket(local_, local_port_, remote_, remote_port_);
  }
  return fd_ < 0 || peer_connected(fd_);
}

}  // namespace mtp::serve
