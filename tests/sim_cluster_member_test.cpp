// The cluster member actor (cluster/member.cpp) in simulated time
// (tests/support/sim_fixture.hpp): a member whose heartbeats stop turns
// suspect after half of cluster.failure_timeout_ms and lost after it, at
// the first heartbeat tick past it; heartbeats keep it up; a late
// heartbeat (from a suspect or a lost member) brings it back; heartbeats
// of strangers change nothing.
#define BOOST_TEST_MODULE sim_cluster_member
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/kernel_registry.hpp"
#include "actors/services.hpp"
#include "base/blocking_pool.hpp"
#include "cluster/internal.hpp"
#include "kernels/process_launcher.hpp"

#include "tests/support/sim_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

const std::string cluster_key(32, 'k');
const std::string digest = "sim-digest";

// Redials of a lost member fail at once: nothing listens anywhere.
caf::behavior refusing_middleman(caf::event_based_actor*) {
  return {
    [](caf::connect_atom, std::string&, uint16_t) -> caf::result<caf::message> {
      return caf::make_error(caf::sec::cannot_connect_to_node);
    },
  };
}

// Member B: joins A with the handshake, then sends a heartbeat whenever
// the test sends it (tick_atom, state); A's own heartbeats are ignored.
struct peer_state {
  caf::actor member;
  bool joined = false;
  std::string refusal;
};

caf::behavior peer(caf::stateful_actor<peer_state>* self, caf::actor member) {
  self->state.member = member;
  self->set_default_handler(caf::drop);
  cluster_hello h;
  h.node_id = "B";
  h.role = "worker";
  h.address = "127.0.0.1:7002";
  h.version = cluster_protocol_version;
  h.digest = digest;
  h.nonce = std::string(24, 'n');
  self->request(member, caf::infinite, hello_atom_v, h)
    .then([self, member](cluster_challenge& c) {
      if (!c.refusal.empty()) {
        self->state.refusal = c.refusal;
        return;
      }
      cluster_proof p;
      p.node_id = "B";
      p.proof = client_proof(cluster_key, c.nonce, "B", c.node_id);
      self->request(member, caf::infinite, auth_atom_v, p)
        .then([self](cluster_welcome& w) {
          self->state.refusal = w.refusal;
          self->state.joined = w.refusal.empty();
        });
    });
  return {
    // A's heartbeats: B does not track A here.
    [](heartbeat_atom, member_info&) {},
    [self](tick_atom, std::string& state) {
      member_info m;
      m.node_id = "B";
      m.address = "127.0.0.1:7002";
      m.role = "worker";
      m.state = state;
      self->send(self->state.member, heartbeat_atom_v, m);
    },
  };
}

struct fixture : mibyan::test::sim_fixture {
  mibyan::test::temp_dir dir;
  kernel_registry_actor kernels;
  caf::actor member;
  caf::actor b;

  fixture() {
    auto s = std::make_shared<runtime_services>();
    s->cfg.home = dir.path();
    s->cfg.code_execution.prestart_kernels = 0;
    s->default_cwd = dir.path();
    s->pool = std::make_unique<blocking_pool>(1);
    s->clock = clock;
    kernels = spawn_kernel_registry(sys, s, "python3", "python3");
    cluster_settings cs;
    cs.node_id = "A";
    cs.role = "all";
    cs.address = "127.0.0.1:7001";
    cs.key = cluster_key;
    cs.digest = digest;
    cs.heartbeat_ms = 500;
    cs.failure_timeout_ms = 3000;
    cs.clock = clock;
    auto mm = sys.spawn(refusing_middleman);
    member = sys.spawn(cluster_member, cs, static_cast<runtime*>(nullptr),
                       tool_dispatcher_actor{}, kernels, mm);
    b = sys.spawn(peer, member);
    self->monitor(member);
    run_all();
  }

  ~fixture() {
    self->send(member, kill_atom_v);
    caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(kernels, caf::exit_reason::user_shutdown);
    run_all();
  }

  // B's state as A sees it ("" when A does not list it).
  std::string state_of(const std::string& id) {
    auto box = ask<std::vector<member_info>>(member, members_atom_v);
    if (!box->value) {
      self->receive(
        [&](caf::down_msg& d) {
          BOOST_TEST_MESSAGE("member down: " << sys.render(d.reason) << " at "
                             << clock->wall_ms() - 1'700'000'000'000 << " ms");
        },
        caf::after(std::chrono::seconds(0)) >> [] {});
    }
    BOOST_REQUIRE_MESSAGE(box->value,
                          (box->error ? sys.render(*box->error)
                                      : std::string{"no answer"}));
    for (auto& m : *box->value)
      if (m.node_id == id)
        return m.state;
    return "";
  }

