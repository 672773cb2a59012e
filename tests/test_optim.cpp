// Optimizers, LR schedulers and clip_grad_norm_ against torch.optim (tests/reference/gen_optim.py):
// the same initial parameters and the same sequence of gradients, every step compared.
#include <functional>
#include <memory>

#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using namespace tenet_test;

namespace {
const char* kFile = "optim.txt";

template <class T>
struct two_params : nn::Module {
  Tensor<T, shape<3, 4>> a{{3, 4}};
  Tensor<T, shape<5>> b{{5}};
  two_params() {
    register_parameter("a", a);
    register_parameter("b", b);
  }
};

template <class T>
any_tensor ref_any(const ref_tensor& r) {
  if (r.sizes.size() == 2) return any_tensor(make<T, dyn_shape<2>>(r));
  return any_tensor(make<T, dyn_shape<1>>(r));
}
template <class T>
void check_any(const any_tensor& got, const ref_tensor& want, double rtol, double atol) {
  ref_tensor flat = want;
  flat.sizes = {static_cast<std::int64_t>(want.values.size())};
  check_close(got.flat<T>(), flat, rtol, atol);
}

using factory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<nn::tensor_ref>)>;
template <class O, class Opt>
factory make(Opt o) {
  return [o](std::vector<nn::tensor_ref> p) { return std::make_unique<O>(std::move(p), o); };
}

/// Runs the case: gradients given explicitly on even steps, through set_grad (autograd's grad
/// slot) on odd steps; compares the parameters after every step and the final state.
template <class T>
void run_case(const std::string& name, const factory& f, double rtol, double atol, const char* file = kFile) {
  INFO("case " << name);
  const auto& c = get_case(file, name);
  two_params<T> m;
  {
    no_grad guard;  // in-place writes into parameters (which require grad)
    m.a.copy_(make<T, dyn_shape<2>>(c.at("p0")));
    m.b.copy_(make<T, dyn_shape<1>>(c.at("p1")));
  }
  auto opt = f(m.parameters());
  for (int s = 0;; ++s) {
    const std::string g0 = "g" + std::to_string(s) + "_0";
    if (!c.count(g0)) break;
    INFO("step " << s);
    std::vector<any_tensor> grads{ref_any<T>(c.at(g0)), ref_any<T>(c.at("g" + std::to_string(s) + "_1"))};
    if (s % 2 == 0) {
      opt->step(grads);
    } else {
      m.a.set_grad(grads[0].as<T, shape<3, 4>>());
      m.b.set_grad(grads[1].as<T, shape<5>>());
      opt->step();
      opt->zero_grad();
      CHECK(!m.a.grad().defined());
    }
    check_any<T>(any_tensor(m.a), c.at("out" + std::to_string(s) + "_0"), rtol, atol);
    check_any<T>(any_tensor(m.b), c.at("out" + std::to_string(s) + "_1"), rtol, atol);
  }
  auto sd = opt->state_dict();
  for (const auto& [k, v] : c) {
    if (k.rfind("state_", 0) != 0) continue;
    INFO("state " << k);
    const std::string idx = k.substr(6, 1), buf = k.substr(8);
    const any_tensor& got = sd.at("state." + idx + "." + buf);
    if (buf == "step") CHECK(got.flat<float>().data()[0] == static_cast<float>(v.values[0]));
    else check_any<T>(got, v, rtol, atol);
  }
}
}  // namespace

