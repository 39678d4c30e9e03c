// File: tests/support/scripted_replies.cpp
#include "tests/support/scripted_replies.hpp"

#include <boost/test/unit_test.hpp>

#include "base/json.hpp"
#include "tests/support/http_server.hpp"

namespace mibyan::test {

std::string completion(const std::string& content,
                       const std::string& call_name,
                       const std::string& call_args) {
  json::value msg;
  msg["role"] = "assistant";
  msg["content"] = content;
  std::string finish = "stop";
  if (!call_name.empty()) {
    json::value tc;
    tc["id"] = "call_1";
    tc["type"] = "function";
    tc["function"]["name"] = call_name;
    tc["function"]["arguments"] = call_args;
    msg["tool_calls"] = json::value::make_array();
    msg["tool_calls"].push_back(std::move(tc));
    finish = "tool_calls";
  }
  json::value choice;
  choice["index"] = 0;
  choice["message"] = std::move(msg);
  choice["finish_reason"] = finish;
  json::value body;
  body["id"] = "c1";
  body["model"] = "m";
  body["choices"] = json::value::make_array();
  body["choices"].push_back(std::move(choice));
  return body.dump();
}

std::string chat_completion(const std::string& content,
                            const std::vector<scripted_call>& calls,
                            std::string finish, const std::string& reasoning) {
  json::value msg;
  msg["role"] = "assistant";
  if (content.empty())
    msg["content"] = json::value{};
  else
    msg["content"] = content;
  if (!reasoning.empty())
    msg["reasoning_content"] = reasoning;
  if (!calls.empty()) {
    auto arr = json::value::make_array();
    for (auto& c : calls) {
      json::value tc;
      tc["id"] = c.id;
      tc["type"] = "function";
      tc["function"]["name"] = c.name;
      tc["function"]["arguments"] = c.arguments;
      arr.push_back(std::move(tc));
    }
    msg["tool_calls"] = std::move(arr);
  }
  if (finish.empty())
    finish = calls.empty() ? "stop" : "tool_calls";
  json::value choice;
  choice["index"] = 0;
  choice["message"] = std::move(msg);
  choice["finish_reason"] = finish;
  json::value body;
  body["id"] = "chatcmpl-1";
  body["object"] = "chat.completion";
  body["model"] = "m";
  body["choices"] = json::value::make_array();
  body["choices"].push_back(std::move(choice));
  json::value u;
  u["prompt_tokens"] = 10;
  u["completion_tokens"] = 5;
  u["total_tokens"] = 15;
  body["usage"] = std::move(u);
  return body.dump();
}

std::string one_arg(const std::string& key, const std::string& value) {
  json::value a;
  a[key] = value;
  return a.dump();
}

std::string streamed_completion_script(const std::vector<std::string>& parts,
                                       int chunk_ms) {
  json::value s;
  s["path"] = "/v1/chat/completions";
  s["status"] = 200;
  s["headers"]["Content-Type"] = "text/event-stream";
  s["chunk_ms"] = chunk_ms;
  s["chunks"] = json::value::make_array();
  for (auto& part : parts) {
    json::value d;
    d["choices"] = json::value::make_array();
    json::value ch;
    ch["index"] = 0;
    ch["delta"]["content"] = part;
    d["choices"].push_back(std::move(ch));
    s["chunks"].push_back("data: " + d.dump() + "\n\n");
  }
  s["chunks"].push_back(R"(data: {"choices":[{"index":0,"delta":{},)"
                        R"("finish_reason":"stop"}]})" "\n\ndata: [DONE]\n\n");
  return s.dump();
}

std::vector<json::value> request_bodies(const http_server& server) {
  auto parsed = json::parse(server.requests());
  BOOST_REQUIRE(parsed);
  std::vector<json::value> out;
  for (auto& r : parsed.v->as_array()) {
    auto body = json::parse(r.find("body")->as_string());
    BOOST_REQUIRE(body);
    out.push_back(*body.v);
  }
  return out;
}

} // namespace mibyan::test
