#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// tenet::optim: torch.optim's SGD, Adam, AdamW, RMSprop and Adagrad, with the same update formulas
// (torch 2's single-tensor path, `foreach=False`) and state names. <tenet/optim.hpp> includes
// these and the LR schedulers (optim/lr_scheduler.hpp).
//
//   nn::Linear<784, 10> model;
//   optim::AdamW opt(model.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
//   ... loss.backward(); opt.step(); opt.zero_grad();
//
// The update is fused: each step makes one pass over every parameter, one loop per parameter that
// reads the parameter, its gradient and its state once and writes them once (vectorized; split over
// threads for tensors of at least `optim::parallel_threshold` elements). Parameters of float and
// double are supported. step(grads) takes the gradients explicitly (one per parameter, undefined to
// skip one), for gradients that do not come from autograd. Parameters on a CUDA device (in
// nvcc-compiled code): every optimizer updates them with one kernel each, the CPU loop's formula,
// their state on the device (backend/training.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <tenet/backend/training.hpp>  // the updates of parameters on a device (CUDA)
#include <tenet/error.hpp>
#include <tenet/nn/module.hpp>
#include <tenet/tensor_dict.hpp>

#if defined(_OPENMP)
#include <omp.h>
#endif
#include <xsimd/xsimd.hpp>  // the update loops run on xsimd batches

