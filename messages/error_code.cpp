#include "messages/error_code.hpp"

namespace mibyan {

std::string to_string(ec x) {
  switch (x) {
    case ec::unavailable: return "unavailable";
    case ec::invalid_request: return "invalid_request";
    case ec::not_found: return "not_found";
    case ec::interrupted: return "interrupted";
    case ec::timeout: return "timeout";
    case ec::storage_failure: return "storage_failure";
    case ec::config_invalid: return "config_invalid";
  }
  return "unknown";
}

} // namespace mibyan
