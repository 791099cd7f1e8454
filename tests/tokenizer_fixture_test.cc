// Compares Tokenizer with HF tokenizers on every vocabulary of the fixture that
// tools/fixtures/make_tokenizer_fixture.py generates (default build/fixtures/tokenizer/, or
// $PAGELLM_TOKENIZER_FIXTURES). Each vocabulary is loaded twice, from its GGUF and from the
// tokenizer.json converted from that GGUF, and each must give, for every corpus string:
//   * HF's ids (special tokens parsed; with BOS/EOS added; special tokens not parsed),
//   * HF's decode of those ids (with and without special tokens),
//   * Decode(Encode(s)) == s, unless HF's own decode differs from s (vocabulary lacks a byte),
//   * the streaming detokenizer's output == Decode;
// plus HF's decode of random id sequences, and llama.cpp's upstream expected ids where the
// fixture has them (ids made by the original HF tokenizers, independent of our converter).
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/tokenizer/streaming_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/model/gguf_file.h"
#include "worker/model/gguf_vocab.h"

namespace pagellm {
namespace {

using Json = nlohmann::json;
using Ids = std::vector<int32_t>;

std::string FixtureDir() {
  const char* env = std::getenv("PAGELLM_TOKENIZER_FIXTURES");
  return env != nullptr ? env : "build/fixtures/tokenizer";
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

std::string Show(const std::string& s) {
  return absl::StrCat("\"", absl::CHexEscape(s.substr(0, 120)), "\"");
}

std::string Show(const Ids& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size() && i < 40; ++i) absl::StrAppend(&out, i ? " " : "", ids[i]);
  return out + (ids.size() > 40 ? " ...]" : "]");
}

// Counts checks of one kind and reports the first few failures.
struct Tally {
  std::string name;
  int passed = 0;
  int failed = 0;
  template <typename T>
  void Check(bool ok, const std::string& context, const T& want, const T& got) {
    if (ok) {
      ++passed;
      return;
    }
    if (++failed <= 5) {
      ADD_FAILURE() << name << " mismatch for " << context << "\n  want " << Show(want)
                    << "\n  got  " << Show(got);
    }
  }
  std::string Summary() const { return absl::StrCat(name, " ", passed, "/", passed + failed); }
};

std::string Stream(const Tokenizer& tok, const Ids& ids, bool skip_special) {
  StreamingDetokenizer d(&tok, skip_special);
  std::string out;
  for (int32_t id : ids) out += d.Feed(id);
  return out + d.Flush();
}

void CheckVocab(const Json& entry, const std::string& source, const Tokenizer& tok,
                const Json& expected) {
  const std::string vocab = entry["name"];
  const bool spm = entry["spm"];
  Tally ids{"ids"}, ids_special{"ids_add_special"}, ids_raw{"ids_no_parse_special"},
      decode{"decode"}, decode_skip{"decode_skip_special"}, roundtrip{"roundtrip"},
      stream{"streaming"}, random{"random_decode"}, upstream{"upstream_ids"};
  int hf_lossy = 0, random_skipped = 0;
  for (const Json& c : expected["cases"]) {
    const std::string text = c["text"];
    const std::string ctx = Show(text);
    const Ids want = c["ids"].get<Ids>();
    const Ids got = tok.Encode(text, /*add_special_tokens=*/false, /*parse_special=*/true);
    ids.Check(got == want, ctx, want, got);
    const Ids want_special = c["ids_add_special"].get<Ids>();
    const Ids got_special = tok.Encode(text, true, true);
    ids_special.Check(got_special == want_special, ctx, want_special, got_special);
    const Ids want_raw = c["ids_no_parse_special"].get<Ids>();
    const Ids got_raw = tok.Encode(text, false, false);
    ids_raw.Check(got_raw == want_raw, ctx, want_raw, got_raw);

    const std::string hf = c["decoded"];
    const std::string mine = tok.Decode(want, false);
    decode.Check(mine == hf, ctx, hf, mine);
    const std::string hf_skip = c["decoded_skip_special"];
    const std::string mine_skip = tok.Decode(want, true);
    decode_skip.Check(mine_skip == hf_skip, ctx, hf_skip, mine_skip);
    if (hf == text) {
      const std::string back = tok.Decode(got, false);
      roundtrip.Check(back == text, ctx, text, back);
    } else {
      ++hf_lossy;  // HF cannot round-trip it either; compared with HF's decode above
    }
    for (bool skip : {false, true}) {
      const std::string s = Stream(tok, want, skip);
      const std::string d = skip ? mine_skip : mine;
      stream.Check(s == d, ctx, d, s);
    }
  }
  for (const Json& c : expected["random_decodes"]) {
    const Ids in = c["ids"].get<Ids>();
    for (bool skip : {false, true}) {
      const std::string hf = c[skip ? "decoded_skip_special" : "decoded"];
      const std::string mine = tok.Decode(in, skip);
      if (spm && hf.find("\xEF\xBF\xBD") != std::string::npos) {
        ++random_skipped;  // HF's ByteFallback turns a whole invalid byte run into U+FFFDs
      } else {
        random.Check(mine == hf, Show(in), hf, mine);
      }
      const std::string s = Stream(tok, in, skip);
      stream.Check(s == mine, Show(in), mine, s);
    }
  }
  for (const Json& u : expected["upstream"]) {
    const std::string text = u["text"];
    const Ids want = u["ids"].get<Ids>();
    const Ids got = tok.Encode(text, false, true);
    upstream.Check(got == want, Show(text), want, got);
  }
  std::cout << "[" << vocab << " from " << source << "] " << ids.Summary() << ", "
            << ids_special.Summary() << ", " << ids_raw.Summary() << ", " << decode.Summary()
            << ", " << decode_skip.Summary() << ", " << roundtrip.Summary() << " (+" << hf_lossy
            << " HF-lossy), " << stream.Summary() << ", " << random.Summary() << " (+"
            << random_skipped << " skipped), " << upstream.Summary() << std::endl;
}

class TokenizerFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    if (!ReadFile(FixtureDir() + "/manifest.json", &text)) {
      GTEST_SKIP() << "no tokenizer fixture in " << FixtureDir()
                   << "; generate it with: .venv/bin/python "
                      "tools/fixtures/make_tokenizer_fixture.py";
    }
    manifest_ = Json::parse(text);
    ASSERT_FALSE(manifest_["vocabs"].empty()) << "the fixture has no vocabulary";
  }

