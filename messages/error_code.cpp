#include "messages/error_code.hpp"

namespace mibyan {

std::string to_string(ec x) {
  switch (x) {
    case ec::unavailable: return "unavailable";
    case ec::invalid_request: return "invalid_request";
    case ec::not_found: return "not_found";
    case ec::interrupted: return "interrupted";
    case ec::timeout: return "timeout";
    case ec::internal: return "internal";
    case ec::config_invalid: return "config_invalid";
    case ec::already_exists: return "already_exists";
    case ec::permission_denied: return "permission_denied";
    case ec::resource_exhausted: return "resource_exhausted";
    case ec::data_corrupt: return "data_corrupt";
  }
  return "unknown";
}

} // namespace mibyan
