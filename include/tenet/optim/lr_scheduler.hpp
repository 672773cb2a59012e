#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Learning-rate schedulers (torch.optim.lr_scheduler): StepLR, CosineAnnealingLR, LinearLR and
// OneCycleLR, with torch's recurrences. Constructing one sets the optimizer's learning rate for
// step 0 (as torch's initial step does); call step() after each optimizer.step().
//
//   optim::SGD opt(model.parameters(), {.lr = 0.1});
//   optim::StepLR sched(opt, 30, 0.1);
//   for (...) { ...; opt.step(); sched.step(); }
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>

#include <tenet/error.hpp>
#include <tenet/optim/optimizers.hpp>

namespace tenet::optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& opt) : opt_(opt) {
    if (opt.initial_lr < 0) opt.initial_lr = opt.lr();
    base_lr_ = opt.initial_lr;
  }
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;
  /// Advances one epoch (or iteration) and sets the optimizer's learning rate.
  void step() {
    ++last_epoch_;
    opt_.set_lr(get_lr());
    last_lr_ = opt_.lr();
  }
  double get_last_lr() const { return last_lr_; }
  std::int64_t last_epoch() const { return last_epoch_; }
  double base_lr() const { return base_lr_; }

  /// torch's scheduler.state_dict(), its counters and learning rates by torch's names ("last_epoch",
  /// "_step_count", "base_lrs.0", "_last_lr.0"; float64 scalars). The hyperparameters are the
  /// constructor's: resume by constructing the scheduler as before, then loading the optimizer's
  /// state (which holds its current learning rate) and this one.
  tensor_dict state_dict() const {
    tensor_dict d;
    d.insert("last_epoch", number(static_cast<double>(last_epoch_)));
    d.insert("_step_count", number(static_cast<double>(last_epoch_ + 1)));
    d.insert("base_lrs.0", number(base_lr_));
    d.insert("_last_lr.0", number(last_lr_));
    return d;
  }
  /// Restores a state_dict() of a scheduler (value_error naming a missing, unknown or malformed key;
  /// nothing changes when a check fails). Does not touch the optimizer's learning rate.
  void load_state_dict(const tensor_dict& d) {
    const auto fail = [](const std::string& why) {
      throw value_error("tenet: optim::LRScheduler::load_state_dict: " + why);
    };
    for (const auto& [key, t] : d)
      if (key != "last_epoch" && key != "_step_count" && key != "base_lrs.0" && key != "_last_lr.0")
        fail("unexpected key \"" + key + "\"");
    const auto get = [&](const char* key) {
      const any_tensor* t = d.find(key);
      if (!t) fail(std::string("missing key \"") + key + "\"");
      if (t->numel() != 1 || (t->scalar_type() != dtype::float64 && t->scalar_type() != dtype::int64))
        fail(std::string("\"") + key + "\" must be a float64 or int64 scalar");
      if (t->scalar_type() == dtype::int64) {
        std::int64_t v = 0;
        t->copy_to_host(&v);
        return static_cast<double>(v);
      }
      double v = 0;
      t->copy_to_host(&v);
      return v;
    };
    const double epoch = get("last_epoch"), base = get("base_lrs.0"), last = get("_last_lr.0");
    if (!(epoch >= -1) || epoch != std::floor(epoch)) fail("\"last_epoch\" must be an integer of at least -1");
    last_epoch_ = static_cast<std::int64_t>(epoch);
    base_lr_ = base;
    last_lr_ = last;
  }

 protected:
  /// torch's _initial_step: called at the end of each derived constructor.
  void initial_step() {
    initial_ = true;
    step();
    initial_ = false;
  }
  /// The learning rate for last_epoch_ (may read the optimizer's current one: torch's recurrences).
  virtual double get_lr() = 0;
  double current() const { return opt_.lr(); }

  static any_tensor number(double v) {
    Tensor<double, shape<>> t(sizes_t<0>{});
    t.fill_(v);
    return any_tensor(t);
  }

  Optimizer& opt_;
  double base_lr_ = 0;
  double last_lr_ = 0;
  std::int64_t last_epoch_ = -1;
  bool initial_ = false;
};

/// lr = base_lr * gamma^floor(epoch / step_size).
class StepLR final : public LRScheduler {
 public:
  StepLR(Optimizer& opt, std::int64_t step_size, double gamma = 0.1) : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
    if (step_size <= 0) throw value_error("tenet: optim::StepLR: step_size must be positive, got " + std::to_string(step_size));
    initial_step();
  }

 protected:
  double get_lr() override {
    if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return current();
    return current() * gamma_;
  }

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// eta_min + (base_lr - eta_min)(1 + cos(π epoch / T_max)) / 2, by torch's recurrence (which keeps
/// going past T_max: the learning rate rises again over the next T_max epochs).
class CosineAnnealingLR final : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, std::int64_t T_max, double eta_min = 0.0) : LRScheduler(opt), t_max_(T_max), eta_min_(eta_min) {
    if (T_max <= 0) throw value_error("tenet: optim::CosineAnnealingLR: T_max must be positive, got " + std::to_string(T_max));
    initial_step();
  }

 protected:
  double get_lr() override {
    constexpr double pi = std::numbers::pi;
    const double e = static_cast<double>(last_epoch_), t = static_cast<double>(t_max_);
    if (initial_) return current();
    if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0)
      return current() + (base_lr_ - eta_min_) * (1 - std::cos(pi / t)) / 2;
    return (1 + std::cos(pi * e / t)) / (1 + std::cos(pi * (e - 1) / t)) * (current() - eta_min_) + eta_min_;
  }

 private:
  std::int64_t t_max_;
  double eta_min_;
};

