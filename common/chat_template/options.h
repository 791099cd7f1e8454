// Options of the chat-template interpreter: the Jinja2 environment settings it emulates and its
// resource limits. Templates come with model files and are not trusted: every limit turns into
// an InvalidArgument error instead of a crash, a hang or unbounded memory. The default limits
// leave real chat templates (SmolLM2, Llama, Mistral, Qwen, Gemma, Phi-3, DeepSeek) orders of
// magnitude of headroom on conversations of thousands of messages.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_OPTIONS_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_OPTIONS_H_

#include <cstddef>
#include <cstdint>

namespace pagellm::chat_template {

struct ParseOptions {
  // Jinja2's Environment(trim_blocks, lstrip_blocks): transformers' apply_chat_template sets
  // both: the newline right after a block or comment tag is dropped, and so is the whitespace
  // between the start of a line and a block or comment tag.
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  // Longest template source accepted.
  size_t max_source_bytes = size_t{1} << 20;
  // Deepest nesting of expressions (operands, parentheses, filter chains: `a + b + c` is 3 deep)
  // and of statements (`{% if %}` inside `{% for %}` is 2 deep). Bounds the interpreter's
  // recursion, so it must stay well within the thread's stack.
  int max_nesting_depth = 128;
};

struct RenderLimits {
  // Longest rendered text.
  size_t max_output_bytes = size_t{1} << 20;
  // Longest single string value (a concatenation, a filter result, a formatted list).
  size_t max_string_bytes = size_t{1} << 20;
  // Total bytes of all strings one render may create: bounds the time and memory of templates
  // that build strings in loops.
  uint64_t max_allocated_bytes = uint64_t{64} << 20;
  // Statements executed + loop iterations + expressions evaluated + container items created or
  // compared + one per 64 bytes of text scanned: bounds the time of one render and the memory
  // held by lists it builds.
  uint64_t max_steps = 1'000'000;
  // Most statements and expressions being evaluated at once, nested in one another, counting
  // through macro calls, call blocks and recursive loops (a recursive macro adds the nesting of
  // its body, and 5 for the call, at each call). Bounds the interpreter's stack: the default
  // fits a thread with a 1 MiB stack (chat_template_test checks), leaves any template within
  // ParseOptions::max_nesting_depth (at most 2 x 128 levels) room, and lets a simple recursive
  // macro nest about 50 calls deep.
  int max_depth = 400;
};

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_OPTIONS_H_
