// File: tests/support/scripted_replies.cpp
#include "tests/support/scripted_replies.hpp"

#include "base/json.hpp"

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

} // namespace mibyan::test
