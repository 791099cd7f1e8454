// Invariants (under mu_): workers_ holds each address once; poll_in_flight_ is true exactly
// while a PollCall for that worker exists, and polls_in_flight_ counts them; reserved_blocks_,
// placed_ and pending_hashes_ are the sums of Placement::reserved_blocks, of 1 and of the
// Placement::prefix_hashes counts over placements on the worker not yet visible in a poll
// (unreleased, or in releasing_). Removed workers leave workers_ but live on while polls or
// requests hold them.
#include "router/worker_pool.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/prefix_cache/block_hash.h"

namespace pagellm {
namespace {

std::shared_ptr<grpc::Channel> MakeWorkerChannel(const std::string& address,
                                                 const WorkerSecurity& security) {
  grpc::ChannelArguments args;
  // GetTokenizer answers with the whole vocabulary: several MB for large models.
  args.SetMaxReceiveMessageSize(-1);
  // A worker whose machine vanished (no FIN) fails its streams within ~15 s; pings are sent only
  // while calls are open, and the polls' traffic keeps the server's ping policy content.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  // Notice a restarted worker within a second, not after gRPC's default backoff of minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // gRPC reads its "minimum reconnect backoff" as each connection attempt's minimum deadline
  // (doc/connection-backoff.md's MIN_CONNECT_TIMEOUT; default 20 s). At the backoff's 100 ms, a
  // worker whose TCP + TLS + HTTP/2 handshake took longer than the longest backoff would never
  // connect. 5 s: ample for a handshake, short for an attempt lost to a vanished address.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (!security.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(security.tls_server_name);
  }
  return grpc::CreateCustomChannel(
      address,
      security.credentials != nullptr ? security.credentials : grpc::InsecureChannelCredentials(),
      args);
}

}  // namespace

WorkerEndpoint::WorkerEndpoint(std::string address, bool from_dns, const WorkerSecurity& security)
    : address_(std::move(address)),
      from_dns_(from_dns),
      token_(security.token),
      stub_(v1::Worker::NewStub(MakeWorkerChannel(address_, security))) {}

struct WorkerPool::PollCall {
  std::shared_ptr<WorkerEndpoint> worker;
  uint64_t failures_at_send = 0;
  uint64_t number = 0;  // the worker's polls_sent_ when this one was sent
  grpc::ClientContext context;
  v1::GetLoadRequest request;
  v1::WorkerLoad response;
};

absl::StatusOr<std::unique_ptr<WorkerPool>> WorkerPool::Create(Options options,
                                                               std::function<void()> on_change) {
  if (options.addresses.empty() && options.dns_target.empty()) {
    return absl::InvalidArgumentError("no workers: give --workers and/or --worker-dns");
  }
  std::string host, port;
  if (!options.dns_target.empty()) {
    const size_t colon = options.dns_target.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == options.dns_target.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--worker-dns must be name:port, got \"", options.dns_target, "\""));
    }
    host = options.dns_target.substr(0, colon);
    port = options.dns_target.substr(colon + 1);
  }
  for (const std::string& a : options.addresses) {
    if (a.empty() || a.find(':') == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("a worker address must be host:port, got \"", a, "\""));
    }
  }
  if (!options.resolver) options.resolver = ResolveHost;
  std::unique_ptr<WorkerPool> pool(new WorkerPool(std::move(options), std::move(on_change)));
  pool->dns_host_ = std::move(host);
  pool->dns_port_ = std::move(port);
  {
    absl::MutexLock lock(&pool->mu_);
    for (const std::string& a : pool->options_.addresses) pool->AddLocked(a, /*from_dns=*/false);
  }
  if (!pool->dns_host_.empty()) {
    pool->dns_thread_ = std::thread([p = pool.get()] { p->DnsLoop(); });
  }
  return pool;
}

WorkerPool::WorkerPool(Options options, std::function<void()> on_change)
    : options_(std::move(options)), on_change_(std::move(on_change)) {}