TEST_CASE("optim: SGD, Adam, AdamW, RMSprop, Adagrad against torch") {
  const double r = 1e-10, a = 1e-12;  // float64
  run_case<double>("sgd_plain", make<optim::SGD>(optim::sgd_options{.lr = 0.1}), r, a);
  run_case<double>("sgd_momentum", make<optim::SGD>(optim::sgd_options{.lr = 0.05, .momentum = 0.9}), r, a);
  run_case<double>("sgd_dampening_wd", make<optim::SGD>(optim::sgd_options{.lr = 0.05, .momentum = 0.8,
                                                                             .dampening = 0.3, .weight_decay = 0.01}), r, a);
  run_case<double>("sgd_nesterov_maximize", make<optim::SGD>(optim::sgd_options{.lr = 0.05, .momentum = 0.9,
                                                                                  .nesterov = true, .maximize = true}), r, a);
  run_case<double>("adam", make<optim::Adam>(optim::adam_options{.lr = 0.01}), r, a);
  run_case<double>("adam_wd_amsgrad", make<optim::Adam>(optim::adam_options{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99,
                                                                             .eps = 1e-6, .weight_decay = 0.1,
                                                                             .amsgrad = true}), r, a);
  run_case<double>("adam_maximize", make<optim::Adam>(optim::adam_options{.lr = 0.01, .maximize = true}), r, a);
  run_case<double>("adamw", make<optim::AdamW>(optim::adamw_options{.lr = 0.01}), r, a);
  run_case<double>("adamw_amsgrad", make<optim::AdamW>(optim::adamw_options{.lr = 0.03, .beta1 = 0.85, .beta2 = 0.95,
                                                                             .weight_decay = 0.2, .amsgrad = true}), r, a);
  run_case<double>("rmsprop", make<optim::RMSprop>(optim::rmsprop_options{.lr = 0.01}), r, a);
  run_case<double>("rmsprop_centered_momentum_wd",
                   make<optim::RMSprop>(optim::rmsprop_options{.lr = 0.01, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.05,
                                                               .momentum = 0.7, .centered = true}), r, a);
  run_case<double>("rmsprop_maximize",
                   make<optim::RMSprop>(optim::rmsprop_options{.lr = 0.01, .momentum = 0.5, .maximize = true}), r, a);
  run_case<double>("adagrad", make<optim::Adagrad>(optim::adagrad_options{.lr = 0.1}), r, a);
  run_case<double>("adagrad_all", make<optim::Adagrad>(optim::adagrad_options{.lr = 0.1, .lr_decay = 0.05,
                                                                               .weight_decay = 0.1,
                                                                               .initial_accumulator_value = 0.2,
                                                                               .eps = 1e-8, .maximize = true}), r, a);
  run_case<float>("adamw_f32", make<optim::AdamW>(optim::adamw_options{.lr = 0.01, .weight_decay = 0.05}), 1e-5, 1e-6);
  run_case<float>("sgd_f32", make<optim::SGD>(optim::sgd_options{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01}),
                  1e-5, 1e-6);
}

/// bfloat16 / float16 parameters (tests/reference/gen_optim_half.py: torch's single-tensor steps
/// on 16-bit tensors): tenet's loops load each 16-bit parameter, gradient and state value into
/// float, compute the step there and round once on the store, whereas torch's single-tensor steps
/// round after each of their ops; a value may differ by a unit or two of the 16-bit precision, and
/// the tolerances are four.
template <class T>
void half_cases(const char* tag) {
  const double u = std::is_same_v<T, bfloat16> ? 0x1p-8 : 0x1p-11, r = 4 * u, a = 4 * u;
  const char* f = "optim_half.txt";
  const std::string t = tag;
  run_case<T>("sgd_momentum_wd_" + t, make<optim::SGD>(optim::sgd_options{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01}),
              r, a, f);
  run_case<T>("sgd_nesterov_" + t, make<optim::SGD>(optim::sgd_options{.lr = 0.05, .momentum = 0.8, .nesterov = true}), r,
              a, f);
  run_case<T>("adam_" + t, make<optim::Adam>(optim::adam_options{.lr = 0.02}), r, a, f);
  run_case<T>("adamw_amsgrad_" + t, make<optim::AdamW>(optim::adamw_options{.lr = 0.03, .beta1 = 0.85, .beta2 = 0.95,
                                                                          .weight_decay = 0.1, .amsgrad = true}),
              r, a, f);
  run_case<T>("rmsprop_centered_momentum_" + t,
              make<optim::RMSprop>(optim::rmsprop_options{.lr = 0.01, .alpha = 0.9, .eps = 1e-6, .momentum = 0.5,
                                                          .centered = true}),
              r, a, f);
  run_case<T>("adagrad_" + t, make<optim::Adagrad>(optim::adagrad_options{.lr = 0.1, .lr_decay = 0.05,
                                                                          .weight_decay = 0.1}),
              r, a, f);
}

TEST_CASE("optim: SGD, Adam, AdamW, RMSprop, Adagrad on bfloat16 and float16 parameters against torch") {
  SECTION("bfloat16") { half_cases<bfloat16>("bf16"); }
  SECTION("float16") { half_cases<float16>("fp16"); }
}