  void heartbeat_from_b(const std::string& state = "up") {
    self->send(b, tick_atom_v, state);
    run_all();
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(silent_member_is_suspect_then_lost, fixture) {
  BOOST_REQUIRE_EQUAL(state_of("B"), "up");
  // Ticks every 500 ms. Silent 1.5 s or less: up.
  advance(milliseconds(1900));
  BOOST_CHECK_EQUAL(state_of("B"), "up");
  // The tick at 2 s: silent longer than half the failure timeout.
  advance(milliseconds(100));
  BOOST_CHECK_EQUAL(state_of("B"), "suspect");
  // Silent exactly 3 s at the tick at 3 s is not yet more than it.
  advance(milliseconds(1400));
  BOOST_CHECK_EQUAL(state_of("B"), "suspect");
  // The tick at 3.5 s declares it lost.
  advance(milliseconds(100));
  BOOST_CHECK_EQUAL(state_of("B"), "lost");
  // Redialling it fails (nothing listens); it stays lost.
  advance(seconds(30));
  BOOST_CHECK_EQUAL(state_of("B"), "lost");
}

BOOST_FIXTURE_TEST_CASE(heartbeats_keep_a_member_up, fixture) {
  for (int i = 0; i < 20; ++i) {
    advance(milliseconds(1000));
    heartbeat_from_b();
    BOOST_CHECK_EQUAL(state_of("B"), "up");
  }
  // Its failure timeout counts from the last heartbeat (at 20 s).
  advance(milliseconds(3400));
  BOOST_CHECK_EQUAL(state_of("B"), "suspect");
  advance(milliseconds(100));
  BOOST_CHECK_EQUAL(state_of("B"), "lost");
}

BOOST_FIXTURE_TEST_CASE(late_heartbeat_of_a_suspect_member, fixture) {
  advance(milliseconds(2900));
  BOOST_REQUIRE_EQUAL(state_of("B"), "suspect");
  heartbeat_from_b();
  BOOST_CHECK_EQUAL(state_of("B"), "up");
  // Lost at the first tick more than 3 s after that heartbeat (at 6 s),
  // not before.
  advance(milliseconds(3000));
  BOOST_CHECK_EQUAL(state_of("B"), "suspect");
  advance(milliseconds(100));
  BOOST_CHECK_EQUAL(state_of("B"), "lost");
}

BOOST_FIXTURE_TEST_CASE(late_heartbeat_of_a_lost_member_brings_it_back,
                        fixture) {
  advance(seconds(4));
  BOOST_REQUIRE_EQUAL(state_of("B"), "lost");
  heartbeat_from_b();
  BOOST_CHECK_EQUAL(state_of("B"), "up");
  advance(milliseconds(3000));
  BOOST_CHECK_EQUAL(state_of("B"), "suspect");
  advance(milliseconds(500));
  BOOST_CHECK_EQUAL(state_of("B"), "lost");
}

BOOST_FIXTURE_TEST_CASE(error_messages_do_not_end_the_member, fixture) {
  // What a peer whose default handler bounces A's heartbeat sends back.
  self->send(member, caf::make_error(caf::sec::unexpected_message));
  run_all();
  BOOST_CHECK_EQUAL(state_of("B"), "up");
  advance(seconds(1));
  BOOST_CHECK_EQUAL(state_of("B"), "up");
}

BOOST_FIXTURE_TEST_CASE(heartbeats_of_strangers_and_leaving, fixture) {
  // A heartbeat naming a member A does not know adds nothing.
  member_info z;
  z.node_id = "Z";
  z.state = "up";
  self->send(member, heartbeat_atom_v, z);
  run_all();
  BOOST_CHECK_EQUAL(state_of("Z"), "");
  // A heartbeat that says "left" ends B at once, with no loss timer.
  heartbeat_from_b("left");
  BOOST_CHECK_EQUAL(state_of("B"), "left");
  advance(seconds(10));
  BOOST_CHECK_EQUAL(state_of("B"), "left");
}