WorkerPool::~WorkerPool() {
  stop_.Notify();
  if (dns_thread_.joinable()) dns_thread_.join();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &polls_in_flight_));
}

void WorkerPool::AddLocked(const std::string& address, bool from_dns) {
  for (const auto& w : workers_) {
    if (w->address() == address) return;
  }
  workers_.push_back(std::make_shared<WorkerEndpoint>(address, from_dns, options_.security));
  PLOG_INFO("worker {} added{}", address, from_dns ? " (DNS)" : "");
}

void WorkerPool::PollAll() {
  std::vector<PollCall*> calls;
  {
    absl::MutexLock lock(&mu_);
    if (stop_.HasBeenNotified()) return;
    for (const auto& w : workers_) {
      if (w->poll_in_flight_) continue;
      w->poll_in_flight_ = true;
      ++polls_in_flight_;
      auto* call = new PollCall;
      call->worker = w;
      call->failures_at_send = w->failures_;
      call->number = ++w->polls_sent_;
      call->request.set_prefix_filter_version(w->filter_version_);
      calls.push_back(call);
    }
  }
  const auto deadline =
      std::chrono::system_clock::now() + absl::ToChronoMilliseconds(options_.poll_timeout);
  for (PollCall* call : calls) {
    call->context.set_deadline(deadline);
    call->worker->Prepare(&call->context);
    call->worker->stub().async()->GetLoad(
        &call->context, &call->request, &call->response,
        [this, call](grpc::Status status) { OnPollDone(call, status); });
  }
}

void WorkerPool::OnPollDone(PollCall* call, const grpc::Status& status) {
  std::unique_ptr<PollCall> owned(call);
  WorkerEndpoint& w = *call->worker;
  {
    absl::MutexLock lock(&mu_);
    w.poll_in_flight_ = false;
    using State = WorkerEndpoint::State;
    State state = State::kDown;
    if (status.ok()) {
      UpdateFilterLocked(w, call->response);
      if (call->number <= w.adapters_set_at_) {  // sent before the router's own change
        *call->response.mutable_lora_adapters() = std::move(*w.load_.mutable_lora_adapters());
      }
      w.load_ = std::move(call->response);
      // Placements released before this poll was sent are in its figures now.
      auto visible = [&](const WorkerEndpoint::Releasing& r) { return r.poll < call->number; };
      for (const WorkerEndpoint::Releasing& r : w.releasing_) {
        if (!visible(r)) continue;
        w.reserved_blocks_ -= r.blocks;
        --w.placed_;
        for (uint64_t h : r.hashes) {
          auto it = w.pending_hashes_.find(h);
          if (it != w.pending_hashes_.end() && --it->second == 0) w.pending_hashes_.erase(it);
        }
      }
      w.releasing_.erase(std::remove_if(w.releasing_.begin(), w.releasing_.end(), visible),
                         w.releasing_.end());
      std::erase_if(w.ended_, [&](uint64_t poll) { return poll < call->number; });
      const bool other_model = !fingerprint_.empty() && !w.load_.model_fingerprint().empty() &&
                               w.load_.model_fingerprint() != fingerprint_;
      state = other_model          ? State::kModelMismatch
              : w.load_.draining() ? State::kDraining
                                   : State::kReady;
      const bool was_ready = w.ready_;
      w.ready_ = state == State::kReady && call->failures_at_send == w.failures_;
      // Joined, back, or restarted between two polls (a new process at the same address).
      const bool restarted = w.start_id_ != 0 && w.load_.start_id() != w.start_id_;
      w.start_id_ = w.load_.start_id();
      if (w.ready_ && (!was_ready || restarted) && options_.replay_runtime_adapters) {
        FindReplayLocked(call->worker);
      }
    } else {
      w.ready_ = false;
    }
    if (state != w.state_) {
      switch (state) {
        case State::kReady:
          PLOG_INFO("worker {} is ready ({} of {} KV blocks free)", w.address(),
                    w.load_.kv_blocks_free(), w.load_.kv_blocks_total());
          break;
        case State::kDraining:
          PLOG_INFO("worker {} is draining", w.address());
          break;
        case State::kModelMismatch:
          PLOG_WARN("worker {} serves another model (fingerprint {}, expected {}): not used",
                    w.address(), w.load_.model_fingerprint().substr(0, 12),
                    fingerprint_.substr(0, 12));
          break;
        case State::kDown:
        case State::kUnknown:
          if (w.state_ != State::kUnknown || !status.ok()) {
            PLOG_WARN("worker {} is down: GetLoad failed: {} {}", w.address(),
                      static_cast<int>(status.error_code()), status.error_message());
          }
          break;
      }
      w.state_ = state;
    }
  }
  if (!stop_.HasBeenNotified()) on_change_();
  // Last: the destructor waits for this, so nothing of the pool is used after it.
  absl::MutexLock lock(&mu_);
  --polls_in_flight_;
}

