#pragma once
#include <tenet/detail_check.hpp>
// The MPI side of tenet::dist: the process-wide state (init, the world and sub-group
// communicators, the timeout), the liveness channel that tells a waiting rank that a peer left,
// and the one wait loop every operation goes through.
//
// Liveness. init_process_group duplicates MPI_COMM_WORLD twice: one communicator carries the
// collectives, the other only "goodbye" messages. Every rank pre-posts one receive per peer on the
// second; a rank that leaves (destroy_process_group, or the process exiting through std::exit /
// returning from main: an atexit handler) first sends goodbye to every peer. The wait loop tests the
// operation's requests and, while they are pending, the goodbye receives: a goodbye from a rank of
// the operation's group (after a short grace period, since the goodbye and the last data of the
// collective travel on different communicators) ends the wait with a dist_error naming that rank.
// A process killed by a signal sends nothing: mpirun then ends the job (naming the rank) or the
// timeout fires, whichever comes first.
//
// Every wait polls (MPI_Testall) against the timeout set at init (300 s by default): nothing in
// tenet::dist blocks inside MPI. After a timeout or a departure the pending MPI request cannot be
// cancelled (MPI has no cancel for collectives), so the process group is marked broken and every
// later operation throws at once; finish the process (destroy_process_group still says goodbye).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <tenet/dtype.hpp>
#include <tenet/error.hpp>
#include <tenet/runtime/half.hpp>

namespace tenet::dist {

/// The reductions of all_reduce, reduce and reduce_scatter (torch.distributed.ReduceOp).
/// On bool tensors sum and max are logical or, prod and min logical and; avg needs a floating dtype.
enum class reduce_op { sum, avg, max, min, prod };

inline const char* name(reduce_op op) {
  switch (op) {
    case reduce_op::sum: return "sum";
    case reduce_op::avg: return "avg";
    case reduce_op::max: return "max";
    case reduce_op::min: return "min";
    case reduce_op::prod: return "prod";
  }
  return "?";
}

/// Settings of init_process_group.
struct init_options {
  /// How long any wait may take before it throws dist_error (torch's `timeout`).
  double timeout_seconds = 300.0;
  /// Before every collective, all-gather (op, dtype, element count, root) and throw dist_error on
  /// every rank when the ranks disagree (costs one small all-gather per collective). Also switched
  /// on by the environment variable TENET_DIST_DEBUG=1.
  bool check_consistency = false;
};

namespace detail {

struct group_impl {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<int> world_ranks;  // world rank of each group rank
  int rank = -1;                 // this process's rank in the group (-1: not a member)
  bool owns_comm = false;
  /// The group's NCCL communicator (nccl.hpp, CUDA builds only), created at its first CUDA
  /// collective, and the device it is on.
  std::shared_ptr<void> nccl_comm;
  int nccl_device = -1;
  ~group_impl() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_comm && comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm);
  }
};

struct state {
  bool initialized = false;
  bool finalized = false;
  int rank = 0, size = 1;
  double timeout = 300.0;
  bool check_consistency = false;
  std::shared_ptr<group_impl> world;
  MPI_Comm liveness = MPI_COMM_NULL;
  std::vector<int> goodbye_buf;           // one int per peer (the sender's rank)
  std::vector<MPI_Request> goodbye_recv;  // per peer; MPI_REQUEST_NULL for self
  std::vector<bool> departed;
  std::string broken;  // non-empty: an earlier error left MPI requests pending; refuse new work
  MPI_Op half_ops[2][4] = {};  // [float16, bfloat16][sum, max, min, prod]
  bool we_initialized_mpi = false;
};

inline state& st() {
  static state s;
  return s;
}

inline constexpr int goodbye_tag = 7001;

inline std::string where() { return "rank " + std::to_string(st().rank) + " of " + std::to_string(st().size); }

inline void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw dist_error(std::string("tenet::dist: ") + what + " failed on " + where() + ": " + std::string(text, len));
}

inline void require_init(const char* what) {
  if (!st().initialized)
    throw dist_error(std::string("tenet::dist::") + what +
                     ": the process group is not initialized; call tenet::dist::init_process_group() first "
                     "(and launch the program with mpirun)");
  if (!st().broken.empty())
    throw dist_error(std::string("tenet::dist::") + what + " on " + where() +
                     ": the process group is unusable after an earlier error (" + st().broken +
                     "); end the process");
}

/// Records the goodbyes that arrived (state::departed).
inline void poll_goodbyes() {
  auto& s = st();
  for (int r = 0; r < s.size; ++r) {
    if (s.departed[r] || s.goodbye_recv[r] == MPI_REQUEST_NULL) continue;
    int flag = 0;
    MPI_Test(&s.goodbye_recv[r], &flag, MPI_STATUS_IGNORE);
    if (flag) s.departed[r] = true;
  }
}

