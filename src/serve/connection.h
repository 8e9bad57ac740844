// Whether the client of a non-streamed request is still there.
//
// cpp-httplib 0.11 (Debian 12) gives a handler no way to learn that its client
// went away: Request has no is_connection_closed() (later versions added it),
// the handler never sees the socket, and a content provider, which could ask
// DataSink::is_writable(), runs only after the status line and the headers
// have been sent (a non-streamed body's status and Content-Length are known
// only at the end). What a handler does have is the connection's two
// addresses (Request::local_addr/local_port, remote_addr/remote_port, from
// getsockname/getpeername), and a TCP connection is the one socket of this
// process with exactly those four. ClientConnection finds it by them and
// peeks at it without consuming anything, so the bytes httplib later writes or
// reads are unchanged.
//
// Threads: one object per request, used by the handler's thread only. The
// socket stays open while the handler runs (httplib closes it after the
// handler has returned), so the descriptor found cannot be reused meanwhile.
#pragma once
#include <string>

namespace mtp::serve {

// The socket of this process whose local address is local:local_port and
// whose peer is remote:remote_port (addresses as getnameinfo(NI_NUMERICHOST)
// writes them, as httplib does); -1 if there is none or the platform cannot
// list its descriptors (Linux: /proc/self/fd).
int find_connection_socket(const std::string& local, int local_port, const std::string& remote,
                           int remote_port);

// false once the peer has closed (EOF) or reset the connection; bytes waiting
// to be read (a pipelined next request) mean it is still there. Never blocks.
// A client that only shuts down its sending side (half-close) reads as gone,
// as httplib's own is_socket_alive() sees it.
bool peer_connected(int fd);

// The client of one request: finds its socket on the first connected() call
// (a request that finishes before its first poll never pays for the search).
class ClientConnection {
 public:
  ClientConnection(std::string local, int local_port, std::string remote, int remote_port)
      : local_(std::move(local)), remote_(std::move(remote)), local_port_(local_port),
        remote_port_(remote_port) {}
  // true while the client may still read the response; also true when its
  // socket cannot be found (nothing can be said then: the request runs on).
  bool connected();
  int fd() const { return fd_; }  // -1 until found (or if not found)

 private:
  std::string local_, remote_;
  int local_port_, remote_port_;
  bool searched_ = false;
  int fd_ = -1;
};

}  // namespace mtp::serve
