#include "kernels/stub_generator.hpp"

#include <algorithm>
#include <string_view>

#include "kernels/runner_source.hpp"

namespace mibyan {

namespace {

// The line of kernels/mibyan_tools_transport.py that generate_stub
// replaces with the kernel's own tool list.
constexpr std::string_view tools_marker = "AVAILABLE_TOOLS = ()";

std::string render_function(const script_tool_spec& t) {
  std::string sig = "def ";
  sig += t.name;
  sig += '(';
  std::string args = "{";
  bool first = true;
  for (auto& p : t.params) {
    if (!first) {
      sig += ", ";
      args += ", ";
    }
    first = false;
    sig += p.name;
    if (!p.annotation.empty())
      sig += ": " + p.annotation;
    if (!p.default_literal.empty())
      sig += p.annotation.empty() ? "=" + p.default_literal
                                  : " = " + p.default_literal;
    args += "\"" + p.name + "\": " + p.name;
  }
  sig += "):\n";
  args += "}";
  std::string out = "\n\n" + sig;
  out += "    \"\"\"";
  out += t.doc;
  out += "\"\"\"\n";
  out += "    return _call(\"";
  out += t.name;
  out += "\", " + args + ")\n";
  return out;
}

// `mcp.<server>.<tool>(**args)` for the MCP tools (docs/mcp.md).
std::string render_mcp_namespace(const std::vector<const script_tool_spec*>& mcp) {
  if (mcp.empty())
    return {};
  std::string out = R"py(

# -- MCP tools: mcp.<server>.<tool>(**args) ----------------------------------

class _McpNamespace(object):
    def __init__(self, label):
        self._label = label

    def __repr__(self):
        return "<%s: %s>" % (self._label, ", ".join(
            k for k in sorted(vars(self)) if not k.startswith("_")))


def _mcp_function(full_name, doc):
    def call(**args):
        return _call(full_name, args)
    call.__name__ = full_name
    call.__doc__ = doc
    return call


mcp = _McpNamespace("MCP servers")
__all__.append("mcp")
MCP_TOOLS = ()
)py";
  std::vector<std::string> servers;
  for (auto* e : mcp)
    if (std::find(servers.begin(), servers.end(), e->mcp_server)
        == servers.end())
      servers.push_back(e->mcp_server);
  std::sort(servers.begin(), servers.end());
  for (auto& sv : servers)
    out += "setattr(mcp, \"" + sv + "\", _McpNamespace(\"MCP server " + sv
           + "\"))\n";
  for (auto* e : mcp) {
    out += "setattr(getattr(mcp, \"" + e->mcp_server + "\"), \"" + e->mcp_tool
           + "\", _mcp_function(\"" + e->name + "\", \"" + e->doc + "\"))\n";
    out += "MCP_TOOLS += (\"" + e->name + "\",)\n";
  }
  return out;
}

} // namespace

std::string generate_stub(const std::vector<std::string>& tools,
                          const std::vector<script_tool_spec>& specs) {
  std::vector<const script_tool_spec*> functions;
  std::vector<const script_tool_spec*> mcp;
  std::vector<std::string> names;
  for (auto& e : specs) {
    if (std::find(tools.begin(), tools.end(), e.name) == tools.end()
        || std::find(names.begin(), names.end(), e.name) != names.end())
      continue;
    names.push_back(e.name);
    if (!e.mcp_server.empty())
      mcp.push_back(&e);
    else
      functions.push_back(&e);
  }
  std::sort(functions.begin(), functions.end(),
            [](auto* x, auto* y) { return x->name < y->name; });
  std::string list = "AVAILABLE_TOOLS = (";
  for (auto* f : functions)
    list += "\"" + f->name + "\", ";
  if (!functions.empty())
    list.resize(list.size() - 1);
  list += ")";
  // The transport is one module (kernels/mibyan_tools_transport.py) whose
  // marker line becomes the tool list; the rest is copied as is.
  auto transport = stub_transport_source();
  auto at = transport.find(tools_marker);
  auto line_end = at == std::string_view::npos ? at
                                               : transport.find('\n', at);
  std::string out;
  out.reserve(transport.size() + 4096);
  if (at == std::string_view::npos) { // never: the build embeds the file
    out = list + "\n";
    out += transport;
  } else {
    out.append(transport.substr(0, at));
    out += list;
    out.append(transport.substr(line_end == std::string_view::npos
                                  ? transport.size()
                                  : line_end));
  }
  for (auto* f : functions)
    out += render_function(*f);
  out += render_mcp_namespace(mcp);
  return out;
}

