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

std::string add_to_command_allowlist(const std::string& path,
                                     const std::string& key) {
  if (path.empty())
    return "no config file path";
  if (key.empty() || key.find('\n') != std::string::npos || key.size() > 200)
    return "invalid pattern key";
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
      return path + ": the top level is not a mapping";
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
      return path + ": command_allowlist is not a list";
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
    return path + ": " + e.what();
  }
}

} // namespace mibyan
