// Tokenizer: Encode / Decode and queries. Construction and validation are in
// tokenizer_build.cc. Encode keeps all its working memory in a per-call EncodeScratch, so the
// Tokenizer itself is never written after Build().
#include "common/tokenizer/tokenizer.h"

#include "absl/strings/str_cat.h"
#include "common/tokenizer/absl_view.h"
#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/hf_tokenizer_json.h"
#include "common/utf8.h"

namespace pagellm {
namespace {
constexpr std::string_view kSpmSpace = "\xE2\x96\x81";       // U+2581 "▁"
constexpr std::string_view kUntrustedMark = "\xEF\xB7\x90";  // U+FDD0, see MarkUntrusted
}  // namespace

struct Tokenizer::EncodeScratch {
  std::vector<SpecialTokenMatcher::Fragment> fragments;
  std::vector<std::string_view> pieces;
  std::vector<int32_t> ids;
  std::string buf;
  BpeMerger::Scratch merge;
};

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHfTokenizerJson(std::string_view json) {
  auto spec = VocabSpecFromHfTokenizerJson(json);
  if (!spec.ok()) return spec.status();
  return Create(*std::move(spec));
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special_tokens,
                                       bool parse_special) const {
  return EncodeImpl(text, add_special_tokens, parse_special, /*unmark=*/false);
}

std::vector<int32_t> Tokenizer::EncodeMarked(std::string_view text, bool add_special_tokens) const {
  return EncodeImpl(text, add_special_tokens, /*parse_special=*/true, /*unmark=*/true);
}

std::vector<int32_t> Tokenizer::EncodeImpl(std::string_view text, bool add_special_tokens,
                                           bool parse_special, bool unmark) const {
  std::string sanitized;
  if (!IsValidUtf8(text)) {
    sanitized = SanitizeUtf8(text);
    text = sanitized;
  }
  EncodeScratch s;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special_tokens && add_bos_) out.push_back(bos_id_);
  if (matcher_.empty()) {
    if (!text.empty()) s.fragments.push_back({text, -1});
  } else {
    matcher_.Split(text, parse_special, &s.fragments);
  }
  std::string unmarked;
  for (const SpecialTokenMatcher::Fragment& f : s.fragments) {
    if (f.id >= 0) {
      out.push_back(f.id);
      continue;
    }
    std::string_view piece = f.text;
    if (unmark && piece.find(kUntrustedMark) != std::string_view::npos) {
      unmarked = RemoveUntrustedMarks(piece);
      piece = unmarked;
      if (piece.empty()) continue;
    }
    if (model_ == VocabModel::kByteLevelBpe) {
      EncodeByteLevel(piece, &s, &out);
    } else {
      const bool prefix =
          add_space_prefix_ && (!space_prefix_first_only_ || f.text.data() == text.data());
      EncodeSentencePiece(piece, prefix, &s, &out);
    }
  }
  if (add_special_tokens && add_eos_) out.push_back(eos_id_);
  return out;
}

absl::StatusOr<std::string> Tokenizer::MarkUntrusted(std::string_view text,
                                                     std::string_view field) const {
  // Fast path: nothing to mark (the common case: no control token spelled, no U+FDD0).
  bool plain = text.find(kUntrustedMark) == std::string_view::npos;
  for (size_t pos = 0; plain && !matcher_.empty() && pos < text.size(); ++pos) {
    plain = matcher_.LongestSpecialAt(text, pos) == 0;
  }
  if (plain) return std::string(text);
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = Utf8CharLen(text, pos);
    const std::string_view ch = text.substr(pos, len);
    if (ch == kUntrustedMark) {
      out.append(kUntrustedMark).append(kUntrustedMark);
    } else {
      const size_t special = matcher_.empty() ? 0 : matcher_.LongestSpecialAt(text, pos);
      if (special == len) {
        return absl::InvalidArgumentError(
            absl::StrCat(AbslView(field),
                         " contains a control token one character long, which cannot be sent "
                         "as text"));
      }
      out.append(ch);
      if (special > 0) out.append(kUntrustedMark);
    }
    pos += len;
  }
  return out;
}

