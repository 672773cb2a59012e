#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// tenet::dist::DistributedDataParallel (also tenet::nn::parallel::DistributedDataParallel, torch's
// spelling); included by <tenet/dist.hpp>, needs MPI (link tenet::dist).
//
// DistributedDataParallel: data parallelism for an nn::Module over the ranks of a process group
// (torch.nn.parallel.DistributedDataParallel's contract for the parts below).
//
// - Construction broadcasts the module's parameters and buffers from the group's first rank, so
//   every replica starts equal.
// - The parameters that require grad are cut into buckets (reverse registration order, one dtype
//   per bucket, at most bucket_cap_mb each: the last layers' gradients are ready first). Each
//   parameter has a post-accumulate-grad hook (autograd/hooks.hpp); when the last gradient of a
//   bucket is in, the bucket's gradients are copied into its flat buffer and its all_reduce(avg)
//   starts (buckets start in index order on every rank, as MPI requires one order of collectives).
//   The rest of the backward runs meanwhile; each later hook tests the pending buckets (Open MPI
//   progresses nonblocking collectives only inside MPI calls). At the end of the backward
//   (autograd::queue_callback) buckets not started yet start, all are waited for, and the averaged
//   gradients are written back into each parameter's .grad.
// - A parameter that got no gradient in a backward on some rank counts as its current .grad, or
//   zeros when it has none, and every rank then gets the averaged .grad (torch would need
//   find_unused_parameters=True and leaves such a .grad as None where no rank used it).
// - Inside no_sync() the hooks do nothing: gradients accumulate locally in .grad, and the next
//   backward outside no_sync averages the accumulated .grad (torch's no_sync).
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tenet/autograd.hpp>
#include <tenet/dist/collectives.hpp>
#include <tenet/nn/module.hpp>
#include <tenet/tensor_dict.hpp>

namespace tenet::dist {

struct ddp_options {
  process_group group{};
  /// Bucket size cap in MiB (torch's bucket_cap_mb, 25 by default).
  double bucket_cap_mb = 25.0;
  /// Broadcast the module's buffers from the first rank at construction.
  bool broadcast_buffers = true;
};

namespace detail {
/// Calls f.template operator()<T>() with the C++ type of dtype d.
template <class F>
void with_dtype(dtype d, F&& f) {
  switch (d) {
    case dtype::bool_: f.template operator()<bool>(); return;
    case dtype::uint8: f.template operator()<std::uint8_t>(); return;
    case dtype::int8: f.template operator()<std::int8_t>(); return;
    case dtype::int16: f.template operator()<std::int16_t>(); return;
    case dtype::int32: f.template operator()<std::int32_t>(); return;
    case dtype::int64: f.template operator()<std::int64_t>(); return;
    case dtype::float16: f.template operator()<float16>(); return;
    case dtype::bfloat16: f.template operator()<bfloat16>(); return;
    case dtype::float32: f.template operator()<float>(); return;
    case dtype::float64: f.template operator()<double>(); return;
  }
}

/// Broadcasts a registered tensor's values from world rank src (through a copy when the tensor
/// is not contiguous or is bool, which any_tensor copies).
inline void broadcast_ref(const nn::tensor_ref& r, const std::string& name, int src, const process_group& g) {
  any_tensor v = r.value();
  with_dtype(v.scalar_type(), [&]<class T>() { broadcast(v.template flat<T>(), src, {.group = g}); });
  if (!r.is_contiguous() || r.scalar_type() == dtype::bool_) r.slot().load(v, name);
}
}  // namespace detail

template <class M>
class DistributedDataParallel {
 public:
  /// Wraps `module` (kept by reference: it must outlive this object) on the ranks of opt.group.
  explicit DistributedDataParallel(M& module, ddp_options opt = {}) : module_(module), opt_(std::move(opt)) {
    (void)detail::member_group(opt_.group, "DistributedDataParallel");
    if (!(opt_.bucket_cap_mb > 0))
      throw value_error("tenet::dist::DistributedDataParallel: bucket_cap_mb must be positive, got " +
                        std::to_string(opt_.bucket_cap_mb));
    const int src = opt_.group.ranks().front();
    for (const auto& [name, r] : module_.named_parameters()) {
      if (!r.device().is_cpu())
        throw device_error("tenet::dist::DistributedDataParallel: parameter \"" + name + "\" is on " + r.device().str() +
                           "; this build runs MPI on CPU tensors");
      detail::broadcast_ref(r, name, src, opt_.group);
      if (r.requires_grad()) params_.push_back({name, r});
    }
    if (opt_.broadcast_buffers)
      for (const auto& [name, r] : module_.named_buffers()) detail::broadcast_ref(r, name, src, opt_.group);
    make_buckets();
    // the hooks reach the parameters through the module's registry (no copy of a tensor: no cycle)
    for (std::size_t i = 0; i < params_.size(); ++i) hooks_.push_back(register_hook(i));
  }
  ~DistributedDataParallel() {
    for (auto& h : hooks_) h.remove();
  }
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// The forward: the wrapped module's.
  template <class... A>
  decltype(auto) operator()(A&&... a) const {
    return module_(std::forward<A>(a)...);
  }
  M& module() const { return module_; }

