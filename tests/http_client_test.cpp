#define BOOST_TEST_MODULE http_client
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/http_client.hpp"
#include "base/json.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

struct fixture {
  test::http_server server;
  http_client client;

  http_request get(const std::string& path) {
    http_request req;
    req.url = server.url(path);
    return req;
  }
};

long elapsed_ms(clock_type::time_point start) {
  return static_cast<long>(
    std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now()
                                                          - start)
      .count());
}

// Collects the callbacks of one submitted request.
struct recorder {
  std::mutex mtx;
  std::condition_variable cv;
  int header_calls = 0;
  long header_status = 0;
  bool data_before_headers = false;
  std::string body;
  int chunks = 0;
  int done_calls = 0;
  http_response_summary summary;

  http_callbacks callbacks(bool keep_going = true) {
    http_callbacks cb;
    cb.on_headers = [this](long status, const http_headers&) {
      std::lock_guard<std::mutex> guard{mtx};
      ++header_calls;
      header_status = status;
    };
    cb.on_data = [this, keep_going](std::string_view chunk) {
      std::lock_guard<std::mutex> guard{mtx};
      if (header_calls == 0)
        data_before_headers = true;
      body.append(chunk.data(), chunk.size());
      ++chunks;
      cv.notify_all();
      return keep_going;
    };
    cb.on_done = [this](const http_response_summary& s) {
      std::lock_guard<std::mutex> guard{mtx};
      ++done_calls;
      summary = s;
      cv.notify_all();
    };
    return cb;
  }

  bool wait_done(std::chrono::milliseconds limit = 10s) {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, limit, [this] { return done_calls > 0; });
  }

  bool wait_chunks(int n, std::chrono::milliseconds limit = 10s) {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, limit, [&] { return chunks >= n; });
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(http_client_suite, fixture)

BOOST_AUTO_TEST_CASE(get_returns_status_headers_and_body) {
  auto res = client.fetch(get("/text"));
  BOOST_TEST(res.summary.ok(), res.summary.error);
  BOOST_TEST(res.summary.status == 200);
  BOOST_TEST(res.body == "plain text body\nsecond line\n");
  BOOST_TEST(res.summary.bytes == res.body.size());
  BOOST_TEST(res.summary.content_type == "text/plain; charset=utf-8");
  BOOST_TEST(res.summary.final_url == server.url("/text"));
  auto* ctype = find_header(res.headers, "content-TYPE");
  BOOST_REQUIRE(ctype != nullptr);
  BOOST_TEST(*ctype == "text/plain; charset=utf-8");
  BOOST_TEST(find_header(res.headers, "X-Nope") == nullptr);
  BOOST_TEST(res.summary.id != 0u);
  BOOST_TEST(!res.summary.cancelled);
  BOOST_TEST(!res.summary.capped);
  BOOST_TEST(!res.summary.timed_out);
}

BOOST_AUTO_TEST_CASE(post_sends_body_headers_and_user_agent) {
  auto req = get("/echo");
  req.method = "POST";
  req.body = R"({"question": 42})";
  req.headers.emplace_back("Content-Type", "application/json");
  req.headers.emplace_back("X-Custom", "custom value");
  req.user_agent = "mibyan-test/1";
  auto res = client.fetch(req);
  BOOST_TEST_REQUIRE(res.summary.ok(), res.summary.error);
  auto echo = json::parse(res.body);
  BOOST_REQUIRE(echo);
  BOOST_TEST(echo.v->get_string("method") == "POST");
  BOOST_TEST(echo.v->get_string("body") == R"({"question": 42})");
  auto* headers = echo.v->find("headers");
  BOOST_REQUIRE(headers != nullptr);
  BOOST_TEST(headers->get_string("X-Custom") == "custom value");
  BOOST_TEST(headers->get_string("Content-Type") == "application/json");
  BOOST_TEST(headers->get_string("User-Agent") == "mibyan-test/1");
  BOOST_TEST(headers->find("Expect") == nullptr);
}

