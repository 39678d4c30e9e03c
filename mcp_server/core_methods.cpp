// The tool and resource methods of the MCP server core
// (mcp_server/server_core.hpp): tools/list with cursors, the list_changed
// check, tools/call with progress and cancellation, and the read-only
// transcript resources.
#include <algorithm>

#include "base/log.hpp"
#include "mcp_server/core_impl.hpp"

namespace mibyan {

using steady = std::chrono::steady_clock;

namespace {

// Cursors are opaque to clients: "o<offset>" here.
bool parse_cursor(const json::value& params, size_t& offset) {
  offset = 0;
  const auto* c = params.find("cursor");
  if (c == nullptr || c->is_null())
    return true;
  if (!c->is_string())
    return false;
  const auto& t = c->as_string();
  if (t.size() < 2 || t.size() > 12 || t[0] != 'o')
    return false;
  size_t n = 0;
  for (size_t i = 1; i < t.size(); ++i) {
    if (t[i] < '0' || t[i] > '9')
      return false;
    n = n * 10 + static_cast<size_t>(t[i] - '0');
  }
  offset = n;
  return true;
}

std::string cursor_at(size_t offset) {
  return "o" + std::to_string(offset);
}

const std::string transcript_prefix = "mibyan://sessions/";

} // namespace

result<std::vector<mcp_offered_tool>>
mcp_server_core::impl::current_tools(bool* changed) {
  if (changed)
    *changed = false;
  if (!backend.list_tools)
    return std::vector<mcp_offered_tool>{};
  auto tools = backend.list_tools();
  if (!tools)
    return tools;
  std::string sig;
  std::set<std::string> names;
  for (auto& t : *tools) {
    sig += t.name;
    sig += '\n';
    sig += t.description;
    sig += '\n';
    sig += t.input_schema.dump();
    sig += '\n';
    names.insert(t.name);
  }
  std::lock_guard<std::mutex> g{mtx};
  tool_names = std::move(names);
  tools_known = true;
  // Only the ticker's check moves the signature on, so that a tools/list
  // of one session never hides a change from the others.
  if (changed != nullptr) {
    *changed = signature_known && sig != tools_signature;
    signature_known = true;
    tools_signature = std::move(sig);
  }
  return tools;
}

void mcp_server_core::impl::check_tool_list() {
  bool changed = false;
  auto tools = current_tools(&changed);
  if (!tools || !changed)
    return;
  std::vector<session_ptr> all;
  {
    std::lock_guard<std::mutex> g{mtx};
    for (auto& [id, s] : sessions)
      all.push_back(s);
  }
  MIBYAN_LOG(info, "mcp-serve", "the offered tools changed ("
                                  << tools->size()
                                  << " now): notifying " << all.size()
                                  << " session(s)");
  for (auto& s : all) {
    {
      std::lock_guard<std::mutex> g{s->mtx};
      if (!s->initialized)
        continue;
    }
    notify(s, "notifications/tools/list_changed", json::value::make_object(),
           {});
  }
}

void mcp_server_core::impl::list_tools(const session_ptr& s,
                                       const json::value& id,
                                       const json::value& params) {
  size_t offset = 0;
  if (!parse_cursor(params, offset)) {
    fail(s, id, mcp_errors::invalid_params, "Invalid params: unknown cursor");
    return;
  }
  auto tools = current_tools(nullptr);
  if (!tools) {
    fail(s, id, mcp_errors::internal_error,
         "the tool list cannot be built: " + tools.error);
    return;
  }
  if (offset > tools->size()) {
    fail(s, id, mcp_errors::invalid_params,
         "Invalid params: the cursor is past the end of the list");
    return;
  }
  size_t page = std::max<size_t>(1, cfg.page_size);
  size_t end = std::min(tools->size(), offset + page);
  json::value list = json::value::make_array();
  for (size_t i = offset; i < end; ++i) {
    const auto& t = (*tools)[i];
    json::value x;
    x["name"] = t.name;
    if (!t.title.empty())
      x["title"] = t.title;
    x["description"] = t.description;
    x["inputSchema"] = t.input_schema;
    json::value ann;
    ann["readOnlyHint"] = t.read_only;
    x["annotations"] = std::move(ann);
    list.push_back(std::move(x));
  }
  json::value r;
  r["tools"] = std::move(list);
  if (end < tools->size())
    r["nextCursor"] = cursor_at(end);
  respond(s, id, std::move(r));
}

void mcp_server_core::impl::call_tool(const session_ptr& s,
                                      const json::value& id,
                                      const json::value& params) {
  const auto* name = params.find("name");
  if (name == nullptr || !name->is_string() || name->as_string().empty()) {
    fail(s, id, mcp_errors::invalid_params,
         "Invalid params: name (a string) is required");
    return;
  }
  const auto* args = params.find("arguments");
  if (args != nullptr && !args->is_null() && !args->is_object()) {
    fail(s, id, mcp_errors::invalid_params,
         "Invalid params: arguments must be an object");
    return;
  }
  const auto& tool = name->as_string();
  bool offered = false;
  {
    std::lock_guard<std::mutex> g{mtx};
    offered = tools_known && tool_names.count(tool) > 0;
  }
  if (!offered) {
    auto tools = current_tools(nullptr);
    std::lock_guard<std::mutex> g{mtx};
    offered = tool_names.count(tool) > 0;
  }
  if (!offered) {
    fail(s, id, mcp_errors::invalid_params, "Unknown tool: " + tool);
    return;
  }
  auto c = std::make_shared<mcp_running_call>();
  c->call_id = "mcp_" + std::to_string(++call_counter); // before it is found
  c->id = id;
  c->tool = tool;
  c->started = c->last_beat = steady::now();
  if (const auto* meta = params.find("_meta"); meta && meta->is_object())
    if (const auto* tok = meta->find("progressToken");
        tok != nullptr && (tok->is_string() || tok->is_int())) {
      c->has_token = true;
      c->token = *tok;
    }
  auto key = id.dump();
  {
    std::lock_guard<std::mutex> g{s->mtx};
    if (s->calls.count(key) != 0) {
      // Answering would confuse the running call's response with this.
      c.reset();
    } else {
      s->calls[key] = c;
    }
  }
  if (!c) {
    fail(s, id, mcp_errors::invalid_request,
         "Invalid Request: request id " + key + " is already in use");
    return;
  }
  mcp_tool_call call;
  call.session_id = s->mibyan_id;
  call.call_id = c->call_id;
  call.tool = tool;
  call.args_json = args != nullptr && args->is_object() ? args->dump() : "{}";
  log_to_client(s, 0, "tools/call " + tool + " started", id);
  MIBYAN_LOG(debug, "mcp-serve", "session " << s->id << ": " << tool
                                            << " call " << call.call_id);
  std::weak_ptr<mcp_server_core> wc = self;
  std::weak_ptr<session> ws = s;
  backend.call_tool(std::move(call), [wc, ws, c, key](mcp_tool_answer a) {
    auto core = wc.lock();
    auto sess = ws.lock();
    if (!core || !sess)
      return;
    auto& p = *core->p_;
    bool drop = false;
    {
      std::lock_guard<std::mutex> g{sess->mtx};
      auto i = sess->calls.find(key);
      if (i != sess->calls.end() && i->second == c)
        sess->calls.erase(i);
      drop = c->abandoned || sess->closed;
    }
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                steady::now() - c->started)
                .count();
    if (drop) {
      MIBYAN_LOG(info, "mcp-serve", "session " << sess->id << ": " << c->tool
                                               << " ended after cancellation "
                                                  "(no response sent)");
      return;
    }
    auto parsed = json::parse(a.result_json);
    bool is_error = a.timed_out;
    json::value r;
    json::value text;
    text["type"] = "text";
    text["text"] = a.result_json;
    json::value content = json::value::make_array();
    content.push_back(std::move(text));
    r["content"] = std::move(content);
    if (parsed && parsed.v->is_object()) {
      if (parsed.v->find("error") != nullptr)
        is_error = true;
      r["structuredContent"] = std::move(*parsed.v);
    }
    r["isError"] = is_error;
    p.log_to_client(sess, is_error ? 3 : 1,
                    "tools/call " + c->tool
                      + (is_error ? " failed" : " finished") + " after "
                      + std::to_string(ms) + " ms",
                    c->id);
    p.respond(sess, c->id, std::move(r));
  });
}

