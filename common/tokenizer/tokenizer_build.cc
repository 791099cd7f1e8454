// Tokenizer construction: validation of a VocabSpec and the tables Encode/Decode use.
// Every check here guards against a hostile model file; nothing later re-checks.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/tokenizer/absl_view.h"
#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/tokenizer.h"
#include "common/utf8.h"

namespace pagellm {
namespace {

constexpr size_t kMaxVocabSize = size_t{1} << 24;
constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 "▁"

// Control tokens that end a turn, by name (the list llama.cpp uses). The first one present
// becomes eot_id when the vocabulary does not name one.
constexpr std::string_view kEndOfTurnNames[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<EOT>",
    "_<EOT>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
};
constexpr std::string_view kEndOfMessageNames[] = {"<|eom_id|>"};

// "<0xAB>" -> 0xAB, else -1.
int ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int hi = hex(text[3]), lo = hex(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

absl::Status CheckId(int32_t id, size_t n, std::string_view what) {
  if (id < -1 || id >= static_cast<int64_t>(n)) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(what), " ", id, " is outside the vocabulary of ", n, " tokens"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(VocabSpec spec) {
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  RETURN_IF_ERROR(tok->Build(std::move(spec)));
  return tok;
}

Tokenizer::~Tokenizer() = default;

absl::Status Tokenizer::Build(VocabSpec spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) return absl::InvalidArgumentError("the vocabulary is empty");
  if (n > kMaxVocabSize) {
    return absl::InvalidArgumentError(absl::StrCat("vocabulary of ", n, " tokens is too large"));
  }
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.scores.size(), " scores for ", n, " tokens"));
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.token_types.size(), " token types for ", n, " tokens"));
  }
  for (float s : spec.scores) {
    if (std::isnan(s)) return absl::InvalidArgumentError("a token score is NaN");
  }
  RETURN_IF_ERROR(CheckId(spec.bos_id, n, "bos id"));
  RETURN_IF_ERROR(CheckId(spec.eos_id, n, "eos id"));
  RETURN_IF_ERROR(CheckId(spec.unk_id, n, "unk id"));
  RETURN_IF_ERROR(CheckId(spec.pad_id, n, "pad id"));
  RETURN_IF_ERROR(CheckId(spec.eot_id, n, "eot id"));
  RETURN_IF_ERROR(CheckId(spec.eom_id, n, "eom id"));
  for (const auto* list : {&spec.eog_ids, &spec.lstrip_ids, &spec.rstrip_ids}) {
    for (int32_t id : *list) {
      if (id < 0) return absl::InvalidArgumentError(absl::StrCat("token id ", id, " < 0"));
      RETURN_IF_ERROR(CheckId(id, n, "token id"));
    }
  }
  if (spec.add_bos && spec.bos_id < 0) {
    return absl::InvalidArgumentError("add_bos is set but there is no bos token");
  }
  if (spec.add_eos && spec.eos_id < 0) {
    return absl::InvalidArgumentError("add_eos is set but there is no eos token");
  }

  model_ = spec.model;
  spec_types_given_ = !spec.token_types.empty();
  types_ = spec_types_given_ ? std::move(spec.token_types)
                             : std::vector<TokenType>(n, TokenType::kNormal);
  spec.token_types = {};
  for (size_t i = 0; i < n; ++i) {
    const auto t = static_cast<int32_t>(types_[i]);
    if (t < 1 || t > 6) {
      return absl::InvalidArgumentError(absl::StrCat("token ", i, " has type ", t));
    }
  }
  size_t text_bytes = 0;
  for (const std::string& t : spec.tokens) text_bytes += t.size();
  texts_.Reserve(n, text_bytes);
  for (const std::string& t : spec.tokens) RETURN_IF_ERROR(texts_.Add(t));
  spec.tokens = {};  // the table holds them now
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (types_[i] == TokenType::kUnused || texts_[id].empty()) continue;
    const int32_t earlier = texts_.Index(id);
    if (earlier >= 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tokens %d and %d have the same text \"%s\"", earlier, i,
                          absl::CHexEscape(AbslView(texts_[id]))));
    }
  }

  // Pieces (decoded bytes) and the byte symbols.
  pieces_.Reserve(n, text_bytes);
  byte_symbol_id_.fill(-1);
  if (model_ == VocabModel::kByteLevelBpe) {
    std::string piece;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view text = texts_[static_cast<int32_t>(i)];
      piece.clear();
      RETURN_IF_ERROR(pieces_.Add(ByteLevelDecode(text, &piece) ? std::string_view(piece) : text));
    }
    for (int b = 0; b < 256; ++b) {
      byte_symbol_id_[b] = texts_.Find(ByteLevelChar(static_cast<uint8_t>(b)));
    }
    if (!spec.pre_patterns.empty()) {
      ASSIGN_OR_RETURN(pre_, PreTokenizer::FromPatterns(spec.pre_patterns));
    } else {
      ASSIGN_OR_RETURN(pre_, PreTokenizer::Create(spec.pre));
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      const std::string_view text = texts_[static_cast<int32_t>(i)];
      const int byte = ParseByteToken(text);
      if (byte >= 0) {
        RETURN_IF_ERROR(pieces_.Add(std::string(1, static_cast<char>(byte))));
        if (types_[i] != TokenType::kUnused && byte_symbol_id_[byte] < 0) {
          byte_symbol_id_[byte] = static_cast<int32_t>(i);
        }
      } else {
        RETURN_IF_ERROR(pieces_.Add(ReplaceAll(text, kSpmSpace, " ")));
      }
    }
  }
  RETURN_IF_ERROR(BuildMerges(spec));

  // Added tokens.
  std::vector<bool> lstrip(n), rstrip(n);
  for (int32_t id : spec.lstrip_ids) lstrip[id] = true;
  for (int32_t id : spec.rstrip_ids) rstrip[id] = true;
  std::vector<SpecialTokenMatcher::Entry> entries;
  for (size_t i = 0; i < n; ++i) {
    const TokenType t = types_[i];
    if (t != TokenType::kControl && t != TokenType::kUnknown && t != TokenType::kUserDefined) {
      continue;
    }
    const std::string_view text = texts_[static_cast<int32_t>(i)];
    if (text.empty() || !IsValidUtf8(text)) continue;
    entries.push_back({std::string(text), static_cast<int32_t>(i), t != TokenType::kUserDefined,
                       lstrip[i], rstrip[i]});
  }
  matcher_ = SpecialTokenMatcher(entries);

  // End of generation.
  bos_id_ = spec.bos_id;
  eos_id_ = spec.eos_id;
  unk_id_ = spec.unk_id;
  eot_id_ = spec.eot_id;
  int32_t eom_id = spec.eom_id;
  auto find_named = [&](std::string_view name) -> int32_t {
    const int32_t id = texts_.Find(name);
    if (id < 0) return -1;
    const TokenType t = types_[id];
    return t == TokenType::kControl || t == TokenType::kUserDefined ? id : -1;
  };
  eog_.assign(n, false);
  auto add_eog = [&](int32_t id) {
    if (id >= 0 && !eog_[id]) {
      eog_[id] = true;
      eog_ids_.push_back(id);
    }
  };
  add_eog(eos_id_);
  for (std::string_view name : kEndOfTurnNames) {
    const int32_t id = find_named(name);
    if (eot_id_ < 0) eot_id_ = id;
    add_eog(id);
  }
  for (std::string_view name : kEndOfMessageNames) {
    const int32_t id = find_named(name);
    if (eom_id < 0) eom_id = id;
    add_eog(id);
  }
  add_eog(eot_id_);
  add_eog(eom_id);
  for (int32_t id : spec.eog_ids) add_eog(id);

  add_bos_ = spec.add_bos;
  add_eos_ = spec.add_eos;
  const bool spm = model_ == VocabModel::kSentencePieceBpe;
  add_space_prefix_ = spm && spec.add_space_prefix;
  space_prefix_first_only_ = spec.space_prefix_first_only;
  ignore_merges_ = !spm && spec.ignore_merges;
  strip_leading_space_ = add_space_prefix_;
  spec.merges = {};  // spec_merges_ holds them as ids
  spec_ = std::move(spec);
  return absl::OkStatus();
}

