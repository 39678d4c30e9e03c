#define BOOST_TEST_MODULE serve_limits
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// The limits of `mibyan serve` against abusive clients (docs/serve.md,
// "Limits"), on a real `mibyan serve` process with the scripted provider
// behind it: the message cap of a request, stateless requests that leave
// no session behind, connections that never finish their request head, and
// keep-alive comments on a slow stream. And limits built in code for an
// in-process server are checked against the server section's rows.

#include <algorithm>
#include <atomic>

#include "runtime/runtime.hpp"
#include "serve/http_server.hpp"
#include "storage/lmdb/lmdb_inspect.hpp"
#include "storage/session_store.hpp"
#include "tests/support/serve_fixture.hpp"

using namespace mibyan;
using namespace std::chrono;
using namespace mibyan::test::serving;

namespace {

// A chat body of `n` messages (user and assistant taking turns, the last
// one from the user).
std::string many_messages(int n) {
  std::string b = R"({"model":"m","messages":[)";
  for (int i = 0; i < n; ++i) {
    bool user = (n - 1 - i) % 2 == 0;
    b += std::string(i ? "," : "") + R"({"role":")"
         + (user ? "user" : "assistant") + R"(","content":"m)"
         + std::to_string(i) + "\"}";
  }
  return b + "]}";
}

// Waits (bounded) until `mibyan sessions list` shows `n` sessions; returns
// the list.
json::value wait_for_sessions(fixture& f, size_t n) {
  auto list = f.sessions_list();
  for (int i = 0; i < 300 && list.size() != n; ++i) {
    std::this_thread::sleep_for(milliseconds{100});
    list = f.sessions_list();
  }
  return list;
}

// How many of `fds` the server closes within `seconds_` (all polled
// together; each is read and dropped until it closes).
size_t count_closed(const std::vector<int>& fds, int seconds_) {
  std::vector<bool> done(fds.size(), false);
  size_t closed = 0;
  auto deadline = steady_clock::now() + seconds{seconds_};
  while (closed < fds.size() && steady_clock::now() < deadline) {
    std::vector<pollfd> ps;
    std::vector<size_t> idx;
    for (size_t i = 0; i < fds.size(); ++i)
      if (!done[i]) {
        ps.push_back(pollfd{fds[i], POLLIN, 0});
        idx.push_back(i);
      }
    if (::poll(ps.data(), ps.size(), 100) <= 0)
      continue;
    for (size_t k = 0; k < ps.size(); ++k) {
      if (ps[k].revents == 0)
        continue;
      char buf[4096];
      if (::recv(ps[k].fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) {
        done[idx[k]] = true;
        ++closed;
      }
    }
  }
  return closed;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(serve_limits, fixture)

BOOST_AUTO_TEST_CASE(too_many_messages_is_refused_before_anything_is_stored) {
  auto sp = start(); // server.max_messages: 1000 by default
  auto r = http(sp->port, "POST", "/v1/chat/completions", many_messages(1001),
                "Content-Type: application/json\r\n"
                "X-Mibyan-Session: big-1\r\n");
  check_error(r, 400, "too_many_messages");
  BOOST_CHECK(contains(r, "server.max_messages"));
  // Nothing reached the provider, nothing was stored.
  BOOST_CHECK_EQUAL(provider_requests().size(), 0u);
  BOOST_CHECK_EQUAL(sessions_list().size(), 0u);
  check_error(http(sp->port, "GET", "/v1/sessions/big-1"), 404,
              "session_not_found");
  // At the limit the request runs (and is stored: it names a session).
  script(reply("a thousand"));
  auto ok = http(sp->port, "POST", "/v1/chat/completions", many_messages(1000),
                 "Content-Type: application/json\r\n"
                 "X-Mibyan-Session: big-2\r\n");
  BOOST_CHECK_EQUAL(status_of(ok), 200);
  BOOST_CHECK(contains(ok, "a thousand"));
  auto list = sessions_list();
  BOOST_REQUIRE_EQUAL(list.size(), 1u);
  BOOST_CHECK_EQUAL(list.as_array()[0].get_string("id", ""), "big-2");
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(stateless_requests_leave_no_session_behind) {
  auto sp = start();
  auto port = sp->port;
  const int n = 12;
  script(reply("stateless answer"), 0, n);
  for (int i = 0; i < n; ++i) {
    // Half of them bring a history, half are streamed.
    std::string body
      = i % 2 ? many_messages(5)
              : R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]})";
    auto r = http(port, "POST", "/v1/chat/completions", body);
    BOOST_CHECK_EQUAL(status_of(r), 200);
    BOOST_CHECK(contains(r, "stateless answer"));
    BOOST_CHECK(!contains(r, "X-Mibyan-Session"));
  }
  // A failed turn (the provider refuses) leaves nothing either.
  {
    json::value s;
    s["path"] = "/v1/chat/completions";
    s["status"] = 400;
    s["body"] = R"({"error":{"message":"no","type":"invalid_request_error"}})";
    provider.script(s.dump());
    auto r = http(port, "POST", "/v1/chat/completions", chat_body);
    BOOST_CHECK_GE(status_of(r), 500);
  }
  // Nor does a client that leaves while its turn runs.
  script(reply("too late"), 4000);
  {
    auto before = provider_requests().size();
    int fd = dial_loopback(port);
    send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                 "Content-Type: application/json\r\nContent-Length: "
                   + std::to_string(chat_body.size()) + "\r\n\r\n"
                   + chat_body);
    wait_for_provider_requests(before + 1);
    ::close(fd);
  }
  // A kept session (X-Mibyan-Session) stays.
  script(reply("kept"));
  auto kept = http(port, "POST", "/v1/chat/completions", chat_body,
                   "Content-Type: application/json\r\n"
                   "X-Mibyan-Session: kept-1\r\n");
  BOOST_CHECK_EQUAL(status_of(kept), 200);
  // The disconnected turn ends asynchronously: wait for its deletion.
  auto list = wait_for_sessions(*this, 1);
  BOOST_REQUIRE_EQUAL(list.size(), 1u);
  BOOST_CHECK_EQUAL(list.as_array()[0].get_string("id", ""), "kept-1");
  auto api = body_of(http(port, "GET", "/v1/sessions"));
  BOOST_CHECK_EQUAL(api["data"].size(), 1u);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
  // Nothing was left for a restart to find.
  BOOST_CHECK_EQUAL(sessions_list().size(), 1u);
}

