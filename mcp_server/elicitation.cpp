// Approvals and clarify questions as form-mode elicitations
// (mcp_server/elicitation.hpp).
#include "mcp_server/elicitation.hpp"

namespace mibyan {

namespace {

json::value form_params(std::string message, json::value properties,
                        const char* required, const std::string& version) {
  json::value schema;
  schema["type"] = "object";
  schema["properties"] = std::move(properties);
  json::value req = json::value::make_array();
  req.push_back(required);
  schema["required"] = std::move(req);
  json::value params;
  // 2025-06-18 has no modes; from 2025-11-25 on form mode is named.
  if (version != "2025-06-18")
    params["mode"] = "form";
  params["message"] = std::move(message);
  params["requestedSchema"] = std::move(schema);
  return params;
}

} // namespace

json::value approval_elicitation(const approval_prompt& p,
                                 const std::string& version) {
  std::string msg = "Mibyan asks to approve a command flagged as "
                    "dangerous";
  if (!p.descriptions.empty()) {
    msg += " (";
    for (size_t i = 0; i < p.descriptions.size(); ++i)
      msg += (i ? "; " : "") + p.descriptions[i];
    msg += ")";
  }
  msg += ":\n\n" + p.command;
  if (!p.guardian_verdict.empty())
    msg += "\n\nThe reviewer's verdict: " + p.guardian_verdict;
  msg += "\n\nonce: run it this time; session: allow this pattern for this "
         "MCP session; always: allow it permanently; deny: refuse it.";
  json::value choices = json::value::make_array();
  choices.push_back("once");
  if (p.allow_session)
    choices.push_back("session");
  if (p.allow_always)
    choices.push_back("always");
  choices.push_back("deny");
  json::value decision;
  decision["type"] = "string";
  decision["title"] = "Decision";
  decision["description"] = "once, session, always or deny";
  decision["enum"] = std::move(choices);
  decision["default"] = "deny";
  json::value props;
  props["decision"] = std::move(decision);
  return form_params(std::move(msg), std::move(props), "decision", version);
}

approval_choice approval_choice_of(const json::value& result,
                                   const approval_prompt& p) {
  if (!result.is_object() || result.get_string("action") != "accept")
    return approval_choice::deny;
  const auto* content = result.find("content");
  if (content == nullptr || !content->is_object())
    return approval_choice::deny;
  auto d = content->get_string("decision");
  if (d == "once")
    return approval_choice::once;
  if (d == "session" && p.allow_session)
    return approval_choice::session;
  if (d == "always" && p.allow_always)
    return approval_choice::always;
  return approval_choice::deny;
}

json::value clarify_elicitation(const clarify_prompt& p,
                                const std::string& version) {
  json::value answer;
  answer["type"] = "string";
  answer["title"] = "Answer";
  std::string desc = "Your answer";
  if (!p.choices.empty()) {
    desc += " (suggested: ";
    for (size_t i = 0; i < p.choices.size(); ++i)
      desc += (i ? "; " : "") + p.choices[i];
    desc += ")";
  }
  answer["description"] = desc;
  json::value props;
  props["answer"] = std::move(answer);
  return form_params("Mibyan asks: " + p.question, std::move(props),
                     "answer", version);
}

std::string clarify_answer_of(const json::value& result) {
  if (!result.is_object() || result.get_string("action") != "accept")
    return {};
  const auto* content = result.find("content");
  if (content == nullptr || !content->is_object())
    return {};
  return content->get_string("answer");
}

} // namespace mibyan
