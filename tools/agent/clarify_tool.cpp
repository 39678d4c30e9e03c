// The clarify tool (docs/tools.md, "clarify"): asks the user through the
// host's clarify channel (agent_tool_state::clarify). Never parallel: it is
// not parallel_safe and the batch planner always runs it alone; questions
// of one runtime are asked one at a time, except through the pending
// registry (runtime/pending_approvals.hpp), which takes the questions of
// several sessions at once.
#include <algorithm>
#include <mutex>

#include "config/options.hpp"

#include "tools/agent/agent_tool_state.hpp"
#include "tools/agent/agent_tools.hpp"

namespace mibyan {

namespace {

constexpr size_t max_choices = 4;

// clarify.timeout: how long the user has to answer.
std::chrono::seconds answer_time(const options& cfg) {
  return std::chrono::seconds(cfg.clarify.timeout);
}

class clarify_tool final : public tool {
public:
  const char* name() const override { return "clarify"; }
  const char* toolset() const override { return "clarify"; }

  std::string description() const override {
    return "Ask the user a question when the task is ambiguous and a wrong "
           "guess would waste work, or before an irreversible choice. Give "
           "up to 4 short choices when the answer is one of a few options; "
           "the user may also answer freely. Ask one question at a time. "
           "Where nobody can answer (headless runs) the result is an error: "
           "then proceed on your best judgement.";
  }

  json::value schema() const override {
    json::value choices = schema_property(
      "array", "Up to 4 suggested answers (the user may answer otherwise).");
    choices["items"] = schema_property("string", "One choice.");
    json::value props;
    props["question"] = schema_property("string", "The question to ask.");
    props["choices"] = std::move(choices);
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    s["required"] = json::array{"question"};
    return s;
  }

  std::chrono::milliseconds deadline(const json::value&,
                                     const options& cfg) const override {
    return answer_time(cfg) + std::chrono::seconds(30);
  }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    auto question = args.get_string("question");
    if (question.find_first_not_of(" \t\r\n") == std::string::npos)
      return error_result("Question text is required.");
    clarify_prompt p;
    p.session_id = ctx.session_id;
    p.question = question;
    if (auto c = args.find("choices"); c && c->is_array())
      for (auto& x : c->as_array())
        if (x.is_string() && !x.as_string().empty()
            && p.choices.size() < max_choices)
          p.choices.push_back(x.as_string());
    static const options defaults;
    p.timeout = answer_time(ctx.cfg ? *ctx.cfg : defaults);
    static const std::atomic<bool> never{false};
    p.cancelled = ctx.cancelled ? ctx.cancelled : &never;
    clarify_callback cb;
    bool serialised = true;
    if (ctx.agent)
      cb = ctx.agent->clarify_for(ctx.session_id, &serialised);
    if (!cb) {
      json::value r = error_result(
        "Clarify tool is not available in this execution context: no user "
        "can answer here. Do not ask again; proceed on your best judgement "
        "and state the assumptions you made in your answer.");
      return r;
    }
    std::string answer;
    {
      std::unique_lock<std::mutex> one_at_a_time{ctx.agent->clarify_mutex(),
                                                 std::defer_lock};
      if (serialised)
        one_at_a_time.lock();
      if (ctx.is_cancelled())
        return error_result("Clarify cancelled before the user answered.");
      answer = cb(p);
    }
    json::value offered = json::value::make_array();
    for (auto& c : p.choices)
      offered.push_back(c);
    json::value r;
    r["question"] = question;
    r["choices_offered"] = std::move(offered);
    r["user_response"] = answer;
    if (answer.empty())
      r["note"] = ctx.is_cancelled()
                    ? "The question was cancelled before the user answered."
                    : "The user gave no answer; proceed on your best "
                      "judgement and state your assumptions.";
    return r;
  }
};

} // namespace

std::unique_ptr<tool> make_clarify_tool() {
  return std::make_unique<clarify_tool>();
}

} // namespace mibyan
