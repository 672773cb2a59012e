#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// tenet::dist::FullyShardedDataParallel (also tenet::nn::FullyShardedDataParallel); included by
// <tenet/dist.hpp>, needs MPI (link tenet::dist). docs/distributed.md has the guide.
//
// Fully sharded data parallelism for one nn::Module (one FSDP unit) over the ranks of a process
// group, after torch.distributed.fsdp.FullyShardedDataParallel:
//
// - Construction broadcasts the module's parameters and buffers from the group's first rank
//   (torch's sync_module_states), flattens the parameters that require grad into one flat
//   parameter (registration order, padded with zeros to a multiple of the group size W) and keeps
//   on this rank only its 1/W shard, `flat_param`, the one parameter of this object: the optimizer
//   steps on it (`optim::SGD opt(fsdp.parameters(), ...)`). The module's own parameter members are
//   then freed (undefined tensors).
// - The forward all-gathers the shards (in the module's parameter dtype, the compute dtype), gives
//   each module parameter a fresh autograd leaf over its slice, and runs the module. Under no_grad
//   the parameters are freed when the forward returns; with grad mode on they live until the end of
//   the backward (torch's reshard_after_forward=False / SHARD_GRAD_OP: the graph reads them; the
//   re-gather for the backward of torch's FULL_SHARD is not done).
// - At the end of the backward (autograd::queue_callback from the parameters' post-accumulate-grad
//   hooks) the gradients are flattened in the reduce dtype, reduce-scattered with avg, converted to
//   the shard dtype and added to flat_param's .grad (gradient accumulation over several backwards
//   works as for any parameter); the module's parameters are freed. Several units (one per block)
//   reduce in their construction order, the same on every rank (detail::fsdp_units).
// - Mixed precision: the compute dtype is the wrapped module's parameter dtype (its type says it:
//   a module of bfloat16 Linears computes in bfloat16); fsdp_options::shard_dtype (the master
//   weights the optimizer updates, e.g. float32) and reduce_dtype (the gradient reduce-scatter)
//   may differ from it. Conversions round to nearest even.
// - State dicts: full_state_dict() (every rank gets the whole module's state, parameters in the
//   shard dtype, by the module's names; save_full_state_dict writes it from the first rank as
//   safetensors), load_full_state_dict; sharded_state_dict() (this rank's flat shard with the world
//   size, rank and element count it belongs to), load_sharded_state_dict(dict) (the same world
//   size) and load_sharded_state_dict(read) (any saved world size: resharded from the files).
//
// Limits: one unit per object (wrap submodules separately and call each wrapper in the forward for
// per-block sharding); every parameter that requires grad must have one dtype and be on the CPU;
// one backward per gathered set of parameters (several forwards may feed it; a second backward of
// a retained graph reduces nothing); the module is held by reference and must outlive this object.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <tenet/autograd.hpp>
#include <tenet/dist/collectives.hpp>
#include <tenet/nn/module.hpp>
#include <tenet/nn/parallel.hpp>  // detail::with_dtype, detail::broadcast_ref
#include <tenet/safetensors.hpp>
#include <tenet/tensor_dict.hpp>