namespace tenet::optim {

/// Parameters with at least this many elements are updated by several threads (OpenMP).
inline constexpr std::int64_t parallel_threshold = 1 << 16;

namespace detail {
/// The lane type of a kernel body: T (one element) or xsimd::batch<T> (a vector of elements).
template <class V>
struct lane {
  using type = V;
};
template <class V, class T>
inline V load(const T* p) {
  if constexpr (std::is_same_v<V, T>) return *p;
  else if constexpr (half_precision<T>) return static_cast<V>(*p);  // a 16-bit element, in float
  else return V::load_unaligned(p);
}
template <class T, class V>
inline void store(T* p, const V& v) {
  if constexpr (std::is_same_v<V, T>) *p = v;
  else if constexpr (half_precision<T>) *p = static_cast<T>(v);  // rounded where it is stored
  else v.store_unaligned(p);
}
template <class T>
inline T vsqrt(T x) {
  return static_cast<T>(std::sqrt(x));  // 16-bit T: the float root, rounded once
}
template <class T, class A>
inline xsimd::batch<T, A> vsqrt(const xsimd::batch<T, A>& x) {
  return xsimd::sqrt(x);  // correctly rounded, as std::sqrt
}
template <class T>
inline T vmax(T a, T b) {
  return std::max(a, b);
}
template <class T, class A>
inline xsimd::batch<T, A> vmax(const xsimd::batch<T, A>& a, const xsimd::batch<T, A>& b) {
  return xsimd::max(a, b);
}
/// torch's lerp: a + w (b - a) for w < 0.5, else b - (b - a)(1 - w) (w a scalar).
template <class V, class T>
inline V lerp(const V& a, const V& b, T w) {
  return w < T(0.5) ? V(a + w * (b - a)) : V(b - (b - a) * (T(1) - w));
}
/// The xsimd batch width of T (1 for bfloat16 / float16: no batches, element by element).
template <class T>
constexpr std::int64_t batch_width() {
  if constexpr (half_precision<T>) return 1;
  else return static_cast<std::int64_t>(xsimd::batch<T>::size);
}
/// Runs body(lane<V>{}, k) over [0, n): xsimd batches of T (k a multiple of the batch width from
/// the start of each thread's range) and single elements for the tail; for bfloat16 / float16,
/// every element as a float (load converts, store rounds: an update computes in float and rounds
/// each value it stores, parameter and state, as the CUDA kernels). The range is split over
/// OpenMP threads when n is at least parallel_threshold. The body reads and writes element(s) k.
template <class T, class F>
inline void for_each_element(std::int64_t n, F&& body) {
  constexpr std::int64_t W = batch_width<T>();
  auto run = [&](std::int64_t begin, std::int64_t end) {
    std::int64_t k = begin;
    if constexpr (!half_precision<T>)
      for (; k + W <= end; k += W) body(lane<xsimd::batch<T>>{}, k);
    for (; k < end; ++k) body(lane<compute_t<T>>{}, k);
  };
#if defined(_OPENMP)
  if (n >= parallel_threshold) {
#pragma omp parallel
    {
      const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const std::int64_t blocks = (n + W - 1) / W, per = (blocks + threads - 1) / threads;
      const std::int64_t begin = std::min(n, t * per * W), end = std::min(n, (t + 1) * per * W);
      run(begin, end);
    }
    return;
  }
#endif
  run(0, n);
}
inline void check_non_negative(const char* opt, const char* what, double v) {
  if (!(v >= 0.0)) throw value_error(std::string("tenet: optim::") + opt + ": invalid " + what + " value: " + std::to_string(v));
}
}  // namespace detail

/// The base of every optimizer: one parameter group (the parameters, the learning rate and the
/// optimizer's hyperparameters) and per-parameter state tensors named as torch's.
class Optimizer {
 public:
  Optimizer(std::vector<nn::tensor_ref> params, double lr, const char* name) : params_(std::move(params)), lr_(lr), name_(name) {
    detail::check_non_negative(name, "learning rate", lr);
    if (params_.empty()) throw value_error(std::string("tenet: optim::") + name + " got an empty parameter list");
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const auto d = params_[i].scalar_type();
      if (!is_floating(d))
        throw dtype_error(std::string("tenet: optim::") + name + ": parameter " + std::to_string(i) + " is " +
                          tenet::name(d) + "; tenet's optimizers update floating parameters");
      if (!params_[i].is_contiguous())
        throw value_error(std::string("tenet: optim::") + name + ": parameter " + std::to_string(i) +
                          " is undefined or not contiguous; an optimizer updates a parameter's storage in place, "
                          "register a contiguous tensor (e.g. its contiguous() copy)");
      for (std::size_t j = 0; j < i; ++j)
        if (params_[j].same(params_[i]))
          throw value_error(std::string("tenet: optim::") + name + ": parameter " + std::to_string(i) +
                            " appears twice in the parameter list");
    }
    state_.resize(params_.size());
  }
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient.
  void step() {
    std::vector<any_tensor> grads;
    grads.reserve(params_.size());
    for (auto& p : params_) grads.push_back(p.grad());
    step(grads);
  }
  /// One update with the given gradients (grads[i] for parameter i; an undefined one skips it).
  void step(const std::vector<any_tensor>& grads) {
    if (grads.size() != params_.size())
      throw value_error(std::string("tenet: optim::") + name_ + "::step got " + std::to_string(grads.size()) +
                        " gradients for " + std::to_string(params_.size()) + " parameters");
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const any_tensor& g = grads[i];
      if (!g.defined()) continue;
      if (g.scalar_type() != params_[i].scalar_type() || g.sizes() != params_[i].sizes())
        throw value_error(std::string("tenet: optim::") + name_ + ": the gradient of parameter " + std::to_string(i) +
                          " is " + tenet::name(g.scalar_type()) + " " + tenet::detail::sizes_text(g.sizes()) +
                          ", the parameter " + tenet::name(params_[i].scalar_type()) + " " +
                          tenet::detail::sizes_text(params_[i].sizes()));
      const device pd = params_[i].device();
      device gd = pd;
      any_tensor::visit_floating_dtype(g.scalar_type(), [&]<class T>() { gd = g.flat<T>().device(); });
      if (gd != pd)
        throw device_error(std::string("tenet: optim::") + name_ + ": the gradient of parameter " + std::to_string(i) +
                           " is on " + gd.str() + ", the parameter on " + pd.str());
      if (!pd.is_cpu() && !runs_on_device())
        throw device_error(std::string("tenet: optim::") + name_ + " updates parameters on the CPU only (parameter " +
                           std::to_string(i) + " is on " + pd.str() +
                           "); SGD, Adam, AdamW, RMSprop and Adagrad run on CUDA");
    }
    try {
      for (std::size_t i = 0; i < params_.size(); ++i) {
        if (!grads[i].defined()) continue;
        const any_tensor p = params_[i].value();
        any_tensor::visit_floating_dtype(params_[i].scalar_type(), [&]<class T>() {  // checked floating above
          const auto pf = p.flat<T>();
          tenet::detail::bump_version(pf.storage().get());  // an in-place update (a graph that saved p refuses it)
          update(i, pf.data(), grads[i].flat<T>().data(), p.numel());
        });
      }
    } catch (...) {
      discard_updates();  // deferred updates point into grads, which may not outlive this call
      throw;
    }
    flush_updates();  // (grads still holds the gradients the deferred updates read)
  }
  /// Clears (set_to_none, torch 2's default) or zeroes the gradients of the parameters.
  void zero_grad(bool set_to_none = true) {
    for (auto& p : params_) {
      auto g = p.grad();
      if (!g.defined()) continue;
      const device_guard on_device(p.device());  // zeros on the parameter's device
      p.set_grad(set_to_none ? any_tensor() : any_tensor::zeros(g.scalar_type(), g.sizes()));
    }
  }

  double lr() const { return lr_; }
  /// Sets the learning rate (unchecked, as torch's param_group["lr"]: a scheduler may extrapolate).
  void set_lr(double lr) { lr_ = lr; }
  /// The learning rate a scheduler started from (torch's group["initial_lr"]); negative when unset.
  double initial_lr = -1.0;
  /// The momentum a scheduler may cycle (SGD's momentum, Adam's beta1, RMSprop's momentum).
  virtual bool has_momentum() const { return false; }
  virtual double momentum() const { return 0.0; }
  virtual void set_momentum(double) {
    throw value_error(std::string("tenet: optim::") + name_ + " has no momentum to set");
  }

  const std::vector<nn::tensor_ref>& params() const { return params_; }
  const char* name() const { return name_; }

  /// The state as flat names: "state.<i>.<buffer>" (torch's names: momentum_buffer, exp_avg,
  /// exp_avg_sq, max_exp_avg_sq, square_avg, grad_avg, sum; "step" a float32 scalar as torch keeps
  /// it) and "param_groups.0.<hyperparameter>" (float64 scalars: lr, betas.0, betas.1, eps, ...).
  /// The tensors share the optimizer's storage.
  tensor_dict state_dict() const {
    tensor_dict d;
    for (std::size_t i = 0; i < state_.size(); ++i) {
      const auto& s = state_[i];
      if (!s.initialized) continue;
      const std::string pre = "state." + std::to_string(i) + ".";
      if (has_step()) {
        Tensor<float, shape<>> st(sizes_t<0>{});
        st.fill_(static_cast<float>(s.step));
        d.insert(pre + "step", any_tensor(st));
      }
      for (const auto& [n, t] : s.buffers) d.insert(pre + n, t);
    }
    for (auto& [n, v] : hyperparameters()) d.insert("param_groups.0." + n, scalar(*v));
    d.insert("param_groups.0.lr", scalar(lr_));
    if (initial_lr >= 0) d.insert("param_groups.0.initial_lr", scalar(initial_lr));
    return d;
  }
  /// Restores a state_dict() of an optimizer of the same kind over parameters of the same sizes:
  /// the buffers, steps and hyperparameters. value_error on an unknown or missing key, a parameter
  /// index out of range, or a buffer whose dtype or sizes differ from its parameter's; nothing
  /// changes when a check fails.
  void load_state_dict(const tensor_dict& d) { commit(stage(d)); }
  /// The checks of load_state_dict(d) (the same value_error), changing nothing.
  void check_state_dict(const tensor_dict& d) const { (void)stage(d); }

 protected:
  struct param_state {
    bool initialized = false;
    double step = 0;
    std::vector<std::pair<std::string, any_tensor>> buffers;
  };
  /// Updates parameter i (n elements at p) with its gradient g. An optimizer may defer the
  /// updates of device parameters and run them together in flush_updates(), which step() calls
  /// after the last update (Adam: one multi-tensor call per device and dtype).
  virtual void update(std::size_t i, float* p, const float* g, std::int64_t n) = 0;
  virtual void update(std::size_t i, double* p, const double* g, std::int64_t n) = 0;
  virtual void update(std::size_t i, bfloat16* p, const bfloat16* g, std::int64_t n) = 0;
  virtual void update(std::size_t i, float16* p, const float16* g, std::int64_t n) = 0;
  virtual void flush_updates() {}
  /// Drops the deferred updates (step() failed before flushing them).
  virtual void discard_updates() {}
  /// The names of the numeric hyperparameters (not lr) with their storage.
  virtual std::vector<std::pair<std::string, double*>> hyperparameters() const = 0;
  /// Every state buffer name the optimizer may keep for a parameter (with the current options).
  virtual std::vector<std::string> buffer_names() const = 0;
  /// True when a loaded state holds every buffer the current options need.
  virtual bool complete(const param_state& s) const {
    for (const auto& n : buffer_names())
      if (!find(s, n)) return false;
    return true;
  }
  /// A state_dict read and checked, not yet applied: load_state_dict = commit(stage(d)).
  struct staged_state {
    std::vector<param_state> states;  // buffers as given (commit copies them to the parameters' devices)
    std::vector<std::pair<double*, double>> hyper;
    double lr, initial_lr;
  };
  staged_state stage(const tensor_dict& d) const {
    std::vector<param_state> fresh(params_.size());
    auto fail = [&](const std::string& why) {
      throw value_error(std::string("tenet: optim::") + name_ + "::load_state_dict: " + why);
    };
    auto scalar_of = [&](const std::string& key, const any_tensor& t) {
      if (!t.defined() || t.numel() != 1 ||
          (t.scalar_type() != dtype::float64 && t.scalar_type() != dtype::float32))
        fail("\"" + key + "\" must be a float scalar");
      if (t.scalar_type() == dtype::float64) {
        double v = 0;
        t.copy_to_host(&v);  // the scalar may be a device's
        return v;
      }
      float v = 0;
      t.copy_to_host(&v);
      return static_cast<double>(v);
    };
    auto hyper = hyperparameters();
    std::vector<std::pair<double*, double>> new_hyper;
    double new_lr = lr_, new_initial = initial_lr;
    bool saw_lr = false;
    for (const auto& [key, t] : d) {
      if (key.rfind("param_groups.0.", 0) == 0) {
        const std::string h = key.substr(15);
        if (h == "lr") {
          new_lr = scalar_of(key, t);
          saw_lr = true;
          continue;
        }
        if (h == "initial_lr") {
          new_initial = scalar_of(key, t);
          continue;
        }
        bool found = false;
        for (auto& [n, v] : hyper)
          if (n == h) new_hyper.emplace_back(v, scalar_of(key, t)), found = true;
        if (!found) fail("unexpected key \"" + key + "\" (not a hyperparameter of " + name_ + ")");
        continue;
      }
      if (key.rfind("state.", 0) != 0) fail("unexpected key \"" + key + "\"");
      const auto dot = key.find('.', 6);
      if (dot == std::string::npos) fail("malformed key \"" + key + "\"");
      std::size_t idx = 0;
      try {
        std::size_t used = 0;
        idx = std::stoul(key.substr(6, dot - 6), &used);
        if (used != dot - 6) throw std::invalid_argument("");
      } catch (const std::exception&) {
        fail("malformed parameter index in \"" + key + "\"");
      }
      if (idx >= params_.size())
        fail("\"" + key + "\" names parameter " + std::to_string(idx) + ", but the optimizer has " +
             std::to_string(params_.size()));
      const std::string buf = key.substr(dot + 1);
      auto& s = fresh[idx];
      s.initialized = true;
      if (buf == "step" && has_step()) {
        s.step = scalar_of(key, t);
        continue;
      }
      const auto names = buffer_names();
      if (std::find(names.begin(), names.end(), buf) == names.end())
        fail("unexpected key \"" + key + "\" (not a state of " + name_ + ")");
      if (!t.defined() || t.scalar_type() != params_[idx].scalar_type() || t.sizes() != params_[idx].sizes())
        fail("\"" + key + "\" is " + (t.defined() ? std::string(tenet::name(t.scalar_type())) : "undefined") + " " +
             tenet::detail::sizes_text(t.sizes()) + ", its parameter " + tenet::name(params_[idx].scalar_type()) +
             " " + tenet::detail::sizes_text(params_[idx].sizes()));
      s.buffers.emplace_back(buf, t);
    }
    if (!saw_lr) fail("missing key \"param_groups.0.lr\"");
    for (auto& [n, v] : hyper) {
      bool found = false;
      for (auto& [p, x] : new_hyper) found = found || p == v;
      if (!found) fail("missing key \"param_groups.0." + n + "\"");
    }
    for (std::size_t i = 0; i < fresh.size(); ++i)
      if (fresh[i].initialized && !complete(fresh[i]))
        fail("the state of parameter " + std::to_string(i) + " lacks a buffer (" + name_ + " keeps " +
             list(buffer_names()) + ")");
    return {std::move(fresh), std::move(new_hyper), new_lr, new_initial};
  }
  void commit(staged_state st) {
    for (std::size_t i = 0; i < st.states.size(); ++i)
      for (auto& [n, t] : st.states[i].buffers) {
        // a copy on the parameter's device (a state saved from a CUDA model and loaded from a file is
        // on the host; its update kernel reads it on the device)
        const device pd = params_[i].device();
        t = t.device() == pd ? t.clone() : t.to(pd);
      }
    state_ = std::move(st.states);
    for (auto& [p, x] : st.hyper) *p = x;
    lr_ = st.lr;
    initial_lr = st.initial_lr;
  }
  virtual bool has_step() const { return true; }
  /// True when update() handles parameters on a device (SGD, Adam, AdamW: autograd/device.hpp).
  virtual bool runs_on_device() const { return false; }

  /// Buffer `n` of parameter i as T*, created (filled with `init`) when absent.
  template <class T>
  T* buffer(std::size_t i, const std::string& n, double init = 0.0) {
    auto& s = state_[i];
    if (const any_tensor* b = find(s, n)) return b->flat<T>().data();
    const device_guard on_device(params_[i].device());  // the state lives with its parameter
    any_tensor t = any_tensor::zeros(dtype_of<T>, params_[i].sizes());
    if (init != 0.0) t.flat<T>().fill_(init);
    s.buffers.emplace_back(n, t);
    return t.flat<T>().data();
  }
  static const any_tensor* find(const param_state& s, const std::string& n) {
    for (const auto& [k, t] : s.buffers)
      if (k == n) return &t;
    return nullptr;
  }
  param_state& state(std::size_t i) { return state_[i]; }

  std::vector<nn::tensor_ref> params_;
  double lr_;
  const char* name_;

 private:
  static any_tensor scalar(double v) {
    Tensor<double, shape<>> t(sizes_t<0>{});
    t.fill_(v);
    return any_tensor(t);
  }
  static std::string list(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  }
  std::vector<param_state> state_;
};

