// Local start-up: rank 0 serves the rendezvous on a free loopback port, forks and execs its own
// binary (/proc/self/exe) with its own command line (/proc/self/cmdline) plus --rank and
// --dist-init for each follower. A child asks the kernel for SIGKILL when its parent dies
// (PR_SET_PDEATHSIG), so no follower outlives its leader; a reaper thread per child logs how it
// ended. The rendezvous server stops once the group is connected: it only carries addresses.
#include "worker/flags/parallel_flags.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "gloo/rendezvous/store.h"
#include "worker/backend/tp/tensor_parallel_backend.h"
#include "worker/dist/gloo_communicator.h"
#include "worker/dist/rendezvous.h"
#ifdef PAGELLM_HAVE_CUDA
#include "worker/dist/nccl_communicator.h"
#endif

ABSL_FLAG(int32_t, tensor_parallel_size, 1,
          "ranks of the tensor-parallel group (one process each; started here unless "
          "--dist-init names a group started elsewhere)");
ABSL_FLAG(int32_t, rank, 0, "this process's rank in its tensor-parallel group (with --dist-init)");
ABSL_FLAG(std::string, dist_init, "",
          "HOST:PORT of the group's rendezvous, served by rank 0 (empty: rank 0 starts the other "
          "ranks on this host)");
ABSL_FLAG(std::string, dist_host, "127.0.0.1",
          "address this rank's collective connections listen on");
ABSL_FLAG(double, dist_timeout, 60.0, "seconds for joining the group and for each collective");
ABSL_FLAG(int32_t, dist_local_rank, -1,
          "set by a leader on the ranks it starts: their index on this host (a GPU rank uses "
          "--gpu-id plus it); -1 for a rank started elsewhere");

namespace pagellm::cli {
namespace {

std::vector<std::string> OwnCommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string cur;
  for (char c : all) {
    if (c == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  return args;
}

// Starts rank `rank` as a child running this binary with these flags, joined through `init`.
absl::Status SpawnFollower(int rank, const std::string& init) {
  std::vector<std::string> args = OwnCommandLine();
  if (args.empty()) return absl::InternalError("cannot read /proc/self/cmdline");
  args.push_back(absl::StrCat("--rank=", rank));
  args.push_back(absl::StrCat("--dist_init=", init));
  args.push_back(absl::StrCat("--dist_local_rank=", rank));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork failed: ", strerror(errno)));
  if (pid == 0) {
    // Async-signal-safe calls only until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // the leader died before prctl
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  std::thread([pid, rank] {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    PLOG_WARN("tensor-parallel rank {} (pid {}) ended: {}", rank, pid,
              WIFSIGNALED(status) ? absl::StrCat("signal ", WTERMSIG(status))
                                  : absl::StrCat("exit code ", WEXITSTATUS(status)));
  }).detach();
  return absl::OkStatus();
}

}  // namespace

int TensorParallelSizeFromFlags() { return absl::GetFlag(FLAGS_tensor_parallel_size); }

absl::StatusOr<ParallelGroup> JoinGroupFromFlags() {
  ParallelGroup g;
  g.world_size = TensorParallelSizeFromFlags();
  g.rank = absl::GetFlag(FLAGS_rank);
  if (g.world_size < 1 || g.world_size > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tensor-parallel-size ", g.world_size, " is not in 1..64"));
  }
  if (g.rank < 0 || g.rank >= g.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank ", g.rank, " is not in 0..", g.world_size - 1));
  }
  if (g.world_size == 1) {
    g.comm = MakeSingleRankCommunicator();
    return g;
  }
  const double timeout_s = absl::GetFlag(FLAGS_dist_timeout);
  if (!(timeout_s > 0)) return absl::InvalidArgumentError("--dist-timeout must be positive");
  const absl::Duration timeout = absl::Seconds(timeout_s);
  std::string init = absl::GetFlag(FLAGS_dist_init);
  if (init.empty() && g.rank != 0) {
    return absl::InvalidArgumentError("--rank other than 0 needs --dist-init HOST:PORT");
  }
  g.local_rank = absl::GetFlag(FLAGS_dist_local_rank);
  if (g.rank == 0) {
    RendezvousServer::Options o;
    o.listen_address = init.empty() ? "127.0.0.1:0" : init;
    ASSIGN_OR_RETURN(g.rendezvous, RendezvousServer::Start(o));
    g.local_rank = init.empty() ? 0 : -1;
    if (init.empty()) {
      init = absl::StrCat("127.0.0.1:", g.rendezvous->port());
      for (int r = 1; r < g.world_size; ++r) RETURN_IF_ERROR(SpawnFollower(r, init));
    }
  }
  PLOG_INFO("tensor parallel: rank {} of {} joining at {}", g.rank, g.world_size, init);
  g.store = MakeRendezvousStore(init, timeout);
  GlooOptions go;
  go.rank = g.rank;
  go.world_size = g.world_size;
  go.hostname = absl::GetFlag(FLAGS_dist_host);
  go.timeout = timeout;
  ASSIGN_OR_RETURN(g.comm, ConnectGloo(go, *g.store));
  RETURN_IF_ERROR(g.comm->Barrier());  // every rank has read every address
  return g;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackendInGroup(
    BackendOptions bo, std::shared_ptr<const ModelCheckpoint> checkpoint, ParallelGroup group) {
  const int tp = group.world_size;
  if (tp == 1) return CreateBackend(bo, std::move(checkpoint));
  const ShardSpec shard{.rank = group.rank, .world_size = tp};
  // The model's collectives: the group's own communicator on the CPU, NCCL on GPUs.
  std::unique_ptr<Communicator> model_comm;
  if (bo.device == "cpu") {
    bo.cpu.shard = shard;
    bo.cpu.communicator = group.comm.get();
    if (bo.cpu.threads <= 0) {
      bo.cpu.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / tp);
    }
  } else if (bo.device == "cuda") {
#ifdef PAGELLM_HAVE_CUDA
    if (group.local_rank > 0) bo.cuda.device_id += group.local_rank;
    NcclOptions no;
    no.rank = group.rank;
    no.world_size = tp;
    no.device = bo.cuda.device_id;
    no.timeout = absl::Seconds(absl::GetFlag(FLAGS_dist_timeout));
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceCommunicator> nccl, ConnectNccl(no, *group.store));
    // ncclCommInitRank returns once every rank joined, so every rank has read the unique id.
    bo.cuda.shard = shard;
    bo.cuda.communicator = nccl.get();
    model_comm = std::move(nccl);
#else
    return absl::UnimplementedError(
        "this build has no CUDA backend (nvcc was not found at build time); use --device cpu");
#endif
  } else {
    return absl::UnimplementedError(absl::StrCat("--tensor-parallel-size ", tp,
                                                 " runs on --device cpu or cuda, not ", bo.device));
  }
  group.store.reset();
  group.rendezvous.reset();
  const LoraLoader load_adapter = MakeLoraLoader(bo, checkpoint.get());
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateBackend(bo, std::move(checkpoint)));
  if (group.rank > 0) {
    const absl::Status s = RunTensorParallelFollower(backend.get(), group.comm.get(), load_adapter);
    backend.reset();  // before the communicators it borrows
    model_comm.reset();
    if (!s.ok()) PLOG_ERROR("tensor-parallel rank {}: {}", group.rank, s.ToString());
    std::exit(s.ok() ? 0 : 1);
  }
  return MakeTensorParallelLeader(std::move(backend), std::move(group.comm), {},
                                  std::move(model_comm));
}

}  // namespace pagellm::cli
