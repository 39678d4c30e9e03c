#define BOOST_TEST_MODULE ui_cluster
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// The operator console over a cluster (docs/serve.md, "Operator console"
// and "dashboard --connect"): GET /ui/api/cluster of a `serve --join`
// gateway on a real 2-node cluster, and `mibyan dashboard --connect`
// forwarding the dashboard API (scheduled jobs included) to a real gateway
// member.

#include "tests/support/cluster_fixture.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/serve_fixture.hpp"
#include "tests/support/sse_watcher.hpp"

using namespace mibyan;
using namespace std::chrono;
using test::contains;
using test::serving::body_of;
using test::serving::status_of;

namespace {

// One request to the HTTP "HOST:PORT" `address`; the whole response.
std::string http_call(const std::string& address, const std::string& method,
                      const std::string& path) {
  auto port = static_cast<uint16_t>(
    std::stoi(address.substr(address.rfind(':') + 1)));
  int fd = test::dial_loopback(port);
  test::send_all(fd, method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:"
                       + std::to_string(port)
                       + "\r\nConnection: close\r\nContent-Length: 0"
                         "\r\n\r\n");
  std::string out;
  test::read_until(fd, out, {}, 60);
  ::close(fd);
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(ui_cluster, test::cluster_fixture)

BOOST_AUTO_TEST_CASE(cluster_endpoint_lists_the_members) {
  auto w1 = start({"--role", "worker"});
  auto gw = start_serve({"--join", w1->address});
  BOOST_REQUIRE_MESSAGE(gw->pid > 0, gw->err());
  {
    auto c = connect(w1->address);
    wait_members(*c, 2);
  }
  auto r = http_call(gw->address, "GET", "/ui/api/cluster");
  BOOST_REQUIRE_MESSAGE(status_of(r) == 200, r);
  auto v = body_of(r);
  BOOST_TEST_CONTEXT(v.dump()) {
    BOOST_TEST(v.get_bool("enabled", false));
    auto& ms = v["members"];
    BOOST_REQUIRE(ms.is_array());
    BOOST_TEST(ms.size() == 2u);
    bool worker = false, gateway = false;
    for (auto& m : ms.as_array()) {
      BOOST_TEST(m.get_string("state", "") == "up");
      BOOST_TEST(m.find("load") != nullptr);
      BOOST_TEST(m.find("sessions") != nullptr);
      worker = worker
               || (m.get_string("node", "") == w1->id
                   && m.get_string("role", "") == "worker");
      gateway = gateway || (m.get_string("node", "") == v.get_string("node", "")
                            && m.get_string("role", "") == "gateway");
    }
    BOOST_TEST(worker);
    BOOST_TEST(gateway);
  }
  BOOST_TEST(status_of(http_call(gw->address, "POST", "/ui/api/cluster"))
             == 405);
  BOOST_CHECK_EQUAL(gw->stop(), 0);
}

BOOST_AUTO_TEST_CASE(dashboard_connect_answers_with_the_gateway) {
  test::http_server provider;
  provider.script_chat(test::completion("hello from the gateway"));
  auto gw = start({"--role", "gateway", "--provider", "custom", "--base-url",
                   provider.url("/v1"), "--model", "m"});
  auto w1 = start({"--role", "worker", "--join", gw->address});
  {
    auto c = connect(gw->address);
    wait_members(*c, 2);
  }
  auto res = test::run_mibyan({"run", "--connect", gw->address, "--session",
                               "dash-1", "say hello"},
                              cli_env());
  BOOST_REQUIRE_MESSAGE(res.exit_code == 0, res.out << res.err << gw->err());
  // The dashboard has a home of its own, without that session.
  test::node_process dash;
  dash.err_path = dir / "dashboard.err";
  std::filesystem::create_directories(dir / "dash-home");
  auto line = launch(dash,
                     {test::mibyan_binary(), "dashboard", "--connect",
                      gw->address, "--listen", "127.0.0.1:0"},
                     dir / "dash-home", {});
  const std::string ready = "mibyan dashboard listening on http://";
  BOOST_REQUIRE_MESSAGE(line.rfind(ready, 0) == 0,
                        "no ready line: '" << line << "' " << dash.err());
  auto addr = line.substr(ready.size());
  if (!addr.empty() && addr.back() == '/')
    addr.pop_back();
  // Sessions: the gateway's.
  auto s = http_call(addr, "GET", "/ui/api/sessions");
  BOOST_REQUIRE_MESSAGE(status_of(s) == 200, s << dash.err());
  BOOST_TEST(contains(body_of(s)["data"].dump(), "\"dash-1\""),
             body_of(s).dump());
  // Cluster: the gateway's view, both members.
  auto c = http_call(addr, "GET", "/ui/api/cluster");
  BOOST_REQUIRE_MESSAGE(status_of(c) == 200, c);
  BOOST_TEST(body_of(c).get_bool("enabled", false));
  BOOST_TEST(body_of(c)["members"].size() == 2u);
  BOOST_TEST(body_of(c).get_string("node", "") == gw->id);
  // Kernels and running turns answer from the gateway too.
  BOOST_TEST(status_of(http_call(addr, "GET", "/ui/api/kernels")) == 200);
  BOOST_TEST(body_of(http_call(addr, "GET", "/ui/api/live/turns"))["data"]
               .dump()
             == "[]");
  // Scheduled jobs: the gateway's store (docs/cron.md, "On the dashboard").
  auto jobs = http_call(addr, "GET", "/ui/api/jobs");
  BOOST_REQUIRE_MESSAGE(status_of(jobs) == 200, jobs);
  BOOST_TEST(body_of(jobs)["data"].is_array());
  BOOST_TEST(body_of(jobs)["scheduler"].is_object());
  auto nojob = http_call(addr, "GET", "/ui/api/jobs/job_0000000000000000");
  BOOST_TEST(status_of(nojob) == 404);
  BOOST_TEST(contains(nojob, "\"code\":\"job_not_found\""), nojob);
  // Live: a polled snapshot.
  {
    auto port = static_cast<uint16_t>(
      std::stoi(addr.substr(addr.rfind(':') + 1)));
    test::sse_watcher w(port);
    BOOST_TEST(w.wait_event("snapshot"));
  }
  // Errors come back as the gateway gave them.
  auto nf = http_call(addr, "GET", "/ui/api/nothing-here");
  BOOST_TEST(status_of(nf) == 404);
  BOOST_TEST(contains(nf, "\"code\":\"not_found\""));
  BOOST_TEST(status_of(http_call(addr, "POST", "/ui/api/kernels/x/reset"))
             == 404);
  BOOST_CHECK_EQUAL(dash.stop(SIGTERM), 0);
  // A wrong cluster key: refused at start, with the reason.
  test::node_process bad;
  bad.err_path = dir / "dashboard-bad.err";
  auto none = launch(bad,
                     {test::mibyan_binary(), "dashboard", "--connect",
                      gw->address, "--listen", "127.0.0.1:0"},
                     dir / "dash-home",
                     {{"MIBYAN_CLUSTER_KEY", "another-key"}});
  BOOST_TEST(none.empty());
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(contains(bad.err(), "key"), bad.err());
}

BOOST_AUTO_TEST_SUITE_END()