// ---------------------------------------------------------------------------------------------

/// The four update overrides of an optimizer with a `run<T>` template (one per parameter dtype).
#define TENET_OPTIMIZER_UPDATES                                                                                 \
  void update(std::size_t i, float* p, const float* g, std::int64_t n) override { run(i, p, g, n); }       \
  void update(std::size_t i, double* p, const double* g, std::int64_t n) override { run(i, p, g, n); }     \
  void update(std::size_t i, bfloat16* p, const bfloat16* g, std::int64_t n) override { run(i, p, g, n); } \
  void update(std::size_t i, float16* p, const float16* g, std::int64_t n) override { run(i, p, g, n); }

struct sgd_options {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
};

/// torch.optim.SGD: g = ±grad + wd p; with momentum b = g (first step) or μ b + (1 - τ) g, and
/// g = g + μ b (nesterov) or b; p -= lr g.
class SGD final : public Optimizer {
 public:
  sgd_options options;
  SGD(std::vector<nn::tensor_ref> params, sgd_options o = {}) : Optimizer(std::move(params), o.lr, "SGD"), options(o) {
    detail::check_non_negative("SGD", "momentum", o.momentum);
    detail::check_non_negative("SGD", "weight_decay", o.weight_decay);
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
      throw value_error("tenet: optim::SGD: Nesterov momentum requires a momentum and zero dampening (momentum " +
                        std::to_string(o.momentum) + ", dampening " + std::to_string(o.dampening) + ")");
  }
  bool has_momentum() const override { return true; }
  double momentum() const override { return options.momentum; }
  void set_momentum(double m) override { options.momentum = m; }