void WorkerPool::FindReplayLocked(const std::shared_ptr<WorkerEndpoint>& worker) {
  std::vector<v1::LoadLoraAdapterRequest> common;
  bool any = false;
  auto same = [](const v1::LoadLoraAdapterRequest& a, const v1::LoadLoraAdapterRequest& b) {
    return a.lora_name() == b.lora_name() && a.lora_path() == b.lora_path();
  };
  for (const std::shared_ptr<WorkerEndpoint>& other : workers_) {
    if (other == worker || !other->ready_) continue;
    const auto& theirs = other->load_.runtime_lora_adapters();
    if (!any) {
      common.assign(theirs.begin(), theirs.end());
      any = true;
      continue;
    }
    std::erase_if(common, [&](const v1::LoadLoraAdapterRequest& a) {
      return std::none_of(theirs.begin(), theirs.end(),
                          [&](const v1::LoadLoraAdapterRequest& b) { return same(a, b); });
    });
  }
  const auto& served = worker->load_.lora_adapters();
  std::erase_if(common, [&](const v1::LoadLoraAdapterRequest& a) {
    return std::find(served.begin(), served.end(), a.lora_name()) != served.end();
  });
  if (!common.empty()) replays_.push_back({worker, std::move(common)});
}

std::vector<WorkerPool::AdapterReplay> WorkerPool::TakeAdapterReplays() {
  absl::MutexLock lock(&mu_);
  std::vector<AdapterReplay> out;
  out.swap(replays_);
  return out;
}

void WorkerPool::UpdateFilterLocked(WorkerEndpoint& w, v1::WorkerLoad& load) {
  const uint64_t version = load.prefix_filter_version();
  if (version == 0) {  // prefix caching off (or a worker that does not report it)
    w.filter_ = PrefixFilterView();
    w.filter_version_ = 0;
    return;
  }
  if (load.prefix_filter().empty()) {
    if (version != w.filter_version_) {  // cannot happen with a well-behaved worker
      w.filter_ = PrefixFilterView();
      w.filter_version_ = 0;
    }
    return;
  }
  absl::StatusOr<PrefixFilterView> view = PrefixFilterView::Parse(
      std::move(*load.mutable_prefix_filter()), load.prefix_filter_hashes());
  load.clear_prefix_filter();
  if (!view.ok()) {
    if (w.filter_version_ != 0 || !w.filter_.empty() ||
        w.state_ == WorkerEndpoint::State::kUnknown) {
      PLOG_WARN("worker {} sent an unusable prefix filter: {}", w.address(),
                view.status().ToString());
    }
    w.filter_ = PrefixFilterView();
    w.filter_version_ = 0;
    return;
  }
  w.filter_ = *std::move(view);
  w.filter_version_ = version;
}