TEST_CASE("optim: argument checks") {
  two_params<double> m;
  CHECK_THROWS_AS(optim::SGD(m.parameters(), {.lr = -1}), value_error);
  CHECK_THROWS_AS(optim::SGD(m.parameters(), {.lr = 0.1, .nesterov = true}), value_error);
  CHECK_THROWS_AS(optim::Adam(m.parameters(), {.beta1 = 1.0}), value_error);
  CHECK_THROWS_AS(optim::SGD({}, {}), value_error);
  auto ps = m.parameters();
  ps.push_back(ps[0]);
  CHECK_THROWS_AS(optim::SGD(ps, {}), value_error);
  struct ints : nn::Module {
    Tensor<std::int64_t, shape<2>> t{{2}};
    ints() { register_parameter("t", t); }
  } im;
  CHECK_THROWS_AS(optim::SGD(im.parameters(), {}), dtype_error);
  struct strided : nn::Module {
    Tensor<double, dyn_shape<2>> base = zeros<double, dyn_shape<2>>(3, 4);
    Tensor<double, dyn_shape<2>> t = base.transpose<0, 1>();
    strided() { register_parameter("t", t); }
  } sm;
  CHECK_THROWS_AS(optim::SGD(sm.parameters(), {}), value_error);  // updates would be lost
  optim::SGD opt(m.parameters(), {});
  CHECK_THROWS_AS(opt.step(std::vector<any_tensor>{any_tensor()}), value_error);  // one gradient for two
  CHECK_THROWS_AS(opt.step({any_tensor::zeros(dtype::float64, {4, 3}), any_tensor()}), value_error);  // sizes
}

TEST_CASE("optim: state_dict round trip continues identically") {
  const auto& c = get_case(kFile, "adam_wd_amsgrad");
  const optim::adam_options o{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1, .amsgrad = true};
  two_params<double> m1, m2;
  {
    no_grad guard;
    m1.a.copy_(make<double, dyn_shape<2>>(c.at("p0")));
    m1.b.copy_(make<double, dyn_shape<1>>(c.at("p1")));
  }
  optim::Adam o1(m1.parameters(), o);
  auto grads = [&](int s) {
    return std::vector<any_tensor>{ref_any<double>(c.at("g" + std::to_string(s) + "_0")),
                                   ref_any<double>(c.at("g" + std::to_string(s) + "_1"))};
  };
  for (int s = 0; s < 3; ++s) o1.step(grads(s));
  auto sd = o1.state_dict();
  CHECK(sd.contains("state.0.exp_avg"));
  CHECK(sd.contains("state.1.max_exp_avg_sq"));
  CHECK(sd.at("param_groups.0.betas.0").flat<double>().data()[0] == 0.8);
  // a fresh optimizer (other hyperparameters) takes the state and the hyperparameters
  m2.load_state_dict(m1.state_dict());
  optim::Adam o2(m2.parameters(), {.lr = 0.5, .amsgrad = true});
  o2.load_state_dict(sd);
  CHECK(o2.lr() == 0.02);
  CHECK(o2.options.beta1 == 0.8);
  for (int s = 3; s < 6; ++s) {
    o1.step(grads(s));
    o2.step(grads(s));
  }
  check_any<double>(any_tensor(m2.a), c.at("out5_0"), 1e-10, 1e-12);
  check_any<double>(any_tensor(m2.b), c.at("out5_1"), 1e-10, 1e-12);

  tensor_dict bad = sd;
  bad.insert("state.7.exp_avg", sd.at("state.0.exp_avg"));
  CHECK_THROWS_AS(o2.load_state_dict(bad), value_error);
  tensor_dict bad2;
  for (const auto& [k, v] : sd)
    bad2.insert(k, k == "state.0.exp_avg" ? any_tensor::zeros(dtype::float64, {12}) : v);
  CHECK_THROWS_AS(o2.load_state_dict(bad2), value_error);
  tensor_dict bad3;
  for (const auto& [k, v] : sd)
    if (k != "param_groups.0.eps") bad3.insert(k, v);
  CHECK_THROWS_AS(o2.load_state_dict(bad3), value_error);
}

