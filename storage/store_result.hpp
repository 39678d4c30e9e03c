// File: storage/store_result.hpp
//
// The storage layer's names for the project's one error type
// (base/status.hpp). Storage functions never throw; they return a
// `store_status` or a `store_result<T>`, whose code says what happened
// (not_found for a missing session, invalid_argument for a malformed
// request, resource_exhausted for a full disk or map, data_corrupt for a
// damaged store, internal otherwise) and whose message names the
// operation, the object and the LMDB reason ("append_message: session 'x'
// does not exist").
#pragma once

#include "base/status.hpp"

namespace mibyan {

using store_status = status;

template <class T>
using store_result = result<T>;

} // namespace mibyan