namespace tenet::dist {

struct fsdp_options {
  process_group group{};
  /// dtype of the shards the optimizer updates (the master weights); unset: the module's parameter dtype.
  std::optional<dtype> shard_dtype = std::nullopt;
  /// dtype the gradients are reduce-scattered in; unset: the module's parameter dtype (as torch's
  /// MixedPrecision reduces in param_dtype by default).
  std::optional<dtype> reduce_dtype = std::nullopt;
  /// Broadcast the module's parameters and buffers from the group's first rank at construction.
  bool sync_module_states = true;
};

namespace detail {
template <class T>
double widen(T v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) return static_cast<double>(static_cast<float>(v));
  else return static_cast<double>(v);
}
template <class T>
T narrow_to(double v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}
/// dst[i] = src[i] (+ dst[i] when accumulate) for n values between floating dtypes.
inline void convert(const void* src, dtype from, void* dst, dtype to, std::int64_t n, bool accumulate = false) {
  any_tensor::visit_floating_dtype(from, [&]<class A>() {
    any_tensor::visit_floating_dtype(to, [&]<class B>() {
      const A* a = static_cast<const A*>(src);
      B* b = static_cast<B*>(dst);
      if constexpr (std::is_same_v<A, B>) {
        if (!accumulate) {
          if (n) std::memcpy(static_cast<void*>(b), a, static_cast<std::size_t>(n) * sizeof(A));
          return;
        }
      }
      for (std::int64_t i = 0; i < n; ++i) b[i] = narrow_to<B>(widen(a[i]) + (accumulate ? widen(b[i]) : 0.0));
    });
  });
}
/// The FSDP units of this process in construction order, and the ones whose parameters received
/// gradients in the running backward. The engine may reach the leaves of one recorded node in an
/// order that differs from rank to rank (a fused expression over several units), so the units'
/// reduce-scatters are not started from the hooks: one end-of-backward callback runs them in
/// construction order, the same on every rank that built the same units in the same order.
struct fsdp_units {
  std::uint64_t next_id = 0;
  std::uint64_t serial = 0;                               // the backward the callback is queued for
  std::map<std::uint64_t, std::function<void()>> pending;  // unit id -> its post-backward
  static fsdp_units& get() {
    static fsdp_units u;
    return u;
  }
  void run_pending() {
    auto todo = std::move(pending);
    pending.clear();
    serial = 0;
    for (auto& [id, f] : todo) f();
  }
};
inline void require_floating(dtype d, const char* what) {
  if (!is_floating(d))
    throw dtype_error(std::string("tenet::dist::FullyShardedDataParallel: ") + what + " must be a floating dtype, got " +
                      name(d));
}
}  // namespace detail

template <class M>
class FullyShardedDataParallel : public nn::Module {
 public:
  /// Shards `module` (kept by reference: it must outlive this object) over the ranks of opt.group.
  explicit FullyShardedDataParallel(M& module, fsdp_options opt = {})
      : module_(module), opt_(std::move(opt)), id_(detail::fsdp_units::get().next_id++) {
    (void)detail::member_group(opt_.group, "FullyShardedDataParallel");
    world_ = opt_.group.size();
    rank_ = opt_.group.rank();
    const int src = opt_.group.ranks().front();
    std::string first_name;
    for (const auto& [name, r] : module_.named_parameters()) {
      if (!r.device().is_cpu())
        throw device_error("tenet::dist::FullyShardedDataParallel: parameter \"" + name + "\" is on " +
                           r.device().str() + "; this build runs MPI on CPU tensors");
      if (opt_.sync_module_states) dist::detail::broadcast_ref(r, name, src, opt_.group);
      if (!r.requires_grad()) continue;  // frozen: replicated, left in the module
      if (params_.empty()) {
        compute_ = r.scalar_type();
        first_name = name;
      } else if (r.scalar_type() != compute_) {
        throw dtype_error("tenet::dist::FullyShardedDataParallel: parameter \"" + name + "\" is " +
                          tenet::name(r.scalar_type()) + " but \"" + first_name + "\" is " + tenet::name(compute_) +
                          "; one flat parameter needs one dtype (wrap the parts of each dtype separately)");
      }
      params_.push_back({name, r, r.sizes(), r.numel(), total_});
      total_ += r.numel();
    }
    if (params_.empty())
      throw value_error("tenet::dist::FullyShardedDataParallel: the module has no parameter that requires grad");
    if (opt_.sync_module_states)
      for (const auto& [name, r] : module_.named_buffers()) dist::detail::broadcast_ref(r, name, src, opt_.group);
    detail::require_floating(compute_, "the module's parameter dtype");
    shard_dtype_ = opt_.shard_dtype.value_or(compute_);
    reduce_dtype_ = opt_.reduce_dtype.value_or(compute_);
    detail::require_floating(shard_dtype_, "shard_dtype");
    detail::require_floating(reduce_dtype_, "reduce_dtype");
    shard_numel_ = (total_ + world_ - 1) / world_;
    padded_ = shard_numel_ * world_;

    // this rank's shard of the flat parameter, from the module's (now equal) values
    any_tensor full = any_tensor::zeros(compute_, {padded_});
    char* base = static_cast<char*>(full.raw_data_mut());
    for (const auto& p : params_) p.ref.value().copy_to_host(base + p.offset * static_cast<std::int64_t>(itemsize(compute_)));
    any_tensor::visit_floating_dtype(shard_dtype_, [&]<class T>() {
      auto& s = shard_.template emplace<Tensor<T, shape<dyn>>>(typename Tensor<T, shape<dyn>>::sizes_type{shard_numel_});
      detail::convert(base + rank_ * shard_numel_ * static_cast<std::int64_t>(itemsize(compute_)), compute_,
                      static_cast<void*>(s.data()), shard_dtype_, shard_numel_);
      register_parameter("flat_param", s);
    });
    reshard();
  }
  ~FullyShardedDataParallel() {
    remove_hooks();
    detail::fsdp_units::get().pending.erase(id_);
  }
  FullyShardedDataParallel(const FullyShardedDataParallel&) = delete;
  FullyShardedDataParallel& operator=(const FullyShardedDataParallel&) = delete;

