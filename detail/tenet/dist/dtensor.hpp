#pragma once
#include <tenet/detail_check.hpp>
// DTensor on a 1-D DeviceMesh (torch.distributed.tensor's contract for the parts below), CPU
// tensors over MPI; included by <tenet/dist.hpp>.
//
//   td::DeviceMesh mesh;                                           // the world, in rank order
//   auto d = td::distribute_tensor(full, mesh, td::Shard{1});      // rank r keeps chunk r of dim 1
//   auto r = d.redistribute(td::Replicate{});                      // all_gather
//   auto p = td::DTensor<float, 2>::from_local(part, mesh, td::Partial{});  // a pending sum
//   auto s = p.redistribute(td::Shard{0});                         // reduce_scatter
//   Tensor<float, dyn_shape<2>> whole = s.full_tensor();
//
// @post d.full_tensor() == full, for every placement and every redistribute chain of d
// Placements: Shard(dim) (rank r of W holds chunk r of that dim: the dim must be a multiple of W,
// value_error with the values otherwise; torch's uneven chunks are not done), Replicate (every
// rank holds the whole), Partial(op) (every rank holds a part; the value is their reduction).
// Redistributions: Shard -> Replicate all_gather; Replicate -> Shard local chunking; Partial ->
// Replicate all_reduce; Partial -> Shard reduce_scatter; Shard(a) -> Shard(b) all_gather then
// chunking (all_to_all would move less: not done); to Partial is refused. None of them is recorded
// by autograd (no backward through a DTensor yet), and DTensor has no ops of its own yet.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include <tenet/dist/collectives.hpp>
#include <tenet/dist/process_group.hpp>
#include <tenet/error.hpp>
#include <tenet/tensor.hpp>

namespace tenet::dist {

struct Shard {
  int dim = 0;
};
struct Replicate {};
struct Partial {
  reduce_op op = reduce_op::sum;
};
using placement = std::variant<Shard, Replicate, Partial>;

/// "Shard(1)", "Replicate()", "Partial(sum)" (torch's reprs).
inline std::string to_string(const placement& p) {
  if (const auto* s = std::get_if<Shard>(&p)) return "Shard(" + std::to_string(s->dim) + ")";
  if (std::holds_alternative<Replicate>(p)) return "Replicate()";
  return std::string("Partial(") + name(std::get<Partial>(p).op) + ")";
}

/// A 1-D mesh: the ranks of a process group in its rank order (torch's init_device_mesh("cpu", (n,))).
class DeviceMesh {
 public:
  explicit DeviceMesh(process_group g = {}) : group_(std::move(g)) {
    (void)detail::member_group(group_, "DeviceMesh");
  }
  int size() const { return group_.size(); }
  /// This rank's coordinate on the mesh.
  int coordinate() const { return group_.rank(); }
  const std::vector<int>& ranks() const { return group_.ranks(); }
  const process_group& group() const { return group_; }
  bool operator==(const DeviceMesh& o) const { return ranks() == o.ranks(); }

 private:
  process_group group_;
};

namespace detail {
inline std::string sizes_text(const std::int64_t* s, std::size_t r) { return sizes_str(s, r); }

/// Products of the sizes before and after dim d.
template <std::size_t R>
std::pair<std::int64_t, std::int64_t> outer_inner(const std::array<std::int64_t, R>& sizes, std::size_t d) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < d; ++i) outer *= sizes[i];
  for (std::size_t i = d + 1; i < R; ++i) inner *= sizes[i];
  return {outer, inner};
}
/// Chunk q (of `parts` equal ones along dim d) of the contiguous values `full` of `sizes`, into `out`.
template <class T, std::size_t R>
void copy_chunk(const T* full, const std::array<std::int64_t, R>& sizes, std::size_t d, int parts, int q, T* out) {
  const auto [outer, inner] = outer_inner(sizes, d);
  const std::int64_t n = sizes[d], c = n / parts, block = c * inner;
  if (block == 0) return;
  for (std::int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<void*>(out + o * block), full + (o * n + q * c) * inner, static_cast<std::size_t>(block) * sizeof(T));
}
/// The inverse: chunk q's values `in` written into its place in `full`.
template <class T, std::size_t R>
void place_chunk(const T* in, const std::array<std::int64_t, R>& sizes, std::size_t d, int parts, int q, T* full) {
  const auto [outer, inner] = outer_inner(sizes, d);
  const std::int64_t n = sizes[d], c = n / parts, block = c * inner;
  if (block == 0) return;
  for (std::int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<void*>(full + (o * n + q * c) * inner), in + o * block, static_cast<std::size_t>(block) * sizeof(T));
}
}  // namespace detail

