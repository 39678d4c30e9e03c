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

json::value schema_property(const char* type, std::string description) {
  json::value p;
  p["type"] = type;
  p["description"] = std::move(description);
  return p;
}

json::value path_property() {
  return schema_property("string",
                         "File path; relative paths are resolved against "
                         "the working directory, ~ expands to the home "
                         "directory.");
}

} // namespace mibyan