  /// The forward: gathers the parameters, then runs the wrapped module (see the header comment
  /// for when they are freed).
  template <class... A>
  decltype(auto) operator()(A&&... a) {
    // parameters a grad-mode forward gathered stay for its backward, even through a no_grad forward
    const bool kept = materialized_ && shard_version() == gathered_version_;
    unshard();
    if (tenet::detail::ag::grad_mode() || kept) return module_(std::forward<A>(a)...);
    struct reshard_on_exit {
      FullyShardedDataParallel& f;
      ~reshard_on_exit() { f.reshard(); }
    } guard{*this};
    // under no_grad: evaluated before the parameters are freed (a lazy result keeps its own handles)
    return module_(std::forward<A>(a)...);
  }
  M& module() const { return module_; }

  /// Gathers the full parameters into the module (fresh leaves that require grad); the forward calls it.
  /// When they are already there and the shard was not written since (its storage version: an
  /// optimizer step or a load moves it), they are kept: several forwards before one backward then
  /// feed the same leaves, and the backward reduces their summed gradient once.
  void unshard() {
    if (materialized_ && shard_version() == gathered_version_) return;
    reshard();
    any_tensor full = any_tensor::zeros(compute_, {padded_});
    dist::detail::with_dtype(compute_, [&]<class C>() {
      if constexpr (is_floating_v<C>) {
        Tensor<C, shape<dyn>> local({shard_numel_});
        std::visit(
            [&](const auto& s) {
              if constexpr (!std::is_same_v<std::decay_t<decltype(s)>, std::monostate>)
                detail::convert(s.data(), shard_dtype_, static_cast<void*>(local.data()), compute_, shard_numel_);
            },
            shard_);
        all_gather_into_tensor(full.template flat<C>(), local, {.group = opt_.group});
      }
    });
    const char* base = static_cast<const char*>(full.raw_data());
    const auto item = static_cast<std::int64_t>(itemsize(compute_));
    for (std::size_t i = 0; i < params_.size(); ++i) {
      param& p = params_[i];
      any_tensor v = any_tensor::zeros(compute_, p.sizes);
      if (p.numel) std::memcpy(v.raw_data_mut(), base + p.offset * item, static_cast<std::size_t>(p.numel * item));
      p.ref.slot().reset_to(v);
      p.ref.requires_grad_(true);
      hooks_.push_back(register_hook(i));
    }
    materialized_ = true;
    gathered_version_ = shard_version();
  }
  /// Frees the module's full parameters (their members become undefined tensors).
  void reshard() {
    remove_hooks();
    for (auto& p : params_) p.ref.slot().reset_to(any_tensor());
    materialized_ = false;
    backward_serial_ = 0;
  }
  bool is_unsharded() const { return materialized_; }