TEST_CASE("optim: LR schedulers against torch") {
  auto run = [](const std::string& name, auto make_opt, auto make_sched) {
    INFO("case " << name);
    const auto& c = get_case(kFile, name);
    two_params<float> m;
    auto opt = make_opt(m.parameters());
    auto sched = make_sched(*opt);
    const auto& lr = c.at("lr");
    const auto& mom = c.at("mom");
    for (std::size_t s = 0; s < lr.values.size(); ++s) {
      INFO("step " << s);
      if (s > 0) sched->step();
      CHECK(opt->lr() == Approx(lr.values[s]).epsilon(1e-12).margin(1e-15));
      CHECK(opt->momentum() == Approx(mom.values[s]).epsilon(1e-12));
      CHECK(sched->get_last_lr() == opt->lr());
    }
  };
  auto sgd = [](std::vector<nn::tensor_ref> p) {
    return std::make_unique<optim::SGD>(std::move(p), optim::sgd_options{.lr = 0.5, .momentum = 0.9});
  };
  run("step_lr", sgd, [](optim::Optimizer& o) { return std::make_unique<optim::StepLR>(o, 3, 0.5); });
  run("cosine", sgd, [](optim::Optimizer& o) { return std::make_unique<optim::CosineAnnealingLR>(o, 5, 0.01); });
  run("linear_warmup", sgd, [](optim::Optimizer& o) { return std::make_unique<optim::LinearLR>(o, 0.1, 1.0, 4); });
  run("linear_decay", sgd, [](optim::Optimizer& o) { return std::make_unique<optim::LinearLR>(o, 1.0, 0.25, 6); });
  run("one_cycle", sgd, [](optim::Optimizer& o) { return std::make_unique<optim::OneCycleLR>(o, 1.0, 20); });
  run("one_cycle_adam_linear_3phase",
      [](std::vector<nn::tensor_ref> p) { return std::make_unique<optim::Adam>(std::move(p), optim::adam_options{.lr = 0.1}); },
      [](optim::Optimizer& o) {
        return std::make_unique<optim::OneCycleLR>(
            o, 0.3, 15,
            optim::one_cycle_options{.pct_start = 0.4, .anneal = optim::anneal_strategy::linear, .div_factor = 10.0,
                                     .final_div_factor = 100.0, .three_phase = true});
      });
  two_params<float> m;
  optim::SGD opt(m.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::OneCycleLR oc(opt, 1.0, 2);
  oc.step();
  oc.step();
  CHECK_THROWS_AS(oc.step(), value_error);  // past total_steps
  optim::Adagrad ada(m.parameters(), {});
  CHECK_THROWS_AS(optim::OneCycleLR(ada, 1.0, 5), value_error);  // no momentum to cycle
}

// Resumable training (issue 37, item 5): a scheduler's state_dict with the optimizer's, through a
// safetensors file's bytes, into a fresh optimizer and scheduler built as before, continues the
// learning rates (and OneCycleLR's momenta) exactly as the uninterrupted run.
TEST_CASE("optim: LR scheduler state_dict resumes the schedule exactly") {
  auto check = [](const char* name, auto make_sched) {
    INFO("scheduler " << name);
    two_params<float> m;
    const optim::sgd_options so{.lr = 0.5, .momentum = 0.9};
    optim::SGD straight(m.parameters(), so);
    auto s1 = make_sched(straight);
    std::vector<double> lrs, moms;
    for (int i = 0; i < 12; ++i) {
      s1->step();
      lrs.push_back(straight.lr());
      moms.push_back(straight.momentum());
    }
    optim::SGD first(m.parameters(), so);
    auto s2 = make_sched(first);
    for (int i = 0; i < 5; ++i) s2->step();
    const std::string opt_bytes = safetensors::serialize(first.state_dict());
    const std::string sched_bytes = safetensors::serialize(s2->state_dict());
    optim::SGD second(m.parameters(), {.lr = 0.01, .momentum = 0.5});  // other values: the state brings them back
    auto s3 = make_sched(second);
    second.load_state_dict(safetensors::deserialize(opt_bytes));
    s3->load_state_dict(safetensors::deserialize(sched_bytes));
    CHECK(s3->last_epoch() == 5);
    CHECK(s3->get_last_lr() == lrs[4]);
    for (int i = 5; i < 12; ++i) {
      s3->step();
      CHECK(second.lr() == lrs[static_cast<std::size_t>(i)]);
      CHECK(second.momentum() == moms[static_cast<std::size_t>(i)]);
    }
  };
  check("StepLR", [](optim::Optimizer& o) { return std::make_unique<optim::StepLR>(o, 3, 0.5); });
  check("CosineAnnealingLR", [](optim::Optimizer& o) { return std::make_unique<optim::CosineAnnealingLR>(o, 7, 0.01); });
  check("LinearLR", [](optim::Optimizer& o) { return std::make_unique<optim::LinearLR>(o, 0.1, 1.0, 8); });
  check("OneCycleLR", [](optim::Optimizer& o) { return std::make_unique<optim::OneCycleLR>(o, 1.0, 20); });

  two_params<float> m;
  optim::SGD opt(m.parameters(), {.lr = 0.1});
  optim::StepLR sched(opt, 2);
  tensor_dict sd = sched.state_dict();
  CHECK(sd.contains("last_epoch"));
  CHECK(sd.contains("_last_lr.0"));
  tensor_dict extra = sd;
  extra.insert("gamma_typo", sd.at("last_epoch"));
  CHECK_THROWS_WITH(sched.load_state_dict(extra), Catch::Contains("unexpected key \"gamma_typo\""));
  tensor_dict missing;
  for (const auto& [k, v] : sd)
    if (k != "base_lrs.0") missing.insert(k, v);
  CHECK_THROWS_WITH(sched.load_state_dict(missing), Catch::Contains("missing key \"base_lrs.0\""));
}

TEST_CASE("optim: clip_grad_norm_ against torch") {
  for (auto [name, p, max_norm] : {std::tuple{"clip_l2", 2.0, 1.0}, std::tuple{"clip_l1", 1.0, 2.5},
                                   std::tuple{"clip_inf", double(INFINITY), 0.5}, std::tuple{"clip_large", 2.0, 100.0}}) {
    INFO(name);
    const auto& c = get_case(kFile, name);
    two_params<double> m;
    m.a.set_grad(make<double, shape<3, 4>>(c.at("g0")));
    m.b.set_grad(make<double, shape<5>>(c.at("g1")));
    const double total = nn::utils::clip_grad_norm_(m.parameters(), max_norm, p);
    CHECK(total == Approx(c.at("total").values[0]).epsilon(1e-12));
    check_any<double>(any_tensor(m.a.grad()), c.at("after0"), 1e-12, 1e-14);
    check_any<double>(any_tensor(m.b.grad()), c.at("after1"), 1e-12, 1e-14);
  }
  two_params<double> m;
  m.a.set_grad(full<double, shape<3, 4>>(NAN));
  CHECK_THROWS_AS(nn::utils::clip_grad_norm_(m.parameters(), 1.0, 2.0, true), value_error);
  CHECK_THROWS_AS(nn::utils::clip_grad_norm_(m.parameters(), 1.0, -1.0), value_error);
  m.a.set_grad(make<double, shape<3, 4>>(get_case(kFile, "clip_l2").at("g0")));
  nn::utils::clip_grad_value_(m.parameters(), 0.5);
  const auto ga = m.a.grad();
  double lo = 0, hi = 0;
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j) lo = std::min(lo, ga(i, j)), hi = std::max(hi, ga(i, j));
  CHECK(lo == -0.5);
  CHECK(hi == 0.5);
}