void WorkerPool::ReportUnavailable(WorkerEndpoint* worker) {
  {
    absl::MutexLock lock(&mu_);
    ++worker->failures_;
    if (!worker->ready_) return;
    worker->ready_ = false;
    worker->state_ = WorkerEndpoint::State::kDown;
  }
  PLOG_WARN("worker {} is down: a call failed with UNAVAILABLE", worker->address());
  on_change_();
}

Placer::Decision WorkerPool::Place(const AdmissionTicket& ticket, Placement* placement,
                                   absl::Status* error) {
  absl::MutexLock lock(&mu_);
  struct Candidate {
    const std::shared_ptr<WorkerEndpoint>* worker;
    int64_t free, need, block_size, matched, load;
    bool room;  // nothing would wait in the worker's own queue
  };
  std::vector<Candidate> candidates;
  int64_t largest_total = 0, min_need = 0;
  bool any_ready = false, any_serving = false, fits_somewhere = false;
  for (const auto& w : workers_) {
    if (w.get() == ticket.avoid || !w->ready_) continue;
    any_ready = true;
    if (!ticket.lora_adapter.empty() &&
        std::find(w->load_.lora_adapters().begin(), w->load_.lora_adapters().end(),
                  ticket.lora_adapter) == w->load_.lora_adapters().end()) {
      continue;
    }
    any_serving = true;
    const v1::WorkerLoad& load = w->load_;
    const int64_t bs = load.block_size() > 0 ? load.block_size() : options_.default_block_size;
    // The prompt's blocks and one more to grow into; where that is more than the worker has,
    // what the prompt and its first new token take (a prompt that ends inside its last block
    // fits a pool that size exactly; a resumed stream near the end of the context is such one).
    int64_t need = (ticket.prompt_tokens + bs - 1) / bs + 1;
    // A worker that reports no capacity (0 total) is trusted to queue the request itself.
    const bool known = load.kv_blocks_total() > 0;
    if (known && need > load.kv_blocks_total()) need = ticket.prompt_tokens / bs + 1;
    if (known && need > load.kv_blocks_total()) {
      largest_total = std::max(largest_total, load.kv_blocks_total());
      min_need = min_need == 0 ? need : std::min(min_need, need);
      continue;
    }
    fits_somewhere = true;
    const int64_t free = known ? load.kv_blocks_free() - w->reserved_blocks_ : INT64_MAX / 2;
    // Requests released since the poll was sent have started: the poll may still count them as
    // waiting (a worker publishes its load between steps, and a prompt's first step is long).
    const int64_t waiting =
        std::max<int64_t>(0, load.waiting() - static_cast<int64_t>(w->releasing_.size()));
    if (free < need) continue;
    const int64_t requests = std::max<int64_t>(
        0, load.running() + waiting + w->placed_ - static_cast<int64_t>(w->ended_.size()));
    const bool queued = waiting > 0 || (load.max_num_seqs() > 0 && requests >= load.max_num_seqs());
    if (queued && (options_.policy != Policy::kPrefixAware || ticket.prompt_ids.empty() ||
                   !ticket.reuses_cached_prefix)) {
      continue;
    }
    candidates.push_back({&w, free, need, bs, 0, requests, !queued});
  }
  const auto with_room =
      std::find_if(candidates.begin(), candidates.end(), [](const Candidate& c) { return c.room; });
  if (with_room == candidates.end()) {
    if (!any_ready) {
      *error = absl::UnavailableError(ticket.avoid != nullptr
                                          ? "the worker failed and no other worker is available"
                                          : "no worker is available");
      return Decision::kReject;
    }
    if (!any_serving) {
      *error = absl::NotFoundError(absl::StrCat("LoRA adapter `", std::string(ticket.lora_adapter),
                                                "` is served by no ready worker"));
      return Decision::kReject;
    }
    if (!fits_somewhere) {
      // OUT_OF_RANGE, not RESOURCE_EXHAUSTED: retrying cannot help (HTTP 400, not 429).
      *error = absl::OutOfRangeError(
          absl::StrCat("the prompt (", ticket.prompt_tokens, " tokens) needs ", min_need,
                       " KV blocks, more than any worker has (", largest_total, ")"));
      return Decision::kReject;
    }
    return Decision::kWait;
  }
  const Candidate* chosen = &*with_room;  // the most free blocks among those with room
  for (const Candidate& c : candidates) {
    if (c.room && c.free > chosen->free) chosen = &c;
  }
  // The prompt's block hashes at each block size in use (one, unless workers differ).
  std::vector<std::pair<int64_t, std::vector<uint64_t>>> chains;
  auto chain_for = [&](int64_t bs) -> const std::vector<uint64_t>& {
    for (const auto& [size, hashes] : chains) {
      if (size == bs) return hashes;
    }
    return chains.emplace_back(bs, PrefixBlockHashes(ticket.prompt_ids, bs, ticket.cache_namespace))
        .second;
  };
  if (options_.policy == Policy::kPrefixAware && !ticket.prompt_ids.empty() &&
      ticket.reuses_cached_prefix) {
    const Candidate* best = nullptr;
    const Candidate* least = nullptr;
    for (Candidate& c : candidates) {
      const WorkerEndpoint& w = **c.worker;
      const std::vector<uint64_t>& chain = chain_for(c.block_size);
      // The block holding the last prompt token is always computed: it cannot be a hit.
      const int64_t hittable = std::min<int64_t>(static_cast<int64_t>(chain.size()),
                                                 (ticket.prompt_tokens - 1) / c.block_size);
      while (c.matched < hittable && (w.filter_.MayContain(chain[c.matched]) ||
                                      w.pending_hashes_.contains(chain[c.matched]))) {
        ++c.matched;
      }
      if (c.room && (least == nullptr || c.load < least->load ||
                     (c.load == least->load && c.free > least->free))) {
        least = &c;
      }
      if (best == nullptr || c.matched * c.block_size > best->matched * best->block_size ||
          (c.matched * c.block_size == best->matched * best->block_size && c.free > best->free)) {
        best = &c;
      }
    }
    const bool lopsided = best->load - least->load > options_.balance_abs &&
                          static_cast<double>(best->load) > options_.balance_rel * least->load;
    if (lopsided) {
      chosen = least;
    } else if (best->matched > 0) {
      chosen = best;
    }
  }
  WorkerEndpoint& w = **chosen->worker;
  w.reserved_blocks_ += chosen->need;
  ++w.placed_;
  placement->worker = *chosen->worker;
  placement->reserved_blocks = chosen->need;
  placement->expected_hit_tokens = chosen->matched * chosen->block_size;
  placement->prefix_hashes.clear();
  if (options_.policy == Policy::kPrefixAware && !ticket.prompt_ids.empty()) {
    placement->prefix_hashes = chain_for(chosen->block_size);
    for (uint64_t h : placement->prefix_hashes) ++w.pending_hashes_[h];
  }
  return Decision::kPlace;
}

