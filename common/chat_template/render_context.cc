#include "common/chat_template/render_context.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pagellm::chat_template {

absl::Status RenderContext::ChargeSteps(uint64_t n) {
  absl::Status status = CheckSteps(n);
  if (status.ok()) steps_ += n;
  return status;
}

absl::Status RenderContext::CheckSteps(uint64_t n) const {
  if (n > limits_.max_steps || steps_ + n > limits_.max_steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("template exceeded its step limit (", limits_.max_steps,
                     " statements, loop iterations, expressions and list items)"));
  }
  return absl::OkStatus();
}

absl::Status RenderContext::CheckStringSize(uint64_t n) const {
  if (n > limits_.max_string_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "template built a string of ", n, " bytes, over the limit of ", limits_.max_string_bytes));
  }
  if (allocated_bytes_ + n > limits_.max_allocated_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("template exceeded its string allocation limit of ",
                     limits_.max_allocated_bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> RenderContext::MakeString(std::string s) {
  if (absl::Status status = CheckStringSize(s.size()); !status.ok()) return status;
  allocated_bytes_ += s.size();
  return Value::String(std::move(s));
}

absl::StatusOr<Value> RenderContext::MakeList(std::vector<Value> items, SeqKind seq,
                                              const char* type_name) {
  if (absl::Status status = ChargeSteps(items.size() + 1); !status.ok()) return status;
  ListObject* list = heap_.NewList();
  list->items = std::move(items);
  list->seq = seq;
  list->type_name = type_name != nullptr        ? type_name
                    : seq == SeqKind::kTuple    ? "tuple"
                    : seq == SeqKind::kIterator ? "generator"
                    : seq == SeqKind::kView     ? "dict_items"
                                                : "list";
  return Value::List(list);
}

}  // namespace pagellm::chat_template
