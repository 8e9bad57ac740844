// serve/connection.h on real loopback sockets: the server side of a
// connection is found by its four addresses (never the client's side, nor a
// listening socket), and its peer reads as gone exactly when it has closed.
#include "serve/connection.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "serve/serve_util.h"

namespace mtp::serve {
namespace {

using namespace std::chrono_literals;

struct Addr {
  std::string ip;
  int port = -1;
};

Addr addr_of(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  sockaddr* sa = reinterpret_cast<sockaddr*>(&a);
  EXPECT_EQ(peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len), 0);
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return {ip, ntohs(a.sin_port)};
}

// A listening socket on 127.0.0.1, a client connected to it, the accepted side.
struct Pair {
  Pair() {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listener, 4), 0);
    client = test::connect_loopback(addr_of(listener, false).port);
    server = ::accept(listener, nullptr, nullptr);
    EXPECT_GE(server, 0);
  }
  ~Pair() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) ::close(fd);
    }
  }
  int listener = -1, client = -1, server = -1;
};

// The peer's state as seen within `wait` (a FIN crosses loopback at once, but
// the test allows for a loaded machine).
bool connected_after(int fd, bool want, std::chrono::milliseconds wait) {
  const auto end = std::chrono::steady_clock::now() + wait;
  bool c = peer_connected(fd);
  while (c != want && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(5ms);
    c = peer_connected(fd);
  }
  return c;
}

TEST(Connection, FindsTheServerSideByItsFourAddresses) {
  Pair p;
  const Addr local = addr_of(p.server, false), remote = addr_of(p.server, true);
  EXPECT_EQ(find_connection_socket(local.ip, local.port, remote.ip, remote.port), p.server);
  // Swapped, the addresses are the client's side.
  EXPECT_EQ(find_connection_socket(remote.ip, remote.port, local.ip, local.port), p.client);
  EXPECT_EQ(find_connection_socket(local.ip, local.port, remote.ip, remote.port + 1), -1);
  EXPECT_EQ(find_connection_socket("127.0.0.2", local.port, remote.ip, remote.port), -1);
  EXPECT_EQ(find_connection_socket(local.ip, -1, remote.ip, remote.port), -1);
  ClientConnection c(local.ip, local.port, remote.ip, remote.port);
  EXPECT_TRUE(c.connected());
  EXPECT_EQ(c.fd(), p.server);
}

TEST(Connection, PendingBytesAreAlivePeerCloseIsGone) {
  Pair p;
  EXPECT_TRUE(peer_connected(p.server));
  // A pipelined next request waits unread: still connected, and not consumed.
  ASSERT_TRUE(test::send_all(p.client, "GET /health HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(connected_after(p.server, true, 100ms));
  char buf[64];
  EXPECT_EQ(::recv(p.server, buf, sizeof buf, MSG_DONTWAIT), 24);
  ::close(p.client);
  p.client = -1;
  EXPECT_FALSE(connected_after(p.server, false, 2s));
}

TEST(Connection, ResetAndHalfCloseAreGoneUnknownSocketIsConnected) {
  Pair p;
  linger l{1, 0};  // close() sends RST
  ASSERT_EQ(setsockopt(p.client, SOL_SOCKET, SO_LINGER, &l, sizeof l), 0);
  ::close(p.client);
  p.client = -1;
  EXPECT_FALSE(connected_after(p.server, false, 2s));
  Pair q;
  ::shutdown(q.client, SHUT_WR);  // documented: a half-close reads as gone
  EXPECT_FALSE(connected_after(q.server, false, 2s));
  // A request whose socket is not found runs on (nothing can be said).
  ClientConnection none("127.0.0.1", 1, "127.0.0.1", 2);
  EXPECT_TRUE(none.connected());
  EXPECT_EQ(none.fd(), -1);
}

}  // namespace
}  // namespace mtp::serve