// The store's pages in use now (the high-water mark less LMDB's free
// list), read through a read-only open of the server's store.
lmdb_inspect::env_figures store_pages(fixture& f) {
  session_store_options o;
  o.dir = session_store::default_dir(f.home.path());
  o.read_only = true;
  auto store = session_store::open(o);
  BOOST_REQUIRE_MESSAGE(store, store.error);
  auto pages = lmdb_inspect::environment(**store);
  BOOST_REQUIRE_MESSAGE(pages, pages.error);
  return *pages;
}

BOOST_AUTO_TEST_CASE(a_thousand_stateless_requests_leave_nothing_behind) {
  // Issue 23, section 5: the session list and the store's used size stay
  // as they were (after a warm-up that lets LMDB's free list settle).
  auto sp = start();
  auto port = sp->port;
  script(reply("kept answer"));
  BOOST_REQUIRE_EQUAL(status_of(http(port, "POST", "/v1/chat/completions",
                                     chat_body,
                                     "Content-Type: application/json\r\n"
                                     "X-Mibyan-Session: keeper\r\n")),
                      200);
  const int warmup = 100, total = 1000, clients = 4;
  script(reply("stateless answer"), 0, total);
  std::atomic<int> next{0}, ok{0};
  auto run = [&](int upto) {
    std::vector<std::thread> ts;
    for (int c = 0; c < clients; ++c)
      ts.emplace_back([&, upto] {
        for (int i; (i = next.fetch_add(1)) < upto;) {
          // Mixed: streamed or not, with a history of 1, 3 or 7 messages.
          std::string b = many_messages(1 + 2 * (i % 3) + (i % 5 == 0 ? 4 : 0));
          if (i % 2 == 0)
            b.insert(1, R"("stream":true,)");
          auto r = http(port, "POST", "/v1/chat/completions", b);
          if (status_of(r) == 200 && contains(r, "stateless answer")
              && !contains(r, "X-Mibyan-Session"))
            ++ok;
        }
      });
    for (auto& t : ts)
      t.join();
    next = upto;
  };
  run(warmup);
  auto before_list = wait_for_sessions(*this, 1);
  BOOST_REQUIRE_EQUAL(before_list.size(), 1u);
  auto before = store_pages(*this);
  run(total);
  BOOST_CHECK_EQUAL(ok.load(), total);
  // Deletions follow the answers on the store thread: wait for the last.
  auto after_list = wait_for_sessions(*this, 1);
  BOOST_CHECK_EQUAL(after_list.dump(), before_list.dump());
  auto api = body_of(http(port, "GET", "/v1/sessions?limit=1000"));
  BOOST_CHECK_EQUAL(api["data"].size(), 1u);
  auto after = store_pages(*this);
  BOOST_TEST_MESSAGE("store pages after " << warmup << " requests: used "
                     << before.used_pages() << " of " << before.high_water
                     << "; after " << total << ": used " << after.used_pages()
                     << " of " << after.high_water << " (page "
                     << after.page_size << " bytes)");
  // 900 more requests, each of which wrote and deleted a session of 2 to
  // 8 messages: the data file's high-water mark and the pages in use stay
  // within a small bound of what the warm-up left (LMDB may hold a few
  // pages of freed lists and the last transactions' copies).
  const uint64_t bound = 64;
  BOOST_CHECK_LE(after.used_pages(), before.used_pages() + bound);
  BOOST_CHECK_LE(after.high_water, before.high_water + bound);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
  BOOST_CHECK_EQUAL(sessions_list().dump(), before_list.dump());
}

