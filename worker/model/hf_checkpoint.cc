// HfCheckpoint. Design: Open() does all the validation; afterwards tensors_ maps every tensor
// name to a SafetensorsTensor inside one of the owned shards_, so lookups need no checks. A
// shard name from the index is trusted only after it is proven to be a plain file name, which
// keeps every opened path inside the checkpoint directory (symlinks inside the directory are
// followed, as the Hugging Face cache layout needs).
#include "worker/model/hf_checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/json/strict_json.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/model/hf_config.h"

namespace pagellm {
namespace {

constexpr char kConfig[] = "config.json";
constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndex[] = "model.safetensors.index.json";
constexpr char kTokenizer[] = "tokenizer.json";
// Debian's Abseil keeps its own string_view type; StrCat and the hash containers need it.
absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr size_t kMaxConfigBytes = 1 << 20;      // config.json is a few KB
constexpr size_t kMaxIndexBytes = 16 << 20;      // ~100 bytes per tensor
constexpr size_t kMaxTokenizerBytes = 64 << 20;  // large vocabularies are ~20 MB

absl::Status ErrnoStatus(int err, absl::string_view what) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Reads a whole regular file of at most `max_bytes`.
absl::StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a readable file"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, " has ", st.st_size, " bytes, more than the cap of ", max_bytes));
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      return ErrnoStatus(err, absl::StrCat("cannot read ", path));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}

// True when `name` names a file directly inside the directory: no separators, not "." or "..".
bool IsPlainFileName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\\\0", 3)) == std::string_view::npos;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfCheckpoint>> HfCheckpoint::Open(const std::string& dir,
                                                                 const Options& options) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("checkpoint directory ", dir));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint ", dir, " is not a directory"));
  }
  std::unique_ptr<HfCheckpoint> ckpt(new HfCheckpoint());
  ckpt->dir_ = dir;
  const std::string config_path = absl::StrCat(dir, "/", kConfig);
  ASSIGN_OR_RETURN(ckpt->config_json_, ReadFile(config_path, kMaxConfigBytes));
  auto config = ParseHfConfig(ckpt->config_json_);
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(config_path, ": ", config.status().message()));
  }
  ckpt->config_ = *std::move(config);

  const std::string tokenizer_path = absl::StrCat(dir, "/", kTokenizer);
  if (Exists(tokenizer_path)) {
    ckpt->tokenizer_path_ = tokenizer_path;
  } else if (options.require_tokenizer) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", dir, " has no ", kTokenizer));
  }
  RETURN_IF_ERROR(ckpt->OpenWeights(options));
  return ckpt;
}

absl::Status HfCheckpoint::OpenWeights(const Options& options) {
  const std::string single = absl::StrCat(dir_, "/", kSingleFile);
  const std::string index_path = absl::StrCat(dir_, "/", kIndex);
  if (Exists(single)) {
    ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(single, options.safetensors_limits));
    for (const SafetensorsTensor& t : file->tensors()) tensors_.emplace(t.name, &t);
    shards_.push_back(std::move(file));
    return absl::OkStatus();
  }
  if (!Exists(index_path)) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", dir_, " has neither ", kSingleFile, " nor ", kIndex));
  }

  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": ", parts...));
  };
  ASSIGN_OR_RETURN(std::string text, ReadFile(index_path, kMaxIndexBytes));
  auto parsed = ParseStrictJson(text);
  if (!parsed.ok()) return bad(parsed.status().message());
  const nlohmann::ordered_json& index = *parsed;
  if (!index.is_object()) return bad("not a JSON object");
  auto map_it = index.find("weight_map");
  if (map_it == index.end() || !map_it->is_object()) return bad("weight_map is not an object");
  if (map_it->empty()) return bad("weight_map lists no tensors");

  absl::flat_hash_map<std::string, size_t> shard_of_name;  // shard file name -> shards_ index
  for (const auto& [tensor, shard_json] : map_it->items()) {
    if (!shard_json.is_string()) return bad("weight_map entry '", tensor, "' is not a string");
    const std::string shard = shard_json.get<std::string>();
    if (!IsPlainFileName(shard)) {
      return bad("shard '", shard, "' of tensor '", tensor,
                 "' is not a plain file name inside the checkpoint directory");
    }
    auto [it, inserted] = shard_of_name.emplace(shard, shards_.size());
    if (inserted) {
      ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(absl::StrCat(dir_, "/", shard),
                                                        options.safetensors_limits));
      shards_.push_back(std::move(file));
    }
    const SafetensorsTensor* t = shards_[it->second]->Find(tensor);
    if (t == nullptr) return bad("tensor '", tensor, "' is not in its shard '", shard, "'");
    tensors_.emplace(tensor, t);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> HfCheckpoint::ReadTokenizerJson() const {
  if (tokenizer_path_.empty()) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", dir_, " has no ", kTokenizer));
  }
  return ReadFile(tokenizer_path_, kMaxTokenizerBytes);
}

std::vector<std::string> HfCheckpoint::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

const SafetensorsTensor* HfCheckpoint::Find(std::string_view name) const {
  auto it = tensors_.find(Absl(name));
  return it == tensors_.end() ? nullptr : it->second;
}

absl::StatusOr<const SafetensorsTensor*> HfCheckpoint::GetFloatTensor(std::string_view name) const {
  const SafetensorsTensor* t = Find(name);
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", dir_, ": no tensor '", Absl(name), "'"));
  }
  if (!IsSupportedFloatDtype(t->dtype)) {
    return absl::UnimplementedError(absl::StrCat(
        "checkpoint ", dir_, ": tensor '", Absl(name), "' has dtype ",
        Absl(SafetensorsDtypeName(t->dtype)), "; only F32, F16 and BF16 are supported"));
  }
  return t;
}

}  // namespace pagellm
