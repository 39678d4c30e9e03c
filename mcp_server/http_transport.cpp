// The Streamable HTTP server of `mibyan mcp serve` (mcp_server/
// http_transport.hpp): listener, threads, Origin policy and the routing of
// outbound messages. Connections are in mcp_server/http_connection.cpp.
#include "mcp_server/http_impl.hpp"

#include <future>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "base/errno_status.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"

namespace mibyan {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

namespace {

// "scheme://host[:port][/...]" -> host and "host:port" (lower case).
bool origin_host(const std::string& origin, std::string& host,
                 std::string& host_port) {
  auto o = strings::lower(origin);
  auto sep = o.find("://");
  if (sep == std::string::npos)
    return false;
  auto rest = o.substr(sep + 3);
  rest = rest.substr(0, rest.find('/'));
  if (rest.empty())
    return false;
  host_port = rest;
  if (rest[0] == '[') {
    auto close = rest.find(']');
    if (close == std::string::npos)
      return false;
    host = rest.substr(1, close - 1);
  } else {
    host = rest.substr(0, rest.find(':'));
  }
  return !host.empty();
}

} // namespace

bool mcp_http_server::impl::origin_allowed(const std::string& origin) const {
  std::string host, host_port;
  if (!origin_host(origin, host, host_port))
    return false; // "null" (sandboxed pages, files) and garbage
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0)
    return true;
  if (host == strings::lower(cfg.host) && cfg.host != "0.0.0.0"
      && cfg.host != "::")
    return true;
  for (auto& a : cfg.allowed_hosts) {
    auto x = strings::lower(a);
    if (x == host || x == host_port)
      return true;
  }
  return false;
}

std::shared_ptr<mcp_session_routes>
mcp_http_server::impl::routes_of(const std::string& id, bool create) {
  std::lock_guard<std::mutex> g{mtx};
  auto i = routes.find(id);
  if (i != routes.end())
    return i->second;
  if (!create)
    return nullptr;
  auto r = std::make_shared<mcp_session_routes>();
  routes[id] = r;
  return r;
}

void mcp_http_server::impl::drop_routes(const std::string& id) {
  std::shared_ptr<mcp_session_routes> r;
  {
    std::lock_guard<std::mutex> g{mtx};
    auto i = routes.find(id);
    if (i == routes.end())
      return;
    r = i->second;
    routes.erase(i);
  }
  // The session's GET stream and open exchanges end with it.
  std::vector<std::shared_ptr<mcp_http_connection>> open;
  {
    std::lock_guard<std::mutex> g{r->mtx};
    if (auto get = r->get_stream.lock())
      open.push_back(get);
    r->get_stream.reset();
    for (auto& [k, w] : r->exchanges)
      if (auto c = w.lock())
        open.push_back(c);
    r->exchanges.clear();
  }
  for (auto& c : open)
    c->close();
}

mcp_outbound
mcp_http_server::impl::outbound_for(std::shared_ptr<mcp_session_routes> r) {
  std::weak_ptr<mcp_session_routes> wr = r;
  size_t keep = cfg.replay_events;
  return [wr, keep](const std::string& text, const json::value& related,
                    bool final) {
    auto r = wr.lock();
    if (!r)
      return;
    std::shared_ptr<mcp_http_connection> target;
    uint64_t event_id = 0;
    {
      std::lock_guard<std::mutex> g{r->mtx};
      if (!related.is_null()) {
        auto i = r->exchanges.find(related.dump());
        if (i != r->exchanges.end()) {
          target = i->second.lock();
          if (final || !target)
            r->exchanges.erase(i);
        }
        // The request is answered or its client left: what belonged to
        // it (a late progress beat, its response) has no reader.
        if (!target)
          return;
      }
      if (!target) {
        // The GET stream, numbered for replay; kept until one reads it.
        event_id = ++r->next_event;
        target = r->get_stream.lock();
        r->events.push_back({event_id, text, target != nullptr});
        while (r->events.size() > keep)
          r->events.pop_front();
        if (!target) {
          // No GET stream: a request of ours (an elicitation) may still
          // reach the client on another open exchange of the session.
          for (auto& [k, w] : r->exchanges)
            if (auto c = w.lock()) {
              target = c;
              r->events.back().delivered = true;
              event_id = 0;
            }
        }
      }
    }
    if (target)
      target->deliver(text, event_id, final);
  };
}