/// A tensor of global sizes `sizes()` spread over a DeviceMesh by one placement; this rank holds
/// `to_local()`.
template <class T, std::size_t R>
class DTensor {
 public:
  using local_type = Tensor<T, dyn_shape<R>>;
  using sizes_type = std::array<std::int64_t, R>;

  /// torch's DTensor.from_local: `local` is this rank's part; the global sizes follow from the
  /// placement (a Shard's dim times the mesh size: every rank must pass equal local sizes).
  static DTensor from_local(const local_type& local, const DeviceMesh& mesh, placement p) {
    sizes_type g{};
    for (std::size_t i = 0; i < R; ++i) g[i] = local.size(static_cast<std::int64_t>(i));
    p = normalize(p, "from_local");
    if (const auto* s = std::get_if<Shard>(&p)) g[static_cast<std::size_t>(s->dim)] *= mesh.size();
    return DTensor(contiguous_copy(local), mesh, p, g);
  }

  const local_type& to_local() const { return local_; }
  const sizes_type& sizes() const { return sizes_; }
  const placement& placements() const { return placement_; }
  const DeviceMesh& device_mesh() const { return mesh_; }

  /// The same global tensor under placement `target` (the collectives in the header comment).
  DTensor redistribute(placement target) const {
    target = normalize(target, "redistribute");
    if (std::holds_alternative<Partial>(target)) {
      if (const auto* p = std::get_if<Partial>(&placement_); p && p->op == std::get<Partial>(target).op) return *this;
      throw value_error("tenet::dist::DTensor::redistribute: from " + to_string(placement_) + " to " + to_string(target) +
                        " is not supported (a Partial placement comes from from_local or an op's result)");
    }
    if (const auto* s = std::get_if<Shard>(&target)) {
      check_divisible(sizes_, *s, mesh_.size(), "redistribute");
      if (const auto* now = std::get_if<Shard>(&placement_); now && now->dim == s->dim) return *this;
      if (const auto* p = std::get_if<Partial>(&placement_)) return DTensor(reduce_scatter_to(*s, p->op), mesh_, target, sizes_);
      // Replicate: chunk locally; another Shard: gather, then chunk
      const local_type whole = std::holds_alternative<Replicate>(placement_) ? local_ : full_tensor();
      return DTensor(chunk_of(whole, *s), mesh_, target, sizes_);
    }
    if (std::holds_alternative<Replicate>(placement_)) return *this;
    return DTensor(full_tensor(), mesh_, Replicate{}, sizes_);
  }

  /// The whole tensor on every rank (all_gather for Shard, all_reduce for Partial).
  local_type full_tensor() const {
    local_type out(sizes_);
    const std::int64_t n = local_.numel();
    if (std::holds_alternative<Replicate>(placement_)) {
      if (n) std::memcpy(static_cast<void*>(out.data()), local_.data(), static_cast<std::size_t>(n) * sizeof(T));
      return out;
    }
    if (const auto* p = std::get_if<Partial>(&placement_)) {
      Tensor<T, shape<dyn>> flat({n});
      if (n) std::memcpy(static_cast<void*>(flat.data()), local_.data(), static_cast<std::size_t>(n) * sizeof(T));
      all_reduce(flat, p->op, {.group = mesh_.group()});
      if (n) std::memcpy(static_cast<void*>(out.data()), flat.data(), static_cast<std::size_t>(n) * sizeof(T));
      return out;
    }
    const auto d = static_cast<std::size_t>(std::get<Shard>(placement_).dim);
    const int w = mesh_.size();
    Tensor<T, shape<dyn>> mine({n}), gathered({n * w});
    if (n) std::memcpy(static_cast<void*>(mine.data()), local_.data(), static_cast<std::size_t>(n) * sizeof(T));
    all_gather_into_tensor(gathered, mine, {.group = mesh_.group()});
    for (int q = 0; q < w; ++q) detail::place_chunk(gathered.data() + q * n, sizes_, d, w, q, out.data());
    return out;
  }

 private:
  template <class U, class S>
  friend DTensor<U, S::rank> distribute_tensor(const Tensor<U, S>& full, const DeviceMesh& mesh, placement p);

  DTensor(local_type local, DeviceMesh mesh, placement p, sizes_type sizes)
      : local_(std::move(local)), mesh_(std::move(mesh)), placement_(p), sizes_(sizes) {}

