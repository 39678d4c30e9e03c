// Streams of forwarded turns (docs/cluster.md, "Streaming of forwarded
// turns"; cluster/turns.cpp): two `serve --join` gateways on one store, the
// session's turn running at h1 (the lease holder) while a streamed request
// for it arrives at h2, which forwards it and relays the holder's deltas.
//   - the HTTP client leaves h2 mid-stream: nothing is cancelled, the
//     holder's turn completes and is stored;
//   - h2 itself is killed (SIGKILL) mid-stream: the holder stops the
//     relay, the turn completes and is stored, the holder keeps serving
//     and drains with no call left running (a relay still waiting for the
//     dead gateway's acknowledgements would hold the forwarded call);
//   - h2 cannot keep up (stopped with SIGSTOP) while the holder streams
//     more than 8 MiB: the holder stops the stream with a "stream_stopped"
//     event the client sees, and the answer still comes whole at the end.
// The provider holds each scripted reply behind a gate the test opens, so
// no step races a timer.
#define BOOST_TEST_MODULE gateway_streams_test
#include <boost/test/unit_test.hpp>

#include <csignal>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/loopback.hpp"
#include "tests/support/socket_read.hpp"

using namespace mibyan;
using namespace mibyan::test;

namespace {

// One SSE chunk of the provider's stream with `text` as content.
std::string sse_chunk(const std::string& text) {
  json::value delta;
  delta["content"] = text;
  json::value choice;
  choice["index"] = 0;
  choice["delta"] = std::move(delta);
  choice["finish_reason"] = json::value{};
  json::value chunk;
  chunk["id"] = "p1";
  chunk["object"] = "chat.completion.chunk";
  chunk["model"] = "m";
  chunk["choices"] = json::value::make_array();
  chunk["choices"].push_back(std::move(choice));
  return "data: " + chunk.dump() + "\n\n";
}

std::string sse_stop() {
  json::value stop;
  stop["index"] = 0;
  stop["delta"] = json::value::make_object();
  stop["finish_reason"] = "stop";
  json::value last;
  last["id"] = "p1";
  last["object"] = "chat.completion.chunk";
  last["model"] = "m";
  last["choices"] = json::value::make_array();
  last["choices"].push_back(std::move(stop));
  return "data: " + last.dump() + "\n\n";
}

// A streamed reply held behind `gate`: "BEGIN", `repeat` x `piece`, "END".
std::string gated_stream(const std::string& gate, const std::string& piece,
                         int repeat, int chunk_ms) {
  json::value spec;
  spec["path"] = "/v1/chat/completions";
  spec["status"] = 200;
  spec["hold"] = gate;
  spec["headers"]["Content-Type"] = "text/event-stream";
  spec["repeat_chunk"] = sse_chunk("BEGIN") + sse_chunk(piece);
  spec["repeat_times"] = 1;
  auto rest = json::value::make_array();
  for (int i = 1; i < repeat; ++i)
    rest.push_back(sse_chunk(piece));
  rest.push_back(sse_chunk("END"));
  rest.push_back(sse_stop());
  rest.push_back("data: [DONE]\n\n");
  spec["chunks"] = std::move(rest);
  spec["chunk_ms"] = chunk_ms;
  return spec.dump();
}

uint16_t port_of(const std::string& address) {
  return static_cast<uint16_t>(
    std::stoi(address.substr(address.rfind(':') + 1)));
}

struct streams : gateways {
  std::unique_ptr<node_process> seed, h1, h2;

  // The cluster, and the session's first turn running at h1 (held at the
  // provider behind gate "first"), so h1 holds the session's lease.
  void start_cluster(const std::string& sid,
                     std::future<std::string>& first) {
    provider.script(R"({"path":"/v1/chat/completions","status":200,)"
                    R"("hold":"first","body":)"
                    + json::value{completion("first answer")}.dump() + "}");
    seed = start_gateway("");
    h1 = start_http_gateway(seed->address);
    h2 = start_http_gateway(seed->address);
    {
      auto probe = connect(seed->address);
      wait_members(*probe, 3);
    }
    first = std::async(std::launch::async, [this, sid] {
      return http_chat(h1->address, sid, "first prompt");
    });
    for (int i = 0; i < 1500 && chat_requests().empty(); ++i)
      std::this_thread::sleep_for(milliseconds{20});
    BOOST_REQUIRE_MESSAGE(!chat_requests().empty(),
                          "the first turn never reached the model");
  }

  // Sends a streamed chat request of `sid` to h2; returns the socket.
  int open_stream(const std::string& sid, const std::string& prompt) {
    auto text = chat_body(prompt, true);
    int fd = dial_loopback(port_of(h2->address));
    send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                 "Connection: close\r\nContent-Type: application/json\r\n"
                 "X-Mibyan-Session: " + sid + "\r\nContent-Length: "
                 + std::to_string(text.size()) + "\r\n\r\n" + text);
    return fd;
  }

  // Waits (bounded) until `n`'s log contains `text`.
  void wait_log(node_process& n, const std::string& text) {
    for (int i = 0; i < 3000 && !contains(n.err(), text); ++i)
      std::this_thread::sleep_for(milliseconds{20});
    BOOST_REQUIRE_MESSAGE(contains(n.err(), text),
                          "no '" << text << "' in:\n" << n.err());
  }

