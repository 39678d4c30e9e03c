// File: base/status.cpp
#include "base/status.hpp"

namespace mibyan {

const char* to_string(status_code code) {
  switch (code) {
    case status_code::ok: return "ok";
    case status_code::invalid_argument: return "invalid_argument";
    case status_code::not_found: return "not_found";
    case status_code::already_exists: return "already_exists";
    case status_code::permission_denied: return "permission_denied";
    case status_code::unavailable: return "unavailable";
    case status_code::timeout: return "timeout";
    case status_code::cancelled: return "cancelled";
    case status_code::resource_exhausted: return "resource_exhausted";
    case status_code::data_corrupt: return "data_corrupt";
    case status_code::config_invalid: return "config_invalid";
    case status_code::internal: return "internal";
  }
  return "internal";
}

bool is_retryable(status_code code) {
  return code == status_code::unavailable || code == status_code::timeout;
}

} // namespace mibyan