/// Polls `done` until it returns true; throws dist_error on timeout or when a rank of the group
/// left (calling `abort` first, when given: NCCL aborts its communicator). `what` names the
/// operation in the message.
template <class Done>
void wait_until(Done&& done, const group_impl& g, const std::string& what, const std::function<void()>& abort = {}) {
  auto& s = st();
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s.timeout));
  std::optional<clock::time_point> departure_seen;
  int gone = -1;
  for (;;) {
    if (done()) return;
    const auto now = clock::now();
    if (!departure_seen) {
      poll_goodbyes();
      for (int wr : g.world_ranks)
        if (s.departed[wr]) {
          gone = wr;
          departure_seen = now;
          break;
        }
    }
    // grace: the goodbye travels on another communicator than the operation's last messages
    if (departure_seen && now - *departure_seen > std::chrono::milliseconds(500)) {
      s.broken = "rank " + std::to_string(gone) + " left during " + what;
      if (abort) abort();
      throw dist_error("tenet::dist: " + what + " on " + where() + ": rank " + std::to_string(gone) +
                       " left the process group (its process exited or called destroy_process_group) "
                       "before taking part; the operation cannot complete");
    }
    if (now > deadline) {
      const double waited = std::chrono::duration<double>(now - start).count();
      s.broken = what + " timed out";
      if (abort) abort();
      throw dist_error("tenet::dist: " + what + " on " + where() + " timed out after " + std::to_string(waited) +
                       " s (timeout " + std::to_string(s.timeout) +
                       " s): some rank of the group did not call it; set the timeout with "
                       "init_options::timeout_seconds or tenet::dist::set_timeout");
    }
    // Open MPI advances a nonblocking collective only inside MPI calls (MPI_Testall here), so
    // poll without sleeping for the first 50 ms, yielding the core to a peer rank that may share
    // it (4 ranks on 2 cores in CI); then sleep between polls: 50 us, and 500 us after a second.
    const auto waited = now - start;
    if (waited < std::chrono::milliseconds(50)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(waited < std::chrono::seconds(1) ? 50 : 500));
  }
}

/// Waits for every MPI request (wait_until over MPI_Testall).
inline void wait_all(std::vector<MPI_Request>& reqs, const group_impl& g, const std::string& what) {
  wait_until(
      [&] {
        int flag = 0;
        check(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE), what.c_str());
        return flag != 0;
      },
      g, what);
}

// --- 16-bit floats: MPI has no type for them; they travel as MPI_UINT16_T and reduce through
// user operations that widen each pair to float, combine, and round back (as torch's CPU kernels
// round per op). Sums of more than two ranks therefore round after each addition.
template <class H, int Op>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const H* a = static_cast<const H*>(in);
  H* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    float r;
    if constexpr (Op == 0) r = x + y;
    else if constexpr (Op == 1) r = (x > y || x != x) ? x : y;  // NaN propagates, as torch's max
    else if constexpr (Op == 2) r = (x < y || x != x) ? x : y;
    else r = x * y;
    b[i] = H(r);
  }
}

template <class H>
void create_half_ops(MPI_Op (&ops)[4]) {
  check(MPI_Op_create(&half_reduce<H, 0>, 1, &ops[0]), "MPI_Op_create");
  check(MPI_Op_create(&half_reduce<H, 1>, 1, &ops[1]), "MPI_Op_create");
  check(MPI_Op_create(&half_reduce<H, 2>, 1, &ops[2]), "MPI_Op_create");
  check(MPI_Op_create(&half_reduce<H, 3>, 1, &ops[3]), "MPI_Op_create");
}

inline MPI_Datatype mpi_type(dtype d) {
  switch (d) {
    case dtype::bool_: return MPI_UINT8_T;  // tenet's bool is one byte holding 0 or 1
    case dtype::uint8: return MPI_UINT8_T;
    case dtype::int8: return MPI_INT8_T;
    case dtype::int16: return MPI_INT16_T;
    case dtype::int32: return MPI_INT32_T;
    case dtype::int64: return MPI_INT64_T;
    case dtype::float16: return MPI_UINT16_T;
    case dtype::bfloat16: return MPI_UINT16_T;
    case dtype::float32: return MPI_FLOAT;
    case dtype::float64: return MPI_DOUBLE;
  }
  throw dtype_error("tenet::dist: unknown dtype");
}

