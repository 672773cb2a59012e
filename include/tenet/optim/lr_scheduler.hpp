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
#include <functional>
#include <numbers>
#include <string>
#include <vector>

#include <tenet/error.hpp>
#include <tenet/optim/optimizers.hpp>
#include <tenet/tensor_dict.hpp>  // and detail::state_reader, int_field ...: the state_dicts

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

  /// The scheduler's class name ("StepLR", ...), as torch's.
  virtual const char* name() const = 0;

  /// torch's scheduler.state_dict(): "last_epoch" and "_step_count" (int64 scalars), "base_lrs.0"
  /// and "_last_lr.0" (float64; torch's lists, one entry per parameter group), then the
  /// scheduler's own fields by torch's names (StepLR's "step_size", "gamma", ...; int64, float64,
  /// bool scalars, a string as the uint8 tensor of its bytes).
  tensor_dict state_dict() const {
    tensor_dict d;
    d.insert("last_epoch", tenet::detail::int_field(last_epoch_));
    d.insert("_step_count", tenet::detail::int_field(last_epoch_ + 1));
    d.insert("base_lrs.0", tenet::detail::real_field(base_lr_));
    d.insert("_last_lr.0", tenet::detail::real_field(last_lr_));
    save_fields(d);
    return d;
  }
  /// Restores a state_dict() of a scheduler of the same class, hyperparameters included (as torch's
  /// load_state_dict), so that the next step() gives the learning rate the saved run's next step
  /// gave, once the optimizer's state (which holds the current learning rate) is loaded too. A
  /// missing, unexpected or malformed key, or a value the constructor would refuse, is a
  /// value_error naming the key; nothing changes when a check fails. Does not touch the optimizer.
  void load_state_dict(const tensor_dict& d) { stage(d)(); }
  /// The checks of load_state_dict(d) (the same value_error), changing nothing.
  void check_state_dict(const tensor_dict& d) const { (void)const_cast<LRScheduler*>(this)->stage(d); }

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

  /// Adds the scheduler's own fields to its state_dict.
  virtual void save_fields(tensor_dict& d) const = 0;
  /// Reads and checks the own fields (through r, which names the key in its errors) without
  /// changing anything; returns what applies them (it must not throw).
  virtual std::function<void()> read_fields(tenet::detail::state_reader& r) = 0;
  /// value_error "<Name>::load_state_dict: "<key>" ..." unless ok.
  void require(tenet::detail::state_reader& r, bool ok, const std::string& key, const std::string& rule) const {
    if (!ok) r.fail("\"" + key + "\" " + rule);
  }

  Optimizer& opt_;
  double base_lr_ = 0;
  double last_lr_ = 0;
  std::int64_t last_epoch_ = -1;
  bool initial_ = false;

 private:
  /// Reads and checks every field of d; returns the function that applies them.
  std::function<void()> stage(const tensor_dict& d) {
    tenet::detail::state_reader r(d, std::string("optim::") + name() + "::load_state_dict");
    const std::int64_t epoch = r.integer("last_epoch");
    require(r, epoch >= -1, "last_epoch", "must be at least -1, got " + std::to_string(epoch));
    (void)r.integer("_step_count");  // torch's count of step() calls (last_epoch + 1 here)
    const double base = r.real("base_lrs.0"), last = r.real("_last_lr.0");
    std::function<void()> own = read_fields(r);
    r.finish();
    return [this, epoch, base, last, own = std::move(own)] {
      last_epoch_ = epoch;
      base_lr_ = base;
      last_lr_ = last;
      own();
    };
  }
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
 public:
  const char* name() const override { return "StepLR"; }

 protected:
  void save_fields(tensor_dict& d) const override {
    d.insert("step_size", tenet::detail::int_field(step_size_));
    d.insert("gamma", tenet::detail::real_field(gamma_));
  }
  std::function<void()> read_fields(tenet::detail::state_reader& r) override {
    const std::int64_t step_size = r.integer("step_size");
    require(r, step_size > 0, "step_size", "must be positive, got " + std::to_string(step_size));
    const double gamma = r.real("gamma");
    return [this, step_size, gamma] { step_size_ = step_size, gamma_ = gamma; };
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
 public:
  const char* name() const override { return "CosineAnnealingLR"; }

 protected:
  void save_fields(tensor_dict& d) const override {
    d.insert("T_max", tenet::detail::int_field(t_max_));
    d.insert("eta_min", tenet::detail::real_field(eta_min_));
  }
  std::function<void()> read_fields(tenet::detail::state_reader& r) override {
    const std::int64_t t_max = r.integer("T_max");
    require(r, t_max > 0, "T_max", "must be positive, got " + std::to_string(t_max));
    const double eta_min = r.real("eta_min");
    return [this, t_max, eta_min] { t_max_ = t_max, eta_min_ = eta_min; };
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
 public:
  const char* name() const override { return "LinearLR"; }

 protected:
  void save_fields(tensor_dict& d) const override {
    d.insert("start_factor", tenet::detail::real_field(start_));
    d.insert("end_factor", tenet::detail::real_field(end_));
    d.insert("total_iters", tenet::detail::int_field(total_));
  }
  std::function<void()> read_fields(tenet::detail::state_reader& r) override {
    const double start = r.real("start_factor"), end = r.real("end_factor");
    require(r, start > 0 && start <= 1, "start_factor", "must lie in (0, 1], got " + std::to_string(start));
    require(r, end >= 0 && end <= 1, "end_factor", "must lie in [0, 1], got " + std::to_string(end));
    const std::int64_t total = r.integer("total_iters");
    return [this, start, end, total] { start_ = start, end_ = end, total_ = total; };
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
 public:
  const char* name() const override { return "OneCycleLR"; }

 protected:
  /// torch's fields; each of torch's _schedule_phases names the optimizer's param_group entries
  /// ('initial_lr', 'max_lr', ...) for its learning rates and momenta, which tenet's optimizers do
  /// not keep: tenet's phases hold the values.
  void save_fields(tensor_dict& d) const override {
    namespace f = tenet::detail;
    d.insert("total_steps", f::int_field(total_));
    for (std::size_t i = 0; i < phases_.size(); ++i) {
      const std::string pre = "_schedule_phases." + std::to_string(i) + ".";
      d.insert(pre + "end_step", f::real_field(phases_[i].end_step));
      d.insert(pre + "start_lr", f::real_field(phases_[i].start_lr));
      d.insert(pre + "end_lr", f::real_field(phases_[i].end_lr));
      d.insert(pre + "start_momentum", f::real_field(phases_[i].start_m));
      d.insert(pre + "end_momentum", f::real_field(phases_[i].end_m));
    }
    d.insert("_anneal_func_type", f::text_field(o_.anneal == anneal_strategy::cos ? "cos" : "linear"));
    d.insert("cycle_momentum", f::flag_field(o_.cycle_momentum));
    d.insert("use_beta1", f::flag_field(uses_beta1()));
  }
  std::function<void()> read_fields(tenet::detail::state_reader& r) override {
    const std::int64_t total = r.integer("total_steps");
    require(r, total > 0, "total_steps", "must be positive, got " + std::to_string(total));
    std::vector<phase> phases;
    while (phases.size() < 3 && r.has("_schedule_phases." + std::to_string(phases.size()) + ".end_step")) {
      const std::string pre = "_schedule_phases." + std::to_string(phases.size()) + ".";
      phases.push_back({r.real(pre + "end_step"), r.real(pre + "start_lr"), r.real(pre + "end_lr"),
                        r.real(pre + "start_momentum"), r.real(pre + "end_momentum")});
    }
    if (phases.size() < 2) (void)r.real("_schedule_phases." + std::to_string(phases.size()) + ".end_step");  // names it
    const std::string anneal = r.text("_anneal_func_type");
    require(r, anneal == "cos" || anneal == "linear", "_anneal_func_type", "must be \"cos\" or \"linear\", got \"" + anneal + "\"");
    const bool cycle = r.flag("cycle_momentum");
    require(r, !cycle || opt_.has_momentum(), "cycle_momentum",
            std::string("is true, but the optimizer ") + opt_.name() + " has no momentum or beta1 to cycle");
    const bool beta1 = r.flag("use_beta1");
    require(r, !cycle || beta1 == uses_beta1(), "use_beta1",
            std::string("is ") + (beta1 ? "true" : "false") + ", but the optimizer " + opt_.name() +
                (uses_beta1() ? " cycles beta1" : " cycles its momentum"));
    return [this, total, phases = std::move(phases), anneal, cycle] {
      total_ = total;
      phases_ = phases;
      o_.anneal = anneal == "cos" ? anneal_strategy::cos : anneal_strategy::linear;
      o_.cycle_momentum = cycle;
    };
  }

 private:
  bool uses_beta1() const { return std::string(opt_.name()).starts_with("Adam"); }
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