BOOST_AUTO_TEST_CASE(other_methods_and_head) {
  auto put = get("/echo");
  put.method = "PUT";
  put.body = "data";
  auto res = client.fetch(put);
  BOOST_TEST_REQUIRE(res.summary.ok(), res.summary.error);
  auto echo = json::parse(res.body);
  BOOST_REQUIRE(echo);
  BOOST_TEST(echo.v->get_string("method") == "PUT");
  BOOST_TEST(echo.v->get_string("body") == "data");
  auto head = get("/text");
  head.method = "HEAD";
  res = client.fetch(head);
  BOOST_TEST(res.summary.ok(), res.summary.error);
  BOOST_TEST(res.summary.status == 200);
  BOOST_TEST(res.body.empty());
  // A large POST body must not stall on "Expect: 100-continue".
  auto big = get("/echo");
  big.method = "POST";
  big.body.assign(2 * 1024 * 1024, 'b');
  auto start = clock_type::now();
  res = client.fetch(big);
  BOOST_TEST_REQUIRE(res.summary.ok(), res.summary.error);
  BOOST_TEST(elapsed_ms(start) < 900);
  echo = json::parse(res.body);
  BOOST_REQUIRE(echo);
  BOOST_TEST(echo.v->get_string("body").size() == big.body.size());
}

BOOST_AUTO_TEST_CASE(gzip_bodies_are_decoded) {
  auto res = client.fetch(get("/gzip"));
  BOOST_TEST_REQUIRE(res.summary.ok(), res.summary.error);
  BOOST_TEST(res.summary.status == 200);
  BOOST_TEST(res.body.find("GZIP-CONTENT") != std::string::npos);
  BOOST_TEST(res.body.find("</html>") != std::string::npos);
  auto* enc = find_header(res.headers, "Content-Encoding");
  BOOST_REQUIRE(enc != nullptr);
  BOOST_TEST(*enc == "gzip");
  auto plain = get("/gzip");
  plain.accept_compressed = false;
  res = client.fetch(plain);
  BOOST_TEST(res.summary.status == 406);
}

BOOST_AUTO_TEST_CASE(redirects_are_followed_and_limited) {
  recorder rec;
  client.submit(get("/redirect-chain/3"), rec.callbacks());
  BOOST_REQUIRE(rec.wait_done());
  BOOST_TEST(rec.summary.ok(), rec.summary.error);
  BOOST_TEST(rec.summary.status == 200);
  BOOST_TEST(rec.summary.redirects == 3);
  BOOST_TEST(rec.summary.final_url == server.url("/page"));
  BOOST_TEST(rec.header_calls == 1);  // redirects are not reported
  BOOST_TEST(rec.header_status == 200);
  BOOST_TEST(!rec.data_before_headers);
  BOOST_TEST(rec.body.find("Main Heading") != std::string::npos);

  auto no_follow = get("/redirect-chain/3");
  no_follow.follow_redirects = false;
  auto res = client.fetch(no_follow);
  BOOST_TEST(res.summary.ok(), res.summary.error);
  BOOST_TEST(res.summary.status == 302);
  BOOST_TEST(*find_header(res.headers, "location") == "/redirect-chain/2");

  auto limited = get("/redirect-chain/3");
  limited.max_redirects = 1;
  res = client.fetch(limited);
  BOOST_TEST(!res.summary.ok());
  BOOST_TEST(res.summary.error.find("redirect") != std::string::npos,
             res.summary.error);
}

