// File: tests/support/scripted_replies.hpp
//
// Bodies the scripted provider server (tests/support/http_server.*) sends
// back: OpenAI-compatible chat completions.
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

/// A script for http_server::script: a streamed chat completion (SSE,
/// one event every `chunk_ms`) with `parts` as content deltas, then a
/// finish reason "stop" and [DONE].
std::string streamed_completion_script(const std::vector<std::string>& parts,
                                       int chunk_ms);

/// The JSON bodies of every request `server` has received, in order
/// (a Boost.Test requirement fails when one does not parse).
std::vector<json::value> request_bodies(const http_server& server);

} // namespace mibyan::test
