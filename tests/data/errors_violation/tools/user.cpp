// Fixture: makes base/thing.hpp a cross-folder header.
#include "base/thing.hpp"