BOOST_AUTO_TEST_CASE(a_compressed_stateless_turn_leaves_no_continuation) {
  // A window of 40000 tokens (threshold 34000): the request's history of
  // ~50000 estimated tokens is summarised before the first model call, and
  // the turn continues in a child session (docs/agent_loop.md).
  auto sp = start("model:\n  context_length: 40000\n"
                  "compression:\n  protect_first_n: 1\n  protect_last_n: 2\n");
  script(reply("SUMMARY: long talk about q."));
  script(reply("compressed answer"));
  std::string body = R"({"model":"m","messages":[)";
  for (int i = 0; i < 10; ++i)
    body += std::string(R"({"role":")") + (i % 2 ? "assistant" : "user")
            + R"(","content":")" + std::to_string(i) + std::string(20000, 'q')
            + "\"},";
  body += R"({"role":"user","content":"sum it up"}]})";
  auto r = http(sp->port, "POST", "/v1/chat/completions", body);
  BOOST_CHECK_EQUAL(status_of(r), 200);
  BOOST_CHECK(contains(r, "compressed answer"));
  BOOST_CHECK(contains(test::slurp(sp->err_path), "summarising messages"));
  BOOST_CHECK_EQUAL(provider_requests().size(), 2u);
  // Neither the first session nor its continuation is left (deleted on
  // the store thread right after the answer: waited for).
  BOOST_CHECK_EQUAL(wait_for_sessions(*this, 0).size(), 0u);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
  BOOST_CHECK_EQUAL(sessions_list().size(), 0u);
}

BOOST_AUTO_TEST_CASE(leftovers_of_a_killed_server_are_swept_at_start) {
  auto sp = start();
  script(reply("never"), 20000);
  int fd = dial_loopback(sp->port);
  send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
               "Content-Type: application/json\r\nContent-Length: "
                 + std::to_string(chat_body.size()) + "\r\n\r\n" + chat_body);
  wait_for_provider_requests(1);
  // Killed mid-turn: nothing could delete the session.
  sp->stop(SIGKILL);
  ::close(fd);
  auto left = sessions_list();
  BOOST_REQUIRE_EQUAL(left.size(), 1u);
  BOOST_CHECK_EQUAL(left.as_array()[0].get_string("source", ""),
                    "api-stateless");
  // The next server finds it, sees its owner gone, and deletes it.
  auto sp2 = start();
  BOOST_CHECK_EQUAL(wait_for_sessions(*this, 0).size(), 0u);
  BOOST_CHECK(contains(test::slurp(sp2->err_path),
                       "deleted 1 stateless session(s)"));
  BOOST_CHECK_EQUAL(sp2->stop(), 0);
}

