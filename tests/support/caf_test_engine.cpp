// CAF's unit-test engine, without its main(): caf/test/dsl.hpp's
// test_coordinator_fixture reads the engine's argc/argv when it builds its
// configuration. The suites stay Boost.Test; nothing here runs CAF tests.
#define CAF_TEST_NO_MAIN
#include "caf/test/unit_test_impl.hpp"
