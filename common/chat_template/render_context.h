// Per-render state shared by the interpreter and the builtins: the heap of containers and the
// budgets of RenderLimits. Every builtin that makes a string or a container goes through it, so
// no template can allocate past the limits.
//
// Not thread-safe: one RenderContext per Render call.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_RENDER_CONTEXT_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_RENDER_CONTEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/chat_template/options.h"
#include "common/chat_template/value.h"

namespace pagellm::chat_template {

class RenderContext {
 public:
  // `now` in `time_zone` is what strftime_now formats.
  explicit RenderContext(const RenderLimits& limits, absl::Time now = absl::UnixEpoch(),
                         absl::TimeZone time_zone = absl::UTCTimeZone())
      : limits_(limits), now_(now), time_zone_(time_zone) {}
  RenderContext(const RenderContext&) = delete;
  RenderContext& operator=(const RenderContext&) = delete;

  const RenderLimits& limits() const { return limits_; }
  absl::Time now() const { return now_; }
  absl::TimeZone time_zone() const { return time_zone_; }
  Heap& heap() { return heap_; }

  // Counts `n` steps; InvalidArgument once max_steps is exceeded.
  absl::Status ChargeSteps(uint64_t n);
  // Fails as ChargeSteps(n) would, without counting: call it before building `n` items.
  absl::Status CheckSteps(uint64_t n) const;
  // Counts the work of scanning `n` bytes of text (searching, comparing, counting characters):
  // one step per kBytesPerStep, so that repeating such work in a loop is bounded too.
  absl::Status ChargeBytes(uint64_t n) { return ChargeSteps(n / kBytesPerStep + 1); }
  static constexpr uint64_t kBytesPerStep = 64;

  // Returns `s` as a string value, counting its bytes; InvalidArgument if it is longer than
  // max_string_bytes or the render's strings exceed max_allocated_bytes.
  absl::StatusOr<Value> MakeString(std::string s);
  // Fails as MakeString would for a string of `n` bytes, before it is built.
  absl::Status CheckStringSize(uint64_t n) const;

  // A new list (or tuple, iterator, view: see SeqKind) holding `items`, counting one step per
  // item. `type_name` is Python's type name for iterators and views (default: by `seq`).
  absl::StatusOr<Value> MakeList(std::vector<Value> items, SeqKind seq = SeqKind::kList,
                                 const char* type_name = nullptr);
  // A new, empty dict (or namespace); entries added later must be charged by the caller.
  Value MakeDict() { return Value::Dict(heap_.NewDict()); }
  Value MakeNamespace() { return Value::Namespace(heap_.NewDict()); }

 private:
  const RenderLimits limits_;
  const absl::Time now_;
  const absl::TimeZone time_zone_;
  Heap heap_;
  uint64_t steps_ = 0;
  uint64_t allocated_bytes_ = 0;
};

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_RENDER_CONTEXT_H_