  Json LoadExpected(const Json& entry) {
    std::string text;
    EXPECT_TRUE(ReadFile(entry["expected"], &text)) << entry["expected"];
    return Json::parse(text);
  }

  Json manifest_;
};

TEST_F(TokenizerFixtureTest, MatchesHfFromGguf) {
  for (const Json& entry : manifest_["vocabs"]) {
    SCOPED_TRACE(entry["name"].get<std::string>() + " (GGUF)");
    auto gguf = GgufFile::Open(entry["gguf"]);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    auto spec = VocabFromGguf(**gguf);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto tok = Tokenizer::Create(*std::move(spec));
    ASSERT_TRUE(tok.ok()) << tok.status();
    CheckVocab(entry, "GGUF", **tok, LoadExpected(entry));
  }
}

TEST_F(TokenizerFixtureTest, MatchesHfFromTokenizerJson) {
  for (const Json& entry : manifest_["vocabs"]) {
    SCOPED_TRACE(entry["name"].get<std::string>() + " (tokenizer.json)");
    std::string json;
    ASSERT_TRUE(ReadFile(entry["tokenizer_json"], &json));
    auto tok = Tokenizer::FromHfTokenizerJson(json);
    ASSERT_TRUE(tok.ok()) << tok.status();
    CheckVocab(entry, "tokenizer.json", **tok, LoadExpected(entry));
  }
}

}  // namespace
}  // namespace pagellm