VocabSpec Tokenizer::spec() const {
  VocabSpec s = spec_;
  s.tokens.reserve(static_cast<size_t>(texts_.size()));
  for (int32_t i = 0; i < texts_.size(); ++i) s.tokens.emplace_back(texts_[i]);
  s.merges.reserve(spec_merges_.size());
  for (const auto& [l, r] : spec_merges_) s.merges.emplace_back(texts_[l], texts_[r]);
  if (spec_types_given_) s.token_types = types_;
  return s;
}

size_t Tokenizer::table_bytes() const {
  return texts_.bytes() + pieces_.bytes() + merger_.bytes() +
         spec_merges_.capacity() * sizeof(spec_merges_[0]) + types_.capacity() * sizeof(TokenType);
}

absl::Status Tokenizer::BuildMerges(const VocabSpec& spec) {
  auto lookup = [&](std::string_view text) { return texts_.Find(text); };
  if (!spec.merges.empty()) {
    spec_merges_.reserve(spec.merges.size());
    for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
      const auto& [left, right] = spec.merges[rank];
      const int32_t l = lookup(left), r = lookup(right);
      const int32_t m = lookup(absl::StrCat(left, right));
      if (l < 0 || r < 0 || m < 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "merge %d (\"%s\" \"%s\") %s", rank, absl::CHexEscape(left), absl::CHexEscape(right),
            l < 0 || r < 0 ? "names a token not in the vocabulary"
                           : "yields a text not in the vocabulary"));
      }
      merger_.Add(l, r, m, static_cast<int32_t>(rank));
      spec_merges_.emplace_back(l, r);
    }
    return absl::OkStatus();
  }
  if (model_ != VocabModel::kSentencePieceBpe) return absl::OkStatus();  // no merges at all

  // SentencePiece: every split of a normal token into two tokens is a merge; a token with a
  // higher score merges first, ties by id, and splits of one token by (left id, right id).
  // This is the order HF's SentencePiece converter gives its merge list.
  std::vector<int32_t> order;
  for (int32_t i = 0; i < texts_.size(); ++i) {
    if (types_[i] == TokenType::kNormal && texts_[i].size() > 1) order.push_back(i);
  }
  auto score = [&](int32_t id) { return spec.scores.empty() ? 0.0f : spec.scores[id]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return score(a) > score(b); });
  int32_t rank = 0;
  std::vector<std::pair<int32_t, int32_t>> splits;
  for (int32_t id : order) {
    const std::string_view text = texts_[id];
    splits.clear();
    for (size_t k = 1; k < text.size(); ++k) {
      if ((static_cast<uint8_t>(text[k]) & 0xC0) == 0x80) continue;  // inside a character
      const int32_t l = lookup(text.substr(0, k)), r = lookup(text.substr(k));
      if (l >= 0 && r >= 0) splits.emplace_back(l, r);
    }
    std::sort(splits.begin(), splits.end());
    for (const auto& [l, r] : splits) merger_.Add(l, r, id, rank++);
  }
  return absl::OkStatus();
}

}  // namespace pagellm