 protected:
  template <class T>
  void run(std::size_t i, T* p, const T* g, std::int64_t n) {
    auto& s = state(i);
    const bool first = !s.initialized;
    s.initialized = true;
    using S = compute_t<T>;  // scalars in float for 16-bit parameters (torch's Python floats)
    const S wd = static_cast<S>(options.weight_decay), mu = static_cast<S>(options.momentum),
            keep = static_cast<S>(1.0 - options.dampening), neg_lr = static_cast<S>(-lr_);
    const bool maximize = options.maximize, nesterov = options.nesterov, use_wd = options.weight_decay != 0;
    if (const device dev = params_[i].device(); !dev.is_cpu()) {
      const bool fresh = first || options.momentum == 0 || !find(s, "momentum_buffer");
      T* buf = options.momentum == 0 ? nullptr : buffer<T>(i, "momentum_buffer");
      detail::sgd_on_device<T>(dev, p, g, buf, n, wd, mu, keep, neg_lr, maximize, nesterov, use_wd, fresh);
      return;
    }
    if (options.momentum == 0) {
      detail::for_each_element<T>(n, [&](auto lane, std::int64_t k) {
        using V = typename decltype(lane)::type;
        V d = detail::load<V>(g + k);
        if (maximize) d = -d;
        const V pk = detail::load<V>(p + k);
        if (use_wd) d = d + wd * pk;
        detail::store(p + k, V(pk + neg_lr * d));
      });
      return;
    }
    const bool fresh = first || !find(s, "momentum_buffer");
    T* buf = buffer<T>(i, "momentum_buffer");
    detail::for_each_element<T>(n, [&](auto lane, std::int64_t k) {
      using V = typename decltype(lane)::type;
      V d = detail::load<V>(g + k);
      if (maximize) d = -d;
      const V pk = detail::load<V>(p + k);
      if (use_wd) d = d + wd * pk;
      const V b = fresh ? d : V(detail::load<V>(buf + k) * mu + keep * d);
      detail::store(buf + k, b);
      d = nesterov ? V(d + mu * b) : b;
      detail::store(p + k, V(pk + neg_lr * d));
    });
  }
  TENET_OPTIMIZER_UPDATES
  std::vector<std::pair<std::string, double*>> hyperparameters() const override {
    auto* o = const_cast<sgd_options*>(&options);
    return {{"momentum", &o->momentum}, {"dampening", &o->dampening}, {"weight_decay", &o->weight_decay}};
  }
  std::vector<std::string> buffer_names() const override {
    if (options.momentum == 0) return {};
    return {"momentum_buffer"};
  }
  bool has_step() const override { return false; }
  bool runs_on_device() const override { return true; }
};

