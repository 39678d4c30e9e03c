// The dashboard's JSON endpoints (serve/ui_api.hpp, docs/serve.md
// "Dashboard") over real HTTP against a `mibyan serve` child whose store
// the test filled beforehand: sessions (paging, source filter, stateless
// never listed), search highlights, transcript (HTML kept as text), delete
// (409 while a turn runs), export (413 over the cap), config (secrets
// masked), usage, and clear 4xx answers to bad parameters.
#define BOOST_TEST_MODULE ui_api
#include <boost/test/unit_test.hpp>

#include <codecvt>
#include <ctime>
#include <locale>

#include "serve/ui_api.hpp"
#include "storage/session_store.hpp"
#include "tests/support/ui_client.hpp"

using namespace mibyan;
using namespace mibyan::test::ui;

namespace {

const std::string the_key = "ui-api-secret-key-777";
const std::string xss = "<script>alert(1)</script>";
const std::string auth = "Authorization: Bearer " + the_key + "\r\n";
// 01:00 UTC two days ago: every stored session starts that day.
const int64_t base_ms
  = (std::chrono::duration_cast<std::chrono::milliseconds>(
       std::chrono::system_clock::now().time_since_epoch())
         .count()
       / 86'400'000
     - 2)
      * 86'400'000
    + 3'600'000;

std::string base_day() {
  std::time_t t = static_cast<std::time_t>(base_ms / 1000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::unique_ptr<session_store> open_store(const std::string& home) {
  session_store_options o;
  o.dir = session_store::default_dir(home);
  auto s = session_store::open(o);
  BOOST_REQUIRE_MESSAGE(s, s.error);
  return std::move(*s);
}

void create(session_store& st, const std::string& id, const std::string& src,
            int64_t started, const std::string& parent = {},
            const std::string& title = {}) {
  new_session ns;
  ns.id = id;
  ns.source = src;
  ns.model = "model-a";
  ns.provider = "custom";
  ns.parent_session_id = parent;
  ns.title = title;
  ns.started_at_ms = started;
  auto r = st.create_session(ns);
  BOOST_REQUIRE_MESSAGE(r, r.error);
}

void append(session_store& st, const std::string& id, chat_message m) {
  auto r = st.append_message(id, m);
  BOOST_REQUIRE_MESSAGE(r, r.error);
}

chat_message msg(const std::string& role, const std::string& content,
                 int64_t ts) {
  chat_message m;
  m.role = role;
  m.content = content;
  m.timestamp_ms = ts;
  return m;
}

// Fills the store: 7 cli sessions s0..s6 (s6 newest), a cron session, two
// stateless API sessions (one with a subagent), an XSS session with a subagent child and a
// compression continuation, and a large session.
void fill(const std::string& home) {
  auto st = open_store(home);
  for (int i = 0; i < 7; ++i) {
    auto id = "s" + std::to_string(i);
    create(*st, id, "cli", base_ms + i * 1000);
    append(*st, id, msg("user", "question " + id, base_ms + i * 1000 + 1));
    append(*st, id, msg("assistant", "answer " + id, base_ms + i * 1000 + 201));
  }
  create(*st, "cron1", "cron", base_ms + 10'000);
  create(*st, "gone1", "api-stateless", base_ms + 11'000);
  append(*st, "gone1", msg("user", "stateless needle", base_ms + 11'001));
  create(*st, "gone2@4242", "api-stateless", base_ms + 12'000);
  create(*st, "gone2-sub", "delegate", base_ms + 12'001, "gone2@4242");

  create(*st, "xss", "cli", base_ms + 20'000, {}, xss);
  append(*st, "xss", msg("user", xss + " needle café 😀 needle", base_ms + 20'001));
  chat_message a = msg("assistant", xss, base_ms + 20'500);
  a.reasoning = xss;
  a.tool_calls.push_back(tool_call{xss, xss, "{\"code\":\"" + std::string{"<script>alert(1)<\\/script>"} + "\"}"});
  append(*st, "xss", a);
  chat_message t = msg("tool", xss, base_ms + 20'900);
  t.tool_call_id = xss;
  t.tool_name = xss;
  append(*st, "xss", t);
  token_usage u;
  u.input_tokens = 100;
  u.output_tokens = 20;
  u.cost_usd = 0.0125;
  u.has_cost = true;
  BOOST_REQUIRE(st->add_usage("xss", u, 1));
  create(*st, "xss-child", "delegate", base_ms + 20'100, "xss");
  BOOST_REQUIRE(st->end_session("xss", "compression", base_ms + 21'000));
  create(*st, "xss-next", "cli", base_ms + 21'001, "xss");

  create(*st, "big", "cli", base_ms + 5'500);
  append(*st, "big", msg("user", std::string(3000, 'x'), base_ms + 5'501));
}

struct api_fixture : fixture {
  std::unique_ptr<serve_process> sp;
  api_fixture() {
    key = the_key;
    fill(home.path());
    sp = start("server:\n  max_export_bytes: 2048\n");
  }
  std::string get(const std::string& path) {
    return request(sp->port, "GET", path, {}, auth);
  }
  json::value get_json(const std::string& path) {
    auto r = get(path);
    BOOST_TEST_CONTEXT(r) { BOOST_REQUIRE_EQUAL(status_of(r), 200); }
    BOOST_CHECK(header_of(r, "Content-Type").rfind("application/json", 0)
                == 0);
    return body_of(r);
  }
};

std::vector<std::string> ids_of(const json::value& v) {
  std::vector<std::string> out;
  for (auto& s : v.find("data")->as_array())
    out.push_back(s.get_string("id", ""));
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(utf16_offsets) {
  std::string t = "a\xc3\xa9\xf0\x9f\x98\x80z"; // a é 😀 z
  BOOST_CHECK_EQUAL(serve::utf16_offset(t, 0), 0u);
  BOOST_CHECK_EQUAL(serve::utf16_offset(t, 1), 1u);
  BOOST_CHECK_EQUAL(serve::utf16_offset(t, 3), 2u);
  BOOST_CHECK_EQUAL(serve::utf16_offset(t, 7), 4u);
  BOOST_CHECK_EQUAL(serve::utf16_offset(t, 8), 5u);
}

BOOST_FIXTURE_TEST_CASE(sessions_list_pages_newest_first, api_fixture) {
  auto all = get_json("/ui/api/sessions?limit=1000");
  auto ids = ids_of(all);
  std::vector<std::string> want{"xss-next", "xss-child", "xss", "cron1",
                                "s6", "big", "s5", "s4", "s3", "s2", "s1",
                                "s0"};
  BOOST_CHECK_EQUAL_COLLECTIONS(ids.begin(), ids.end(), want.begin(),
                                want.end());
  BOOST_CHECK(all.find("next_offset")->is_null());
  // Pages of 5.
  std::vector<std::string> paged;
  int64_t offset = 0;
  for (int i = 0; i < 10; ++i) {
    auto page = get_json("/ui/api/sessions?limit=5&offset="
                         + std::to_string(offset));
    for (auto& id : ids_of(page))
      paged.push_back(id);
    auto next = page.find("next_offset");
    if (next->is_null())
      break;
    BOOST_CHECK_EQUAL(next->as_int(), offset + 5);
    offset = next->as_int();
  }
  BOOST_CHECK_EQUAL_COLLECTIONS(paged.begin(), paged.end(), want.begin(),
                                want.end());
  auto cron = ids_of(get_json("/ui/api/sessions?source=cron"));
  BOOST_REQUIRE_EQUAL(cron.size(), 1u);
  BOOST_CHECK_EQUAL(cron[0], "cron1");
  BOOST_CHECK(ids_of(get_json("/ui/api/sessions?source=api-stateless"))
                .empty());
  // Fields, cost.
  auto top = get_json("/ui/api/sessions?limit=3");
  for (auto& s : top.find("data")->as_array()) {
    if (s.get_string("id", "") == "xss") {
      BOOST_CHECK_EQUAL(s.get_string("title", ""), xss);
      BOOST_CHECK_CLOSE(s.find("cost_usd")->as_double(), 0.0125, 1e-9);
      BOOST_CHECK_EQUAL(s.find("tokens")->get_int("input", 0), 100);
      BOOST_CHECK_EQUAL(s.get_int("message_count", 0), 3);
      BOOST_CHECK_EQUAL(s.get_int("tool_call_count", 0), 1);
      BOOST_CHECK_EQUAL(s.get_string("end_reason", ""), "compression");
    } else {
      BOOST_CHECK(s.find("cost_usd")->is_null());
    }
  }
  // Bad parameters.
  for (auto q : {"limit=0", "limit=1001", "limit=-1", "limit=abc",
                 "limit=99999999999999999999", "offset=-5", "offset=x",
                 "offset=1e3"})
    check_error(get(std::string{"/ui/api/sessions?"} + q), 400,
                "bad_parameter");
  BOOST_CHECK(ids_of(get_json("/ui/api/sessions?offset=100000")).empty());
  check_error(request(sp->port, "POST", "/ui/api/sessions", "{}", auth), 405,
              "method_not_allowed");
}

BOOST_FIXTURE_TEST_CASE(search_returns_text_with_utf16_highlights,
                        api_fixture) {
  auto r = get_json("/ui/api/search?q=needle");
  auto& data = r.find("data")->as_array();
  BOOST_REQUIRE_EQUAL(data.size(), 1u); // the stateless hit is not shown
  auto& hit = data[0];
  BOOST_CHECK_EQUAL(hit.get_string("session_id", ""), "xss");
  BOOST_CHECK_EQUAL(hit.get_string("role", ""), "user");
  auto text = hit.get_string("text", "");
  BOOST_CHECK(contains(text, "</script>"));
  std::wstring_convert<std::codecvt_utf8_utf16<char16_t>, char16_t> conv;
  auto u16 = conv.from_bytes(text);
  auto& spans = hit.find("highlights")->as_array();
  BOOST_REQUIRE_EQUAL(spans.size(), 2u);
  for (auto& s : spans) {
    auto b = static_cast<size_t>(s.as_array()[0].as_int());
    auto e = static_cast<size_t>(s.as_array()[1].as_int());
    BOOST_REQUIRE(b < e && e <= u16.size());
    BOOST_CHECK(u16.substr(b, e - b) == u"needle");
  }
  // The second needle follows the emoji (a surrogate pair).
  BOOST_CHECK_GT(spans[1].as_array()[0].as_int(), spans[0].as_array()[1].as_int());
  BOOST_CHECK(get_json("/ui/api/search?q=zzzznothing").find("data")
                ->as_array()
                .empty());
  check_error(get("/ui/api/search"), 400, "bad_parameter");
  check_error(get("/ui/api/search?q=%20%20"), 400, "bad_parameter");
  check_error(get("/ui/api/search?q=needle&limit=100000"), 400,
              "bad_parameter");
}

BOOST_FIXTURE_TEST_CASE(transcript_keeps_html_as_text, api_fixture) {
  auto raw = get("/ui/api/sessions/xss");
  BOOST_REQUIRE_EQUAL(status_of(raw), 200);
  BOOST_CHECK(header_of(raw, "Content-Type").rfind("application/json", 0)
              == 0);
  BOOST_CHECK_EQUAL(header_of(raw, "X-Content-Type-Options"), "nosniff");
  auto v = body_of(raw);
  BOOST_CHECK_EQUAL(v.get_string("title", ""), xss);
  auto& msgs = v.find("messages")->as_array();
  BOOST_REQUIRE_EQUAL(msgs.size(), 3u);
  BOOST_CHECK_EQUAL(msgs[0].get_string("content", ""),
                    xss + " needle café 😀 needle");
  BOOST_CHECK_EQUAL(msgs[0].get_int("ts_ms", 0), base_ms + 20'001);
  BOOST_CHECK_EQUAL(msgs[1].get_string("content", ""), xss);
  BOOST_CHECK_EQUAL(msgs[1].get_string("reasoning", ""), xss);
  auto& call = msgs[1].find("tool_calls")->as_array().at(0);
  BOOST_CHECK_EQUAL(call.get_string("id", ""), xss);
  BOOST_CHECK_EQUAL(call.get_string("name", ""), xss);
  BOOST_CHECK_EQUAL(call.get_string("arguments", ""),
                    "{\"code\":\"<script>alert(1)<\\/script>\"}");
  BOOST_CHECK_EQUAL(msgs[2].get_string("content", ""), xss);
  BOOST_CHECK_EQUAL(msgs[2].get_string("tool_call_id", ""), xss);
  BOOST_CHECK_EQUAL(msgs[2].get_string("name", ""), xss);
  BOOST_CHECK_EQUAL(msgs[2].get_string("role", ""), "tool");
  auto& kids = v.find("children")->as_array();
  BOOST_REQUIRE_EQUAL(kids.size(), 1u);
  BOOST_CHECK_EQUAL(kids[0].as_string(), "xss-child");
  BOOST_CHECK(v.find("chain")->find("previous")->is_null());
  BOOST_CHECK_EQUAL(v.find("chain")->get_string("next", ""), "xss-next");
  auto next = get_json("/ui/api/sessions/xss-next");
  BOOST_CHECK_EQUAL(next.find("chain")->get_string("previous", ""), "xss");
  BOOST_CHECK(next.find("chain")->find("next")->is_null());

  check_error(get("/ui/api/sessions/nosuch"), 404, "session_not_found");
  check_error(get("/ui/api/sessions/gone1"), 404, "session_not_found");
  check_error(get("/ui/api/sessions/gone2-sub"), 404, "session_not_found");
  for (std::string bad : std::vector<std::string>{"/ui/api/sessions/a%20b", "/ui/api/sessions/a/b",
                   "/ui/api/sessions/" + std::string(200, 'a'),
                   std::string{"/ui/api/sessions/%3Cscript%3E"}})
    check_error(get(bad), 400, "bad_session_id");
}

BOOST_FIXTURE_TEST_CASE(export_and_its_cap, api_fixture) {
  auto r = get("/ui/api/sessions/xss/export");
  BOOST_REQUIRE_EQUAL(status_of(r), 200);
  BOOST_CHECK_EQUAL(header_of(r, "Content-Type"), "application/x-ndjson");
  BOOST_CHECK_EQUAL(header_of(r, "Content-Disposition"),
                    "attachment; filename=\"xss.jsonl\"");
  auto body = raw_body(r);
  size_t lines = 0;
  size_t pos = 0;
  while (pos < body.size()) {
    auto nl = body.find('\n', pos);
    BOOST_REQUIRE(nl != std::string::npos);
    auto line = json::parse(body.substr(pos, nl - pos));
    BOOST_REQUIRE(line && line.v->is_object());
    BOOST_CHECK_EQUAL(line.v->get_string("session_id", ""), "xss");
    BOOST_CHECK(contains(line.v->get_string("content", ""), xss));
    ++lines;
    pos = nl + 1;
  }
  BOOST_CHECK_EQUAL(lines, 3u);
  auto big = get("/ui/api/sessions/big/export");
  check_error(big, 413, "export_too_large");
  BOOST_CHECK(header_of(big, "Content-Disposition").empty());
  check_error(get("/ui/api/sessions/nosuch/export"), 404, "session_not_found");
  check_error(request(sp->port, "DELETE", "/ui/api/sessions/xss/export", {},
                      auth),
              405, "method_not_allowed");
  // Nothing was lost by the refused export.
  BOOST_CHECK_EQUAL(get_json("/ui/api/sessions/big").find("messages")
                      ->as_array()
                      .size(),
                    1u);
}

BOOST_FIXTURE_TEST_CASE(delete_refused_while_a_turn_runs, api_fixture) {
  // A kept session with a slow turn.
  script(reply("slow answer"), 4000);
  int fd = connect_from(sp->port, "127.0.0.1");
  send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
               "Connection: close\r\nContent-Type: application/json\r\n"
               + auth + "X-Mibyan-Session: busy1\r\nContent-Length: "
               + std::to_string(chat_body.size()) + "\r\n\r\n" + chat_body);
  wait_for_provider_requests(1);
  check_error(request(sp->port, "DELETE", "/ui/api/sessions/busy1", {}, auth),
              409, "session_busy");
  auto answer = read_all(fd);
  ::close(fd);
  BOOST_CHECK_EQUAL(status_of(answer), 200);
  auto del = request(sp->port, "DELETE", "/ui/api/sessions/busy1", {}, auth);
  BOOST_CHECK_EQUAL(status_of(del), 200);
  check_error(get("/ui/api/sessions/busy1"), 404, "session_not_found");
  auto ok = request(sp->port, "DELETE", "/ui/api/sessions/s0", {}, auth);
  BOOST_CHECK_EQUAL(status_of(ok), 200);
  check_error(request(sp->port, "DELETE", "/ui/api/sessions/s0", {}, auth),
              404, "session_not_found");
  auto left = ids_of(get_json("/ui/api/sessions?limit=1000"));
  BOOST_CHECK(std::find(left.begin(), left.end(), "s0") == left.end());
  BOOST_CHECK(std::find(left.begin(), left.end(), "s1") != left.end());
}

BOOST_FIXTURE_TEST_CASE(config_masks_secrets, api_fixture) {
  // The key now comes from config.yaml, which the page must not show.
  BOOST_CHECK_EQUAL(sp->stop(SIGTERM), 0);
  home.write("config.yaml", "server:\n  key: " + the_key
                              + "\n  max_export_bytes: 2048\n");
  key.clear();
  sp = start();
  auto r = get("/ui/api/config");
  BOOST_REQUIRE_EQUAL(status_of(r), 200);
  BOOST_CHECK(!contains(r, the_key));
  auto v = body_of(r);
  BOOST_CHECK_EQUAL(v.find("config")->find("server")->get_string("key", ""),
                    "***");
  BOOST_CHECK_EQUAL(
    v.find("config")->find("server")->get_int("max_export_bytes", 0), 2048);
  BOOST_CHECK(v.find("config")->find("server")->find("allowed_hosts")
                ->is_array());
  auto& check = v.find("check")->as_array();
  BOOST_REQUIRE_EQUAL(check.size(), 1u);
  BOOST_CHECK_EQUAL(check[0].get_string("level", ""), "ok");
  // A broken file shows in the check (the server keeps running).
  home.write("config.yaml", "server:\n  key: [unclosed\n");
  auto broken = body_of(get("/ui/api/config"));
  BOOST_CHECK_EQUAL(broken.find("check")->as_array()[0].get_string("level", ""),
                    "error");
}

BOOST_FIXTURE_TEST_CASE(usage_by_day_and_model, api_fixture) {
  auto v = get_json("/ui/api/usage?days=7");
  auto& days = v.find("by_day")->as_array();
  BOOST_REQUIRE_EQUAL(days.size(), 1u);
  BOOST_CHECK_EQUAL(days[0].get_string("day", ""), base_day());
  BOOST_CHECK_EQUAL(days[0].get_string("model", ""), "model-a");
  // s0..s6, xss and big have one turn each.
  BOOST_CHECK_EQUAL(days[0].get_int("turns", 0), 9);
  BOOST_CHECK_EQUAL(days[0].get_int("input_tokens", 0), 100);
  BOOST_CHECK_CLOSE(days[0].find("cost_usd")->as_double(), 0.0125, 1e-9);
  // Latencies: 200 ms (x7) and 899 ms (xss); big has no answer.
  BOOST_CHECK_EQUAL(days[0].get_int("latency_ms_p50", 0), 200);
  BOOST_CHECK_EQUAL(days[0].get_int("latency_ms_p95", 0), 899);
  auto& models = v.find("by_model")->as_array();
  BOOST_REQUIRE_EQUAL(models.size(), 1u);
  BOOST_CHECK_EQUAL(models[0].get_int("turns", 0), 9);
  BOOST_CHECK(get_json("/ui/api/usage?days=1").find("by_day")->as_array()
                .empty());
  for (auto q : {"days=0", "days=367", "days=x", "days="})
    check_error(get(std::string{"/ui/api/usage?"} + q), 400, "bad_parameter");
}

BOOST_FIXTURE_TEST_CASE(provider_cost_is_stored_and_listed, api_fixture) {
  // An OpenRouter-style usage.cost on the provider's answer.
  auto body = json::parse(reply("paid answer"));
  BOOST_REQUIRE(body);
  json::value usage;
  usage["prompt_tokens"] = 10;
  usage["completion_tokens"] = 2;
  usage["total_tokens"] = 12;
  usage["cost"] = 0.0042;
  (*body.v)["usage"] = std::move(usage);
  script(body.v->dump());
  auto r = request(sp->port, "POST", "/v1/chat/completions", chat_body,
                   auth + "X-Mibyan-Session: paid1\r\n", "x");
  BOOST_REQUIRE_EQUAL(status_of(r), 200);
  auto v = get_json("/ui/api/sessions/paid1");
  BOOST_REQUIRE(v.find("cost_usd") && v.find("cost_usd")->is_number());
  BOOST_CHECK_CLOSE(v.find("cost_usd")->as_double(), 0.0042, 1e-9);
  BOOST_CHECK_EQUAL(v.find("tokens")->get_int("input", 0), 10);
  auto list = get_json("/ui/api/sessions?limit=1");
  BOOST_CHECK_EQUAL(list.find("data")->as_array()[0].get_string("id", ""),
                    "paid1");
}
