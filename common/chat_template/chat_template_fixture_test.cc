// Compares ChatTemplate with Python jinja2, configured as transformers' apply_chat_template
// configures it, on the fixture tools/fixtures/make_chat_template_fixture.py generates (default
// .cache/fixtures/chat_template/expected.json, or $PAGELLM_CHAT_TEMPLATE_FIXTURES/expected.json):
// real chat templates (SmolLM2, Llama 2/3/3.1, Mistral, Qwen2/2.5, Gemma, Phi-3, ChatML, Zephyr,
// DeepSeek, ...) each rendered over ten conversations, feature templates, and seeded random
// templates (whitespace control, expressions); and the templates with tool calling over
// conversations with tools, calls and tool results, as vLLM passes them.
//   * jinja2 rendered text: ours must be byte-identical;
//   * the template's raise_exception(msg): ours must fail with exactly msg, marked as raised;
//   * any other jinja2 error (including a template jinja2 cannot compile): ours must fail too,
//     at Parse or at Render.
// Skips when the fixture is missing (no .venv: see tools/setup.sh).
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "common/chat_template/chat_template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;  // keeps template_kwargs in order, as Python does

std::string FixturePath() {
  const char* env = std::getenv("PAGELLM_CHAT_TEMPLATE_FIXTURES");
  return absl::StrCat(env != nullptr ? env : ".cache/fixtures/chat_template", "/expected.json");
}

std::string Show(const std::string& s) {
  return absl::StrCat("\"", absl::CHexEscape(s.size() > 600 ? s.substr(0, 600) + "..." : s), "\"");
}

class ChatTemplateFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream f(FixturePath());
    if (!f) GTEST_SKIP() << FixturePath() << " missing: run tools/setup.sh, then ctest";
    fixture_ = Json::parse(f);
  }

  Json fixture_;
};

TEST_F(ChatTemplateFixtureTest, MatchesJinja2) {
  std::map<std::string, absl::StatusOr<std::unique_ptr<ChatTemplate>>> parsed;
  for (const auto& [name, entry] : fixture_["templates"].items()) {
    parsed.emplace(name, ChatTemplate::Parse(entry["source"].get<std::string>()));
    if (entry["parse_error"].is_null()) {
      EXPECT_TRUE(parsed.at(name).ok())
          << name << ": jinja2 compiles it but Parse fails: " << parsed.at(name).status();
    }
  }
  int matched = 0;
  int failed = 0;
  std::map<std::string, std::pair<int, int>> per_template;  // {matched, total}
  for (const Json& c : fixture_["cases"]) {
    const std::string name = c["template"];
    const std::string context = absl::StrCat(
        name, " x ", c["conversation"].get<std::string>(),
        " (add_generation_prompt=", c["add_generation_prompt"].get<bool>(),
        c.contains("template_kwargs") ? absl::StrCat(", kwargs ", c["template_kwargs"].dump()) : "",
        ")");
    std::vector<ChatMessage> messages;
    for (const Json& m : c["messages"]) {
      ChatMessage message{m["role"], m["content"]};
      // Tool calling cases: the keys vLLM passes (tool_calls with parsed arguments, ...).
      if (m.contains("reasoning")) message.reasoning = m["reasoning"];
      if (m.contains("tool_calls")) message.tool_calls_json = m["tool_calls"].dump();
      if (m.contains("tool_call_id")) message.tool_call_id = m["tool_call_id"];
      if (m.contains("name")) message.name = m["name"];
      messages.push_back(std::move(message));
    }
    RenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"];
    options.bos_token = c["bos_token"];
    options.eos_token = c["eos_token"];
    // Cases of the script's FEATURE_VARIANTS: extra variables.
    if (c.contains("unk_token") && !c["unk_token"].is_null()) options.unk_token = c["unk_token"];
    if (c.contains("pad_token") && !c["pad_token"].is_null()) options.pad_token = c["pad_token"];
    if (c.contains("tools") && !c["tools"].is_null()) options.tools_json = c["tools"].dump();
    if (c.contains("template_kwargs") && !c["template_kwargs"].is_null()) {
      options.template_kwargs_json = c["template_kwargs"].dump();
    }
    // The fixture script's FIXED_NOW, as strftime_now sees it.
    options.now = absl::FromCivil(absl::CivilSecond(2024, 9, 18, 7, 5, 3), absl::UTCTimeZone());
    options.time_zone = absl::UTCTimeZone();
    const auto& tmpl = parsed.at(name);
    absl::StatusOr<std::string> got =
        tmpl.ok() ? (*tmpl)->Render(messages, options) : absl::StatusOr<std::string>(tmpl.status());

    std::string problem;
    if (c["error"].is_null()) {
      const std::string want = c["expected"];
      if (!got.ok()) {
        problem = absl::StrCat("want ", Show(want), "\n  got error ", got.status().ToString());
      } else if (*got != want) {
        problem = absl::StrCat("want ", Show(want), "\n  got  ", Show(*got));
      }
    } else if (got.ok()) {
      problem = absl::StrCat("want error ", c["error"]["message"].get<std::string>(),
                             "\n  got text ", Show(*got));
    } else if (c["error"]["kind"] == "raise_exception") {
      const std::string want = c["error"]["message"];
      if (got.status().code() != absl::StatusCode::kInvalidArgument ||
          got.status().message() != want || !ChatTemplate::IsRaisedByTemplate(got.status())) {
        problem =
            absl::StrCat("want raise_exception ", Show(want), "\n  got ", got.status().ToString());
      }
    } else if (got.status().code() != absl::StatusCode::kInvalidArgument) {
      problem = absl::StrCat("want InvalidArgument, got ", got.status().ToString());
    }
    auto& [template_matched, template_total] = per_template[name];
    ++template_total;
    if (problem.empty()) {
      ++matched;
      ++template_matched;
    } else if (++failed <= 20) {
      ADD_FAILURE() << context << ":\n  " << problem;
    }
  }
  std::string summary;
  for (const auto& [name, counts] : per_template) {
    if (name.rfind("feature:", 0) != 0) {
      absl::StrAppend(&summary, " ", name, " ", counts.first, "/", counts.second, ";");
    }
  }
  std::cout << "chat templates vs jinja2 " << fixture_["jinja2_version"].get<std::string>() << ": "
            << matched << "/" << matched + failed << " cases match\n  per template:" << summary
            << "\n";
  EXPECT_EQ(failed, 0);
  EXPECT_GT(matched, 0);
}

}  // namespace
}  // namespace pagellm
