// actors/error_mapping.hpp: the actor error codes (messages/error_code.hpp)
// and the status codes (base/status.hpp) map one-to-one, so a failure that
// crosses a mailbox keeps its code.
#define BOOST_TEST_MODULE error_mapping
#include <boost/test/unit_test.hpp>

#include <set>
#include <string>

#include "caf/sec.hpp"

#include "actors/error_mapping.hpp"

using namespace mibyan;

namespace {

// Every failed status code: the enum is dense from invalid_argument to
// internal (base/status.hpp).
std::set<status_code> failed_codes() {
  std::set<status_code> out;
  for (int i = static_cast<int>(status_code::invalid_argument);
       i <= static_cast<int>(status_code::internal); ++i)
    out.insert(static_cast<status_code>(i));
  return out;
}

// Every actor code: dense from 1 to data_corrupt.
std::set<ec> actor_codes() {
  std::set<ec> out;
  for (int i = 1; i <= static_cast<int>(ec::data_corrupt); ++i)
    out.insert(static_cast<ec>(i));
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(every_status_code_round_trips) {
  std::set<ec> seen;
  for (auto code : failed_codes()) {
    auto e = to_ec(code);
    BOOST_TEST_INFO("status code " << to_string(code));
    BOOST_CHECK(to_status_code(e) == code);
    BOOST_CHECK(seen.insert(e).second); // no two codes share an ec
  }
  BOOST_CHECK(seen == actor_codes());
}

BOOST_AUTO_TEST_CASE(every_actor_code_round_trips) {
  std::set<status_code> seen;
  for (auto e : actor_codes()) {
    auto code = to_status_code(e);
    BOOST_TEST_INFO("actor code " << to_string(e));
    BOOST_CHECK(code != status_code::ok);
    BOOST_CHECK(to_ec(code) == e);
    BOOST_CHECK(seen.insert(code).second);
    BOOST_CHECK_NE(to_string(e), "unknown");
  }
  BOOST_CHECK(seen == failed_codes());
}

BOOST_AUTO_TEST_CASE(a_status_survives_the_caf_error) {
  for (auto code : failed_codes()) {
    auto st = status::failure(code, "why: " + std::string{to_string(code)});
    auto back = to_status(to_actor_error(st));
    BOOST_TEST_INFO("status code " << to_string(code));
    BOOST_CHECK(back.code == st.code);
    BOOST_CHECK_EQUAL(back.error, st.error);
  }
  BOOST_CHECK(to_status(caf::error{}).ok());
}

BOOST_AUTO_TEST_CASE(a_foreign_error_becomes_internal) {
  auto st = to_status(caf::make_error(caf::sec::unexpected_message));
  BOOST_CHECK(st.code == status_code::internal);
  BOOST_CHECK(!st.error.empty());
}
