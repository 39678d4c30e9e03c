#define BOOST_TEST_MODULE cluster_hardening
#include <boost/test/unit_test.hpp>

// What a peer without the cluster key can do to a node (docs/cluster.md,
// "Handshake" and "Frame guard"), and a cut member link (redial):
//   * the bytes a key-holding client sent, replayed on a new connection
//     after it exited, run nothing;
//   * a frame header announcing a huge payload closes its connection before
//     the node allocates for it;
//   * a second connection naming a node id that a live one claimed, and a
//     routed message in another node's name, close their connections;
//   * a gateway–worker link cut at the socket heals by itself.
// Real `mibyan node` processes and raw sockets on loopback; waits are
// bounded polls, nothing asserts a time.

#include <fstream>
#include <random>

#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"
#include "caf/message.hpp"
#include "caf/io/basp/header.hpp"
#include "caf/io/basp/message_type.hpp"
#include "caf/node_id.hpp"

#include "tests/support/cluster_fixture.hpp"
#include "tests/support/loopback.hpp"
#include "tests/support/tcp_relay.hpp"

using namespace mibyan;
using namespace mibyan::test;

namespace {

namespace basp = caf::io::basp;

// Reads (and drops) what the node sends until it closes the connection;
// false when it is still open after `limit`.
bool closed_by_node(int fd, seconds limit = seconds{20}) {
  char buf[4096];
  auto deadline = steady_clock::now() + limit;
  while (steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    if (::recv(fd, buf, sizeof buf, 0) <= 0)
      return true;
  }
  return false;
}

std::string frame(basp::message_type op, uint32_t payload_len,
                  caf::actor_id dest = caf::actor_id{0}) {
  basp::header hdr{op, 0, payload_len, 0, caf::actor_id{0}, dest};
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  BOOST_REQUIRE(!sink(hdr));
  BOOST_REQUIRE_EQUAL(buf.size(), basp::header_size);
  return {buf.begin(), buf.end()};
}

caf::node_id made_up_node() {
  static std::mt19937 rng{std::random_device{}()};
  caf::node_id::default_data::host_id_type host;
  for (auto& b : host)
    b = static_cast<uint8_t>(rng());
  return caf::make_node_id(static_cast<uint32_t>(rng() % 100000 + 2), host);
}

template <class... Ts>
std::string payload(const Ts&... xs) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  BOOST_REQUIRE(!sink(const_cast<Ts&>(xs)...));
  return {buf.begin(), buf.end()};
}

// Reads the node's server handshake on a fresh connection: its node id
// and the id of the actor published on the port.
std::pair<caf::node_id, caf::actor_id> server_handshake(int fd) {
  auto read_exactly = [fd](size_t n) {
    std::string out;
    auto deadline = steady_clock::now() + seconds{20};
    while (out.size() < n && steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0)
        continue;
      char buf[4096];
      auto got = ::recv(fd, buf, std::min(sizeof buf, n - out.size()), 0);
      if (got <= 0)
        break;
      out.append(buf, static_cast<size_t>(got));
    }
    BOOST_REQUIRE_EQUAL(out.size(), n);
    return out;
  };
  auto head = read_exactly(basp::header_size);
  basp::header hdr;
  caf::binary_deserializer hd{nullptr, head.data(), head.size()};
  BOOST_REQUIRE(!hd(hdr));
  BOOST_REQUIRE(hdr.operation == basp::message_type::server_handshake);
  auto body = read_exactly(hdr.payload_len);
  caf::binary_deserializer bd{nullptr, body.data(), body.size()};
  caf::node_id node;
  std::vector<std::string> app_ids;
  caf::actor_id aid = 0;
  BOOST_REQUIRE(!bd(node, app_ids, aid));
  return {node, aid};
}

std::string client_handshake(const caf::node_id& node) {
  auto body = payload(node);
  return frame(basp::message_type::client_handshake,
               static_cast<uint32_t>(body.size()))
         + body;
}

int64_t vm_hwm_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stoll(line.substr(6));
  return -1;
}

