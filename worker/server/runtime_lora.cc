#include "worker/server/runtime_lora.h"

#include <climits>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sampling/sampling_params.h"

namespace pagellm {
namespace {

// realpath(3): the canonical absolute path, or NotFound.
absl::StatusOr<std::string> Canonical(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) {
    return absl::NotFoundError(absl::StrCat("no such adapter directory: ", path.substr(0, 200)));
  }
  return std::string(buf);
}

}  // namespace

absl::Status RuntimeLoraOff() {
  return absl::FailedPreconditionError(
      "runtime LoRA updating is off (start the worker with --allow-runtime-lora-updating "
      "--lora-dir DIR)");
}

absl::StatusOr<std::string> ResolveAdapterPath(const std::string& lora_dir,
                                               const std::string& path) {
  if (path.empty() || path.size() > 4096 || path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("lora_path must be a path of 1..4096 bytes");
  }
  absl::StatusOr<std::string> dir = Canonical(lora_dir);
  if (!dir.ok()) return absl::FailedPreconditionError("the worker's --lora-dir does not exist");
  absl::StatusOr<std::string> resolved =
      Canonical(path.front() == '/' ? path : absl::StrCat(*dir, "/", path));
  const bool inside =
      resolved.ok() && (*dir == "/" || *resolved == *dir ||
                        (resolved->size() > dir->size() && resolved->starts_with(*dir) &&
                         (*resolved)[dir->size()] == '/'));
  // One answer for missing and outside, so that a caller cannot probe the host's files.
  if (!inside) {
    return absl::NotFoundError("lora_path names no directory inside the worker's --lora-dir");
  }
  return resolved;
}

absl::StatusOr<std::unique_ptr<RuntimeLora>> RuntimeLora::Create(EngineLoop* loop,
                                                                 RuntimeLoraOptions options) {
  std::unique_ptr<RuntimeLora> r(new RuntimeLora(loop, std::move(options)));
  if (!r->options_.enabled) return r;
  if (r->options_.lora_dir.empty() || !r->options_.load) {
    return absl::InvalidArgumentError(
        "--allow-runtime-lora-updating needs --lora-dir: adapters load from inside it only");
  }
  absl::StatusOr<std::string> dir = Canonical(r->options_.lora_dir);
  if (!dir.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lora-dir ", r->options_.lora_dir.substr(0, 200), " does not exist"));
  }
  r->canonical_dir_ = *std::move(dir);
  r->thread_ = std::thread([p = r.get()] { p->Run(); });
  r->loop_->SetAdapterReader(
      [p = r.get()](const LoraModuleSpec& spec, EngineLoop::AdapterReadDone done) {
        p->QueueRead(spec, std::move(done));
      });
  return r;
}

RuntimeLora::RuntimeLora(EngineLoop* loop, RuntimeLoraOptions options)
    : loop_(loop), options_(std::move(options)) {}

RuntimeLora::~RuntimeLora() {
  // No QueueRead runs after this (the reader is set once the thread runs).
  if (thread_.joinable()) loop_->SetAdapterReader(nullptr);
  std::deque<Job> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    left.swap(jobs_);
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  for (Job& j : left) {
    const absl::Status down = absl::UnavailableError("the worker is shutting down");
    if (j.read) {
      j.read(down);
    } else {
      j.done(down, loop_->served_adapters());
    }
  }
}

void RuntimeLora::QueueRead(const LoraModuleSpec& spec, EngineLoop::AdapterReadDone done) {
  // Runs under the loop's lock (so it may not call `done`), and never after the destructor's
  // SetAdapterReader(nullptr): the thread is still there to take the job.
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back({spec, nullptr, std::move(done)});
  cv_.notify_one();
}

void RuntimeLora::Load(std::string name, std::string path, Done done) {
  absl::Status st;
  if (!enabled()) {
    st = RuntimeLoraOff();
  } else {
    st = CheckLoraAdapterName(name, "lora_name");
  }
  absl::StatusOr<std::string> resolved;
  if (st.ok()) {
    resolved = ResolveAdapterPath(canonical_dir_, path);
    st = resolved.status();
  }
  if (!st.ok()) {
    done(st, loop_->served_adapters());
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) {
    lock.unlock();  // QueueRead takes mu_ under the loop's lock: never the other way round
    done(absl::UnavailableError("the worker is shutting down"), loop_->served_adapters());
    return;
  }
  // Listed under the path as given (another worker resolves it inside its own --lora-dir).
  Done listed = [this, spec = LoraModuleSpec{name, path}, done = std::move(done)](
                    const absl::Status& st, const std::vector<std::string>& served) {
    if (st.ok()) {
      std::lock_guard<std::mutex> lock(loaded_mu_);
      loaded_.push_back(spec);
    }
    done(st, served);
  };
  jobs_.push_back({{std::move(name), *std::move(resolved)}, std::move(listed), nullptr});
  cv_.notify_one();
}

void RuntimeLora::Unload(std::string name, Done done) {
  if (!enabled()) {
    done(RuntimeLoraOff(), loop_->served_adapters());
    return;
  }
  EngineLoop::AdapterChange change;
  change.unload = name;
  loop_->ChangeAdapters(
      std::move(change), [this, name, done = std::move(done)](
                             const absl::Status& st, const std::vector<std::string>& served) {
        if (st.ok()) {
          std::lock_guard<std::mutex> lock(loaded_mu_);
          std::erase_if(loaded_, [&](const LoraModuleSpec& s) { return s.name == name; });
        }
        done(st, served);
      });
}

std::vector<LoraModuleSpec> RuntimeLora::Loaded() const {
  std::lock_guard<std::mutex> lock(loaded_mu_);
  return loaded_;
}

void RuntimeLora::Run() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (job.read) {  // the directory may have been replaced by a link elsewhere since
      absl::StatusOr<std::string> still = ResolveAdapterPath(canonical_dir_, job.spec.path);
      job.read(still.ok() ? options_.load({job.spec.name, *still})
                          : absl::StatusOr<std::shared_ptr<const LoraAdapter>>(still.status()));
      continue;
    }
    absl::StatusOr<std::shared_ptr<const LoraAdapter>> adapter = options_.load(job.spec);
    if (!adapter.ok()) {
      job.done(adapter.status(), loop_->served_adapters());
      continue;
    }
    EngineLoop::AdapterChange change;
    change.load = *std::move(adapter);
    loop_->ChangeAdapters(std::move(change), std::move(job.done));
  }
}

}  // namespace pagellm
