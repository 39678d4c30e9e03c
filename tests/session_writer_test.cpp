#define BOOST_TEST_MODULE session_writer
#include <boost/test/unit_test.hpp>

#include "caf/all.hpp"

#include "actors/session_writer.hpp"
#include "mibyan/actors.hpp"
#include "runtime/runtime.hpp"
#include "storage/session_store.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

struct fixture {
  test::temp_dir home;
  std::unique_ptr<runtime> rt;
  std::shared_ptr<session_store> store;
  session_writer_actor writer;

  fixture() {
    options opts;
    opts.home = home.path();
    opts.code_execution.prestart_kernels = 0;
    std::string err;
    auto made = create_runtime(opts);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
    session_store_options so;
    so.dir = home.path() + "/store";
    auto opened = session_store::open(so);
    BOOST_REQUIRE_MESSAGE(opened, opened.error);
    store = std::move(*opened);
    writer = spawn_session_writer(actor_system_of(*rt), store);
  }

  ~fixture() {
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(session_writer, fixture)

BOOST_AUTO_TEST_CASE(appends_in_order_and_reports_errors) {
  caf::scoped_actor self{actor_system_of(*rt)};
  std::string id;
  self->request(writer, caf::infinite, create_atom_v,
                session_meta{"", "test", "m", "p", "/tmp", "t", ""})
    .receive([&](std::string& x) { id = x; },
             [&](caf::error& e) { BOOST_FAIL(actor_system_of(*rt).render(e)); });
  BOOST_REQUIRE(!id.empty());
  // Fire-and-forget appends keep their order: one mailbox, one writer.
  for (int i = 0; i < 50; ++i) {
    chat_message m;
    m.role = i % 2 ? "assistant" : "user";
    m.content = "message " + std::to_string(i);
    self->send(writer, append_atom_v, message_append{id, m, ""});
  }
  uint64_t last = 0;
  chat_message final_msg{"user", "last", {}, "", "", "", "", 0};
  self->request(writer, caf::infinite, append_atom_v,
                message_append{id, final_msg, "k1"})
    .receive([&](uint64_t x) { last = x; },
             [&](caf::error& e) { BOOST_FAIL(actor_system_of(*rt).render(e)); });
  BOOST_TEST(last > 0u);
  auto msgs = store->load_messages(id);
  BOOST_REQUIRE(msgs);
  BOOST_REQUIRE(msgs->size() == 51u);
  for (int i = 0; i < 50; ++i)
    BOOST_TEST((*msgs)[i].message.content == "message " + std::to_string(i));
  bool failed = false;
  self->request(writer, caf::infinite, append_atom_v,
                message_append{"no-such-session", final_msg, ""})
    .receive([&](uint64_t) {},
             [&](caf::error& e) {
               failed = true;
               BOOST_TEST(actor_system_of(*rt).render(e).find("no-such-session")
                          != std::string::npos);
             });
  BOOST_TEST(failed);
  bool ended = false;
  self->request(writer, caf::infinite, end_atom_v, id, std::string{"done"})
    .receive([&](bool b) { ended = b; }, [&](caf::error&) {});
  BOOST_TEST(ended);
  BOOST_TEST(store->get_session(id)->end_reason == "done");
}

BOOST_AUTO_TEST_SUITE_END()
