// Jinja2's filters that sort or regroup sequences (jinja2/filters.py): dictsort, batch, slice,
// groupby. batch and slice return single-use iterators (Jinja2's generators); dictsort and
// groupby lists. Every item and every group built counts a step, so no argument (a huge batch
// size with fill_with, a huge number of slices) can build past the render's limits.
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/chat_template/access.h"
#include "common/chat_template/builtins.h"
#include "common/chat_template/filter_helpers.h"
#include "common/chat_template/operators.h"
#include "common/status_macros.h"

namespace pagellm::chat_template {
namespace {

#define PAGELLM_FILTER(fn_name)                                                      \
  absl::StatusOr<Value> fn_name([[maybe_unused]] RenderContext& ctx, const Value& v, \
                                [[maybe_unused]] const CallArgs& args)

absl::Status NotAnInteger(const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  return absl::InvalidArgumentError(
      absl::StrCat("'", v.TypeName(), "' object cannot be interpreted as an integer"));
}

// Stable-sorts `keyed` ({key, item}) by key with Python's <, as sorted(key=...) does.
absl::Status SortByKey(RenderContext& ctx, bool reverse,
                       std::vector<std::pair<Value, Value>>* keyed) {
  absl::Status error;
  std::stable_sort(keyed->begin(), keyed->end(), [&](const auto& x, const auto& y) {
    if (!error.ok()) return false;
    absl::StatusOr<bool> less =
        reverse ? PyLess(y.first, x.first, ctx) : PyLess(x.first, y.first, ctx);
    if (!less.ok()) {
      error = less.status();
      return false;
    }
    return *less;
  });
  return error;
}

PAGELLM_FILTER(DictSort) {
  ASSIGN_OR_RETURN(auto a, BindArgs("dictsort", args, {"case_sensitive", "by", "reverse"}, 0));
  const bool case_sensitive = a[0] && a[0]->Truthy();
  const bool reverse = a[2] && a[2]->Truthy();
  int pos = 0;
  if (a[1]) {
    if (a[1]->is_string() && a[1]->AsString() == "value") {
      pos = 1;
    } else if (!a[1]->is_string() || a[1]->AsString() != "key") {
      return absl::InvalidArgumentError("You can only sort by either \"key\" or \"value\"");
    }
  }
  if (v.is_undefined()) return UndefinedError(v);
  if (v.kind() != ValueKind::kDict) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", v.TypeName(), "' object has no attribute 'items'"));
  }
  RETURN_IF_ERROR(ctx.ChargeSteps(v.AsDict()->entries.size()));
  std::vector<std::pair<Value, Value>> keyed;  // {sort key, (key, value)}
  for (const auto& [key, value] : v.AsDict()->entries) {
    ASSIGN_OR_RETURN(Value pair, ctx.MakeList({key, value}, SeqKind::kTuple));
    const Value& sort_key = pos == 0 ? key : value;
    keyed.emplace_back(case_sensitive ? sort_key : IgnoreCase(sort_key), pair);
  }
  RETURN_IF_ERROR(SortByKey(ctx, reverse, &keyed));
  std::vector<Value> out;
  for (auto& [key, pair] : keyed) out.push_back(std::move(pair));
  return ctx.MakeList(std::move(out));
}

PAGELLM_FILTER(Batch) {
  ASSIGN_OR_RETURN(auto a, BindArgs("batch", args, {"linecount", "fill_with"}, 1));
  if (!a[0]->is_integral()) return NotAnInteger(*a[0]);
  const int64_t linecount = a[0]->AsInt();
  const bool fill = a[1] && !a[1]->is_none();
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::vector<Value> batches;
  std::vector<Value> tmp;
  for (Value& item : items) {
    if (static_cast<int64_t>(tmp.size()) == linecount) {
      ASSIGN_OR_RETURN(Value batch, ctx.MakeList(std::move(tmp)));
      batches.push_back(batch);
      tmp.clear();
    }
    tmp.push_back(std::move(item));
  }
  if (!tmp.empty()) {
    if (fill && static_cast<int64_t>(tmp.size()) < linecount) {
      const uint64_t missing = static_cast<uint64_t>(linecount) - tmp.size();
      RETURN_IF_ERROR(ctx.CheckSteps(missing));
      tmp.insert(tmp.end(), missing, *a[1]);
    }
    ASSIGN_OR_RETURN(Value batch, ctx.MakeList(std::move(tmp)));
    batches.push_back(batch);
  }
  return ctx.MakeList(std::move(batches), SeqKind::kIterator);
}

PAGELLM_FILTER(Slice) {
  ASSIGN_OR_RETURN(auto a, BindArgs("slice", args, {"slices", "fill_with"}, 1));
  if (!a[0]->is_integral()) return NotAnInteger(*a[0]);
  const int64_t slices = a[0]->AsInt();
  const bool fill = a[1] && !a[1]->is_none();
  ASSIGN_OR_RETURN(std::vector<Value> seq, Iterate(ctx, v));
  if (slices == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
  std::vector<Value> out;
  if (slices < 0) return ctx.MakeList(std::move(out), SeqKind::kIterator);
  RETURN_IF_ERROR(ctx.CheckSteps(static_cast<uint64_t>(slices)));
  const int64_t length = static_cast<int64_t>(seq.size());
  const int64_t per_slice = length / slices;
  const int64_t with_extra = length % slices;
  int64_t offset = 0;
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t start = offset + i * per_slice;
    if (i < with_extra) ++offset;
    const int64_t end = offset + (i + 1) * per_slice;
    std::vector<Value> tmp(seq.begin() + start, seq.begin() + end);
    if (fill && i >= with_extra) tmp.push_back(*a[1]);
    ASSIGN_OR_RETURN(Value part, ctx.MakeList(std::move(tmp)));
    out.push_back(part);
  }
  return ctx.MakeList(std::move(out), SeqKind::kIterator);
}

PAGELLM_FILTER(GroupBy) {
  ASSIGN_OR_RETURN(auto a,
                   BindArgs("groupby", args, {"attribute", "default", "case_sensitive"}, 1));
  const Value& attribute = *a[0];
  std::optional<Value> fallback;
  if (a[1] && !a[1]->is_none()) fallback = *a[1];
  const bool case_sensitive = a[2] && a[2]->Truthy();
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::vector<std::pair<Value, Value>> keyed;  // {key, item}
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value key, GetPath(ctx, item, attribute, fallback));
    keyed.emplace_back(case_sensitive ? key : IgnoreCase(key), item);
  }
  RETURN_IF_ERROR(SortByKey(ctx, false, &keyed));
  std::vector<Value> groups;
  for (size_t i = 0; i < keyed.size();) {
    size_t j = i + 1;
    while (j < keyed.size()) {
      ASSIGN_OR_RETURN(bool same, PyEquals(keyed[i].first, keyed[j].first, ctx));
      if (!same) break;
      ++j;
    }
    std::vector<Value> members;
    for (size_t k = i; k < j; ++k) members.push_back(keyed[k].second);
    // The grouper is the first member's key as it is (not lowered).
    Value grouper = keyed[i].first;
    if (!case_sensitive) {
      ASSIGN_OR_RETURN(grouper, GetPath(ctx, members[0], attribute, fallback));
    }
    ASSIGN_OR_RETURN(Value list, ctx.MakeList(std::move(members)));
    ASSIGN_OR_RETURN(Value group, ctx.MakeList({grouper, list}, SeqKind::kTuple, kGroupTupleType));
    groups.push_back(group);
    i = j;
  }
  return ctx.MakeList(std::move(groups));
}

#undef PAGELLM_FILTER

struct NamedFilter {
  std::string_view name;
  FilterFn fn;
};

constexpr NamedFilter kFilters[] = {
    {"batch", Batch},
    {"dictsort", DictSort},
    {"groupby", GroupBy},
    {"slice", Slice},
};

}  // namespace

FilterFn FindGroupingFilter(std::string_view name) {
  for (const NamedFilter& f : kFilters) {
    if (f.name == name) return f.fn;
  }
  return nullptr;
}

}  // namespace pagellm::chat_template