TEST_CASE("optim: clip_grad_norm_ / clip_grad_value_ of bfloat16 gradients") {
  // the norm summed in double from the 16-bit values; the scale rounded to bfloat16, then each
  // product rounded (torch: g.mul_(coef.to(g.dtype)))
  const auto& c = get_case(kFile, "clip_l2");
  two_params<bfloat16> m;
  Tensor<bfloat16, shape<3, 4>> g0 = make<double, shape<3, 4>>(c.at("g0")).to<bfloat16>();
  Tensor<bfloat16, shape<5>> g1 = make<double, shape<5>>(c.at("g1")).to<bfloat16>();
  m.a.set_grad(g0.clone());  // clipped in place: keep g0, g1
  m.b.set_grad(g1.clone());
  double want = 0;
  for (std::int64_t i = 0; i < 12; ++i) want += double(float(g0.data()[i])) * double(float(g0.data()[i]));
  for (std::int64_t i = 0; i < 5; ++i) want += double(float(g1.data()[i])) * double(float(g1.data()[i]));
  want = std::sqrt(want);
  const double total = nn::utils::clip_grad_norm_(m.parameters(), 1.0);
  CHECK(total == Approx(want).epsilon(1e-12));
  const bfloat16 coef(static_cast<float>(std::min(1.0 / (want + 1e-6), 1.0)));
  const auto ga = m.a.grad();
  for (std::int64_t i = 0; i < 12; ++i) CHECK(float(ga.data()[i]) == float(bfloat16(float(g0.data()[i]) * float(coef))));
  nn::utils::clip_grad_value_(m.parameters(), 0.25);
  const auto gb = m.b.grad();
  for (std::int64_t i = 0; i < 5; ++i) CHECK(std::fabs(float(gb.data()[i])) <= 0.25f);
}