// ---------------------------------------------------------------------------------------------

struct adam_options {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
};

namespace detail {
/// Adam's scalars for one step of parameters of type T (decoupled: AdamW's weight decay).
template <class T>
tenet::detail::adam_scalars<compute_t<T>> adam_scalars_for(const adam_options& o, double lr, double step, bool decoupled) {
  const double bc1 = 1.0 - std::pow(o.beta1, step), bc2 = 1.0 - std::pow(o.beta2, step);
  using S = compute_t<T>;
  return {static_cast<S>(-(lr / bc1)),  static_cast<S>(std::sqrt(bc2)),    static_cast<S>(1.0 - o.beta1),
          static_cast<S>(o.beta2),      static_cast<S>(1.0 - o.beta2),     static_cast<S>(o.eps),
          static_cast<S>(o.weight_decay), static_cast<S>(1.0 - lr * o.weight_decay), o.maximize,
          o.weight_decay != 0,          decoupled};
}
/// Adam's update of one parameter in host memory (decoupled: AdamW's weight decay p *= 1 - lr wd).
template <class T>
void adam_update(T* p, const T* g, T* m, T* v, T* vmax_buf, std::int64_t n, const adam_options& o, double lr,
                 double step, bool decoupled) {
  const auto sc = adam_scalars_for<T>(o, lr, step, decoupled);
  const auto neg_step_size = sc.neg_step_size, bc2_sqrt = sc.bc2_sqrt, w1 = sc.w1, b2 = sc.b2, w2 = sc.w2, eps = sc.eps,
             wd = sc.wd, decay = sc.decay;
  const bool maximize = o.maximize, use_wd = o.weight_decay != 0, ams = o.amsgrad;
  for_each_element<T>(n, [&](auto lane, std::int64_t k) {
    using V = typename decltype(lane)::type;
    V d = detail::load<V>(g + k);
    if (maximize) d = -d;
    V pk = detail::load<V>(p + k);
    if (use_wd) {
      if (decoupled) pk = pk * decay;
      else d = d + wd * pk;
    }
    const V mk = detail::lerp(detail::load<V>(m + k), d, w1);
    const V vk = detail::load<V>(v + k) * b2 + w2 * d * d;
    detail::store(m + k, mk);
    detail::store(v + k, vk);
    V denom;
    if (ams) {
      const V mx = detail::vmax(detail::load<V>(vmax_buf + k), vk);
      detail::store(vmax_buf + k, mx);
      denom = detail::vsqrt(mx) / bc2_sqrt + eps;
    } else {
      denom = detail::vsqrt(vk) / bc2_sqrt + eps;
    }
    detail::store(p + k, V(pk + neg_step_size * mk / denom));
  });
}
}  // namespace detail

