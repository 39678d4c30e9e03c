// File: base/status.hpp
//
// The one error type (`status`, `result<T>`, `status_code`) is public
// (mibyan/status.hpp): the embedding API returns it too. Library code
// includes it through this header.
#pragma once

#include "mibyan/status.hpp"
