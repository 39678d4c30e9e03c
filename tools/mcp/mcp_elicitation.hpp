// File: tools/mcp/mcp_elicitation.hpp
//
// Form-mode elicitation of the MCP client (docs/mcp.md, "Elicitation"): a
// server's `requestedSchema` (an object of primitive properties: string
// with optional format, number, integer, boolean, single-select enums as
// `enum` or titled `oneOf`, multi-select arrays of such enums) as a list of
// form fields; an answer checked against it with the defaults applied; and
// the whole form asked through a clarify channel one question per field
// (the chat, the dashboard's questions page, an ACP or MCP-serve client).
//
// Pure functions (no I/O) except mcp_elicit_by_questions, which blocks in
// the clarify callback.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"
#include "mibyan/clarify.hpp"
#include "tools/mcp/mcp_session.hpp"

namespace mibyan {

/// One field of an elicitation form.
struct mcp_form_field {
  std::string name;
  std::string title;       // the schema's title, else the name
  std::string description;
  /// "string", "number", "integer", "boolean" or "array" (multi-select).
  std::string type;
  std::string format;      // email, uri, date, date-time ("" none)
  /// The allowed values of an enum (single or multi-select) and their
  /// display labels (the value itself when the schema gives none).
  std::vector<std::string> values;
  std::vector<std::string> labels;
  json::value default_value; // null when none
  bool required = false;
  std::optional<double> minimum, maximum;   // number, integer
  std::optional<int64_t> min_length, max_length; // string length, items
};

/// The fields of `schema` in its property order. Errors
/// (invalid_argument): not an object schema, a property that is not
/// primitive (nested object, array of non-enum items).
result<std::vector<mcp_form_field>> mcp_parse_form(const json::value& schema);

/// Checks an accepted `content` against `fields`: every default of a
/// missing field applied, each value of the right type, in its enum and
/// range, every required field present. Unknown members are dropped.
/// Errors (invalid_argument) name the field and why.
result<json::value> mcp_complete_form(const std::vector<mcp_form_field>& fields,
                                      const json::value& content);

/// The typed value of one field from the user's text ("" is no value:
/// an error). Booleans take yes/no/true/false/y/n/1/0; enums the value or
/// its label (case-insensitive) or a 1-based number; multi-select a
/// comma-separated list of those.
result<json::value> mcp_form_value(const mcp_form_field& f,
                                   const std::string& text);

/// Asks `r` through `ask`: first whether to fill in the form (accept /
/// decline / cancel; no answer = cancel), then each field (Enter or "-"
/// keeps the default or skips an optional field; an invalid answer is asked again,
/// twice at most). Returns the ElicitResult. Each question waits at most
/// `per_question` and stops when `*r.cancelled` turns true.
json::value mcp_elicit_by_questions(const mcp_elicitation_request& r,
                                    const clarify_callback& ask,
                                    std::chrono::seconds per_question);

/// {"action": `action`} (decline / cancel).
json::value mcp_elicit_result(const char* action);

} // namespace mibyan