  dtype compute_dtype() const { return compute_; }
  dtype shard_dtype() const { return shard_dtype_; }
  dtype reduce_dtype() const { return reduce_dtype_; }
  /// Elements of the flat parameter (without padding), and of this rank's shard.
  std::int64_t flat_numel() const { return total_; }
  std::int64_t shard_numel() const { return shard_numel_; }
  /// This rank's shard (a copy of the handle: same storage and autograd identity).
  nn::tensor_ref flat_param() const { return parameters().front(); }

  /// The whole module's state on every rank (an all-gather of the shards): the sharded parameters
  /// in the shard dtype, the other parameters and persistent buffers as the module holds them.
  tensor_dict full_state_dict() const {
    any_tensor full = gather_shards();
    const char* base = static_cast<const char*>(full.raw_data());
    const auto item = static_cast<std::int64_t>(itemsize(shard_dtype_));
    tensor_dict out;
    for (const auto& [name, r] : module_.named_parameters()) {
      if (const param* p = find(name)) {
        any_tensor v = any_tensor::zeros(shard_dtype_, p->sizes);
        if (p->numel) std::memcpy(v.raw_data_mut(), base + p->offset * item, static_cast<std::size_t>(p->numel * item));
        out.insert(name, v);
      } else {
        out.insert(name, r.value().clone());
      }
    }
    for (const auto& [name, v] : module_.state_dict())
      if (!out.contains(name)) out.insert(name, v.clone());  // persistent buffers
    return out;
  }
  /// full_state_dict() written as safetensors by the group's first rank (the others wait for it).
  void save_full_state_dict(const std::string& path, const safetensors::metadata& meta = {{"format", "pt"}}) const {
    tensor_dict d = full_state_dict();
    std::int64_t ok = 1;
    std::string error;
    if (rank_ == 0) {
      try {
        safetensors::save_file(d, path, meta);
      } catch (const std::exception& e) {
        ok = 0;
        error = e.what();
      }
    }
    Tensor<std::int64_t, shape<1>> flag({1});
    flag(0) = ok;
    broadcast(flag, opt_.group.ranks().front(), {.group = opt_.group});  // every rank learns whether it worked
    if (flag(0) == 0)
      throw value_error("tenet::dist::FullyShardedDataParallel::save_full_state_dict: the first rank could not write " +
                        path + (error.empty() ? std::string() : ": " + error));
  }
  /// Loads a full state dict (every rank passes the same one, e.g. safetensors::load_file of what
  /// save_full_state_dict wrote): each rank keeps its shard of the sharded parameters (any floating
  /// dtype, converted to the shard dtype) and copies the rest into the module. Every key of the
  /// module must be there and no other (value_error listing them); sizes must match (shape_error).
  void load_full_state_dict(const tensor_dict& d) {
    const char* who = "tenet::dist::FullyShardedDataParallel::load_full_state_dict";
    std::vector<std::string> missing, unexpected;
    std::vector<std::string> keys;
    for (const auto& [name, r] : module_.named_parameters()) keys.push_back(name);
    for (const auto& [name, v] : module_.state_dict())
      if (std::find(keys.begin(), keys.end(), name) == keys.end()) keys.push_back(name);
    for (const auto& k : keys)
      if (!d.contains(k)) missing.push_back(k);
    for (const auto& k : d.keys())
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) unexpected.push_back(k);
    if (!missing.empty() || !unexpected.empty())
      throw value_error(std::string(who) + ": missing keys [" + join(missing) + "], unexpected keys [" +
                        join(unexpected) + "]");
    for (const auto& p : params_) {
      const any_tensor& v = d.at(p.name);
      if (v.sizes() != p.sizes)
        throw shape_error(std::string(who) + ": \"" + p.name + "\" has sizes " + tenet::detail::sizes_text(v.sizes()) +
                          " in the state dict, the module's parameter " + tenet::detail::sizes_text(p.sizes));
      detail::require_floating(v.scalar_type(), ("the state dict's \"" + p.name + "\"").c_str());
    }
    // the checks passed: write this rank's shard, then the rest of the module
    any_tensor shard = any_tensor::zeros(shard_dtype_, {shard_numel_});
    const auto item = static_cast<std::int64_t>(itemsize(shard_dtype_));
    const std::int64_t lo = rank_ * shard_numel_, hi = lo + shard_numel_;
    for (const auto& p : params_) {
      const std::int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.numel);
      if (a >= b) continue;
      const any_tensor& v = d.at(p.name);
      detail::convert(static_cast<const char*>(v.raw_data()) + (a - p.offset) * static_cast<std::int64_t>(itemsize(v.scalar_type())),
                      v.scalar_type(), static_cast<char*>(shard.raw_data_mut()) + (a - lo) * item, shard_dtype_, b - a);
    }
    write_shard(shard);
    tensor_dict rest;
    for (const auto& [name, v] : d)
      if (!find(name)) rest.insert(name, v);
    if (!rest.empty()) (void)module_.load_state_dict(rest, false);
  }

  /// This rank's shard: "flat_param" (a copy) with the int64 scalars "world_size", "rank" and
  /// "flat_numel" it belongs to. Save one file per rank; load_sharded_state_dict reads it back on
  /// a group of the same size.
  tensor_dict sharded_state_dict() const {
    tensor_dict d;
    d.insert("flat_param", flat_param().value().clone());
    d.insert("world_size", tenet::detail::int_field(world_));
    d.insert("rank", tenet::detail::int_field(rank_));
    d.insert("flat_numel", tenet::detail::int_field(total_));
    return d;
  }
  void load_sharded_state_dict(const tensor_dict& d) {
    const std::string who = "tenet::dist::FullyShardedDataParallel::load_sharded_state_dict";
    tenet::detail::state_reader in(d, who);
    const std::int64_t w = in.integer("world_size"), r = in.integer("rank"), n = in.integer("flat_numel");
    if (w != world_ || r != rank_ || n != total_)
      throw value_error(who + ": the shard was saved by rank " + std::to_string(r) + " of " + std::to_string(w) +
                        " for a flat parameter of " + std::to_string(n) + " elements; this is rank " +
                        std::to_string(rank_) + " of " + std::to_string(world_) + " with " + std::to_string(total_) +
                        " elements (resharding to another world size goes through full_state_dict)");
    if (!d.contains("flat_param")) throw value_error(who + ": the state dict has no \"flat_param\"");
    const any_tensor& v = d.at("flat_param");
    if (v.sizes() != std::vector<std::int64_t>{shard_numel_})
      throw shape_error(who + ": \"flat_param\" has sizes " + tenet::detail::sizes_text(v.sizes()) + ", the shard [" +
                        std::to_string(shard_numel_) + "]");
    detail::require_floating(v.scalar_type(), "the state dict's \"flat_param\"");
    for (const auto& k : d.keys())
      if (k != "flat_param" && k != "world_size" && k != "rank" && k != "flat_numel")
        throw value_error(who + ": unexpected key \"" + k + "\" (a sharded state dict holds flat_param, world_size, "
                          "rank and flat_numel)");
    any_tensor shard = any_tensor::zeros(shard_dtype_, {shard_numel_});
    detail::convert(v.raw_data(), v.scalar_type(), shard.raw_data_mut(), shard_dtype_, shard_numel_);
    write_shard(shard);
  }

  /// Loads a sharded checkpoint written by a group of any size (resharding): `read(q)` returns the
  /// sharded_state_dict that rank q of the saving group wrote (e.g. safetensors::load_file of its
  /// file). Rank 0's dict is read for the saved world size, then only the saved shards that overlap
  /// this rank's. No communication: every rank reads what it needs.
  void load_sharded_state_dict(const std::function<tensor_dict(int)>& read) {
    const std::string who = "tenet::dist::FullyShardedDataParallel::load_sharded_state_dict";
    const tensor_dict first = read(0);
    const std::int64_t saved_world = tenet::detail::state_reader(first, who).integer("world_size");
    if (saved_world < 1) throw value_error(who + ": rank 0's dict says world_size " + std::to_string(saved_world));
    const std::int64_t old = (total_ + saved_world - 1) / saved_world;  // the saved shards' length
    const std::int64_t lo = rank_ * shard_numel_, hi = std::min(lo + shard_numel_, total_);
    any_tensor shard = any_tensor::zeros(shard_dtype_, {shard_numel_});
    const auto item = static_cast<std::int64_t>(itemsize(shard_dtype_));
    for (std::int64_t q = old ? lo / old : 0; old && q < saved_world && q * old < hi; ++q) {
      const tensor_dict other = q == 0 ? tensor_dict() : read(static_cast<int>(q));
      const tensor_dict& d = q == 0 ? first : other;
      tenet::detail::state_reader in(d, who);
      const std::int64_t w = in.integer("world_size"), r = in.integer("rank"), n = in.integer("flat_numel");
      if (w != saved_world || r != q || n != total_)
        throw value_error(who + ": read(" + std::to_string(q) + ") returned the shard of rank " + std::to_string(r) +
                          " of " + std::to_string(w) + " for " + std::to_string(n) + " elements; expected rank " +
                          std::to_string(q) + " of " + std::to_string(saved_world) + " for " + std::to_string(total_));
      if (!d.contains("flat_param") || d.at("flat_param").sizes() != std::vector<std::int64_t>{old})
        throw shape_error(who + ": the shard of rank " + std::to_string(q) + " has no \"flat_param\" of sizes [" +
                          std::to_string(old) + "]");
      const any_tensor& v = d.at("flat_param");
      detail::require_floating(v.scalar_type(), "the state dict's \"flat_param\"");
      const std::int64_t a = std::max(lo, q * old), b = std::min(hi, (q + 1) * old);
      if (a < b)
        detail::convert(static_cast<const char*>(v.raw_data()) + (a - q * old) * static_cast<std::int64_t>(itemsize(v.scalar_type())),
                        v.scalar_type(), static_cast<char*>(shard.raw_data_mut()) + (a - lo) * item, shard_dtype_, b - a);
    }
    write_shard(shard);
  }

 private:
  struct param {
    std::string name;
    nn::tensor_ref ref;
    std::vector<std::int64_t> sizes;
    std::int64_t numel = 0;
    std::int64_t offset = 0;  // elements into the flat parameter
  };

  const param* find(const std::string& name) const {
    for (const auto& p : params_)
      if (p.name == name) return &p;
    return nullptr;
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "\"" : ", \"") + x + "\"";
    return s;
  }

  /// The padded flat parameter in the shard dtype, gathered from every rank.
  any_tensor gather_shards() const {
    any_tensor full = any_tensor::zeros(shard_dtype_, {padded_});
    std::visit(
        [&]<class X>(const X& s) {
          if constexpr (!std::is_same_v<X, std::monostate>) {
            using T = typename X::value_type;
            all_gather_into_tensor(full.template flat<T>(), s.detach(), {.group = opt_.group});
          }
        },
        shard_);
    return full;
  }
  std::uint64_t shard_version() const {
    return std::visit(
        [](const auto& s) -> std::uint64_t {
          if constexpr (std::is_same_v<std::decay_t<decltype(s)>, std::monostate>) return 0;
          else return s.storage()->version.load(std::memory_order_relaxed);
        },
        shard_);
  }
  void write_shard(const any_tensor& v) {
    const no_grad off;  // an optimizer-style write into the leaf
    flat_param().slot().load(v, "flat_param");
  }

  autograd::hook_handle register_hook(std::size_t i) {
    const auto m = params_[i].ref.slot().bound()->identity();
    static std::atomic<std::uint64_t> next_id{1u << 29};
    const std::uint64_t id = next_id++;
    m->post_accumulate_hooks.emplace_back(id, [this] { on_grad_ready(); });
    return autograd::hook_handle(m, id);
  }
  void remove_hooks() {
    for (auto& h : hooks_) h.remove();
    hooks_.clear();
  }

  void on_grad_ready() {
    const std::uint64_t serial = autograd::current_backward_serial();
    if (serial == backward_serial_) return;
    backward_serial_ = serial;
    auto& units = detail::fsdp_units::get();
    if (units.serial != serial) {  // the first unit of this backward: one callback for all
      units.pending.clear();
      units.serial = serial;
      autograd::queue_callback([] { detail::fsdp_units::get().run_pending(); });
    }
    units.pending[id_] = [this] { post_backward(); };
  }

  /// The module's gradients, averaged over the group, scattered into flat_param's .grad (added to
  /// the gradient already there); then the full parameters are freed.
  void post_backward() {
    any_tensor flat = any_tensor::zeros(reduce_dtype_, {padded_});
    const auto item = static_cast<std::int64_t>(itemsize(reduce_dtype_));
    for (const auto& p : params_) {
      const any_tensor g = p.ref.grad();
      if (g.defined())
        detail::convert(g.raw_data(), g.scalar_type(), static_cast<char*>(flat.raw_data_mut()) + p.offset * item,
                        reduce_dtype_, p.numel);
    }
    any_tensor mine = any_tensor::zeros(reduce_dtype_, {shard_numel_});
    dist::detail::with_dtype(reduce_dtype_, [&]<class R>() {
      if constexpr (is_floating_v<R>)
        reduce_scatter_tensor(mine.template flat<R>(), flat.template flat<R>(), reduce_op::avg, {.group = opt_.group});
    });
    const nn::tensor_ref fp = flat_param();
    const any_tensor previous = fp.grad();
    any_tensor g = previous.defined() ? previous.clone() : any_tensor::zeros(shard_dtype_, {shard_numel_});
    detail::convert(mine.raw_data(), reduce_dtype_, g.raw_data_mut(), shard_dtype_, shard_numel_, previous.defined());
    fp.set_grad(g);
    reshard();
  }

  M& module_;
  fsdp_options opt_;
  std::uint64_t id_;  // construction order among this process's units (fsdp_units)
  int world_ = 1;
  int rank_ = 0;
  dtype compute_ = dtype::float32;
  dtype shard_dtype_ = dtype::float32;
  dtype reduce_dtype_ = dtype::float32;
  std::vector<param> params_;
  std::int64_t total_ = 0, shard_numel_ = 0, padded_ = 0;
  std::variant<std::monostate, Tensor<float16, shape<dyn>>, Tensor<bfloat16, shape<dyn>>, Tensor<float, shape<dyn>>,
               Tensor<double, shape<dyn>>>
      shard_;
  std::vector<autograd::hook_handle> hooks_;
  bool materialized_ = false;
  std::uint64_t gathered_version_ = 0;  // the shard's storage version when the parameters were gathered
  std::uint64_t backward_serial_ = 0;
};

}  // namespace tenet::dist

namespace tenet::nn {
using tenet::dist::FullyShardedDataParallel;
}  // namespace tenet::nn
