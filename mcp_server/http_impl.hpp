// File: mcp_server/http_impl.hpp
//
// Private to mcp_server/http_transport.cpp and http_connection.cpp (it
// pulls in Beast): the server's state, the per-session routing of outbound
// messages to the connection that waits for them, and one connection.
//
// Routing: each session has `session_routes`: the open POST exchanges by
// request id, the GET stream, and the GET stream's numbered events (kept
// for replay). A message related to a request goes to that request's
// exchange; any other message (or one whose exchange is gone) goes to the
// GET stream, or waits for one in the event buffer. Locking: the server's
// `mtx` before a routes' `mtx`; neither is held while posting to a
// connection.
#pragma once

#include "mcp_server/http_transport.hpp"

#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace mibyan {

class mcp_http_connection;

struct mcp_session_routes {
  struct event {
    uint64_t id = 0;
    std::string text;
    bool delivered = false;
  };
  std::mutex mtx;
  std::map<std::string, std::weak_ptr<mcp_http_connection>> exchanges;
  std::weak_ptr<mcp_http_connection> get_stream;
  std::deque<event> events;
  uint64_t next_event = 0;
};

struct mcp_http_server::impl : std::enable_shared_from_this<impl> {
  using tcp = boost::asio::ip::tcp;

  impl(std::shared_ptr<mcp_server_core> c, mcp_http_settings s)
      : core(std::move(c)), cfg(std::move(s)), acceptor(ioc) {}

  std::shared_ptr<mcp_server_core> core;
  mcp_http_settings cfg;
  boost::asio::io_context ioc;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;

  std::mutex mtx;
  std::map<std::string, std::shared_ptr<mcp_session_routes>> routes;
  std::map<mcp_http_connection*, std::weak_ptr<mcp_http_connection>> conns;
  bool stopped = false;

  void accept();
  /// The routes of session `id` (created when absent when `create`).
  std::shared_ptr<mcp_session_routes> routes_of(const std::string& id,
                                                bool create);
  void drop_routes(const std::string& id);
  /// The outbound function of a session whose messages use `r`.
  mcp_outbound outbound_for(std::shared_ptr<mcp_session_routes> r);
  /// Whether an Origin header value may talk to this server.
  bool origin_allowed(const std::string& origin) const;
};

class mcp_http_connection
  : public std::enable_shared_from_this<mcp_http_connection> {
public:
  using tcp = boost::asio::ip::tcp;
  using request = boost::beast::http::request<boost::beast::http::string_body>;

  mcp_http_connection(std::shared_ptr<mcp_http_server::impl> srv,
                      tcp::socket sock);
  ~mcp_http_connection();

  void start();
  /// A message for this connection's exchange or stream (any thread).
  /// `event_id` 0: no SSE id; `final`: the exchange's response (the
  /// stream ends after it).
  void deliver(std::string text, uint64_t event_id, bool final);
  /// Closes the connection (any thread).
  void close();

private:
  enum class mode { reading, awaiting, streaming, closed };

  void read_request();
  void on_read(boost::beast::error_code ec);
  void handle(request req);
  void handle_post(request& req, const std::string& sid);
  void handle_get(request& req, const std::string& sid);
  void handle_delete(const std::string& sid);
  void reply(unsigned status, std::string body, bool keep_alive,
             const std::vector<std::pair<std::string, std::string>>& extra
             = {});
  void reply_error(unsigned status, int code, const std::string& message,
                   const std::vector<std::pair<std::string, std::string>>&
                     extra = {});
  void on_deliver(std::string text, uint64_t event_id, bool final);
  void start_stream();
  void queue_event(std::string frame);
  void write_next();
  void probe();
  void keepalive();
  void gone(const char* why);
  void finish();

  std::shared_ptr<mcp_http_server::impl> srv_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<
    boost::beast::http::string_body>>
    parser_;
  boost::asio::steady_timer keepalive_;
  boost::asio::steady_timer stall_;
  mode mode_ = mode::reading;
  // The current exchange (POST) or stream (GET).
  std::string session_id_;
  std::shared_ptr<mcp_server_core::session> session_;
  json::value request_id_;
  bool is_get_ = false;
  bool accepts_sse_ = true;
  bool keep_alive_ = true;
  unsigned version_ = 11;
  std::deque<std::string> out_;
  bool writing_ = false;
  bool end_after_write_ = false;
  bool probing_ = false;
  std::array<char, 512> probe_buf_{};
};

} // namespace mibyan