  void release(const std::string& gate) {
    provider.control("POST", "/__release", R"({"gate":")" + gate + "\"}");
  }

  // The session's history once its last message is the streamed answer
  // (bounded poll of the store).
  std::vector<stored_message> wait_answer(const std::string& sid) {
    std::vector<stored_message> h;
    for (int i = 0; i < 3000; ++i) {
      h = history(sid);
      if (h.size() >= 4 && h.back().message.role == "assistant"
          && contains(h.back().message.content, "END"))
        return h;
      std::this_thread::sleep_for(milliseconds{20});
    }
    BOOST_FAIL("the forwarded turn's answer was never stored");
    return h;
  }

  // A plain turn of `sid` through `at` still works.
  void check_serves(node_process& at, const std::string& sid) {
    provider.script_chat(completion("still serving"));
    auto r = http_chat(at.address, sid, "are you there?");
    BOOST_CHECK_MESSAGE(contains(r, "still serving"), r << at.err());
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(a_client_leaving_the_forwarder_cancels_nothing,
                        streams) {
  std::future<std::string> first;
  start_cluster("left", first);
  provider.script(gated_stream("second", "part ", 20, 50));
  int fd = open_stream("left", "stream it");
  wait_log(*h2, "forwarded to its lease holder");
  release("first");
  release("second");
  std::string got;
  BOOST_REQUIRE_MESSAGE(read_until(fd, got, "BEGIN", 60), got);
  ::close(fd); // the client leaves mid-stream
  auto h = wait_answer("left");
  BOOST_CHECK_EQUAL(h[2].message.content, "stream it");
  BOOST_CHECK(contains(h[3].message.content, "BEGINpart part "));
  BOOST_CHECK(contains(h[3].message.content, "END"));
  BOOST_CHECK(contains(first.get(), "first answer"));
  check_serves(*h2, "left");
  for (auto* g : {h1.get(), h2.get(), seed.get()})
    BOOST_CHECK_EQUAL(g->stop(), 0);
}

BOOST_FIXTURE_TEST_CASE(a_forwarder_killed_mid_stream_leaves_the_turn_whole,
                        streams) {
  std::future<std::string> first;
  start_cluster("killed", first);
  // More events than the relay's window, so a relay that kept waiting
  // for the dead gateway's acknowledgements would never finish.
  provider.script(gated_stream("second", "part ", 200, 5));
  int fd = open_stream("killed", "stream it");
  wait_log(*h2, "forwarded to its lease holder");
  release("first");
  release("second");
  std::string got;
  BOOST_REQUIRE_MESSAGE(read_until(fd, got, "BEGIN", 60), got);
  h2->stop(SIGKILL);
  ::close(fd);
  auto h = wait_answer("killed");
  BOOST_CHECK(contains(h[3].message.content, "END"));
  BOOST_CHECK_EQUAL(h.size(), 4u);
  BOOST_CHECK(contains(first.get(), "first answer"));
  // The holder goes on serving the session, and drains and stops at once
  // (a forwarded turn it could not finish would hold the drain).
  check_serves(*h1, "killed");
  BOOST_CHECK_EQUAL(h1->stop(), 0);
  auto log = h1->err();
  BOOST_CHECK_MESSAGE(contains(log, "draining (0 call(s) running)"), log);
  BOOST_CHECK_MESSAGE(!contains(log, "drain deadline"), log);
  BOOST_CHECK_EQUAL(seed->stop(), 0);
}

BOOST_FIXTURE_TEST_CASE(a_stream_past_8_mib_stops_and_the_client_is_told,
                        streams) {
  // h2 is stopped for a moment below: the members must not give it up.
  auto cfg = config();
  auto at_timeout = cfg.find("failure_timeout_ms: 2000");
  BOOST_REQUIRE(at_timeout != std::string::npos);
  cfg.replace(at_timeout, 24, "failure_timeout_ms: 60000");
  dir.write("shared/config.yaml", cfg);
  std::future<std::string> first;
  start_cluster("big", first);
  // 360 deltas of 32 KiB (11.25 MiB): with h2 stopped, the holder's relay
  // fills its window of 64 events and then more than 8 MiB waits.
  const std::string piece(32 * 1024, 'x');
  provider.script(gated_stream("second", piece, 360, 0));
  int fd = open_stream("big", "stream a lot");
  wait_log(*h2, "forwarded to its lease holder");
  release("first");
  BOOST_CHECK(contains(first.get(), "first answer"));
  // h2 stops reading its cluster link; then the stream starts.
  BOOST_REQUIRE_EQUAL(::kill(h2->pid, SIGSTOP), 0);
  release("second");
  wait_log(*h1, "of a forwarded turn stopped");
  BOOST_REQUIRE_EQUAL(::kill(h2->pid, SIGCONT), 0);
  std::string got;
  BOOST_REQUIRE_MESSAGE(read_until(fd, got, "data: [DONE]", 120),
                        got.substr(0, 2000));
  ::close(fd);
  // The client was told, and after that the whole answer came in one
  // content chunk.
  auto at = got.find("\"type\":\"stream_stopped\"");
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, got.substr(0, 2000));
  auto tail = got.substr(at);
  BOOST_CHECK(contains(tail, "MiB waited"));
  auto whole = "BEGIN" + piece;
  BOOST_CHECK(contains(tail, whole));
  BOOST_CHECK(contains(tail, piece + "END\""));
  BOOST_CHECK(contains(tail, "\"finish_reason\":\"stop\""));
  // And the store has it whole.
  auto h = wait_answer("big");
  BOOST_CHECK_EQUAL(h[3].message.content.size(),
                    5 + 360 * piece.size() + 3);
  for (auto* g : {h1.get(), h2.get(), seed.get()})
    BOOST_CHECK_EQUAL(g->stop(), 0);
}