  /// RAII scope without gradient synchronization (gradient accumulation).
  class no_sync_guard {
   public:
    explicit no_sync_guard(DistributedDataParallel& d) : d_(d), previous_(d.sync_) { d.sync_ = false; }
    ~no_sync_guard() { d_.sync_ = previous_; }
    no_sync_guard(const no_sync_guard&) = delete;
    no_sync_guard& operator=(const no_sync_guard&) = delete;

   private:
    DistributedDataParallel& d_;
    bool previous_;
  };
  [[nodiscard]] no_sync_guard no_sync() { return no_sync_guard(*this); }

  /// The buckets, as lists of parameter names (first bucket first): for tests and tuning.
  std::vector<std::vector<std::string>> bucket_names() const {
    std::vector<std::vector<std::string>> out;
    for (const auto& b : buckets_) {
      out.emplace_back();
      for (std::size_t p : b.params) out.back().push_back(params_[p].name);
    }
    return out;
  }
  /// How many buckets started their all-reduce from a hook (while the backward ran) in the last
  /// synchronized backward; the others started at its end.
  int buckets_started_during_backward() const { return started_in_hooks_; }

 private:
  struct param {
    std::string name;
    nn::tensor_ref ref;
    std::size_t bucket = 0;
    std::int64_t offset = 0;  // elements into the bucket's buffer
    bool ready = false;
  };
  struct bucket {
    dtype type = dtype::float32;
    std::vector<std::size_t> params;
    std::int64_t numel = 0;
    any_tensor buffer;
    std::size_t ready = 0;
    bool started = false;
    work pending;
  };

  void make_buckets() {
    const double cap = opt_.bucket_cap_mb * 1024.0 * 1024.0;
    for (std::size_t k = params_.size(); k-- > 0;) {
      param& p = params_[k];
      const dtype d = p.ref.scalar_type();
      const double bytes = static_cast<double>(p.ref.numel() * static_cast<std::int64_t>(itemsize(d)));
      bool fits = false;
      if (!buckets_.empty()) {
        const bucket& b = buckets_.back();
        fits = b.type == d && static_cast<double>(b.numel * static_cast<std::int64_t>(itemsize(d))) + bytes <= cap;
      }
      if (!fits) buckets_.push_back(bucket{d, {}, 0, {}, 0, false, {}});
      bucket& b = buckets_.back();
      p.bucket = buckets_.size() - 1;
      p.offset = b.numel;
      b.params.push_back(k);
      b.numel += p.ref.numel();
    }
    for (bucket& b : buckets_) b.buffer = any_tensor::zeros(b.type, {b.numel});
  }

  autograd::hook_handle register_hook(std::size_t i) {
    return register_on_slot(params_[i].ref, [this, i] { on_grad_ready(i); });
  }

