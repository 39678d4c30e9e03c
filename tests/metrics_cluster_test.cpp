#define BOOST_TEST_MODULE metrics_cluster
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// mibyan_cluster_members (docs/metrics.md) on a `mibyan serve --join`
// gateway: the members by state as the gateway sees them, following a
// worker from up to lost. Real processes on loopback; bounded polls.

#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "base/json.hpp"
#include "tests/support/loopback.hpp"
#include "tests/support/process.hpp"
#include "tests/support/prom_text.hpp"
#include "tests/support/socket_read.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

#include "tests/support/cluster_fixture.hpp"

namespace prom = mibyan::test::prom;

namespace {

// GET `path` at "127.0.0.1:PORT"; the body of a 200 answer, else "".
std::string get_body(const std::string& address, const std::string& path) {
  int fd = test::dial_loopback(test::port_of(address));
  test::send_all(fd, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Connection: close\r\n\r\n");
  std::string out;
  test::read_until(fd, out, {}, 30);
  ::close(fd);
  if (out.rfind("HTTP/1.1 200", 0) != 0)
    return {};
  auto b = out.find("\r\n\r\n");
  return b == std::string::npos ? "" : out.substr(b + 4);
}

// Polls the gateway's /metrics until `want` holds (at most 60 s); returns
// the last scrape.
template <class Pred>
prom::document scrape_until(const std::string& address, Pred want) {
  prom::document doc;
  auto deadline = steady_clock::now() + seconds{60};
  do {
    doc = prom::parse(get_body(address, "/metrics"));
    BOOST_REQUIRE_MESSAGE(doc.error.empty(), doc.error);
    if (want(doc))
      break;
    std::this_thread::sleep_for(milliseconds{50});
  } while (steady_clock::now() < deadline);
  return doc;
}

double at(const prom::document& d, const std::string& key) {
  auto it = d.values.find(key);
  return it == d.values.end() ? 0.0 : it->second;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(metrics_cluster, test::cluster_fixture)

BOOST_AUTO_TEST_CASE(the_gateway_shows_its_members_by_state) {
  auto w1 = start({"--role", "worker"});
  auto gw = start_serve({"--join", w1->address});
  BOOST_REQUIRE_MESSAGE(gw->pid > 0, gw->err());
  const std::string up = R"(mibyan_cluster_members{state="up"})";
  const std::string lost = R"(mibyan_cluster_members{state="lost"})";
  auto doc = scrape_until(gw->address, [&](const prom::document& d) {
    return at(d, up) == 2;
  });
  BOOST_CHECK_EQUAL(at(doc, up), 2); // the gateway and the worker
  BOOST_CHECK_EQUAL(at(doc, lost), 0);
  // The worker dies: the gateway marks it lost after the failure timeout.
  w1->stop(SIGKILL);
  doc = scrape_until(gw->address, [&](const prom::document& d) {
    return at(d, lost) == 1;
  });
  BOOST_CHECK_EQUAL(at(doc, lost), 1);
  BOOST_CHECK_EQUAL(at(doc, up), 1);
  BOOST_CHECK_EQUAL(gw->stop(), 0);
}

BOOST_AUTO_TEST_SUITE_END()
