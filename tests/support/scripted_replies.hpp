// File: tests/support/scripted_replies.hpp
//
// Bodies the scripted provider server (tests/support/http_server.*) sends
// back: OpenAI-compatible chat completions. Pure, thread-safe (but
// request_bodies, which reads the server's log).
#pragma once

#include <string>
#include <vector>

#include "base/json.hpp"

namespace mibyan::test {

class http_server;

/// A non-streamed chat completion whose message has `content` and, when
/// `call_name` is given, one tool call `call_1` with `call_args` as its
/// argument text (finish reason "tool_calls"; otherwise "stop").
std::string completion(const std::string& content,
                       const std::string& call_name = {},
                       const std::string& call_args = {});

/// One tool call of a scripted model answer.
struct scripted_call {
  std::string id;
  std::string name;
  std::string arguments;
};

/// A Chat Completions response body (non-streaming) with `content` (null
/// when empty), the tool `calls`, usage 10/5/15; `finish` defaults to
/// tool_calls / stop; `reasoning` becomes "reasoning_content".
std::string chat_completion(const std::string& content,
                            const std::vector<scripted_call>& calls = {},
                            std::string finish = "",
                            const std::string& reasoning = "");

/// The arguments text {"key": "value"}.
std::string one_arg(const std::string& key, const std::string& value);

/// A script for http_server::script: a streamed chat completion (SSE,
/// one event every `chunk_ms`) with `parts` as content deltas, then a
/// finish reason "stop" and [DONE].
std::string streamed_completion_script(const std::vector<std::string>& parts,
                                       int chunk_ms);

/// The JSON bodies of every request `server` has received, in order
/// (a Boost.Test requirement fails when one does not parse).
std::vector<json::value> request_bodies(const http_server& server);

} // namespace mibyan::test