  /// Shard dims counted from the end (Shard{-1}) made non-negative; out of range: value_error.
  static placement normalize(placement p, const char* what) {
    if (auto* s = std::get_if<Shard>(&p)) {
      const int r = static_cast<int>(R);
      if (s->dim < -r || s->dim >= r)
        throw value_error(std::string("tenet::dist::DTensor::") + what + ": Shard(" + std::to_string(s->dim) +
                          ") of a tensor of rank " + std::to_string(r) + "; the dim must be in [" +
                          std::to_string(-r) + ", " + std::to_string(r - 1) + "]");
      if (s->dim < 0) s->dim += r;
    }
    return p;
  }
  static void check_divisible(const sizes_type& g, Shard s, int w, const char* what) {
    const auto d = static_cast<std::size_t>(s.dim);
    if (g[d] % w != 0)
      throw value_error(std::string("tenet::dist::") + what + ": Shard(" + std::to_string(s.dim) + ") of sizes " +
                        detail::sizes_text(g.data(), R) + " on a mesh of " + std::to_string(w) + " ranks: dim " +
                        std::to_string(s.dim) + " (" + std::to_string(g[d]) + ") is not a multiple of " +
                        std::to_string(w) + " (uneven shards are not supported)");
  }
  static local_type contiguous_copy(const local_type& t) {
    local_type c = t.contiguous();
    if (c.storage() == t.storage()) c = t.clone();  // own storage: later writes to t do not reach it
    return c;
  }
  /// This rank's chunk along s.dim of the contiguous whole `whole` (of sizes_).
  local_type chunk_of(const local_type& whole, Shard s) const {
    sizes_type ls = sizes_;
    const auto d = static_cast<std::size_t>(s.dim);
    ls[d] /= mesh_.size();
    local_type out(ls);
    const local_type c = whole.contiguous();
    detail::copy_chunk(c.data(), sizes_, d, mesh_.size(), mesh_.coordinate(), out.data());
    return out;
  }
  /// Partial -> Shard: every rank's chunks packed in rank order, reduced and scattered.
  local_type reduce_scatter_to(Shard s, reduce_op op) const {
    const int w = mesh_.size();
    const auto d = static_cast<std::size_t>(s.dim);
    const std::int64_t n = local_.numel(), per = n / w;
    Tensor<T, shape<dyn>> packed({n}), mine({per});
    for (int q = 0; q < w; ++q) detail::copy_chunk(local_.data(), sizes_, d, w, q, packed.data() + q * per);
    reduce_scatter_tensor(mine, packed, op, {.group = mesh_.group()});
    sizes_type ls = sizes_;
    ls[d] /= w;
    local_type out(ls);
    if (per) std::memcpy(static_cast<void*>(out.data()), mine.data(), static_cast<std::size_t>(per) * sizeof(T));
    return out;
  }

  local_type local_;  // contiguous, owned
  DeviceMesh mesh_;
  placement placement_;
  sizes_type sizes_{};
};

/// torch's distribute_tensor: `full` as it is on the mesh's first rank (broadcast to the others,
/// as torch's src_data_rank=0), placed by Shard (each rank keeps its chunk) or Replicate; Partial
/// is refused (value_error), as in torch.
template <class T, class S>
DTensor<T, S::rank> distribute_tensor(const Tensor<T, S>& full, const DeviceMesh& mesh, placement p) {
  constexpr std::size_t R = S::rank;
  using D = DTensor<T, R>;
  p = D::normalize(p, "distribute_tensor");
  if (std::holds_alternative<Partial>(p))
    throw value_error("tenet::dist::distribute_tensor: a Partial placement cannot be distributed (use "
                      "DTensor::from_local with each rank's part)");
  typename D::sizes_type g{};
  for (std::size_t i = 0; i < R; ++i) g[i] = full.size(static_cast<std::int64_t>(i));
  if (const auto* s = std::get_if<Shard>(&p)) D::check_divisible(g, *s, mesh.size(), "distribute_tensor");
  typename D::local_type whole(g);
  const auto c = full.detach().contiguous();
  const std::int64_t n = whole.numel();
  Tensor<T, shape<dyn>> flat({n});
  if (n) std::memcpy(static_cast<void*>(flat.data()), c.data(), static_cast<std::size_t>(n) * sizeof(T));
  broadcast(flat, mesh.ranks().front(), {.group = mesh.group()});
  if (n) std::memcpy(static_cast<void*>(whole.data()), flat.data(), static_cast<std::size_t>(n) * sizeof(T));
  D out(whole, mesh, Replicate{}, g);
  if (const auto* s = std::get_if<Shard>(&p)) return D(out.chunk_of(whole, *s), mesh, p, g);
  return out;
}

}  // namespace tenet::dist