/// torch.optim.Adam (L2 weight decay added to the gradient) and, with decoupled weight decay,
/// torch.optim.AdamW (p *= 1 - lr wd first; its default weight_decay is 0.01).
class Adam : public Optimizer {
 public:
  adam_options options;
  Adam(std::vector<nn::tensor_ref> params, adam_options o = {}) : Adam(std::move(params), o, false, "Adam") {}
  bool has_momentum() const override { return true; }
  double momentum() const override { return options.beta1; }
  void set_momentum(double m) override { options.beta1 = m; }

 protected:
  Adam(std::vector<nn::tensor_ref> params, adam_options o, bool decoupled, const char* name)
      : Optimizer(std::move(params), o.lr, name), options(o), decoupled_(decoupled) {
    detail::check_non_negative(name, "epsilon", o.eps);
    detail::check_non_negative(name, "weight_decay", o.weight_decay);
    if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
      throw value_error(std::string("tenet: optim::") + name + ": invalid betas (" + std::to_string(o.beta1) + ", " +
                        std::to_string(o.beta2) + "): each must lie in [0, 1)");
  }
  template <class T>
  void run(std::size_t i, T* p, const T* g, std::int64_t n) {
    auto& s = state(i);
    s.initialized = true;
    s.step += 1;
    T* m = buffer<T>(i, "exp_avg");
    T* v = buffer<T>(i, "exp_avg_sq");
    T* vmax = options.amsgrad ? buffer<T>(i, "max_exp_avg_sq") : nullptr;
    const device dev = params_[i].device();
    if (dev.is_cpu()) return detail::adam_update(p, g, m, v, vmax, n, options, lr_, s.step, decoupled_);
    // a device parameter joins the list of its device, dtype and scalars (flush_updates)
    auto& lists = std::get<pending<T>>(pending_);
    const auto sc = detail::adam_scalars_for<T>(options, lr_, s.step, decoupled_);
    if (lists.empty() || !(lists.back().dev == dev) || !(lists.back().scalars == sc)) lists.push_back({dev, sc, {}});
    lists.back().spans.push_back({p, g, m, v, vmax, n});
  }
  void flush_updates() override {
    auto run = [](auto& lists) {
      for (const auto& l : lists) detail::adam_on_device(l.dev, l.spans, l.scalars);
      lists.clear();
    };
    try {
      std::apply([&](auto&... ls) { (run(ls), ...); }, pending_);
    } catch (...) {
      discard_updates();
      throw;
    }
  }
  void discard_updates() override {
    std::apply([](auto&... ls) { (ls.clear(), ...); }, pending_);
  }
  TENET_OPTIMIZER_UPDATES
  std::vector<std::pair<std::string, double*>> hyperparameters() const override {
    auto* o = const_cast<adam_options*>(&options);
    return {{"betas.0", &o->beta1}, {"betas.1", &o->beta2}, {"eps", &o->eps}, {"weight_decay", &o->weight_decay}};
  }
  std::vector<std::string> buffer_names() const override {
    if (options.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    return {"exp_avg", "exp_avg_sq"};
  }
  bool runs_on_device() const override { return true; }

 private:
  bool decoupled_;
  template <class T>
  struct pending_list {
    device dev;
    tenet::detail::adam_scalars<compute_t<T>> scalars;
    std::vector<tenet::detail::adam_span<T>> spans;
  };
  template <class T>
  using pending = std::vector<pending_list<T>>;
  std::tuple<pending<float>, pending<double>, pending<bfloat16>, pending<float16>> pending_;
};

struct adamw_options {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};
class AdamW final : public Adam {
 public:
  AdamW(std::vector<nn::tensor_ref> params, adamw_options o = {})
      : Adam(std::move(params), {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize}, true, "AdamW") {}
};

// ---------------------------------------------------------------------------------------------

struct rmsprop_options {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  bool centered = false;
  bool maximize = false;
};

/// torch.optim.RMSprop: s = α s + (1 - α) g²; centered: a = lerp(a, g, 1 - α), avg = √(s - a²), else
/// avg = √s; avg += eps; momentum: b = μ b + g / avg, p -= lr b; else p -= lr g / avg.
class RMSprop final : public Optimizer {
 public:
  rmsprop_options options;
  RMSprop(std::vector<nn::tensor_ref> params, rmsprop_options o = {})
      : Optimizer(std::move(params), o.lr, "RMSprop"), options(o) {
    detail::check_non_negative("RMSprop", "epsilon", o.eps);
    detail::check_non_negative("RMSprop", "momentum", o.momentum);
    detail::check_non_negative("RMSprop", "weight_decay", o.weight_decay);
    detail::check_non_negative("RMSprop", "alpha", o.alpha);
  }
  bool has_momentum() const override { return true; }
  double momentum() const override { return options.momentum; }
  void set_momentum(double m) override { options.momentum = m; }

