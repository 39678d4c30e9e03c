// Fixture for layering_check_detects_violation: base/ may not include actors/.
#include "actors/thing.hpp"
