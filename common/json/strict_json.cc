// ParseStrictJson. Design: nlohmann's callback parser reports every container start and key
// before it allocates anything for them; the callback keeps one set of seen keys per open
// container and throws a private exception type at the first violation, which unwinds the
// parser (its partial document is freed) and becomes an InvalidArgument status here.
#include "common/json/strict_json.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace pagellm {
namespace {

struct Rejected {
  std::string why;
};

}  // namespace

absl::StatusOr<nlohmann::ordered_json> ParseStrictJson(std::string_view text,
                                                       const StrictJsonOptions& options) {
  using Json = nlohmann::ordered_json;
  using Event = Json::parse_event_t;
  // Keys seen so far in each open container (always empty for arrays).
  std::vector<absl::flat_hash_set<std::string>> open;
  auto callback = [&](int /*depth*/, Event event, Json& parsed) {
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (static_cast<int>(open.size()) >= options.max_depth) {
          throw Rejected{absl::StrCat("JSON nested deeper than ", options.max_depth, " levels")};
        }
        open.emplace_back();
        break;
      case Event::object_end:
      case Event::array_end:
        if (!open.empty()) open.pop_back();
        break;
      case Event::key:
        if (!open.empty() && !open.back().insert(parsed.get<std::string>()).second) {
          throw Rejected{absl::StrCat("duplicate key '", parsed.get<std::string>(), "'")};
        }
        break;
      case Event::value:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const Rejected& r) {
    return absl::InvalidArgumentError(r.why);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not valid JSON: ", e.what()));
  }
}

}  // namespace pagellm