BOOST_AUTO_TEST_CASE(redirect_to_other_schemes_is_refused) {
  auto req = get("/redirect?to=file:///etc/passwd");
  auto res = client.fetch(req);
  BOOST_TEST(!res.summary.ok());
  BOOST_TEST(res.body.find("root:") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(max_body_bytes_caps_the_transfer) {
  auto req = get("/huge?bytes=5000000");
  req.max_body_bytes = 1000;
  auto res = client.fetch(req);
  BOOST_TEST(!res.summary.ok());
  BOOST_TEST(res.summary.capped);
  BOOST_TEST(res.body.size() == 1000u);
  BOOST_TEST(res.summary.bytes == 1000u);
  BOOST_TEST(res.summary.status == 200);
  BOOST_TEST(res.summary.error == "response body exceeds 1000 bytes");
  // Exactly at the cap is fine.
  auto exact = get("/huge?bytes=4096");
  exact.max_body_bytes = 4096;
  res = client.fetch(exact);
  BOOST_TEST(res.summary.ok(), res.summary.error);
  BOOST_TEST(res.body.size() == 4096u);
}

BOOST_AUTO_TEST_CASE(total_timeout_stops_a_slow_response) {
  auto req = get("/slow?ms=5000");
  req.total_timeout = 300ms;
  auto start = clock_type::now();
  auto res = client.fetch(req);
  auto ms = elapsed_ms(start);
  BOOST_TEST(!res.summary.ok());
  BOOST_TEST(res.summary.timed_out);
  BOOST_TEST(ms >= 250);
  BOOST_TEST(ms < 2000);
}

BOOST_AUTO_TEST_CASE(idle_timeout_stops_a_stalled_stream) {
  auto req = get("/drip?chunks=5&ms=1500");
  req.idle_timeout = 300ms;
  auto start = clock_type::now();
  auto res = client.fetch(req);
  auto ms = elapsed_ms(start);
  BOOST_TEST(!res.summary.ok());
  BOOST_TEST(res.summary.timed_out);
  BOOST_TEST(res.summary.error == "no data received for 300 ms");
  BOOST_TEST(res.body == "chunk 0\n");
  BOOST_TEST(ms < 1400);
  // A stream that keeps delivering is not idle.
  auto lively = get("/drip?chunks=6&ms=100");
  lively.idle_timeout = 400ms;
  res = client.fetch(lively);
  BOOST_TEST(res.summary.ok(), res.summary.error);
  BOOST_TEST(res.body.find("chunk 5") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(streaming_delivers_chunks_in_order) {
  recorder rec;
  client.submit(get("/sse?events=5&ms=20"), rec.callbacks());
  BOOST_REQUIRE(rec.wait_done());
  BOOST_TEST(rec.summary.ok(), rec.summary.error);
  BOOST_TEST(rec.header_calls == 1);
  BOOST_TEST(rec.header_status == 200);
  BOOST_TEST(rec.chunks >= 2);
  BOOST_TEST(rec.body.find("data: {\"i\": 0}") < rec.body.find("data: [DONE]"));
  BOOST_TEST(rec.summary.content_type == "text/event-stream");
}

BOOST_AUTO_TEST_CASE(receiver_can_abort) {
  recorder rec;
  client.submit(get("/drip?chunks=50&ms=20"), rec.callbacks(false));
  BOOST_REQUIRE(rec.wait_done());
  BOOST_TEST(rec.summary.error == "aborted by receiver");
  BOOST_TEST(rec.chunks == 1);
}

BOOST_AUTO_TEST_CASE(cancel_mid_transfer) {
  recorder rec;
  auto start = clock_type::now();
  auto id = client.submit(get("/drip?chunks=100&ms=50"), rec.callbacks());
  BOOST_REQUIRE(rec.wait_chunks(1));
  client.cancel(id);
  BOOST_REQUIRE(rec.wait_done(2s));
  BOOST_TEST(rec.summary.cancelled);
  BOOST_TEST(rec.summary.error == "cancelled");
  BOOST_TEST(rec.done_calls == 1);
  BOOST_TEST(elapsed_ms(start) < 2000);
  // Cancelling again, or an unknown id, is harmless.
  client.cancel(id);
  client.cancel(999999);
  std::this_thread::sleep_for(50ms);
  BOOST_TEST(rec.done_calls == 1);
  BOOST_TEST(client.active() == 0u);
}

BOOST_AUTO_TEST_CASE(fetch_honours_the_cancel_flag) {
  std::atomic<bool> flag{false};
  // Cancelled while the server holds the request.
  std::thread canceller{[&] {
    test::wait_until([&] {
      return server.requests().find("/slow") != std::string::npos;
    });
    flag = true;
  }};
  auto start = clock_type::now();
  auto res = client.fetch(get("/slow?ms=5000"), &flag);
  canceller.join();
  BOOST_TEST(res.summary.cancelled);
  BOOST_TEST(elapsed_ms(start) < 1500);
}

BOOST_AUTO_TEST_CASE(fetch_all_honours_the_deadline) {
  std::vector<http_request> reqs{get("/slow?ms=5000"), get("/text")};
  auto start = clock_type::now();
  auto results = client.fetch_all(std::move(reqs), nullptr,
                                  clock_type::now() + 300ms);
  BOOST_TEST(elapsed_ms(start) < 1500);
  BOOST_REQUIRE(results.size() == 2u);
  BOOST_TEST(results[0].summary.cancelled);
  BOOST_TEST(results[1].summary.ok(), results[1].summary.error);
  BOOST_TEST(results[1].body.find("plain text") == 0u);
}

BOOST_AUTO_TEST_CASE(concurrent_requests_overlap) {
  constexpr int n = 64;
  // One request alone, for comparison.
  auto start = clock_type::now();
  auto single = client.fetch(get("/slow?ms=400"));
  auto one_ms = elapsed_ms(start);
  BOOST_TEST_REQUIRE(single.summary.ok(), single.summary.error);
  std::vector<http_request> reqs;
  for (int i = 0; i < n; ++i)
    reqs.push_back(get("/slow?ms=400"));
  start = clock_type::now();
  auto results = client.fetch_all(std::move(reqs));
  auto all_ms = elapsed_ms(start);
  int ok = 0;
  for (auto& r : results)
    if (r.summary.ok() && r.body == "slow done")
      ++ok;
  BOOST_TEST(ok == n);
  BOOST_TEST_MESSAGE("one request: " << one_ms << " ms, " << n
                                     << " concurrent: " << all_ms << " ms");
  BOOST_TEST(all_ms < one_ms + 600);
  BOOST_TEST(all_ms < 4 * 400);
}

BOOST_AUTO_TEST_CASE(connect_check_refuses_before_connecting) {
  std::mutex mtx;
  std::vector<std::pair<std::string, std::string>> seen;
  auto req = get("/text");
  req.connect_check = [&](const std::string& url, const std::string& ip) {
    std::lock_guard<std::mutex> guard{mtx};
    seen.emplace_back(url, ip);
    return status::failure(status_code::permission_denied,
                           "no loopback please");
  };
  auto res = client.fetch(req);
  BOOST_TEST(!res.summary.ok());
  BOOST_TEST(res.summary.blocked);
  BOOST_TEST(res.summary.error == "no loopback please");
  BOOST_TEST(res.summary.status == 0);
  {
    std::lock_guard<std::mutex> guard{mtx};
    BOOST_REQUIRE(!seen.empty());
    BOOST_TEST(seen.front().second == "127.0.0.1");
    BOOST_TEST(seen.front().first == server.url("/text"));
  }
  // The server never saw the request.
  BOOST_TEST(server.requests() == "[]");
}

BOOST_AUTO_TEST_CASE(connect_check_applies_to_redirect_hops) {
  // localhost -> 127.0.0.1 is a new host, hence a new connection that
  // goes through the check again.
  auto target = server.url("/page");
  http_request req;
  req.url = "http://localhost:" + std::to_string(server.port())
            + "/redirect?to=" + target;
  std::atomic<int> calls{0};
  req.connect_check = [&](const std::string& url, const std::string&) {
    ++calls;
    if (url.find("/page") != std::string::npos)
      return status::failure(status_code::permission_denied,
                             "second hop refused");
    return status{};
  };
  auto res = client.fetch(req);
  BOOST_TEST(calls.load() >= 2);
  BOOST_TEST(res.summary.blocked);
  BOOST_TEST(res.summary.error == "second hop refused");
  BOOST_TEST(res.body.find("Main Heading") == std::string::npos);
  // Allowed: the same redirect goes through.
  req.connect_check = [](const std::string&, const std::string&) {
    return status{};
  };
  res = client.fetch(req);
  BOOST_TEST(res.summary.ok(), res.summary.error);
  BOOST_TEST(res.body.find("Main Heading") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_urls_and_refused_connections_fail_cleanly) {
  for (auto url : {"ftp://127.0.0.1/x", "not a url", "", "http://",
                   "file:///etc/passwd"}) {
    http_request req;
    req.url = url;
    auto res = client.fetch(req);
    BOOST_TEST(!res.summary.ok(), url);
    BOOST_TEST(res.body.empty(), url);
  }
  // A port nobody listens on: bind one without listening.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  BOOST_REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  BOOST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                == 0);
  http_request req;
  req.url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/";
  req.connect_timeout = 2000ms;
  auto res = client.fetch(req);
  ::close(fd);
  BOOST_TEST(!res.summary.ok());
  BOOST_TEST(res.summary.status == 0);
  BOOST_TEST(!res.summary.blocked);
}

BOOST_AUTO_TEST_CASE(http_errors_are_responses_not_failures) {
  auto res = client.fetch(get("/status/503"));
  BOOST_TEST(res.summary.ok(), res.summary.error);
  BOOST_TEST(res.summary.status == 503);
  BOOST_TEST(res.body == "status 503 body");
  res = client.fetch(get("/no/such/route"));
  BOOST_TEST(res.summary.status == 404);
}

BOOST_AUTO_TEST_CASE(callbacks_may_submit_more_work) {
  std::promise<std::string> second;
  http_callbacks cb;
  cb.on_done = [&](const http_response_summary& s) {
    BOOST_CHECK(s.ok());
    http_request req;
    req.url = server.url("/json");
    http_callbacks inner;
    auto body = std::make_shared<std::string>();
    inner.on_data = [body](std::string_view chunk) {
      body->append(chunk.data(), chunk.size());
      return true;
    };
    inner.on_done = [&second, body](const http_response_summary&) {
      second.set_value(*body);
    };
    client.submit(std::move(req), std::move(inner));
  };
  client.submit(get("/text"), std::move(cb));
  auto fut = second.get_future();
  BOOST_REQUIRE(fut.wait_for(5s) == std::future_status::ready);
  BOOST_TEST(fut.get().find("\"hello\"") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(destructor_finishes_requests_in_flight) {
  test::http_server server;
  recorder recs[5];
  auto start = clock_type::now();
  {
    http_client client;
    for (auto& rec : recs) {
      http_request req;
      req.url = server.url("/slow?ms=10000");
      client.submit(std::move(req), rec.callbacks());
    }
    std::this_thread::sleep_for(100ms);
  }
  BOOST_TEST(elapsed_ms(start) < 2000);
  for (auto& rec : recs) {
    BOOST_TEST(rec.done_calls == 1);
    BOOST_TEST(rec.summary.error == "shutdown");
  }
}

BOOST_AUTO_TEST_CASE(destructor_right_after_submit) {
  test::http_server server;
  recorder rec;
  {
    http_client client;
    http_request req;
    req.url = server.url("/slow?ms=10000");
    client.submit(std::move(req), rec.callbacks());
  }
  BOOST_TEST(rec.done_calls == 1);
  BOOST_TEST(rec.summary.error == "shutdown");
}