void WorkerPool::Release(const Placement& placement) {
  if (placement.worker == nullptr || placement.reserved_blocks == 0) return;
  absl::MutexLock lock(&mu_);
  WorkerEndpoint& w = *placement.worker;
  w.releasing_.push_back({w.polls_sent_, placement.reserved_blocks, placement.prefix_hashes});
  // Nothing can go now; the next poll result calls on_change_.
}

void WorkerPool::Ended(WorkerEndpoint* worker) {
  if (worker == nullptr) return;
  {
    absl::MutexLock lock(&mu_);
    worker->ended_.push_back(worker->polls_sent_);
  }
  on_change_();
}

std::vector<std::shared_ptr<WorkerEndpoint>> WorkerPool::Endpoints() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<WorkerEndpoint>> out = workers_;
  auto rank = [](const std::shared_ptr<WorkerEndpoint>& w) {
    return w->ready_ ? 0 : w->state_ == WorkerEndpoint::State::kModelMismatch ? 1 : 2;
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  return out;
}

std::vector<std::shared_ptr<WorkerEndpoint>> WorkerPool::ReadyEndpoints() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<WorkerEndpoint>> out;
  for (const auto& w : workers_) {
    if (w->ready_) out.push_back(w);
  }
  return out;
}

std::vector<std::string> WorkerPool::ServedAdapters() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& w : workers_) {
    if (!w->ready_) continue;
    for (const std::string& name : w->load_.lora_adapters()) {
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    }
  }
  return out;
}

