#include "tools/mcp/mcp_message.hpp"

namespace mibyan {

mcp_incoming classify_mcp_message(const json::value& msg) {
  mcp_incoming in;
  if (!msg.is_object()) {
    in.error = "a message that is no JSON object";
    return in;
  }
  auto method = msg.find("method");
  auto id = msg.find("id");
  if (method != nullptr && method->is_string()) {
    in.method = method->as_string();
    if (id == nullptr || id->is_null()) {
      in.k = mcp_incoming::kind::notification;
      return in;
    }
    in.k = mcp_incoming::kind::request;
    in.id = *id;
    auto p = msg.find("params");
    in.params = p != nullptr && p->is_object() ? *p
                                               : json::value::make_object();
    return in;
  }
  if (id == nullptr || !id->is_int()) {
    in.error = "a reply without a valid id";
    return in;
  }
  in.k = mcp_incoming::kind::reply;
  in.id = *id;
  if (auto err = msg.find("error"); err != nullptr && !err->is_null()) {
    auto code = err->is_object() ? err->get_int("code", 0) : 0;
    auto text = err->is_object() ? err->get_string("message", "")
                                 : err->dump();
    in.error = "MCP error " + std::to_string(code) + ": " + text;
  } else if (auto r = msg.find("result")) {
    in.ok = true;
    in.result = *r;
  } else {
    in.error = "the server replied without result or error";
  }
  return in;
}

result<std::vector<mcp_incoming>> parse_mcp_messages(std::string_view text) {
  auto parsed = json::parse(text);
  if (!parsed)
    return status::failure(status_code::invalid_argument, parsed.error);
  std::vector<mcp_incoming> out;
  if (parsed.v->is_array()) {
    for (auto& m : parsed.v->as_array())
      out.push_back(classify_mcp_message(m));
  } else {
    out.push_back(classify_mcp_message(*parsed.v));
  }
  return out;
}

bool mcp_line_reader::feed(std::string_view chunk,
                           const message_fn& on_message,
                           const skipped_fn& on_skipped) {
  return lines_.feed(chunk, [&](std::string_view line) {
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    auto first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos)
      return;
    if (line[first] == '{' || line[first] == '[')
      on_message(std::string{line});
    else
      on_skipped(line.size());
  });
}

} // namespace mibyan
