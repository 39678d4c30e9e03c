// `GET /metrics` of `mibyan serve` (docs/metrics.md, docs/serve.md).
#include "serve/metrics_route.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/string.hpp>

#include "base/metrics.hpp"
#include "base/runtime_metrics.hpp"
#include "serve/http_server.hpp"

namespace mibyan::serve {

bool loopback_bind(const std::string& host) {
  if (host == "localhost")
    return true;
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(host, ec);
  if (ec)
    return false;
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    return a.to_v6().to_v4().is_loopback();
  return a.is_loopback();
}

metrics_reply metrics_response(const std::string& bind_host,
                               const std::string& key,
                               std::string_view authorization) {
  metrics_reply r;
  if (key.empty()) {
    if (!loopback_bind(bind_host)) {
      r.status = 403;
      r.message = "/metrics on a non-loopback address needs a server key: "
                  "set MIBYAN_SERVER_KEY (or server.key) and send "
                  "'Authorization: Bearer <key>'";
      r.code = "metrics_need_key";
      return r;
    }
  } else {
    const std::string_view prefix = "Bearer ";
    bool ok = authorization.size() > prefix.size()
              && boost::beast::iequals(
                boost::beast::string_view{authorization.data(),
                                          prefix.size()},
                boost::beast::string_view{prefix.data(), prefix.size()})
              && constant_time_equal(
                std::string{authorization.substr(prefix.size())}, key);
    if (!ok) {
      r.status = 401;
      r.message = "missing or wrong API key: send 'Authorization: Bearer "
                  "<key>' with the server key";
      r.code = "invalid_api_key";
      return r;
    }
  }
  metrics::register_all();
  r.body = metrics::registry::global().render();
  return r;
}

void note_request(std::string_view target, int status, double seconds) {
  auto q = target.find('?');
  metrics::count_http_request(
    metrics::http_route_class(target.substr(0, q)), status, seconds);
}

} // namespace mibyan::serve
