#include "worker/engine/structured_outputs.h"

#include <algorithm>
#include <chrono>

#include "common/structured/gbnf_grammar.h"
#include "common/structured/json_schema_grammar.h"
#include "common/structured/regex_grammar.h"

namespace pagellm {

absl::StatusOr<structured::Grammar> BuildGrammar(const StructuredOutput& so) {
  absl::StatusOr<structured::Grammar> grammar;
  switch (so.kind) {
    case StructuredOutput::Kind::kJsonSchema:
      grammar = structured::JsonSchemaGrammar(so.json_schema);
      break;
    case StructuredOutput::Kind::kJsonObject:
      grammar = structured::JsonObjectGrammar();
      break;
    case StructuredOutput::Kind::kChoice:
      grammar = structured::ChoiceGrammar(so.choices);
      break;
    case StructuredOutput::Kind::kRegex:
      grammar = structured::RegexGrammar(so.regex);
      break;
    case StructuredOutput::Kind::kGrammar:
      grammar = structured::GbnfGrammar(so.grammar);
      break;
    case StructuredOutput::Kind::kNone:
      return absl::InvalidArgumentError("structured output: none asked for");
  }
  if (!grammar.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling_params.structured_output: ", grammar.status().message()));
  }
  return grammar;
}

absl::StatusOr<structured::Grammar> GrammarBuildCache::Build(const StructuredOutput& so) {
  std::string key = so.CacheKey();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it =
        std::find_if(kept_.begin(), kept_.end(), [&](const auto& e) { return e.first == key; });
    if (it != kept_.end()) {
      std::rotate(it, it + 1, kept_.end());  // most recently used last
      ++reused_;
      return *kept_.back().second;
    }
  }
  absl::StatusOr<structured::Grammar> grammar = BuildGrammar(so);
  std::lock_guard<std::mutex> lock(mu_);
  ++built_;
  if (!grammar.ok() || key.size() > kMaxKeyBytes) return grammar;
  auto it = std::find_if(kept_.begin(), kept_.end(), [&](const auto& e) { return e.first == key; });
  if (it == kept_.end()) {  // another thread may have built the same meanwhile
    if (kept_.size() == static_cast<size_t>(kKept)) kept_.erase(kept_.begin());
    kept_.emplace_back(std::move(key), std::make_shared<const structured::Grammar>(*grammar));
  }
  return grammar;
}

int64_t GrammarBuildCache::built() const {
  std::lock_guard<std::mutex> lock(mu_);
  return built_;
}

int64_t GrammarBuildCache::reused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reused_;
}

StructuredOutputs::StructuredOutputs(const Tokenizer* tokenizer, int64_t vocab_size,
                                     std::vector<int32_t> eos_ids)
    : tokenizer_(tokenizer),
      vocab_size_(vocab_size),
      words_((vocab_size + 63) / 64),
      eos_ids_(std::move(eos_ids)) {}

absl::StatusOr<std::shared_ptr<structured::CompiledGrammar>> StructuredOutputs::Compile(
    const StructuredOutput& so, std::optional<structured::Grammar> prebuilt) {
  std::string key = so.CacheKey();
  for (size_t i = 0; i < cache_.size(); ++i) {
    if (cache_[i].first != key) continue;
    if (cache_[i].second->exhausted()) {  // out of nodes: start a fresh one
      cache_.erase(cache_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
    std::rotate(cache_.begin() + static_cast<std::ptrdiff_t>(i),
                cache_.begin() + static_cast<std::ptrdiff_t>(i) + 1, cache_.end());
    return cache_.back().second;
  }
  absl::StatusOr<structured::Grammar> grammar =
      prebuilt.has_value() ? *std::move(prebuilt) : BuildGrammar(so);
  if (!grammar.ok()) return grammar.status();
  if (vocab_ == nullptr) {
    const Tokenizer* t = tokenizer_;
    auto vocab = structured::TokenVocabulary::Create(
        static_cast<int32_t>(vocab_size_), [t](int32_t id) { return t->TokenPiece(id); },
        [t](int32_t id) {
          return id < t->vocab_size() && !t->IsSpecial(id) &&
                 t->token_type(id) != TokenType::kUnused;
        });
    if (!vocab.ok()) return vocab.status();
    vocab_ = *std::move(vocab);
  }
  auto compiled = structured::CompiledGrammar::Create(*std::move(grammar), vocab_);
  if (!compiled->can_finish()) {
    return absl::InvalidArgumentError(
        "sampling_params.structured_output: no output can complete it (a rule that never "
        "finishes, or recursion that must nest deeper than the parse stack allows)");
  }
  if (cache_.size() >= static_cast<size_t>(kCachedGrammars)) cache_.erase(cache_.begin());
  cache_.emplace_back(std::move(key), compiled);
  return compiled;
}

std::vector<uint64_t> StructuredOutputs::AllowedMask(const SamplingParams& params) const {
  std::vector<uint64_t> mask(words_, 0);
  for (int32_t id : params.allowed_token_ids) mask[id >> 6] |= uint64_t{1} << (id & 63);
  return mask;
}

int64_t StructuredOutputs::AddMask(structured::GrammarMatcher& matcher,
                                   const SamplingParams& params,
                                   absl::Span<const uint64_t> allowed) {
  const auto handle = static_cast<int64_t>(masks_.size());
  masks_.resize(masks_.size() + words_);
  const absl::Span<uint64_t> mask(masks_.data() + handle, words_);
  const auto start = std::chrono::steady_clock::now();
  const int64_t computed = matcher.grammar().stats().masks_computed;
  matcher.FillNextTokenMask(mask);
  if (matcher.grammar().stats().masks_computed > computed) {
    ++masks_computed_;
  } else {
    ++masks_cached_;
  }
  if (matcher.CanEnd()) {
    auto allow = [&](int32_t id) { mask[id >> 6] |= uint64_t{1} << (id & 63); };
    if (!params.ignore_eos) {
      for (int32_t id : eos_ids_) allow(id);
    }
    for (int32_t id : params.stop_token_ids) allow(id);
  }
  if (!allowed.empty()) {
    for (int64_t w = 0; w < words_; ++w) mask[w] &= allowed[w];
  }
  mask_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return handle;
}

}  // namespace pagellm
