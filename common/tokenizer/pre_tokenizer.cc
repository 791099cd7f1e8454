// Design: each regex is compiled (and JIT-compiled when the platform allows) once; Split() makes
// its own pcre2_match_data per call, so concurrent calls share only immutable pcre2_code.
// Matching follows Oniguruma's find_iter, which HF tokenizers uses: leftmost match, then
// continue at its end; an empty match (none of the built-in patterns has one) is skipped.
#include "common/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/tokenizer/absl_view.h"
#include "common/utf8.h"

namespace pagellm {
namespace {

constexpr std::string_view kGpt2Regex =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kLlama3Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})re"
    R"re(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})re"
    R"re(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kDigitRegex = R"re(\p{N})re";

struct Family {
  std::string_view name;
  std::array<std::string_view, 2> patterns;  // empty entries are unused
  PreTokenizerDefaults defaults;
};

constexpr Family kFamilies[] = {
    {"default", {kGpt2Regex, {}}, {}},
    {"gpt2", {kGpt2Regex, {}}, {}},
    {"gpt-2", {kGpt2Regex, {}}, {}},
    {"phi-2", {kGpt2Regex, {}}, {}},
    {"mpt", {kGpt2Regex, {}}, {}},
    {"olmo", {kGpt2Regex, {}}, {}},
    {"smollm", {kDigitRegex, kGpt2Regex}, {}},
    {"starcoder", {kDigitRegex, kGpt2Regex}, {}},
    {"refact", {kDigitRegex, kGpt2Regex}, {}},
    {"llama3", {kLlama3Regex, {}}, {.ignore_merges = true, .add_bos = true}},
    {"llama-v3", {kLlama3Regex, {}}, {.ignore_merges = true, .add_bos = true}},
    {"llama-bpe", {kLlama3Regex, {}}, {.ignore_merges = true, .add_bos = true}},
    {"qwen2", {kQwen2Regex, {}}, {}},
    {"deepseek-r1-qwen", {kQwen2Regex, {}}, {}},
    {"stablelm2", {kQwen2Regex, {}}, {}},
};

const Family* FindFamily(std::string_view name) {
  for (const Family& f : kFamilies) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

std::string_view Gpt2PreTokenizerRegex() { return kGpt2Regex; }

absl::StatusOr<PreTokenizerDefaults> PreTokenizerDefaultsFor(std::string_view name) {
  const Family* f = FindFamily(name);
  if (f == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("unsupported pre-tokenizer \"", AbslView(name), "\""));
  }
  return f->defaults;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(std::string_view name) {
  const Family* f = FindFamily(name);
  if (f == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("unsupported pre-tokenizer \"", AbslView(name), "\""));
  }
  std::vector<std::string> patterns;
  for (std::string_view p : f->patterns) {
    if (!p.empty()) patterns.emplace_back(p);
  }
  auto pre = FromPatterns(patterns);
  if (!pre.ok()) return absl::InternalError(pre.status().message());
  return pre;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromPatterns(
    const std::vector<std::string>& patterns) {
  std::unique_ptr<PreTokenizer> pre(new PreTokenizer());
  for (const std::string& pattern : patterns) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto re = std::make_unique<Regex>();
    re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (re->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(error, msg, sizeof(msg));
      return absl::InvalidArgumentError(absl::StrCat("pre-tokenizer regex error at offset ", offset,
                                                     ": ", reinterpret_cast<const char*>(msg)));
    }
    // Without JIT (unsupported platform) matching still works, only slower.
    pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    pre->regexes_.push_back(std::move(re));
  }
  return pre;
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::SplitOne(const Regex& re, std::string_view text,
                            std::vector<std::string_view>* out) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re.code, nullptr);
  PAGELLM_CHECK(md != nullptr, "pcre2_match_data_create_from_pattern: out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t emitted = 0;  // text[0, emitted) has been appended to `out`
  size_t search = 0;
  while (search < text.size()) {
    int rc = pcre2_match(re.code, subject, text.size(), search, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(re.code, subject, text.size(), search, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                       nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      // Only resource limits can get here; keep the rest as one piece.
      PLOG_WARN("pre-tokenizer: pcre2_match failed ({}); {} bytes left unsplit", rc,
                text.size() - search);
      break;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t begin = ov[0];
    const size_t end = ov[1];
    if (end == begin) {  // empty match: step over one character
      search = begin + (begin < text.size() ? Utf8CharLen(text, begin) : 1);
      continue;
    }
    if (begin > emitted) out->push_back(text.substr(emitted, begin - emitted));
    out->push_back(text.substr(begin, end - begin));
    emitted = search = end;
  }
  if (emitted < text.size()) out->push_back(text.substr(emitted));
  pcre2_match_data_free(md);
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  if (text.empty()) return;
  if (regexes_.empty()) {
    pieces->push_back(text);
    return;
  }
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (size_t i = 0; i < regexes_.size(); ++i) {
    std::vector<std::string_view>* out = i + 1 == regexes_.size() ? pieces : &next;
    for (std::string_view piece : current) SplitOne(*regexes_[i], piece, out);
    if (out == &next) {
      current.swap(next);
      next.clear();
    }
  }
}

}  // namespace pagellm