  // The parameter's autograd identity from its slot (bound_tensor::identity), then the hook on it.
  static autograd::hook_handle register_on_slot(const nn::tensor_ref& r, std::function<void()> f) {
    const auto m = r.slot().bound()->identity();
    if (!m || !m->requires_grad || m->grad_fn)
      throw value_error("tenet::dist::DistributedDataParallel: a parameter that requires grad is not an autograd leaf");
    static std::atomic<std::uint64_t> next_id{1u << 30};
    const std::uint64_t id = next_id++;
    m->post_accumulate_hooks.emplace_back(id, std::move(f));
    return autograd::hook_handle(m, id);
  }

  void on_grad_ready(std::size_t i) {
    if (!sync_) return;
    const std::uint64_t serial = autograd::current_backward_serial();
    if (serial != backward_serial_) {  // the first hook of this backward
      // A backward that threw after its first hook never ran finish_backward: drop its state
      // (the buckets it started finish first: a work waits for its MPI requests when dropped).
      if (backward_serial_ != 0) reset_buckets();
      backward_serial_ = serial;
      started_in_hooks_ = 0;
      autograd::queue_callback([this] { finish_backward(); });
    }
    param& p = params_[i];
    if (!p.ready) {
      p.ready = true;
      copy_in(p);
      ++buckets_[p.bucket].ready;
    }
    start_ready_buckets(true);
    for (bucket& b : buckets_)  // let MPI progress the buckets already started
      if (b.started) (void)b.pending.is_completed();
  }

  void copy_in(const param& p) {
    bucket& b = buckets_[p.bucket];
    char* dst = static_cast<char*>(b.buffer.raw_data_mut()) + p.offset * static_cast<std::int64_t>(itemsize(b.type));
    const any_tensor g = p.ref.grad();
    if (g.defined()) {
      if (g.numel() != p.ref.numel())
        throw shape_error("tenet::dist::DistributedDataParallel: the gradient of \"" + p.name + "\" has " +
                          std::to_string(g.numel()) + " elements, the parameter " + std::to_string(p.ref.numel()));
      g.copy_to_host(dst);
    } else {
      std::memset(dst, 0, static_cast<std::size_t>(p.ref.numel()) * itemsize(b.type));
    }
  }

  void start_ready_buckets(bool from_hook) {
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].ready == buckets_[next_bucket_].params.size()) {
      bucket& b = buckets_[next_bucket_];
      detail::with_dtype(b.type, [&]<class T>() {
        b.pending = all_reduce(b.buffer.template flat<T>(), reduce_op::avg, {.group = opt_.group, .async_op = true});
      });
      b.started = true;
      if (from_hook) ++started_in_hooks_;
      ++next_bucket_;
    }
  }

  void reset_buckets() {
    for (param& p : params_) p.ready = false;
    for (bucket& b : buckets_) {
      b.ready = 0;
      b.started = false;
      b.pending = work();
    }
    next_bucket_ = 0;
  }

  void finish_backward() {
    backward_serial_ = 0;
    // parameters without a gradient in this backward: their current .grad (or zeros)
    for (param& p : params_)
      if (!p.ready) {
        p.ready = true;
        copy_in(p);
        ++buckets_[p.bucket].ready;
      }
    start_ready_buckets(false);
    for (bucket& b : buckets_) b.pending.wait();
    for (param& p : params_) {
      const bucket& b = buckets_[p.bucket];
      const char* src = static_cast<const char*>(b.buffer.raw_data()) + p.offset * static_cast<std::int64_t>(itemsize(b.type));
      const std::size_t bytes = static_cast<std::size_t>(p.ref.numel()) * itemsize(b.type);
      any_tensor avg = any_tensor::zeros(b.type, p.ref.sizes());
      if (bytes) std::memcpy(avg.raw_data_mut(), src, bytes);
      p.ref.set_grad(avg);
    }
    reset_buckets();
  }

  M& module_;
  ddp_options opt_;
  std::vector<param> params_;
  std::vector<bucket> buckets_;
  std::vector<autograd::hook_handle> hooks_;
  std::size_t next_bucket_ = 0;
  bool sync_ = true;
  std::uint64_t backward_serial_ = 0;  // the backward whose gradients are being synchronized
  int started_in_hooks_ = 0;
};

}  // namespace tenet::dist

namespace tenet::nn::parallel {
using tenet::dist::DistributedDataParallel;
}  // namespace tenet::nn::parallel
