#include "tools/argument_limit.hpp"

#include <string>

namespace mibyan {

status check_argument_size(uint64_t size, int64_t limit) {
  if (limit <= 0 || size <= static_cast<uint64_t>(limit))
    return {};
  return status::failure(
    status_code::resource_exhausted,
    "The tool arguments are too large: " + std::to_string(size)
      + " bytes, over the limit of " + std::to_string(limit)
      + " bytes (tools.max_argument_bytes). The call was not run; pass "
        "large content through a file instead.");
}

} // namespace mibyan
