#include "config/allowlist_writer.hpp"

#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "base/private_file.hpp"

namespace mibyan {

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

} // namespace

status add_to_command_allowlist(const std::string& path,
                                const std::string& key) {
  if (path.empty())
    return status::failure(status_code::invalid_argument,
                           "no config file path");
  if (key.empty() || key.find('\n') != std::string::npos || key.size() > 200)
    return status::failure(status_code::invalid_argument,
                           "invalid pattern key");
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
  }
  try {
    YAML::Node root = text.empty() ? YAML::Node{} : YAML::Load(text);
    if (root && !root.IsNull() && !root.IsMap())
      return status::failure(status_code::config_invalid,
                             path + ": the top level is not a mapping");
    YAML::Node list = (root && root.IsMap()) ? root["command_allowlist"]
                                              : YAML::Node{};
    if (!list || list.IsNull()) {
      if (!text.empty() && text.back() != '\n')
        text += "\n";
      if (list && list.IsNull()) {
        // `command_allowlist:` present but empty: rewrite below.
      } else {
        text += "command_allowlist:\n  - " + quoted(key) + "\n";
        return write_private_file(path, text);
      }
    } else if (!list.IsSequence()) {
      return status::failure(status_code::config_invalid,
                             path + ": command_allowlist is not a list");
    } else {
      for (const auto& item : list)
        if (item.IsScalar() && item.Scalar() == key)
          return {};
    }
    YAML::Node seq = (list && list.IsSequence()) ? list
                                                 : YAML::Node{YAML::NodeType::Sequence};
    seq.push_back(key);
    root["command_allowlist"] = seq;
    YAML::Emitter out;
    out << root;
    return write_private_file(path, std::string{out.c_str()} + "\n");
  } catch (const std::exception& e) {
    return status::failure(status_code::config_invalid,
                           path + ": " + e.what());
  }
}

} // namespace mibyan
