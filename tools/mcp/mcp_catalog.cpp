#include "tools/mcp/mcp_catalog.hpp"

#include "base/base64.hpp"

#include <fnmatch.h>

#include <atomic>
#include <filesystem>
#include <fstream>

namespace mibyan {

namespace fs = std::filesystem;

std::string mcp_sanitize(std::string_view component) {
  std::string out{component};
  for (auto& c : out)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
          || (c >= '0' && c <= '9') || c == '_'))
      c = '_';
  return out;
}

std::string mcp_tool_name(std::string_view server, std::string_view tool) {
  return "mcp__" + mcp_sanitize(server) + "__" + mcp_sanitize(tool);
}

std::string mcp_toolset_name(std::string_view server) {
  return "mcp-" + std::string{server};
}

namespace {

bool matches(const std::vector<std::string>& patterns, std::string_view name) {
  std::string n{name};
  for (auto& p : patterns)
    if (p == n || ::fnmatch(p.c_str(), n.c_str(), 0) == 0)
      return true;
  return false;
}

} // namespace

bool mcp_tool_admitted(const mcp_server_options& s, std::string_view name) {
  if (!s.include.empty())
    return matches(s.include, name);
  if (!s.exclude.empty())
    return !matches(s.exclude, name);
  return true;
}

json::value mcp_normalize_schema(const json::value* input_schema) {
  json::value out;
  if (input_schema != nullptr && input_schema->is_object())
    out = *input_schema;
  else
    out = json::value::make_object();
  out.erase("$schema");
  if (out.get_string("type", "") != "object")
    out["type"] = "object";
  auto props = out.find("properties");
  if (props == nullptr || !props->is_object()) {
    out["properties"] = json::value::make_object();
    props = out.find("properties");
  }
  if (auto req = out.find("required"); req != nullptr) {
    json::value kept = json::value::make_array();
    if (req->is_array())
      for (auto& r : req->as_array())
        if (r.is_string() && props->find(r.as_string()) != nullptr)
          kept.push_back(r);
    if (kept.size() == 0)
      out.erase("required");
    else
      out["required"] = std::move(kept);
  }
  return out;
}

namespace {

std::string extension_of(const std::string& mime) {
  auto slash = mime.find('/');
  auto sub = slash == std::string::npos ? std::string{"bin"}
                                        : mime.substr(slash + 1);
  sub = mcp_sanitize(sub);
  if (sub == "jpeg")
    sub = "jpg";
  if (sub.size() > 10 || sub.empty())
    sub = "bin";
  return sub;
}

std::string save_media(const std::string& dir, const std::string& kind,
                       const json::value& block) {
  auto mime = block.get_string("mimeType", kind + "/octet-stream");
  auto data = base64_decode(block.get_string("data", ""));
  static std::atomic<uint64_t> seq{0};
  std::error_code ec;
  fs::create_directories(dir, ec);
  auto now = std::chrono::system_clock::now().time_since_epoch().count();
  auto path = dir + "/" + kind + "-" + std::to_string(now) + "-"
              + std::to_string(seq.fetch_add(1)) + "." + extension_of(mime);
  std::ofstream out(path, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out)
    return "[" + kind + ": " + mime + ", " + std::to_string(data.size())
           + " bytes, not saved]";
  return "[" + kind + ": " + path + " (" + mime + ", "
         + std::to_string(data.size()) + " bytes)]";
}

} // namespace

json::value mcp_result_to_tool_result(const json::value& call_result,
                                      const std::string& media_dir) {
  std::string text;
  auto append = [&](const std::string& piece) {
    if (!text.empty() && !piece.empty())
      text += "\n";
    text += piece;
  };
  if (auto content = call_result.find("content");
      content != nullptr && content->is_array()) {
    for (auto& block : content->as_array()) {
      if (!block.is_object())
        continue;
      auto type = block.get_string("type", "");
      if (type == "text") {
        append(block.get_string("text", ""));
      } else if (type == "image" || type == "audio") {
        append(save_media(media_dir, type, block));
      } else if (type == "resource") {
        auto res = block.find("resource");
        if (res != nullptr && res->is_object()) {
          auto uri = res->get_string("uri", "");
          if (auto t = res->find("text"); t != nullptr && t->is_string())
            append("[resource " + uri + "]\n" + t->as_string());
          else
            append("[resource " + uri + ": "
                   + res->get_string("mimeType", "binary") + " blob]");
        }
      } else if (type == "resource_link") {
        append("[resource link: " + block.get_string("uri", "") + " "
               + block.get_string("name", "") + "]");
      } else if (!type.empty()) {
        append("[" + type + " content]");
      }
    }
  }
  json::value out;
  if (call_result.get_bool("isError", false)) {
    out["error"] = text.empty() ? std::string{"the MCP tool reported an error"}
                                : text;
    return out;
  }
  auto structured = call_result.find("structuredContent");
  if (structured != nullptr && !structured->is_null()) {
    if (text.empty()) {
      out["result"] = *structured;
    } else {
      out["result"] = text;
      out["structuredContent"] = *structured;
    }
    return out;
  }
  out["result"] = text;
  return out;
}

std::optional<std::string>
mcp_breaker::check(const std::string& server,
                   std::chrono::steady_clock::time_point now) const {
  if (failures < threshold || now >= open_until)
    return std::nullopt;
  auto left = std::chrono::duration_cast<std::chrono::seconds>(open_until
                                                                - now)
                .count()
              + 1;
  return "MCP server '" + server + "' is unreachable after "
         + std::to_string(failures)
         + " consecutive failures; an automatic retry becomes possible in ~"
         + std::to_string(left)
         + " s. Do not retry this tool now: use another approach or ask the "
           "user to check the server.";
}

void mcp_breaker::on_failure(std::chrono::steady_clock::time_point now) {
  ++failures;
  if (failures >= threshold)
    open_until = now + cooldown;
}

} // namespace mibyan
