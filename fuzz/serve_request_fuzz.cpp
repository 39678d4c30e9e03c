// Fuzz target: the request path of `mibyan serve` (docs/serve.md) up to the
// point where a turn would start: Boost.Beast's request parser with the
// server's limits, fed in pieces; then the target split and query decoding,
// the session header check, `limit` parsing, the chat-completions body
// parser and the conversion of its history into chat messages; the
// Responses API body parser, and a response built from the parsed request
// (its text as deltas, its earlier items as tool events).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>

#include "base/json.hpp"
#include "fuzz/fuzz_input.hpp"
#include "serve/openai_chat.hpp"
#include "serve/responses.hpp"
#include "serve/routes.hpp"

using namespace mibyan;
namespace http = boost::beast::http;

namespace {

void route(const http::request<http::string_body>& req) {
  std::string path;
  std::map<std::string, std::string> query;
  auto target = req.target();
  serve::split_target(std::string_view{target.data(), target.size()}, path,
                      query);
  size_t limit = 20;
  (void)serve::parse_limit(query, limit);
  (void)serve::valid_session_id(std::string{req["X-Mibyan-Session"]});
  chat_completion_request cr;
  if (!parse_chat_completion(req.body(), cr, 1000))
    return;
  // The typed history the turn call would carry.
  (void)history_of(std::move(cr.history));
}

// The Responses API body, then a response whose events come from it.
void responses(std::string_view body) {
  responses_request rr;
  responses_refusal why;
  if (!parse_responses_request(body, rr, 1000, why))
    return;
  (void)history_of(rr.earlier);
  response_builder b{response_id(), 1, "m", json::value{}, true};
  std::string out = b.start();
  for (size_t i = 0; i < rr.prompt.size(); i += 7)
    out += b.text(rr.prompt.substr(i, 7));
  int n = 0;
  for (auto& m : rr.earlier) {
    // Tool events with fuzzed text, starts and ends unpaired too.
    tool_event ev;
    ev.what = n % 3 == 2 ? tool_event::phase::end : tool_event::phase::start;
    ev.call_id = m.tool_call_id.empty() ? m.role : m.tool_call_id;
    ev.tool = m.tool_name;
    ev.args_json = m.content;
    ev.result_json = m.content;
    out += b.tool(ev);
    if (++n % 4 == 0)
      out += b.restart();
  }
  response_end end;
  end.status = n % 2 ? "failed" : "completed";
  end.answer = rr.prompt;
  out += b.finish(end);
  (void)b.object().dump();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(1 << 20);
  parser.eager(true);
  std::string buf;
  bool failed = false;
  boost::beast::error_code ec;
  fuzz::feed_in_pieces(data, size, [&](std::string_view piece) {
    if (failed || parser.is_done())
      return;
    buf.append(piece);
    while (!buf.empty() && !parser.is_done()) {
      auto n = parser.put(boost::asio::buffer(buf.data(), buf.size()), ec);
      if (ec == http::error::need_more) {
        ec = {};
        buf.erase(0, n);
        break;
      }
      if (ec) {
        failed = true;
        return;
      }
      buf.erase(0, n);
      if (n == 0)
        break;
    }
  });
  if (!failed && !parser.is_done()) {
    parser.put_eof(ec);
    if (ec)
      return 0;
  }
  if (!failed && parser.is_done())
    route(parser.get());
  // The body parser on the raw bytes too, without HTTP framing around it.
  chat_completion_request cr;
  (void)parse_chat_completion(fuzz::as_text(data, size), cr, 1000);
  responses(fuzz::as_text(data, size));
  return 0;
}
