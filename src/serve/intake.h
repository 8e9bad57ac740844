// The HTTP server's connection handling (server.h): httplib parses requests
// and routes them; a connection takes none of its worker threads while its
// request arrives (a slow client cannot hold a worker).
//
// Contracts:
//  - One poll loop (the intake) reads every connection until a whole request
//    — its head, and its body by Content-Length or to a chunked body's last
//    chunk — has arrived; only then does a worker (one of `workers`) take it
//    and run httplib's parser and handlers over the bytes already read. A
//    client that drips its request (slowloris) holds a socket and its few
//    bytes, never a worker: with 40 of them dripping, a well-behaved request
//    is served at once.
//  - Per connection, not per read: the whole request must arrive within
//    request_timeout_ms of when the server began waiting for it (acceptance,
//    or the end of the previous response on a kept-alive connection), else
//    it is answered 408 and closed. A kept-alive connection that starts no
//    new request within keep_alive_ms, or a new one that sends nothing
//    within request_timeout_ms, is closed without a word.
//  - At most max_per_client connections are open at once per client address
//    (the next is answered 429 and closed), and at most max_pending wait for
//    their requests in all (503): memory and descriptors stay bounded.
//  - A head larger than kMaxHead is answered 431, a body larger than
//    max_body 413, a malformed Content-Length or chunk 400 — from the intake,
//    before a worker is involved. Error bodies are rendered by `render`
//    (the server's OpenAI-style JSON, counted in its metrics).
//  - stop_accepting(): the listening socket is shut down; complete requests
//    already received are served, waiting and kept-alive connections close.
#pragma once
#include <httplib.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace mtp::serve {

struct IntakeOptions {
  int request_timeout_ms = 10000;
  int keep_alive_ms = 2000;
  int write_timeout_ms = 30000;
  int max_per_client = 64;
  int max_pending = 512;
  size_t max_body = 1 << 20;
  int workers = 8;
  size_t max_requests_per_connection = 100;
};

inline constexpr size_t kMaxHead = 64 * 1024;

// The JSON body of an error the intake answers itself (status, message).
using RenderError = std::function<std::string(int status, const std::string& message)>;

class Intake;

class HttpServer : public httplib::Server {
 public:
  HttpServer(IntakeOptions o, RenderError render);
  ~HttpServer() override;
  // Shuts the listening socket down: listen() stops accepting and returns
  // once the requests it has received are served (httplib's stop() also ends
  // every chunked stream).
  void stop_accepting();
  // Runs httplib's request processing over one complete request (intake.cc).
  bool serve_request(httplib::Stream& strm, bool close_connection, bool& connection_closed);
  bool stopped() const;
  // httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed in
  // Debian's library): a burst of connections then waited seconds for SYN
  // retries. Called after binding: the listening socket's backlog becomes
  // SOMAXCONN.
  void raise_backlog();

 private:
  // Called by httplib's accept loop for each connection: hands it to the intake.
  bool process_and_close_socket(socket_t sock) override;
  std::unique_ptr<Intake> intake_;
};

}  // namespace mtp::serve