// -- resources: the stored sessions' transcripts, read-only ----------------------

bool mcp_server_core::impl::has_resources() const {
  return backend.run_blocking && backend.list_transcripts
         && backend.read_transcript;
}

void mcp_server_core::impl::list_resources(const session_ptr& s,
                                           const json::value& id,
                                           const json::value& params) {
  size_t offset = 0;
  if (!parse_cursor(params, offset)) {
    fail(s, id, mcp_errors::invalid_params, "Invalid params: unknown cursor");
    return;
  }
  size_t page = std::max<size_t>(1, cfg.page_size);
  std::weak_ptr<mcp_server_core> wc = self;
  bool queued = backend.run_blocking([wc, s, id, offset, page] {
    auto core = wc.lock();
    if (!core)
      return;
    auto& p = *core->p_;
    // One more than a page: whether there is a next page.
    auto list = p.backend.list_transcripts(offset, page + 1);
    if (!list) {
      p.fail(s, id, mcp_errors::internal_error,
             "the session store cannot be read: " + list.error);
      return;
    }
    json::value arr = json::value::make_array();
    for (size_t i = 0; i < list->size() && i < page; ++i) {
      const auto& t = (*list)[i];
      json::value x;
      x["uri"] = transcript_prefix + t.session_id;
      x["name"] = t.session_id;
      if (!t.title.empty())
        x["title"] = t.title;
      x["description"] = "The stored messages of Mibyan session "
                         + t.session_id + " (read-only)";
      x["mimeType"] = "application/json";
      if (!t.updated.empty()) {
        json::value ann;
        ann["lastModified"] = t.updated;
        x["annotations"] = std::move(ann);
      }
      arr.push_back(std::move(x));
    }
    json::value r;
    r["resources"] = std::move(arr);
    if (list->size() > page)
      r["nextCursor"] = cursor_at(offset + page);
    p.respond(s, id, std::move(r));
  });
  if (!queued)
    fail(s, id, mcp_errors::internal_error, "the server is stopping");
}