 protected:
  bool runs_on_device() const override { return true; }
  template <class T>
  void run(std::size_t i, T* p, const T* g, std::int64_t n) {
    auto& s = state(i);
    s.initialized = true;
    s.step += 1;
    T* sq = buffer<T>(i, "square_avg");
    T* buf = options.momentum > 0 ? buffer<T>(i, "momentum_buffer") : nullptr;
    T* ga = options.centered ? buffer<T>(i, "grad_avg") : nullptr;
    using S = compute_t<T>;
    const S alpha = static_cast<S>(options.alpha), w = static_cast<S>(1.0 - options.alpha),
            eps = static_cast<S>(options.eps), wd = static_cast<S>(options.weight_decay),
            mu = static_cast<S>(options.momentum), neg_lr = static_cast<S>(-lr_);
    const bool maximize = options.maximize, use_wd = options.weight_decay != 0, centered = options.centered,
               use_mom = options.momentum > 0;
    if (const device dev = params_[i].device(); !dev.is_cpu())
      return detail::rmsprop_on_device<T>(dev, p, g, sq, buf, ga, n, alpha, w, eps, wd, mu, neg_lr, maximize, use_wd);
    detail::for_each_element<T>(n, [&](auto lane, std::int64_t k) {
      using V = typename decltype(lane)::type;
      V d = detail::load<V>(g + k);
      if (maximize) d = -d;
      const V pk = detail::load<V>(p + k);
      if (use_wd) d = d + wd * pk;
      const V s2 = detail::load<V>(sq + k) * alpha + w * d * d;
      detail::store(sq + k, s2);
      V avg;
      if (centered) {
        const V a = detail::lerp(detail::load<V>(ga + k), d, w);
        detail::store(ga + k, a);
        avg = detail::vsqrt(V(s2 + S(-1) * a * a));
      } else {
        avg = detail::vsqrt(s2);
      }
      avg = avg + eps;
      if (use_mom) {
        const V b = detail::load<V>(buf + k) * mu + S(1) * d / avg;
        detail::store(buf + k, b);
        detail::store(p + k, V(pk + neg_lr * b));
      } else {
        detail::store(p + k, V(pk + neg_lr * d / avg));
      }
    });
  }
  TENET_OPTIMIZER_UPDATES
  std::vector<std::pair<std::string, double*>> hyperparameters() const override {
    auto* o = const_cast<rmsprop_options*>(&options);
    return {{"alpha", &o->alpha}, {"eps", &o->eps}, {"weight_decay", &o->weight_decay}, {"momentum", &o->momentum}};
  }
  std::vector<std::string> buffer_names() const override {
    std::vector<std::string> b{"square_avg"};
    if (options.momentum > 0) b.push_back("momentum_buffer");
    if (options.centered) b.push_back("grad_avg");
    return b;
  }
};

// ---------------------------------------------------------------------------------------------

struct adagrad_options {
  double lr = 1e-2;
  double lr_decay = 0.0;
  double weight_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double eps = 1e-10;
  bool maximize = false;
};

/// torch.optim.Adagrad: clr = lr / (1 + (step - 1) lr_decay); sum += g²; p -= clr g / (√sum + eps).
class Adagrad final : public Optimizer {
 public:
  adagrad_options options;
  Adagrad(std::vector<nn::tensor_ref> params, adagrad_options o = {})
      : Optimizer(std::move(params), o.lr, "Adagrad"), options(o) {
    detail::check_non_negative("Adagrad", "lr_decay", o.lr_decay);
    detail::check_non_negative("Adagrad", "weight_decay", o.weight_decay);
    detail::check_non_negative("Adagrad", "initial_accumulator_value", o.initial_accumulator_value);
    detail::check_non_negative("Adagrad", "epsilon", o.eps);
  }