size_t lines_of(const std::string& path) {
  auto text = slurp(path);
  size_t n = 0;
  for (char c : text)
    n += c == '\n' ? 1 : 0;
  return n;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(cluster_hardening, cluster_fixture)

BOOST_AUTO_TEST_CASE(a_replayed_client_connection_runs_nothing) {
  auto gw = start({"--role", "all"});
  tcp_relay relay{port_of(gw->address)};
  auto marker = dir / "marker";
  json::value args;
  args["command"] = "echo ran >> " + marker;
  auto res = run_mibyan({"tool", "--connect", relay.address(), "--session",
                         "replay", "terminal", args.dump()},
                        cli_env());
  BOOST_REQUIRE_MESSAGE(res.exit_code == 0, res.out << res.err);
  BOOST_REQUIRE_EQUAL(lines_of(marker), 1u);
  // The client exited; its connection ends.
  for (int i = 0; i < 200 && !relay.ended(0); ++i)
    std::this_thread::sleep_for(milliseconds{50});
  BOOST_REQUIRE(relay.ended(0));
  auto captured = relay.client_bytes(0);
  BOOST_TEST_MESSAGE("replaying " << captured.size() << " bytes");
  // The same bytes on a new connection: CAF's handshake naming the exited
  // client's node id, its hello, its (stale) proof and its tool call.
  int fd = dial_loopback(port_of(gw->address));
  send_all(fd, captured);
  // The replayed call would append a second line; a legitimate call made
  // afterwards through the same node shows the node has handled what came
  // before it, and the poll gives the replay's call time to land.
  auto c = connect(gw->address);
  auto r = call(*c, "after-replay", "terminal", R"({"command":"echo ok"})");
  BOOST_CHECK(contains(r.get_string("output", ""), "ok"));
  for (int i = 0; i < 60 && lines_of(marker) < 2; ++i)
    std::this_thread::sleep_for(milliseconds{100});
  ::close(fd);
  BOOST_CHECK_MESSAGE(lines_of(marker) == 1,
                      "the replayed connection ran the command again");
}

BOOST_AUTO_TEST_CASE(an_oversized_frame_closes_its_connection_first) {
  auto gw = start({"--role", "all"});
  auto before = vm_hwm_kb(gw->pid);
  int fd = dial_loopback(port_of(gw->address));
  // A client handshake announcing 1 GiB (the cap is 64 MiB), then 8 MiB.
  send_all(fd, frame(basp::message_type::client_handshake, 1u << 30));
  send_all(fd, std::string(8u << 20, '\0'));
  BOOST_CHECK_MESSAGE(closed_by_node(fd), "the node kept the connection");
  ::close(fd);
  auto after = vm_hwm_kb(gw->pid);
  BOOST_TEST_MESSAGE("gateway VmHWM " << before << " kB -> " << after
                                      << " kB");
  BOOST_CHECK_LT(after, before + 256 * 1024);
  BOOST_CHECK(contains(gw->err(), "bytes (the cap is 67108864)"));
  // The node still serves.
  auto c = connect(gw->address);
  auto r = call(*c, "after-big-frame", "terminal",
                R"({"command":"echo served"})");
  BOOST_CHECK(contains(r.get_string("output", ""), "served"));
}

BOOST_AUTO_TEST_CASE(a_node_id_speaks_through_one_connection) {
  auto gw = start({"--role", "all"});
  auto port = port_of(gw->address);
  auto x = made_up_node();
  int first = dial_loopback(port);
  auto [gw_node, front] = server_handshake(first);
  send_all(first, client_handshake(x));
  // A second connection naming the same node while the first is open.
  int second = dial_loopback(port);
  send_all(second, client_handshake(x));
  BOOST_CHECK_MESSAGE(closed_by_node(second),
                      "a second connection for one node id stayed open");
  // A well-formed routed message on the first connection, to the
  // published actor, in another node's name (CAF would make a proxy of
  // that node on the word of this connection).
  std::vector<int32_t> stack; // encodes as an empty forwarding stack
  caf::message empty;
  auto body = payload(made_up_node(), gw_node, stack, empty);
  send_all(first, frame(basp::message_type::routed_message,
                        static_cast<uint32_t>(body.size()), front)
                    + body);
  BOOST_CHECK_MESSAGE(closed_by_node(first),
                      "a routed message in another node's name was taken");
  ::close(first);
  ::close(second);
  BOOST_CHECK(contains(gw->err(), "which another connection speaks for"));
  BOOST_CHECK(contains(gw->err(), "a message in the name of node"));
  auto c = connect(gw->address);
  auto r = call(*c, "after", "terminal", R"({"command":"echo served"})");
  BOOST_CHECK(contains(r.get_string("output", ""), "served"));
}

BOOST_AUTO_TEST_CASE(a_cut_member_link_heals) {
  auto gw = start({"--role", "gateway"});
  tcp_relay relay{port_of(gw->address)};
  // The worker joins through the relay, so its link to the gateway can be
  // cut at the sockets.
  auto w = start({"--role", "worker", "--join", relay.address()});
  auto c = connect(gw->address);
  wait_members(*c, 2);
  auto r = call(*c, "before-cut", "terminal", R"({"command":"echo one"})");
  BOOST_REQUIRE(contains(r.get_string("output", ""), "one"));
  relay.cut();
  // Both ends see the link drop ...
  std::string seen;
  for (int i = 0; i < 200 && seen != "lost"; ++i) {
    seen = state_of(*c, w->id);
    if (seen != "lost")
      std::this_thread::sleep_for(milliseconds{20});
  }
  BOOST_TEST_MESSAGE("worker state after the cut: " << seen);
  // ... and the member is up again without anyone restarting anything.
  wait_members(*c, 2);
  r = call(*c, "after-cut", "terminal", R"({"command":"echo two"})");
  BOOST_CHECK_MESSAGE(contains(r.get_string("output", ""), "two"), r.dump());
  BOOST_CHECK_EQUAL(r.get_string("node", ""), w->id);
  BOOST_CHECK(contains(gw->err(), "lost") || contains(w->err(), "lost"));
}

BOOST_AUTO_TEST_SUITE_END()