void mcp_server_core::impl::read_resource(const session_ptr& s,
                                          const json::value& id,
                                          const json::value& params) {
  auto uri = params.get_string("uri");
  if (uri.rfind(transcript_prefix, 0) != 0
      || uri.size() == transcript_prefix.size()) {
    fail(s, id, mcp_errors::resource_not_found, "Resource not found: " + uri);
    return;
  }
  auto sid = uri.substr(transcript_prefix.size());
  std::weak_ptr<mcp_server_core> wc = self;
  bool queued = backend.run_blocking([wc, s, id, uri, sid] {
    auto core = wc.lock();
    if (!core)
      return;
    auto& p = *core->p_;
    auto text = p.backend.read_transcript(sid);
    if (!text) {
      if (text.code == status_code::not_found)
        p.fail(s, id, mcp_errors::resource_not_found,
               "Resource not found: " + uri);
      else
        p.fail(s, id, mcp_errors::internal_error,
               "the session store cannot be read: " + text.error);
      return;
    }
    json::value c;
    c["uri"] = uri;
    c["mimeType"] = "application/json";
    c["text"] = std::move(*text);
    json::value arr = json::value::make_array();
    arr.push_back(std::move(c));
    json::value r;
    r["contents"] = std::move(arr);
    p.respond(s, id, std::move(r));
  });
  if (!queued)
    fail(s, id, mcp_errors::internal_error, "the server is stopping");
}

} // namespace mibyan