 protected:
  bool runs_on_device() const override { return true; }
  template <class T>
  void run(std::size_t i, T* p, const T* g, std::int64_t n) {
    auto& s = state(i);
    s.initialized = true;
    s.step += 1;
    T* sum = buffer<T>(i, "sum", options.initial_accumulator_value);
    using S = compute_t<T>;
    const S neg_clr = static_cast<S>(-(lr_ / (1.0 + (s.step - 1.0) * options.lr_decay))),
            eps = static_cast<S>(options.eps), wd = static_cast<S>(options.weight_decay);
    const bool maximize = options.maximize, use_wd = options.weight_decay != 0;
    if (const device dev = params_[i].device(); !dev.is_cpu())
      return detail::adagrad_on_device<T>(dev, p, g, sum, n, neg_clr, eps, wd, maximize, use_wd);
    detail::for_each_element<T>(n, [&](auto lane, std::int64_t k) {
      using V = typename decltype(lane)::type;
      V d = detail::load<V>(g + k);
      if (maximize) d = -d;
      const V pk = detail::load<V>(p + k);
      if (use_wd) d = d + wd * pk;
      const V s2 = detail::load<V>(sum + k) + S(1) * d * d;
      detail::store(sum + k, s2);
      detail::store(p + k, V(pk + neg_clr * d / (detail::vsqrt(s2) + eps)));
    });
  }
  TENET_OPTIMIZER_UPDATES
  std::vector<std::pair<std::string, double*>> hyperparameters() const override {
    auto* o = const_cast<adagrad_options*>(&options);
    return {{"lr_decay", &o->lr_decay}, {"weight_decay", &o->weight_decay},
            {"initial_accumulator_value", &o->initial_accumulator_value}, {"eps", &o->eps}};
  }
  std::vector<std::string> buffer_names() const override { return {"sum"}; }
};

#undef TENET_OPTIMIZER_UPDATES

}  // namespace tenet::optim
