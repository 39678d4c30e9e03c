// Starting and stopping `mibyan serve`'s HTTP server (docs/serve.md): the
// listener, the I/O threads, the idle-session reaper and the graceful
// shutdown. Connections are in serve/connection.cpp.
#include "serve/http_server.hpp"

#include <future>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/error.hpp>

#include "base/errno_status.hpp"
#include "base/log.hpp"
#include "config/option_bounds.hpp"
#include "runtime/background.hpp"
#include "serve/impl.hpp"

namespace mibyan {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

bool constant_time_equal(const std::string& a, const std::string& b) {
  // Every byte of the longer string is visited; the result accumulates.
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

void http_server::impl::reap() {
  auto period = std::chrono::seconds(
    std::min<int64_t>(60, cfg.limits.session_idle_timeout));
  reaper.expires_after(period);
  reaper.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->stopping)
      return;
    auto limit = std::chrono::seconds(self->cfg.limits.session_idle_timeout);
    auto now = std::chrono::steady_clock::now();
    std::vector<std::string> idle;
    {
      std::lock_guard<std::mutex> g{self->mtx};
      for (auto i = self->kept.begin(); i != self->kept.end();) {
        // A session whose background subagents still run stays
        // (docs/agent_loop.md, "Background deliveries").
        if (now - i->second > limit && self->running.count(i->first) == 0
            && background_running(self->rt, i->first) == 0) {
          idle.push_back(i->first);
          i = self->kept.erase(i);
        } else {
          ++i;
        }
      }
    }
    for (auto& id : idle) {
      MIBYAN_LOG(info, "serve", "closed idle session " << id);
      self->rt.close_session(id);
    }
    self->reap();
  });
}

void http_server::impl::accept() {
  acceptor.async_accept(
    net::make_strand(ioc),
    [self = shared_from_this()](beast::error_code ec, tcp::socket sock) {
      if (ec) {
        if (ec == net::error::operation_aborted || !self->acceptor.is_open())
          return;
        MIBYAN_LOG(warning, "serve", "accept failed: " << ec.message());
      } else {
        // Small writes (SSE events, keep-alive comments) go out at once:
        // with Nagle's algorithm each one after the first waits for the
        // client's delayed ACK (about 40 ms on Linux).
        beast::error_code ignored;
        sock.set_option(tcp::no_delay(true), ignored);
        // Admission (serve/admission.cpp) may refuse it.
        start_connection(self, std::move(sock));
      }
      if (!self->stopping)
        self->accept();
    });
}

result<std::unique_ptr<http_server>>
http_server::start(runtime& rt, http_server_settings settings) {
  // The limits may be built in code: the loader's ranges, checked once
  // here, hold for everything below (config/option_bounds.hpp).
  options limits;
  limits.server = settings.limits;
  if (auto valid = validate_options(limits); !valid.ok())
    return valid;
  auto p = std::make_shared<impl>(rt, std::move(settings));
  // approvals.http / clarify.http: pending - flagged commands and
  // questions wait for an answer over HTTP (serve/pending_http.cpp).
  runtime::pending_channels channels;
  channels.approvals = config_of(rt).approvals.http == "pending";
  channels.clarify = config_of(rt).clarify.http == "pending";
  if (channels.approvals || channels.clarify)
    rt.use_pending_channels(channels);
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
  serve::ui_auth_settings ua;
  ua.key = p->cfg.key;
  ua.listen_host = p->cfg.host;
  ua.listen_port = p->acceptor.local_endpoint(ec).port();
  ua.allowed_hosts = p->cfg.limits.allowed_hosts;
  p->ui_auth = std::make_unique<serve::ui_auth>(std::move(ua));
  p->accept();
  p->reap();
  boost::asio::post(p->store_pool, [p] { p->sweep_stateless_leftovers(); });
  auto n = p->cfg.limits.io_threads;
  for (int64_t i = 0; i < n; ++i)
    p->threads.emplace_back([p] {
      for (;;) {
        try {
          p->ioc.run();
          return;
        } catch (const std::exception& e) {
          // A handler threw (a Beast/Asio edge case): log and keep serving.
          MIBYAN_LOG(error, "serve", "I/O handler failed: " << e.what());
        }
      }
    });
  return std::unique_ptr<http_server>(new http_server(std::move(p)));
}

http_server::http_server(std::shared_ptr<impl> p) : impl_(std::move(p)) {}

std::string http_server::host() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? impl_->cfg.host : ep.address().to_string();
}

uint16_t http_server::port() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void http_server::shutdown(std::chrono::milliseconds grace) {
  auto& p = *impl_;
  {
    std::lock_guard<std::mutex> g{p.mtx};
    if (p.stopped)
      return;
    p.stopped = true;
  }
  p.stopping = true;
  auto closed = std::make_shared<std::promise<void>>();
  net::post(p.ioc, [&p, closed] {
    beast::error_code ec;
    p.acceptor.close(ec);
    p.reaper.cancel();
    closed->set_value();
  });
  closed->get_future().wait_for(std::chrono::seconds(5));
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> g{p.mtx};
    ids.assign(p.running.begin(), p.running.end());
  }
  for (auto& id : ids)
    p.rt.interrupt(id, "the server is shutting down");
  {
    std::unique_lock<std::mutex> g{p.mtx};
    p.cv.wait_for(g, grace, [&p] { return p.busy == 0; });
  }
  p.ioc.stop();
  for (auto& t : p.threads)
    if (t.joinable())
      t.join();
  {
    std::lock_guard<std::mutex> g{p.mtx};
    p.store_closed = true;
  }
  p.store_pool.join();
  p.discard_remaining_stateless();
  // Handlers still queued (a turn that ended after the grace period, a
  // read never completed) hold connections and through them the server.
  p.close_io();
}

http_server::~http_server() {
  shutdown(std::chrono::milliseconds(2000));
}

} // namespace mibyan