void WorkerPool::SetAdapters(WorkerEndpoint* worker, std::vector<std::string> adapters) {
  {
    absl::MutexLock lock(&mu_);
    worker->load_.clear_lora_adapters();
    for (std::string& name : adapters) worker->load_.add_lora_adapters(std::move(name));
    worker->adapters_set_at_ = worker->polls_sent_;
  }
  if (!stop_.HasBeenNotified()) on_change_();
}

WorkerPool::Stats WorkerPool::GetStats() const {
  absl::MutexLock lock(&mu_);
  Stats s;
  s.known = static_cast<int>(workers_.size());
  auto lower = [](int32_t* limit, int32_t value) {
    if (value > 0 && (*limit == 0 || value < *limit)) *limit = value;
  };
  for (const auto& w : workers_) {
    s.mismatched += w->state_ == WorkerEndpoint::State::kModelMismatch ? 1 : 0;
    if (!w->ready_) continue;
    ++s.ready;
    lower(&s.max_model_len, w->load_.max_model_len());
    lower(&s.max_parallel_samples, w->load_.max_parallel_samples());
  }
  return s;
}

void WorkerPool::SetModelFingerprint(std::string fingerprint) {
  absl::MutexLock lock(&mu_);
  fingerprint_ = std::move(fingerprint);
}

void WorkerPool::ResolveNow() {
  absl::StatusOr<std::vector<std::string>> found = options_.resolver(dns_host_, dns_port_);
  if (!found.ok()) {
    PLOG_WARN("resolving {}:{} failed, keeping the current workers: {}", dns_host_, dns_port_,
              std::string(found.status().message()));
    return;
  }
  const absl::flat_hash_set<std::string> now(found->begin(), found->end());
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    auto gone = std::stable_partition(workers_.begin(), workers_.end(), [&](const auto& w) {
      return !w->from_dns_ || now.contains(w->address());
    });
    for (auto it = gone; it != workers_.end(); ++it) {
      PLOG_INFO("worker {} dropped: no longer in DNS", (*it)->address());
      changed = true;
    }
    workers_.erase(gone, workers_.end());
    for (const std::string& a : *found) {
      const size_t before = workers_.size();
      AddLocked(a, /*from_dns=*/true);
      changed |= workers_.size() != before;
    }
  }
  if (changed) on_change_();
}

void WorkerPool::DnsLoop() {
  do {
    ResolveNow();
  } while (!stop_.WaitForNotificationWithTimeout(options_.dns_interval));
}

absl::StatusOr<std::vector<std::string>> ResolveHost(const std::string& host,
                                                     const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc == EAI_NONAME || rc == EAI_NODATA) return std::vector<std::string>{};
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("getaddrinfo: ", gai_strerror(rc)));
  }
  std::vector<std::string> out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {};
    std::string addr;
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, ip, sizeof(ip));
      addr = absl::StrCat(ip, ":", port);
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, ip, sizeof(ip));
      addr = absl::StrCat("[", ip, "]:", port);
    } else {
      continue;
    }
    if (std::find(out.begin(), out.end(), addr) == out.end()) out.push_back(std::move(addr));
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace pagellm
