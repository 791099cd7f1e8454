// Cursor over the lexer's tokens for the parsers (parser.cc, expression_parser.cc), with
// Jinja2-style token tests (`name:for`, operators), syntax errors that name the line, and the
// nesting-depth accounting that keeps parsing and the tree it builds bounded.
//
// Not thread-safe; one per parse.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_TOKEN_STREAM_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_TOKEN_STREAM_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/chat_template/ast.h"
#include "common/chat_template/lexer.h"
#include "common/chat_template/options.h"

namespace pagellm::chat_template {

class TokenStream {
 public:
  // REQUIRES: `tokens` ends with kEof and outlives the stream.
  TokenStream(const std::vector<Token>& tokens, const ParseOptions& options)
      : tokens_(tokens), max_depth_(options.max_nesting_depth) {}

  const Token& current() const { return tokens_[pos_]; }
  // The token after the current one (kEof at the end).
  const Token& look() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  void Next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }

  bool Is(TokenKind kind) const { return current().kind == kind; }
  bool IsName(std::string_view name) const {
    return Is(TokenKind::kName) && current().text == name;
  }
  bool IsOp(std::string_view op) const { return Is(TokenKind::kOperator) && current().text == op; }
  // Consumes the current token if it is the name / operator; returns whether it did.
  bool SkipName(std::string_view name);
  bool SkipOp(std::string_view op);

  absl::Status Expect(TokenKind kind);
  absl::Status ExpectOp(std::string_view op);
  absl::Status ExpectName(std::string_view name);
  // Consumes and returns a name token's text.
  absl::StatusOr<std::string> ExpectAnyName();

  // InvalidArgument "chat template syntax error, line N: message" at the current token.
  absl::Status Error(std::string_view message) const;
  // How an error message names the current token: "'foo'", "end of print statement", ...
  std::string Describe() const;

  // Nesting accounting: Enter() before recursing into a nested construct, Leave() after.
  // Enter() fails once the depth passes the limit.
  absl::Status Enter();
  void Leave() { --depth_; }

  // Sets `expr`'s depth from its children and fails if it passes the limit.
  absl::StatusOr<std::unique_ptr<Expr>> Finish(std::unique_ptr<Expr> expr) const;

 private:
  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  const int max_depth_;
};

// Enter()s on construction; Leave()s on destruction if the Enter() succeeded.
class NestingGuard {
 public:
  explicit NestingGuard(TokenStream* stream) : stream_(stream), status_(stream->Enter()) {}
  ~NestingGuard() {
    if (status_.ok()) stream_->Leave();
  }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;

  const absl::Status& status() const { return status_; }

 private:
  TokenStream* stream_;
  absl::Status status_;
};

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_TOKEN_STREAM_H_