std::string first_sentence(const std::string& text) {
  size_t end = text.size();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') {
      end = i;
      break;
    }
    if (text[i] == '.' && (i + 1 == text.size() || text[i + 1] == ' ')) {
      end = i + 1;
      break;
    }
  }
  return text.substr(0, end);
}

bool is_stub_identifier(const std::string& name) {
  static const char* const keywords[] = {
    "False", "None", "True", "and", "as", "assert", "async", "await",
    "break", "class", "continue", "def", "del", "elif", "else", "except",
    "finally", "for", "from", "global", "if", "import", "in", "is",
    "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
    "while", "with", "yield"};
  if (name.empty() || name[0] == '_' || (name[0] >= '0' && name[0] <= '9'))
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
          || (c >= '0' && c <= '9') || c == '_'))
      return false;
  for (auto k : keywords)
    if (name == k)
      return false;
  return true;
}

result<script_tool_spec> make_script_tool_spec(const std::string& name,
                                               const std::string& description,
                                               const json::value& schema) {
  auto fail = [](std::string msg) {
    return result<script_tool_spec>::failure(status_code::invalid_argument,
                                             std::move(msg));
  };
  if (!is_stub_identifier(name))
    return fail("'" + name + "' cannot be a Python function name");
  script_tool_spec spec;
  spec.name = name;
  std::vector<std::string> required;
  if (auto r = schema.find("required"); r != nullptr && r->is_array())
    for (auto& v : r->as_array())
      if (v.is_string())
        required.push_back(v.as_string());
  auto annotation = [](const json::value* prop) -> std::string {
    if (prop == nullptr || !prop->is_object())
      return "";
    auto type = prop->get_string("type", "");
    if (type == "string")
      return "str";
    if (type == "integer")
      return "int";
    if (type == "number")
      return "float";
    if (type == "boolean")
      return "bool";
    if (type == "array")
      return "list";
    if (type == "object")
      return "dict";
    return "";
  };
  auto props = schema.find("properties");
  for (auto& r : required) {
    if (!is_stub_identifier(r))
      return fail("property '" + r + "' of '" + name
                  + "' cannot be a Python parameter name");
    const json::value* prop = nullptr;
    if (props != nullptr && props->is_object())
      prop = props->find(r);
    spec.params.push_back({r, annotation(prop), ""});
  }
  if (props != nullptr && props->is_object()) {
    for (auto& [key, prop] : props->as_object()) {
      if (std::find(required.begin(), required.end(), key) != required.end())
        continue;
      if (!is_stub_identifier(key))
        return fail("property '" + key + "' of '" + name
                    + "' cannot be a Python parameter name");
      spec.params.push_back({key, "", "None"});
    }
  }
  // The docstring sits between triple quotes on one line.
  std::string doc;
  for (char c : description) {
    if (c == '\n' || c == '\r')
      c = ' ';
    if (c == '\\' || c == '"')
      doc += '\\';
    doc += c;
  }
  if (doc.size() > 400)
    doc = doc.substr(0, 400) + "...";
  spec.doc = doc.empty() ? "A tool of the host application." : doc;
  return spec;
}

std::string stub_signature(const script_tool_spec& spec) {
  std::string sig = spec.name + "(";
  for (size_t i = 0; i < spec.params.size(); ++i) {
    if (i > 0)
      sig += ", ";
    sig += spec.params[i].name;
    if (!spec.params[i].default_literal.empty())
      sig += "=" + spec.params[i].default_literal;
  }
  return sig + ")";
}

} // namespace mibyan
