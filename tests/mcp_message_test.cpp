#define BOOST_TEST_MODULE mcp_message
#include <boost/test/unit_test.hpp>

// The reading side of MCP's JSON-RPC (tools/mcp/mcp_message.hpp): message
// lines of a stdio server and the classification the session acts on.

#include <string>
#include <vector>

#include "tools/mcp/mcp_message.hpp"

using namespace mibyan;
using kind = mcp_incoming::kind;

namespace {

std::vector<mcp_incoming> parse(const std::string& text) {
  auto out = parse_mcp_messages(text);
  BOOST_REQUIRE_MESSAGE(out.ok(), out.error);
  return std::move(*out);
}

} // namespace

BOOST_AUTO_TEST_CASE(classifies_each_kind) {
  auto m = parse(R"([{"jsonrpc":"2.0","id":3,"result":{"x":1}},
    {"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"bad"}},
    {"jsonrpc":"2.0","id":5,"error":"plain"},
    {"jsonrpc":"2.0","id":6},
    {"jsonrpc":"2.0","method":"notifications/tools/list_changed"},
    {"jsonrpc":"2.0","id":"s1","method":"ping"},
    {"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":[1]},
    {"jsonrpc":"2.0","id":"x","result":{}},
    {"jsonrpc":"2.0","id":1.5,"result":{}},
    17])");
  BOOST_REQUIRE_EQUAL(m.size(), 10u);
  BOOST_TEST((m[0].k == kind::reply && m[0].ok && m[0].id.as_int() == 3));
  BOOST_TEST(m[0].result.get_int("x", 0) == 1);
  BOOST_TEST((m[1].k == kind::reply && !m[1].ok));
  BOOST_TEST(m[1].error == "MCP error -32602: bad");
  BOOST_TEST(m[2].error == "MCP error 0: \"plain\"");
  BOOST_TEST(m[3].error == "the server replied without result or error");
  BOOST_TEST((m[4].k == kind::notification
              && m[4].method == "notifications/tools/list_changed"));
  BOOST_TEST((m[5].k == kind::request && m[5].method == "ping"));
  BOOST_TEST(m[5].id.as_string() == "s1");
  // Params that are no object become an empty object.
  BOOST_TEST((m[6].k == kind::request && m[6].params.is_object()));
  BOOST_TEST((m[7].k == kind::invalid && m[8].k == kind::invalid));
  BOOST_TEST(m[7].error == "a reply without a valid id");
  BOOST_TEST((m[9].k == kind::invalid));
}

BOOST_AUTO_TEST_CASE(rejects_text_that_is_no_json) {
  auto out = parse_mcp_messages("{\"id\":1,");
  BOOST_TEST(!out.ok());
  BOOST_TEST((out.code == status_code::invalid_argument));
  BOOST_TEST(!out.error.empty());
}

BOOST_AUTO_TEST_CASE(line_reader_splits_any_chunking) {
  std::string stream = "server starting\r\n  \n{\"id\":1}\r\n[{\"id\":2}]\n"
                       "  {\"id\":3}\nlog\n";
  for (size_t step = 1; step <= stream.size(); ++step) {
    mcp_line_reader r{64};
    std::vector<std::string> msgs;
    std::vector<size_t> skipped;
    for (size_t i = 0; i < stream.size(); i += step)
      BOOST_REQUIRE(r.feed(std::string_view{stream}.substr(i, step),
                           [&](std::string m) { msgs.push_back(m); },
                           [&](size_t n) { skipped.push_back(n); }));
    BOOST_REQUIRE_EQUAL(msgs.size(), 3u);
    BOOST_TEST(msgs[0] == "{\"id\":1}");
    BOOST_TEST(msgs[1] == "[{\"id\":2}]");
    BOOST_TEST(msgs[2] == "  {\"id\":3}");
    BOOST_REQUIRE_EQUAL(skipped.size(), 2u);
    BOOST_TEST(skipped[0] == 15u); // "server starting" without "\r"
    BOOST_TEST(skipped[1] == 3u);
  }
}

BOOST_AUTO_TEST_CASE(line_reader_fails_on_an_oversized_message) {
  mcp_line_reader r{16};
  size_t n = 0;
  auto on_msg = [&](std::string) { ++n; };
  auto on_skip = [](size_t) {};
  BOOST_TEST(r.feed("{\"id\":1}\n{\"id\":", on_msg, on_skip));
  BOOST_TEST(!r.feed("\"aaaaaaaaaaaaaaaaaaaaaa\"}\n", on_msg, on_skip));
  BOOST_TEST(n == 1u);
  // Failed for good: later input is ignored.
  BOOST_TEST(!r.feed("{}\n", on_msg, on_skip));
  BOOST_TEST(n == 1u);
}