BOOST_AUTO_TEST_CASE(unfinished_heads_do_not_lock_out_health) {
  // Old behaviour: the 64 slots stay taken until header_timeout (30 s) and
  // every further connection is closed unanswered.
  auto sp = start("server:\n  max_connections: 64\n  header_timeout: 30\n");
  std::vector<int> slow;
  for (int i = 0; i < 300; ++i) {
    int fd = dial_loopback(sp->port);
    send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    slow.push_back(fd);
  }
  for (int i = 0; i < 3; ++i)
    BOOST_CHECK_EQUAL(status_of(http(sp->port, "GET", "/health")), 200);
  // Over 3/4 of the limit the unfinished heads get a short deadline: the
  // server closes every one of them well before header_timeout.
  BOOST_CHECK_EQUAL(count_closed(slow, 20), slow.size());
  for (int fd : slow)
    ::close(fd);
  BOOST_CHECK_EQUAL(status_of(http(sp->port, "GET", "/health")), 200);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(one_address_cannot_take_every_connection) {
  // server.max_connections_per_ip: 256 by default; header_timeout is long
  // so that only admission closes anything here.
  auto sp = start("server:\n  header_timeout: 60\n");
  // Another client's unfinished request, older than the flood.
  int other = connect_from(sp->port, "127.0.0.2");
  send_all(other, "GET /health HTTP/1.1\r\nHost: x\r\n");
  std::vector<int> flood;
  for (int i = 0; i < 300; ++i) {
    int fd = connect_from(sp->port, "127.0.0.1");
    send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    flood.push_back(fd);
  }
  // The oldest unfinished heads of 127.0.0.1 made room for the newest:
  // 44 of them are closed, 256 stay.
  BOOST_CHECK_EQUAL(
    count_closed(std::vector<int>(flood.begin(), flood.begin() + 44), 20),
    44u);
  // 127.0.0.1 still gets in (its oldest waiting connection goes)...
  BOOST_CHECK_EQUAL(status_of(http(sp->port, "GET", "/health")), 200);
  // ...and the other client was never touched: it finishes its request.
  send_all(other, "Connection: close\r\n\r\n");
  auto r = read_all(other);
  BOOST_CHECK_EQUAL(status_of(r), 200);
  ::close(other);
  for (int fd : flood)
    ::close(fd);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(a_slow_stream_gets_keep_alive_comments) {
  auto sp = start("server:\n  keepalive_s: 1\n");
  script(reply("slow answer"), 3500);
  auto r = http(sp->port, "POST", "/v1/chat/completions",
                R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]})");
  BOOST_CHECK_EQUAL(status_of(r), 200);
  BOOST_CHECK(contains(r, "slow answer"));
  BOOST_CHECK(contains(r, "data: [DONE]"));
  // The comment came before the answer.
  auto ka = r.find("\n: keep-alive\n\n");
  BOOST_REQUIRE(ka != std::string::npos);
  BOOST_CHECK_LT(ka, r.find("slow answer"));
  // The stock openai client skips the comments.
  node(*sp, "keepalive");
}

BOOST_AUTO_TEST_SUITE_END()

// The server relies on its limits' ranges (no clamping inside): settings
// built in code with one out of range are refused at start, naming the key.
BOOST_AUTO_TEST_CASE(limits_out_of_range_are_refused_at_start) {
  test::temp_dir home;
  options opts;
  opts.home = home.path();
  opts.code_execution.prestart_kernels = 0;
  auto made = create_runtime(opts);
  BOOST_REQUIRE_MESSAGE(made, made.error);
  auto rt = std::move(*made);
  http_server_settings st;
  st.port = 0;
  st.model_id = "m";
  st.new_session_id = [] { return std::string{"s"}; };
  st.limits.io_threads = 0;
  auto refused = http_server::start(*rt, st);
  BOOST_TEST(!refused);
  BOOST_TEST((refused.code == status_code::config_invalid));
  BOOST_TEST(refused.error == "server.io_threads: must be between 1 and 64, "
                              "got 0");
  st.limits.io_threads = 1;
  st.limits.session_idle_timeout = -1;
  refused = http_server::start(*rt, st);
  BOOST_TEST((refused.code == status_code::config_invalid));
  BOOST_TEST(refused.error.find("server.session_idle_timeout") == 0u,
             refused.error);
  st.limits.session_idle_timeout = 60;
  auto started = http_server::start(*rt, st);
  BOOST_REQUIRE_MESSAGE(started, started.error);
  (*started)->shutdown(seconds{5});
}