void mcp_http_server::impl::accept() {
  acceptor.async_accept(
    net::make_strand(ioc),
    [self = shared_from_this()](beast::error_code ec, tcp::socket sock) {
      if (ec) {
        if (ec == net::error::operation_aborted || !self->acceptor.is_open())
          return;
        MIBYAN_LOG(warning, "mcp-serve", "accept failed: " << ec.message());
      } else {
        bool full = false;
        {
          std::lock_guard<std::mutex> g{self->mtx};
          full = self->conns.size() >= self->cfg.max_connections;
        }
        if (full) {
          MIBYAN_LOG(warning, "mcp-serve", "connection refused: "
                                             << self->cfg.max_connections
                                             << " open already");
          beast::error_code ignored;
          sock.close(ignored);
        } else {
          beast::error_code ignored;
          sock.set_option(tcp::no_delay(true), ignored);
          auto c = std::make_shared<mcp_http_connection>(self,
                                                         std::move(sock));
          {
            std::lock_guard<std::mutex> g{self->mtx};
            self->conns[c.get()] = c;
          }
          c->start();
        }
      }
      bool stopped = false;
      {
        std::lock_guard<std::mutex> g{self->mtx};
        stopped = self->stopped;
      }
      if (!stopped)
        self->accept();
    });
}

result<std::unique_ptr<mcp_http_server>>
mcp_http_server::start(std::shared_ptr<mcp_server_core> core,
                       mcp_http_settings settings) {
  auto p = std::make_shared<impl>(std::move(core), std::move(settings));
  beast::error_code ec;
  auto addr = net::ip::make_address(p->cfg.host, ec);
  if (ec)
    return status::failure(status_code::invalid_argument,
                           "invalid listen address '" + p->cfg.host + "': "
                             + ec.message());
  tcp::endpoint ep{addr, p->cfg.port};
  p->acceptor.open(ep.protocol(), ec);
  if (!ec)
    p->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec)
    p->acceptor.bind(ep, ec);
  if (!ec)
    p->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return errno_status(ec.value(), "cannot listen on " + p->cfg.host + ":"
                                      + std::to_string(p->cfg.port));
  p->accept();
  int n = std::max(1, p->cfg.io_threads);
  for (int i = 0; i < n; ++i)
    p->threads.emplace_back([p] {
      for (;;) {
        try {
          p->ioc.run();
          return;
        } catch (const std::exception& e) {
          MIBYAN_LOG(error, "mcp-serve", "I/O handler failed: " << e.what());
        }
      }
    });
  return std::unique_ptr<mcp_http_server>(new mcp_http_server(std::move(p)));
}

mcp_http_server::mcp_http_server(std::shared_ptr<impl> p) : p_(std::move(p)) {}

std::string mcp_http_server::host() const {
  beast::error_code ec;
  auto ep = p_->acceptor.local_endpoint(ec);
  return ec ? p_->cfg.host : ep.address().to_string();
}

uint16_t mcp_http_server::port() const {
  beast::error_code ec;
  auto ep = p_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void mcp_http_server::shutdown() {
  auto& p = *p_;
  std::vector<std::shared_ptr<mcp_http_connection>> open;
  {
    std::lock_guard<std::mutex> g{p.mtx};
    if (p.stopped)
      return;
    p.stopped = true;
    for (auto& [raw, w] : p.conns)
      if (auto c = w.lock())
        open.push_back(c);
  }
  auto closed = std::make_shared<std::promise<void>>();
  net::post(p.ioc, [&p, closed] {
    beast::error_code ec;
    p.acceptor.close(ec);
    closed->set_value();
  });
  closed->get_future().wait_for(std::chrono::seconds(5));
  for (auto& c : open)
    c->close();
  open.clear();
  p.ioc.stop();
  for (auto& t : p.threads)
    if (t.joinable())
      t.join();
  // Handlers still queued hold connections and through them the server:
  // run them out (their sockets are closed, so they end at once).
  p.ioc.restart();
  try {
    for (int i = 0; i < 100 && p.ioc.poll() > 0; ++i) {
    }
  } catch (const std::exception& e) {
    MIBYAN_LOG(warning, "mcp-serve", "a handler failed at shutdown: "
                                       << e.what());
  }
  std::lock_guard<std::mutex> g{p.mtx};
  p.routes.clear();
}

mcp_http_server::~mcp_http_server() {
  shutdown();
}

} // namespace mibyan