/// The MPI operation of `op` on dtype d (avg: the sum; the caller divides).
inline MPI_Op mpi_op(reduce_op op, dtype d) {
  const reduce_op base = op == reduce_op::avg ? reduce_op::sum : op;
  if (op == reduce_op::avg && !is_floating(d))
    throw dtype_error(std::string("tenet::dist: reduce_op::avg needs a floating dtype, the tensor is ") +
                      tenet::name(d) + "; reduce with sum and divide, or convert the tensor first");
  if (d == dtype::bool_) return base == reduce_op::sum || base == reduce_op::max ? MPI_MAX : MPI_MIN;
  if (d == dtype::float16 || d == dtype::bfloat16) {
    const int i = base == reduce_op::sum ? 0 : base == reduce_op::max ? 1 : base == reduce_op::min ? 2 : 3;
    return st().half_ops[d == dtype::bfloat16 ? 1 : 0][i];
  }
  switch (base) {
    case reduce_op::sum: return MPI_SUM;
    case reduce_op::max: return MPI_MAX;
    case reduce_op::min: return MPI_MIN;
    case reduce_op::prod: return MPI_PROD;
    default: break;
  }
  return MPI_SUM;
}

inline void say_goodbye_and_finalize() {
  auto& s = st();
  if (!s.initialized) return;
  s.initialized = false;
  // tell every peer that has not left that this rank is leaving; wait briefly for the sends
  std::vector<MPI_Request> sends;
  int me = s.rank;
  for (int r = 0; r < s.size; ++r) {
    if (r == s.rank) continue;
    MPI_Request q;
    if (MPI_Isend(&me, 1, MPI_INT, r, goodbye_tag, s.liveness, &q) == MPI_SUCCESS) sends.push_back(q);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    int flag = 0;
    MPI_Testall(static_cast<int>(sends.size()), sends.data(), &flag, MPI_STATUSES_IGNORE);
    if (flag || std::chrono::steady_clock::now() > until) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (auto& q : s.goodbye_recv)
    if (q != MPI_REQUEST_NULL) {
      MPI_Cancel(&q);
      MPI_Request_free(&q);
    }
  for (auto& ops : s.half_ops)
    for (auto& op : ops)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
  s.world.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && s.we_initialized_mpi) MPI_Finalize();
  s.finalized = true;
}

}  // namespace detail

/// A group of ranks that run collectives together (torch's ProcessGroup). The default-constructed
/// group is the world. Ranks passed to operations (src, dst, peer) are world ranks, as torch's.
class process_group {
 public:
  process_group() = default;
  explicit process_group(std::shared_ptr<detail::group_impl> g) : g_(std::move(g)) {}
  /// This process's rank in the group; -1 when it is not a member.
  int rank() const { return impl().rank; }
  int size() const { return static_cast<int>(impl().world_ranks.size()); }
  bool is_member() const { return impl().rank >= 0; }
  /// The world ranks of the group, in group-rank order.
  const std::vector<int>& ranks() const { return impl().world_ranks; }
  /// The group rank of world rank r; dist_error when r is not in the group.
  int group_rank(int world_rank, const char* what) const {
    const auto& w = impl().world_ranks;
    const auto it = std::find(w.begin(), w.end(), world_rank);
    if (it == w.end())
      throw dist_error(std::string("tenet::dist::") + what + ": rank " + std::to_string(world_rank) +
                       " is not in the process group (ranks " + ranks_text() + ")");
    return static_cast<int>(it - w.begin());
  }
  /// The group's state (the world's when default-constructed), shared.
  std::shared_ptr<detail::group_impl> shared() const {
    (void)impl();
    return g_ ? g_ : detail::st().world;
  }
  const detail::group_impl& impl() const {
    if (g_) return *g_;
    if (!detail::st().world)
      throw dist_error("tenet::dist: the process group is not initialized; call tenet::dist::init_process_group() first");
    return *detail::st().world;
  }
  std::string ranks_text() const {
    std::string t = "[";
    for (std::size_t i = 0; i < impl().world_ranks.size(); ++i)
      t += (i ? ", " : "") + std::to_string(impl().world_ranks[i]);
    return t + "]";
  }

 private:
  std::shared_ptr<detail::group_impl> g_;
};

