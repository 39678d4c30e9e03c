#define BOOST_TEST_MODULE agent_iteration_budget
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "agent/iteration_budget.hpp"

using namespace mibyan;

namespace {

tool_call call(std::string name) {
  return tool_call{"id_" + name, std::move(name), "{}"};
}

} // namespace

BOOST_AUTO_TEST_CASE(default_cap_is_ninety) {
  iteration_budget b;
  BOOST_TEST(b.max() == 90);
  BOOST_TEST(b.used() == 0);
  BOOST_TEST(b.remaining() == 90);
  BOOST_TEST(!b.exhausted());
}

BOOST_AUTO_TEST_CASE(consume_until_refused) {
  iteration_budget b{3};
  BOOST_TEST(b.consume());
  BOOST_TEST(b.consume());
  BOOST_TEST(b.remaining() == 1);
  BOOST_TEST(b.consume());
  BOOST_TEST(b.exhausted());
  BOOST_TEST(!b.consume());
  BOOST_TEST(b.used() == 3);
  BOOST_TEST(b.remaining() == 0);
}

BOOST_AUTO_TEST_CASE(refund_gives_a_unit_back) {
  iteration_budget b{2};
  BOOST_TEST(b.consume());
  BOOST_TEST(b.consume());
  BOOST_TEST(!b.consume());
  BOOST_TEST(b.refund());
  BOOST_TEST(b.remaining() == 1);
  BOOST_TEST(b.consume());
  BOOST_TEST(!b.consume());
}

BOOST_AUTO_TEST_CASE(refund_without_consumption_is_refused) {
  iteration_budget b{2};
  BOOST_TEST(!b.refund());
  BOOST_TEST(b.used() == 0);
  BOOST_TEST(b.remaining() == 2);
}

BOOST_AUTO_TEST_CASE(zero_and_negative_caps_allow_nothing) {
  iteration_budget zero{0};
  BOOST_TEST(!zero.consume());
  BOOST_TEST(zero.exhausted());
  iteration_budget negative{-5};
  BOOST_TEST(negative.max() == 0);
  BOOST_TEST(!negative.consume());
  BOOST_TEST(negative.remaining() == 0);
}

BOOST_AUTO_TEST_CASE(copies_are_independent) {
  iteration_budget a{5};
  a.consume();
  iteration_budget b = a;
  BOOST_TEST(b.used() == 1);
  b.consume();
  BOOST_TEST(a.used() == 1);
  BOOST_TEST(b.used() == 2);
  a = b;
  BOOST_TEST(a.used() == 2);
}

BOOST_AUTO_TEST_CASE(concurrent_consumers_never_exceed_the_cap) {
  iteration_budget b{1000};
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i)
        if (b.consume())
          ++granted;
    });
  for (auto& t : threads)
    t.join();
  BOOST_TEST(granted.load() == 1000);
  BOOST_TEST(b.used() == 1000);
  BOOST_TEST(b.remaining() == 0);
}

BOOST_AUTO_TEST_CASE(only_execute_code_batches_are_refunded) {
  BOOST_TEST(batch_refunds_iteration({call("execute_code")}));
  BOOST_TEST(batch_refunds_iteration({call("execute_code"),
                                      call("execute_code")}));
  BOOST_TEST(!batch_refunds_iteration({}));
  BOOST_TEST(!batch_refunds_iteration({call("execute_code"),
                                       call("read_file")}));
  BOOST_TEST(!batch_refunds_iteration({call("terminal")}));
  BOOST_TEST(!batch_refunds_iteration({call("Execute_Code")}));
}
