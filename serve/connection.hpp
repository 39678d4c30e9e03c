// File: serve/connection.hpp
//
// Private to serve/connection.cpp and serve/chat.cpp (it pulls in
// Beast): one HTTP connection of `mibyan serve` (docs/serve.md), on its own
// strand. Everything a connection owns is touched only there; turn
// callbacks arrive on runtime threads and only post to the strand.
// Reading, routing, the sessions endpoints and plain responses are in
// serve/connection.cpp; turns (shared by both APIs), chat completions and
// streaming in serve/chat.cpp; the Responses API in
// serve/responses_route.cpp; the pending approvals and questions in
// serve/pending_http.cpp.
#pragma once

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "runtime/turn_events.hpp"
#include "base/json.hpp"
#include "serve/impl.hpp"
#include "serve/ui_auth.hpp"

namespace mibyan {

struct response_turn; // serve/responses_route.cpp
struct responses_request; // serve/responses.hpp

class serve_connection
  : public std::enable_shared_from_this<serve_connection> {
public:
  using server_impl = http_server::impl;
  using tcp = boost::asio::ip::tcp;

  serve_connection(std::shared_ptr<server_impl> srv, tcp::socket sock);
  /// Releases the busy count and the admission ticket.
  ~serve_connection();

  /// Admits the connection (serve/admission.cpp) and starts reading;
  /// a refused connection is closed. `addr` is the client's address.
  void start(std::string addr);

private:
  template <class T>
  using sp = std::shared_ptr<T>;
  using string_response
    = boost::beast::http::response<boost::beast::http::string_body>;

  // -- reading --------------------------------------------------------------

  void read_request();
  void on_header(boost::beast::error_code ec);
  void read_body();

  // A request could not be read: answer when the socket still works, then
  // close (the stream position is unknown).
  void read_failed(boost::beast::error_code ec);
  void on_body(boost::beast::error_code ec);

  // -- routing --------------------------------------------------------------

  void handle();
  bool authorized();
  void method_not_allowed();
  // Answers 503 store_unavailable (the runtime has no session store).
  void store_unavailable();

  // -- sessions -------------------------------------------------------------

  void sessions(const std::string& path,
                const std::map<std::string, std::string>& query);

  // -- dashboard (serve/ui_connection.cpp) ------------------------------

  // Every path under /ui/: the Host check, the security headers, the static
  // files, login/logout/whoami and the /ui/api/ endpoints.
  void ui(const std::string& path,
          const std::map<std::string, std::string>& query);
  // The request as serve/ui_auth.hpp reads it.
  serve::ui_request ui_request_view() const;
  // The dashboard endpoints over the session store (serve/ui_api.hpp), run
  // on the store pool; `path` is below /ui/api/.
  void ui_store(const std::string& path,
                const std::map<std::string, std::string>& query);

public:
  /// Authorises the current request for the dashboard or a dashboard-used
  /// endpoint (serve/ui_auth.hpp): the bearer key or the `mibyan_ui`
  /// cookie, plus the X-CSRF-Token for a state-changing request authorised
  /// by the cookie. On false the 401/403/429 reply has been sent. On the
  /// connection's strand.
  bool ui_authorised(bool state_changing);

private:

  // -- turns, shared by both APIs (serve/chat.cpp) ---------------------------

  // The request's Content-Type is application/json; else answers 415.
  bool json_body();
  // `model` is "" or one this node serves; else answers 404.
  bool model_served(const std::string& model);
  // Takes a turn slot (server.max_concurrent_turns); else answers 503
  // (shutting down) or 429. A taken slot is given back by on_turn_done or
  // release_turn_slot.
  bool admit_turn();
  void release_turn_slot();
  // Runs `call` as the turn of session_ (stateful_: kept, else deleted when
  // it ends), streaming when stream_mode_. `reserved`: session_ is already
  // in the server's running set. Its end comes to on_turn_done.
  void run_turn(turn_call call, bool reserved);

  // -- pending approvals and questions (serve/pending_http.cpp) ---------

  // GET /v1/approvals[/], POST /v1/approvals/{id}; the same under
  // /v1/clarifications. `prefix` is the collection path.
  void pending(const std::string& path, const std::string& prefix,
               const std::map<std::string, std::string>& query,
               pending_kind kind);
  // While a streamed turn runs: its session's pending requests become
  // `approval_required` / `clarify_required` events on the stream.
  void watch_pending();
  void unwatch_pending();
  void on_pending(const pending_event& e);

  // -- chat (serve/chat.cpp) -------------------------------------------

  void chat();

  // While a turn runs, a readable socket that reads EOF means the client
  // left: interrupt the turn (what was done is persisted).
  void watch_disconnect();
  void client_gone();
  void on_turn_done(turn_result out);

  // Maps a turn outcome to the response.
  void finish_turn(turn_result out);
  // The start of every turn's answer (chat and responses): false after
  // logging 499 and closing when the client has gone; else true, with
  // X-Mibyan-Session `session` added for a stateful turn.
  bool begin_answer(const std::string& session);

  // -- the Responses API (serve/responses_route.cpp) -------------------------

  void responses(const std::string& path);
  void create_response();
  // A request with an Idempotency-Key (docs/serve.md, "Idempotent
  // responses"): replays the key's stored response, or runs the turn.
  void keyed_response(responses_request rr, std::string key);
  // Admits the turn of a parsed request (`key` "" = none) and runs it.
  void begin_response(responses_request rr, std::string key);
  // Answers a stored response object again, as JSON or as its events.
  void replay_response(const std::string& object_json,
                       const std::string& session, bool stream);
  // Runs the response's turn once its session is known (on the strand).
  void start_response(turn_call call, bool reserved);
  // A `mibyan.<name>` extension event on a streamed response (no-op when
  // not streaming one).
  void response_extension(const std::string& name, json::value data);
  void response_delta(const std::string& kind, const std::string& text);
  // A tool event of the response's turn: its item, streamed when asked.
  void response_tool(const tool_event& ev);
  void finish_response(turn_result out);

  // -- streaming (serve/chat.cpp) --------------------------------------

  void start_stream();
  void on_delta(const std::string& kind, const std::string& text);
  /// A tool event of the running turn (on the connection's strand).
  void on_tool(const tool_event& ev);
  void push(std::string event);
  void push_last();
  void pump();

  // -- SSE output (serve/chat.cpp) ---------------------------------------

  // Writes the head of an event-stream response (chat streams, live) and
  // starts the keep-alive comments; events go out with push / pump.
  void begin_sse();

  // -- operator console (serve/ui_live.cpp) ----------------------------

  // GET /ui/api/live: the snapshot of running turns, then the runtime's
  // turn events as SSE, until the watcher leaves.
  void live();
  // Events are queued for the watcher (its wake, on the strand): arms the
  // flush timer unless a flush is armed or due.
  void live_wake();
  // The stream is idle: moves the watcher's queued events into the output.
  void live_refill();
  // The watcher left (or the connection closes): unsubscribes.
  void live_stop();
  // A forwarded live stream (dashboard --connect): polls the running turns.
  void live_poll();
  // The other operator endpoints (serve/ui_ops.hpp), answered here or
  // forwarded (http_server_settings::ui_forward).
  void ui_ops(const std::string& path,
              const std::map<std::string, std::string>& query);

  // -- plain responses ------------------------------------------------------

  void send_error(boost::beast::http::status st, const std::string& message,
                  const std::string& type, const std::string& code);
  void send_json(boost::beast::http::status st, std::string body);
  // Any body with its Content-Type (a 304 with an empty body).
  void send_body(boost::beast::http::status st, const std::string& type,
                 std::string body);

  // A response in production counts for the graceful shutdown until it is
  // written (or the connection closes).
  void hold_busy();
  void release_busy();
  void log_access();

  // After answering a request we did not read in full: stop sending, read
  // and drop what the client still sends (bounded in time and size), then
  // close, so the client sees the answer rather than a reset.
  void linger_close();
  void drain(size_t total);
  void close();

  // -- admission (serve/connection.cpp) --------------------------------

  // A head read starts or ends (admission may evict a waiting connection).
  void set_waiting_head(bool waiting);
  // Under pressure: the head read gets at most the short deadline.
  void hurry();

  // -- keep-alive comments (serve/chat.cpp) ----------------------------

  // Arms the timer that sends ": keep-alive" after server.keepalive_s
  // without output on the stream.
  void arm_keepalive();

  std::shared_ptr<server_impl> srv_;
  std::shared_ptr<conn_ticket> ticket_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<
    boost::beast::http::request_parser<boost::beast::http::string_body>>
    parser_;
  boost::beast::http::request<boost::beast::http::string_body> req_;
  std::vector<std::pair<std::string, std::string>> extra_headers_;
  std::chrono::steady_clock::time_point start_;
  std::string method_, path_, session_;
  int status_ = 0;
  bool first_ = true;
  bool keep_alive_ = true;
  // A head read is pending; the short deadline of pressure cut it.
  bool reading_head_ = false;
  bool hurried_ = false;
  boost::asio::steady_timer head_deadline_;
  // The running turn.
  bool in_turn_ = false;
  bool gone_ = false;
  bool stateful_ = false;
  bool stream_mode_ = false;
  // Which API the running turn answers.
  enum class turn_api : uint8_t { chat, responses };
  turn_api api_ = turn_api::chat;
  // The running Responses API request (null otherwise).
  std::shared_ptr<response_turn> resp_;
  bool include_usage_ = false;
  std::string id_, model_, round_text_;
  int64_t created_ = 0;
  // Streaming output.
  sp<boost::beast::http::response<boost::beast::http::empty_body>> sse_res_;
  sp<boost::beast::http::response_serializer<boost::beast::http::empty_body>>
    sse_sr_;
  std::deque<std::shared_ptr<std::string>> out_;
  bool writing_ = false;
  // The last write to the stream, and the timer of keep-alive comments.
  std::chrono::steady_clock::time_point last_output_;
  boost::asio::steady_timer keepalive_;
  // The live stream (serve/ui_live.cpp): its subscription to the turn
  // events, or (forwarded) its poll timer and last snapshot.
  bool live_ = false;
  std::shared_ptr<turn_subscriber> live_sub_;
  // The flush timer (or, forwarded, the poll timer): a flush is armed, or
  // it fired and the queued events go out once the socket is free.
  boost::asio::steady_timer live_timer_;
  bool live_armed_ = false;
  bool live_due_ = false;
  std::string live_last_;
  // The runtime's watch token of the running stream (0: none).
  uint64_t pending_watch_ = 0;
  bool holds_busy_ = false;
  bool lingering_ = false;
  std::shared_ptr<std::array<char, 16384>> drain_;
};

} // namespace mibyan
