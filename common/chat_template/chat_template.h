// Chat templates: renders a conversation into a model's prompt with the model's own Jinja2 chat
// template (GGUF `tokenizer.chat_template`, tokenizer_config.json `chat_template`), producing
// the same text as Hugging Face transformers' apply_chat_template(messages, tokenize=False).
//
// The template runs in a small Jinja2 interpreter written for untrusted input: it implements the
// part of Jinja2 that chat templates use (see parser.h for the syntax, interpreter.h for the
// semantics, builtins.h for filters, tests and functions) and bounds the time, memory and
// recursion of every render (options.h). The environment matches transformers':
// trim_blocks and lstrip_blocks on, the loopcontrols extension ({% break %}, {% continue %}),
// the `raise_exception(msg)` global and transformers' `tojson` filter.
//
// Usage:
//   ASSIGN_OR_RETURN(std::unique_ptr<ChatTemplate> tmpl, ChatTemplate::Parse(source));
//   ASSIGN_OR_RETURN(std::string prompt, tmpl->Render(messages, {.bos_token = "<s>"}));
//
// Checked byte for byte against Python jinja2 on real templates and on random ones
// (chat_template_fixture_test). Implemented beyond plain expressions and loops: macros (with
// defaults, keyword arguments, varargs/kwargs and caller()), call, filter and with blocks,
// recursive loops, the globals joiner, cycler and namespace, printf-style `str % x`,
// str.format, and every builtin test and filter of Jinja2 3.1 but random, urlize and wordwrap
// (tojson is transformers' own, as transformers installs it).
// Known gaps, which fail with InvalidArgument rather than render differently:
// include/import/extends/block, *args/**kwargs in calls, those three filters, ints past 64
// bits, Unicode character classes (isalpha, wordcount's \w, ...) outside the ranges of
// py_chartype.h, HTML entities other than a few in striptags, pprint of values wider than
// 80 columns, the rarer corners of string formatting (py_format_string.h). Known differences:
// an unknown filter or test fails when it is evaluated (Jinja2 rejects the template when
// compiling it); range() is a list (its repr differs); case mapping covers Latin, Greek,
// Cyrillic and Armenian letters only (py_string.h); repr() escapes the common non-printable
// characters only (py_format.h); a macro kept past the loop iteration that defined it (in a
// namespace) sees that iteration's variables where Jinja2 sees its own internal state;
// recursion (macros, recursive loops) stops at RenderLimits::max_depth, not at Python's
// recursion limit.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_CHAT_TEMPLATE_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_CHAT_TEMPLATE_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/chat_template/options.h"

namespace pagellm {

// One message of a conversation, as the template sees it: a dict {"role": .., "content": ..},
// then the keys that are set of "reasoning" and "reasoning_content" (both `reasoning`),
// "tool_calls", "tool_call_id" and "name".
struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ... (the template decides what is valid)
  std::string content;
  std::optional<std::string> reasoning = std::nullopt;
  // A JSON array (an assistant's calls, each {"id", "type", "function": {"name", "arguments"}}
  // as the template should see them); empty: no "tool_calls" key.
  std::string tool_calls_json = {};
  std::optional<std::string> tool_call_id = std::nullopt;
  std::optional<std::string> name = std::nullopt;
};

struct RenderOptions {
  // Whether the template should end with the header of the assistant's reply.
  bool add_generation_prompt = true;
  // The tokenizer's special tokens, as transformers passes them to the template (its
  // special_tokens_map). bos_token and eos_token are always defined (empty if unset);
  // unk_token and pad_token only when not empty, as transformers leaves out the tokens a
  // tokenizer does not have.
  std::string bos_token;
  std::string eos_token;
  std::string unk_token;
  std::string pad_token;
  // Empty, or a JSON object (vLLM's chat_template_kwargs, e.g. {"enable_thinking": false})
  // whose members become extra template variables (see chat_template/template_kwargs.h),
  // replacing the special tokens of the same name. Render fails with InvalidArgument for
  // invalid JSON, a non-object, or a member named messages, tools, documents or
  // add_generation_prompt.
  std::string template_kwargs_json;
  // Empty (the template's `tools` is none), or a JSON array: the functions the model may call
  // as the template sees them (vLLM: {"type": "function", "function": {...}} each).
  std::string tools_json;
  chat_template::RenderLimits limits;
  // What strftime_now(format) formats (transformers' datetime.now()): unset, the clock at
  // render, in `time_zone`.
  std::optional<absl::Time> now;
  absl::TimeZone time_zone = absl::LocalTimeZone();
};

// A parsed chat template. Thread-safe: immutable after Parse; Render may run on many threads at
// once.
class ChatTemplate {
 public:
  // Parses a template. Returns InvalidArgument with the line and the cause for a syntax error,
  // an unsupported tag, invalid UTF-8, or a template past the limits of `options`.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> Parse(
      std::string_view source, const chat_template::ParseOptions& options = {});

  ~ChatTemplate();
  ChatTemplate(const ChatTemplate&) = delete;
  ChatTemplate& operator=(const ChatTemplate&) = delete;

  // Renders `messages`. The template sees the variables `messages` (a list of dicts with "role"
  // and "content"), `add_generation_prompt`, `bos_token`, `eos_token` (and `unk_token`,
  // `pad_token` when set), `tools` (options.tools_json, none when empty), `documents` set to
  // none, the members of options.template_kwargs_json, and
  // transformers' global strftime_now(format) (options.now in options.time_zone).
  // Invalid UTF-8 in messages or tokens is replaced by U+FFFD first. JSON (tools_json,
  // tool_calls_json) that does not parse is InvalidArgument naming it.
  // Errors are InvalidArgument: for the template's own raise_exception(msg) (it rejects the
  // conversation: an unknown role, roles that do not alternate, ...) the message is exactly
  // `msg`; otherwise "chat template error, line N: <cause>" (a type error, an undefined value
  // used, a limit of `options.limits` exceeded).
  [[nodiscard]] absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                                   const RenderOptions& options) const;

  // True if `status` is the error of the template's raise_exception (a rejected conversation,
  // as opposed to a broken template).
  [[nodiscard]] static bool IsRaisedByTemplate(const absl::Status& status);

 private:
  struct Impl;
  explicit ChatTemplate(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_CHAT_TEMPLATE_H_
