#include "tools/tool.hpp"

namespace mibyan {

std::chrono::milliseconds tool::deadline(const json::value&,
                                         const options&) const {
  return std::chrono::seconds(60);
}

json::value error_result(std::string message) {
  json::value result;
  result["error"] = std::move(message);
  return result;
}

} // namespace mibyan