std::string Tokenizer::RemoveUntrustedMarks(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.substr(pos, kUntrustedMark.size()) != kUntrustedMark) {
      out.push_back(text[pos++]);
      continue;
    }
    pos += kUntrustedMark.size();
    if (text.substr(pos, kUntrustedMark.size()) == kUntrustedMark) {  // the text's own, doubled
      out.append(kUntrustedMark);
      pos += kUntrustedMark.size();
    }
  }
  return out;
}

void Tokenizer::EncodeByteLevel(std::string_view text, EncodeScratch* s,
                                std::vector<int32_t>* out) const {
  s->pieces.clear();
  pre_->Split(text, &s->pieces);
  for (std::string_view piece : s->pieces) {
    if (ignore_merges_) {
      s->buf.clear();
      ByteLevelEncode(piece, &s->buf);
      const int32_t id = texts_.Find(s->buf);
      if (id >= 0) {
        out->push_back(id);
        continue;
      }
    }
    s->ids.clear();
    for (char c : piece) {
      const int32_t id = byte_symbol_id_[static_cast<uint8_t>(c)];
      if (id >= 0) s->ids.push_back(id);
    }
    merger_.Merge(&s->ids, &s->merge);
    out->insert(out->end(), s->ids.begin(), s->ids.end());
  }
}

void Tokenizer::EncodeSentencePiece(std::string_view text, bool prefix, EncodeScratch* s,
                                    std::vector<int32_t>* out) const {
  std::string& buf = s->buf;
  buf.clear();
  if (prefix) buf.append(kSpmSpace);
  for (char c : text) {
    if (c == ' ') {
      buf.append(kSpmSpace);
    } else {
      buf.push_back(c);
    }
  }
  s->ids.clear();
  bool last_unk = false;
  for (size_t pos = 0; pos < buf.size();) {
    const size_t len = Utf8CharLen(buf, pos);
    const std::string_view ch(buf.data() + pos, len);
    pos += len;
    const int32_t id = texts_.Find(ch);
    if (id >= 0) {
      s->ids.push_back(id);
      last_unk = false;
      continue;
    }
    bool all_bytes = true;
    for (char c : ch) all_bytes = all_bytes && byte_symbol_id_[static_cast<uint8_t>(c)] >= 0;
    if (all_bytes) {
      for (char c : ch) s->ids.push_back(byte_symbol_id_[static_cast<uint8_t>(c)]);
      last_unk = false;
    } else if (unk_id_ >= 0 && !last_unk) {
      s->ids.push_back(unk_id_);  // consecutive unknown characters share one unk (HF fuse_unk)
      last_unk = true;
    }
  }
  merger_.Merge(&s->ids, &s->merge);
  out->insert(out->end(), s->ids.begin(), s->ids.end());
}

std::string Tokenizer::Decode(absl::Span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (!InRange(id) || (skip_special && IsSpecial(id))) continue;
    bytes.append(pieces_[id]);
  }
  std::string text = SanitizeUtf8(bytes);
  if (strip_leading_space_ && !text.empty() && text[0] == ' ') text.erase(0, 1);
  return text;
}

std::string_view Tokenizer::TokenPiece(int32_t id) const {
  return InRange(id) ? pieces_[id] : std::string_view();
}

std::string_view Tokenizer::TokenText(int32_t id) const {
  return InRange(id) ? texts_[id] : std::string_view();
}

std::optional<int32_t> Tokenizer::FindToken(std::string_view text) const {
  const int32_t id = texts_.Find(text);
  if (id < 0) return std::nullopt;
  return id;
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const { return InRange(id) && eog_[id]; }

bool Tokenizer::IsSpecial(int32_t id) const {
  return InRange(id) && (types_[id] == TokenType::kControl || types_[id] == TokenType::kUnknown);
}

TokenType Tokenizer::token_type(int32_t id) const {
  return InRange(id) ? types_[id] : TokenType::kUnused;
}

}  // namespace pagellm
