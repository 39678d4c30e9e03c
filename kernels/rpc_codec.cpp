#include "kernels/rpc_codec.hpp"

#include "base/json.hpp"

namespace mibyan {

namespace {

status invalid(std::string why) {
  return status::failure(status_code::invalid_argument, std::move(why));
}

} // namespace

status decode_rpc_request(std::string_view line, rpc_request& out) {
  auto parsed = json::parse(line);
  if (!parsed)
    return invalid("not JSON (" + parsed.error + ")");
  auto& v = *parsed.v;
  if (!v.is_object())
    return invalid("expected a JSON object");
  if (auto id = v.find("id"); id && id->is_string())
    out.id = id->as_string();
  else if (id && id->is_int())
    out.id = std::to_string(id->as_int());
  auto tool = v.find("tool");
  if (tool == nullptr || !tool->is_string() || tool->as_string().empty())
    return invalid("missing string member 'tool'");
  out.tool = tool->as_string();
  if (auto token = v.find("token"); token && token->is_string())
    out.token = token->as_string();
  if (auto cell = v.find("cell"); cell && cell->is_string())
    out.cell = cell->as_string();
  auto args = v.find("args");
  if (args == nullptr || args->is_null())
    out.args_json = "{}";
  else if (args->is_object())
    out.args_json = args->dump();
  else
    return invalid("'args' must be a JSON object");
  if (out.id.empty())
    return invalid("missing string member 'id'");
  return {};
}

std::string peek_rpc_id(std::string_view line) {
  size_t i = 0;
  auto skip_ws = [&] {
    while (i < line.size()
           && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
      ++i;
  };
  auto expect = [&](std::string_view s) {
    skip_ws();
    if (line.substr(i, s.size()) != s)
      return false;
    i += s.size();
    return true;
  };
  if (!expect("{") || !expect("\"id\"") || !expect(":") || !expect("\""))
    return {};
  auto rest = line.substr(i, 129);
  auto end = rest.find('"');
  if (end == std::string_view::npos)
    return {};
  auto id = rest.substr(0, end);
  if (id.find('\\') != std::string_view::npos)
    return {};
  return std::string{id};
}

std::string encode_rpc_response(const std::string& id,
                                const std::string& result_json) {
  std::string out = "{\"id\":";
  if (id.empty())
    out += "null";
  else
    json::append_quoted(out, id);
  out += ",\"result\":";
  json::append_quoted(out, result_json);
  out += "}\n";
  return out;
}

std::string encode_rpc_error(const std::string& id,
                             const std::string& message) {
  json::value r;
  r["error"] = message;
  return encode_rpc_response(id, r.dump());
}

bool token_matches(std::string_view expected, std::string_view given) {
  if (expected.empty())
    return false;
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    auto g = i < given.size() ? given[i] : 0;
    diff |= static_cast<unsigned char>(expected[i] ^ g);
  }
  return diff == 0;
}

} // namespace mibyan