/// Initializes MPI (MPI_Init_thread, MPI_THREAD_SERIALIZED: one thread at a time calls tenet::dist)
/// from the launcher's environment (mpirun, srun --mpi=pmix) and the world process group. An MPI
/// initialized by the program before is used as it is (and not finalized by tenet).
inline void init_process_group(const init_options& opt = {}) {
  auto& s = detail::st();
  if (s.initialized) throw dist_error("tenet::dist::init_process_group: already initialized");
  if (s.finalized)
    throw dist_error("tenet::dist::init_process_group: the process group was destroyed; MPI cannot be initialized twice "
                     "in one process");
  if (!(opt.timeout_seconds > 0))
    throw value_error("tenet::dist::init_process_group: timeout_seconds must be positive, got " +
                      std::to_string(opt.timeout_seconds));
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    int provided = 0;
    detail::check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    s.we_initialized_mpi = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.size);
  s.timeout = opt.timeout_seconds;
  const char* env = std::getenv("TENET_DIST_DEBUG");
  s.check_consistency = opt.check_consistency || (env && std::string(env) == "1");
  auto w = std::make_shared<detail::group_impl>();
  detail::check(MPI_Comm_dup(MPI_COMM_WORLD, &w->comm), "MPI_Comm_dup");
  // errors come back as codes (thrown as dist_error), not as MPI's default abort
  MPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN);
  w->owns_comm = true;
  w->rank = s.rank;
  for (int r = 0; r < s.size; ++r) w->world_ranks.push_back(r);
  s.world = std::move(w);
  detail::check(MPI_Comm_dup(MPI_COMM_WORLD, &s.liveness), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(s.liveness, MPI_ERRORS_RETURN);
  s.goodbye_buf.assign(static_cast<std::size_t>(s.size), -1);
  s.goodbye_recv.assign(static_cast<std::size_t>(s.size), MPI_REQUEST_NULL);
  s.departed.assign(static_cast<std::size_t>(s.size), false);
  for (int r = 0; r < s.size; ++r)
    if (r != s.rank)
      detail::check(MPI_Irecv(&s.goodbye_buf[r], 1, MPI_INT, r, detail::goodbye_tag, s.liveness, &s.goodbye_recv[r]),
                    "MPI_Irecv");
  detail::create_half_ops<float16>(s.half_ops[0]);
  detail::create_half_ops<bfloat16>(s.half_ops[1]);
  s.broken.clear();
  s.initialized = true;
  static bool registered = false;
  if (!registered) {
    std::atexit([] { detail::say_goodbye_and_finalize(); });
    registered = true;
  }
}

inline bool is_initialized() { return detail::st().initialized; }
/// This process's world rank (torch.distributed.get_rank()).
inline int rank() {
  if (!detail::st().initialized) throw dist_error("tenet::dist::rank: call init_process_group() first");
  return detail::st().rank;
}
inline int world_size() {
  if (!detail::st().initialized) throw dist_error("tenet::dist::world_size: call init_process_group() first");
  return detail::st().size;
}
/// The timeout of every later wait, in seconds.
inline void set_timeout(double seconds) {
  if (!(seconds > 0)) throw value_error("tenet::dist::set_timeout: seconds must be positive, got " + std::to_string(seconds));
  detail::st().timeout = seconds;
}
inline double timeout() { return detail::st().timeout; }
/// Switches the cross-rank check of dtype and sizes before each collective (init_options).
inline void set_check_consistency(bool on) { detail::st().check_consistency = on; }

/// Tells the peers this rank is leaving and finalizes MPI (when tenet initialized it).
inline void destroy_process_group() { detail::say_goodbye_and_finalize(); }

/// The world group.
inline process_group world() {
  detail::require_init("world");
  return process_group(detail::st().world);
}

/// A sub-group of the world ranks `ranks` (torch.distributed.new_group): every rank of the world
/// must call it with the same list, members or not; group ranks follow the sorted world ranks.
inline process_group new_group(std::vector<int> ranks) {
  detail::require_init("new_group");
  auto& s = detail::st();
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty()) throw value_error("tenet::dist::new_group: the list of ranks is empty");
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= s.size)
      throw value_error("tenet::dist::new_group: rank " + std::to_string(ranks[i]) + " is not in [0, " +
                        std::to_string(s.size) + ")");
    if (i && ranks[i] == ranks[i - 1])
      throw value_error("tenet::dist::new_group: rank " + std::to_string(ranks[i]) + " is listed twice");
  }
  auto g = std::make_shared<detail::group_impl>();
  g->world_ranks = ranks;
  const auto it = std::find(ranks.begin(), ranks.end(), s.rank);
  g->rank = it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
  // collective over the world (a split, polled like every other wait would need MPI 4's
  // MPI_Comm_isplit; this one is short and every rank calls it)
  detail::check(MPI_Comm_split(s.world->comm, g->rank >= 0 ? 0 : MPI_UNDEFINED, s.rank, &g->comm), "MPI_Comm_split");
  if (g->comm != MPI_COMM_NULL) {
    MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
    g->owns_comm = true;
  }
  return process_group(std::move(g));
}

}  // namespace tenet::dist