/// The learning rate scaled by a factor moving linearly from start_factor to end_factor over
/// total_iters epochs (a linear warmup with the defaults 1/3 -> 1 over 5).
class LinearLR final : public LRScheduler {
 public:
  LinearLR(Optimizer& opt, double start_factor = 1.0 / 3.0, double end_factor = 1.0, std::int64_t total_iters = 5)
      : LRScheduler(opt), start_(start_factor), end_(end_factor), total_(total_iters) {
    if (!(start_factor > 0 && start_factor <= 1))
      throw value_error("tenet: optim::LinearLR: starting multiplicative factor expected to be greater than 0 and "
                        "less or equal to 1, got " + std::to_string(start_factor));
    if (!(end_factor >= 0 && end_factor <= 1))
      throw value_error("tenet: optim::LinearLR: ending multiplicative factor expected to be between 0 and 1, got " +
                        std::to_string(end_factor));
    initial_step();
  }

 protected:
  double get_lr() override {
    if (last_epoch_ == 0) return current() * start_;
    if (initial_ || last_epoch_ > total_) return current();
    return current() * (1.0 + (end_ - start_) / (static_cast<double>(total_) * start_ +
                                                 static_cast<double>(last_epoch_ - 1) * (end_ - start_)));
  }

 private:
  double start_, end_;
  std::int64_t total_;
};

enum class anneal_strategy { cos, linear };
struct one_cycle_options {
  double pct_start = 0.3;
  anneal_strategy anneal = anneal_strategy::cos;
  bool cycle_momentum = true;
  double base_momentum = 0.85, max_momentum = 0.95;
  double div_factor = 25.0, final_div_factor = 1e4;
  bool three_phase = false;
};

/// The 1cycle policy: from max_lr / div_factor up to max_lr over pct_start of total_steps, then down
/// to initial_lr / final_div_factor (three_phase: back to initial_lr first); the momentum (SGD's
/// momentum, Adam's beta1) cycles inversely between max_momentum and base_momentum.
class OneCycleLR final : public LRScheduler {
 public:
  OneCycleLR(Optimizer& opt, double max_lr, std::int64_t total_steps, one_cycle_options o = {})
      : LRScheduler(prepare(opt, max_lr, total_steps, o)), o_(o), total_(total_steps), max_lr_(max_lr) {
    initial_lr_ = max_lr / o.div_factor;
    min_lr_ = initial_lr_ / o.final_div_factor;
    const double n = static_cast<double>(total_steps);
    if (o.three_phase)
      phases_ = {{o.pct_start * n - 1, initial_lr_, max_lr_, o.max_momentum, o.base_momentum},
                 {2 * o.pct_start * n - 2, max_lr_, initial_lr_, o.base_momentum, o.max_momentum},
                 {n - 1, initial_lr_, min_lr_, o.max_momentum, o.max_momentum}};
    else
      phases_ = {{o.pct_start * n - 1, initial_lr_, max_lr_, o.max_momentum, o.base_momentum},
                 {n - 1, max_lr_, min_lr_, o.base_momentum, o.max_momentum}};
    initial_step();
  }

 protected:
  double get_lr() override {
    if (last_epoch_ > total_)
      throw value_error("tenet: optim::OneCycleLR: tried to step " + std::to_string(last_epoch_) +
                        " times; the specified number of total steps is " + std::to_string(total_));
    const double step = static_cast<double>(last_epoch_);
    double start_step = 0.0, lr = 0.0;
    for (std::size_t i = 0; i < phases_.size(); ++i) {
      const auto& ph = phases_[i];
      if (step <= ph.end_step || i + 1 == phases_.size()) {
        const double pct = (step - start_step) / (ph.end_step - start_step);
        lr = anneal(ph.start_lr, ph.end_lr, pct);
        if (o_.cycle_momentum) opt_.set_momentum(anneal(ph.start_m, ph.end_m, pct));
        break;
      }
      start_step = ph.end_step;
    }
    return lr;
  }

 private:
  struct phase {
    double end_step, start_lr, end_lr, start_m, end_m;
  };
  static Optimizer& prepare(Optimizer& opt, double max_lr, std::int64_t total_steps, const one_cycle_options& o) {
    if (total_steps <= 0)
      throw value_error("tenet: optim::OneCycleLR: expected a positive total_steps, got " + std::to_string(total_steps));
    if (!(o.pct_start >= 0 && o.pct_start <= 1))
      throw value_error("tenet: optim::OneCycleLR: expected pct_start between 0 and 1, got " + std::to_string(o.pct_start));
    if (o.cycle_momentum && !opt.has_momentum())
      throw value_error(std::string("tenet: optim::OneCycleLR: optimizer ") + opt.name() +
                        " has no momentum or beta1 for cycle_momentum");
    opt.initial_lr = max_lr / o.div_factor;
    if (o.cycle_momentum) opt.set_momentum(o.max_momentum);
    return opt;
  }
  double anneal(double start, double end, double pct) const {
    if (o_.anneal == anneal_strategy::cos) return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
    return (end - start) * pct + start;
  }
  one_cycle_options o_;
  std::int64_t total_;
  double max_lr_, initial_lr_ = 0, min_lr_ = 0;
  std::vector<phase> phases_;
};

}  // namespace tenet::optim