TEST_CASE("optim: a training loop (module, cross_entropy, backward, AdamW) against torch") {
  const auto& c = get_case(kFile, "train_mlp_adamw");
  nn::Sequential<nn::Linear<4, 6>, nn::ReLU, nn::Linear<6, 3>> mlp;
  tensor_dict init;
  for (const auto& [k, v] : c)
    if (k.rfind("p:", 0) == 0) init.insert(k.substr(2), v.sizes.size() == 2 ? any_tensor(make<float, dyn_shape<2>>(v))
                                                                               : any_tensor(make<float, dyn_shape<1>>(v)));
  mlp.load_state_dict(init);
  const auto x = make<float, dyn_shape<2>>(c.at("x"));
  const auto y = make<std::int64_t, dyn_shape<1>>(c.at("y"));
  optim::AdamW opt(mlp.parameters(), {.lr = 0.05});
  for (int s = 0; s < 4; ++s) {
    INFO("step " << s);
    Tensor<float, shape<>> loss = cross_entropy(mlp(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    CHECK(loss.item() == Approx(c.at("loss" + std::to_string(s)).values[0]).epsilon(1e-5));
    for (const auto& [k, v] : mlp.state_dict()) {
      INFO(k);
      check_any<float>(v, c.at("after" + std::to_string(s) + ":" + k), 1e-4, 1e-5);
    }
  }
}

namespace {
template <class T>
struct one_param : nn::Module {
  Tensor<T, shape<dyn>> w;
  explicit one_param(std::int64_t n) : w({n}) { register_parameter("w", w); }
};
/// The vectorized, threaded update of a large parameter equals, element by element, the scalar
/// update of one-element parameters holding the same values (sampled positions, 3 steps).
template <class T>
void check_wide_equals_scalar(const factory& f, const std::string& what) {
  INFO(what << " " << name(dtype_of<T>));
  const std::int64_t n = optim::parallel_threshold + 37;  // threads, batches and a scalar tail
  manual_seed(5);
  one_param<T> big(n);
  Tensor<T, shape<dyn>> init = randn<T, shape<dyn>>(n);
  {
    no_grad guard;
    big.w.copy_(init);
  }
  std::vector<Tensor<T, shape<dyn>>> grads;
  for (int s = 0; s < 3; ++s) grads.push_back(randn<T, shape<dyn>>(n));
  auto opt = f(big.parameters());
  for (int s = 0; s < 3; ++s) opt->step({any_tensor(grads[static_cast<std::size_t>(s)])});
  for (std::int64_t k : {std::int64_t{0}, std::int64_t{1}, std::int64_t{17}, n / 3, n / 2 + 5, n - 40, n - 3, n - 1}) {
    INFO("element " << k);
    one_param<T> small(1);
    {
      no_grad guard;
      small.w.fill_(init(k));
    }
    auto o = f(small.parameters());
    for (int s = 0; s < 3; ++s) {
      Tensor<T, shape<dyn>> g({1});
      g(0) = grads[static_cast<std::size_t>(s)](k);
      o->step({any_tensor(g)});
    }
    const double want = static_cast<double>(small.w(0)), got = static_cast<double>(big.w(k));
    CHECK(got == Approx(want).epsilon(std::is_same_v<T, float> ? 1e-5 : 1e-12).margin(1e-7));
  }
}
}  // namespace

TEST_CASE("optim: the vectorized, threaded update equals the scalar one") {
  const std::vector<std::pair<std::string, factory>> all{
      {"SGD", make<optim::SGD>(optim::sgd_options{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true})},
      {"Adam", make<optim::Adam>(optim::adam_options{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true, .maximize = true})},
      {"AdamW", make<optim::AdamW>(optim::adamw_options{.lr = 0.01})},
      {"RMSprop", make<optim::RMSprop>(optim::rmsprop_options{.lr = 0.01, .weight_decay = 0.05, .momentum = 0.7,
                                                                  .centered = true})},
      {"Adagrad", make<optim::Adagrad>(optim::adagrad_options{.lr = 0.1, .lr_decay = 0.05, .weight_decay = 0.1})}};
  for (const auto& [what, f] : all) {
    check_wide_equals_scalar<float>(f, what);
    check_wide_equals_scalar<double>(f, what);
  }
}
