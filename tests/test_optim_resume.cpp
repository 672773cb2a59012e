// Resumable training (issue 37, item 5): LR scheduler state_dicts against torch's
// (tests/reference/gen_lr_resume.py), the DataLoader's position, and tenet::training_state: a run
// stopped, saved, and resumed into fresh objects ends bit for bit where the uninterrupted run ends.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using namespace tenet_test;

namespace {

using i64 = std::int64_t;

/// Same keys, dtypes, sizes and bytes (the order of the keys aside).
void check_same_bits(const tensor_dict& a, const tensor_dict& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& [k, t] : a) {
    INFO("key " << k);
    const any_tensor* u = b.find(k);
    REQUIRE(u != nullptr);
    REQUIRE(t.scalar_type() == u->scalar_type());
    REQUIRE(t.sizes() == u->sizes());
    std::string x(t.nbytes(), '\0'), y(u->nbytes(), '\0');
    t.copy_to_host(x.data());
    u->copy_to_host(y.data());
    CHECK(x == y);
  }
}
bool same_bits(const tensor_dict& a, const tensor_dict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, t] : a) {
    const any_tensor* u = b.find(k);
    if (!u || u->scalar_type() != t.scalar_type() || u->sizes() != t.sizes()) return false;
    std::string x(t.nbytes(), '\0'), y(u->nbytes(), '\0');
    t.copy_to_host(x.data());
    u->copy_to_host(y.data());
    if (x != y) return false;
  }
  return true;
}
double number(const any_tensor& t) {
  double v = 0;
  if (t.scalar_type() == dtype::float64) t.copy_to_host(&v);
  else if (t.scalar_type() == dtype::int64) {
    i64 i = 0;
    t.copy_to_host(&i);
    v = static_cast<double>(i);
  } else if (t.scalar_type() == dtype::bool_) {
    bool b = false;
    t.copy_to_host(&b);
    v = b ? 1.0 : 0.0;
  } else {
    FAIL("unexpected dtype " << name(t.scalar_type()));
  }
  return v;
}

struct two_params : nn::Module {
  Tensor<float, shape<3>> a{{3}};
  two_params() { register_parameter("a", a); }
};

using sched_factory = std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)>;
using opt_factory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<nn::tensor_ref>)>;

}  // namespace

// ---------------------------------------------------------------------------------------------
// LR schedulers

TEST_CASE("optim_resume: scheduler state_dicts hold torch's values; a resumed schedule gives torch's learning rates") {
  const std::size_t K = 5, N = 12;  // as gen_lr_resume.py
  auto run = [&](const char* name, const opt_factory& make_opt, const sched_factory& make_sched,
                 const sched_factory& make_other) {
    INFO("case " << name);
    const auto& c = get_case("lr_resume.txt", name);
    two_params m;
    // uninterrupted, against torch
    auto o1 = make_opt(m.parameters());
    auto s1 = make_sched(*o1);
    std::vector<double> lrs{o1->lr()}, moms{o1->momentum()};
    for (std::size_t s = 0; s < N; ++s) {
      o1->step(std::vector<any_tensor>(1));  // no gradient: the schedule alone
      s1->step();
      lrs.push_back(o1->lr());
      moms.push_back(o1->momentum());
    }
    REQUIRE(c.at("lr").values.size() == lrs.size());
    for (std::size_t s = 0; s <= N; ++s) {
      INFO("step " << s);
      CHECK(lrs[s] == Approx(c.at("lr").values[s]).epsilon(1e-12).margin(1e-15));
      CHECK(moms[s] == Approx(c.at("mom").values[s]).epsilon(1e-12));
    }
    // stopped at K: the state_dict is torch's, key for key
    auto o2 = make_opt(m.parameters());
    auto s2 = make_sched(*o2);
    for (std::size_t s = 0; s < K; ++s) s2->step();
    const tensor_dict sd = s2->state_dict();
    std::size_t torch_keys = 0;
    for (const auto& [k, v] : c)
      if (k.rfind("sd:", 0) == 0) ++torch_keys;
    CHECK(sd.size() == torch_keys);
    for (const auto& [k, t] : sd) {
      INFO("key " << k);
      REQUIRE(c.count("sd:" + k) == 1);
      const double want = c.at("sd:" + k).values[0];
      if (k == "_anneal_func_type") {  // a string in the state (torch's), a number in the reference file
        std::string s(static_cast<std::size_t>(t.numel()), '\0');
        t.copy_to_host(s.data());
        CHECK(s == (want == 0 ? "cos" : "linear"));
      } else {
        CHECK(number(t) == Approx(want).epsilon(1e-14));
      }
    }
    CHECK(sd.at("last_epoch").scalar_type() == dtype::int64);
    CHECK(sd.at("_last_lr.0").scalar_type() == dtype::float64);
    // through a file's bytes into a fresh optimizer and a scheduler built with other hyperparameters
    const std::string opt_bytes = safetensors::serialize(o2->state_dict());
    const std::string sched_bytes = safetensors::serialize(sd);
    auto o3 = make_opt(m.parameters());
    o3->set_lr(123.0);
    auto s3 = make_other(*o3);
    o3->load_state_dict(safetensors::deserialize(opt_bytes));
    s3->load_state_dict(safetensors::deserialize(sched_bytes));
    CHECK(s3->last_epoch() == static_cast<i64>(K));
    CHECK(s3->get_last_lr() == lrs[K]);
    check_same_bits(s3->state_dict(), sd);
    for (std::size_t s = K; s < N; ++s) {
      INFO("resumed step " << s + 1);
      s3->step();
      CHECK(o3->lr() == lrs[s + 1]);  // tenet's own uninterrupted run, exactly
      CHECK(o3->momentum() == moms[s + 1]);
      CHECK(o3->lr() == Approx(c.at("lr_resumed").values[s - K]).epsilon(1e-12).margin(1e-15));
      CHECK(o3->momentum() == Approx(c.at("mom_resumed").values[s - K]).epsilon(1e-12));
    }
  };
  const opt_factory sgd = [](std::vector<nn::tensor_ref> p) {
    return std::make_unique<optim::SGD>(std::move(p), optim::sgd_options{.lr = 0.5, .momentum = 0.9});
  };
  const opt_factory adam = [](std::vector<nn::tensor_ref> p) {
    return std::make_unique<optim::Adam>(std::move(p), optim::adam_options{.lr = 0.1});
  };
  run("step_lr", sgd, [](optim::Optimizer& o) { return std::make_unique<optim::StepLR>(o, 3, 0.5); },
      [](optim::Optimizer& o) { return std::make_unique<optim::StepLR>(o, 7, 0.9); });
  run("cosine", sgd, [](optim::Optimizer& o) { return std::make_unique<optim::CosineAnnealingLR>(o, 7, 0.01); },
      [](optim::Optimizer& o) { return std::make_unique<optim::CosineAnnealingLR>(o, 3, 0.2); });
  run("linear", sgd, [](optim::Optimizer& o) { return std::make_unique<optim::LinearLR>(o, 0.1, 1.0, 8); },
      [](optim::Optimizer& o) { return std::make_unique<optim::LinearLR>(o, 0.5, 0.9, 2); });
  run("one_cycle", sgd, [](optim::Optimizer& o) { return std::make_unique<optim::OneCycleLR>(o, 1.0, 20); },
      [](optim::Optimizer& o) {
        return std::make_unique<optim::OneCycleLR>(o, 0.3, 40,
                                                   optim::one_cycle_options{.anneal = optim::anneal_strategy::linear});
      });
  run("one_cycle_adam_linear_3phase", adam,
      [](optim::Optimizer& o) {
        return std::make_unique<optim::OneCycleLR>(
            o, 0.3, 15,
            optim::one_cycle_options{.pct_start = 0.4, .anneal = optim::anneal_strategy::linear, .div_factor = 10.0,
                                     .final_div_factor = 100.0, .three_phase = true});
      },
      [](optim::Optimizer& o) { return std::make_unique<optim::OneCycleLR>(o, 2.0, 30); });
}

TEST_CASE("optim_resume: a scheduler refuses a bad state_dict, naming the key, and changes nothing") {
  two_params m;
  optim::SGD opt(m.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::StepLR sched(opt, 2, 0.5);
  sched.step();
  const tensor_dict good = sched.state_dict();
  const std::string before = safetensors::serialize(good);
  const auto with = [&](const std::string& key, any_tensor v) {
    tensor_dict d;
    for (const auto& [k, t] : good)
      if (k != key) d.insert(k, t);
    if (v.defined()) d.insert(key, v);
    return d;
  };
  const auto refuses = [&](const tensor_dict& d, const std::string& text) {
    CHECK_THROWS_WITH(sched.load_state_dict(d), Catch::Contains(text) && Catch::Contains("StepLR::load_state_dict"));
    CHECK_THROWS_AS(sched.check_state_dict(d), value_error);
    CHECK(safetensors::serialize(sched.state_dict()) == before);  // nothing changed
  };
  refuses(with("gamma", {}), "missing key \"gamma\"");
  refuses(with("last_epoch", {}), "missing key \"last_epoch\"");
  refuses(with("step_size", tenet::detail::real_field(2.5)), "\"step_size\" must be an integer");
  refuses(with("step_size", any_tensor(Tensor<float, shape<2>>({2}))), "\"step_size\" must be an integer");
  refuses(with("gamma", tenet::detail::flag_field(true)), "\"gamma\" must be a float64 scalar");
  refuses(with("gamma", tenet::detail::text_field("0.5")), "\"gamma\" must be a float64 scalar");
  refuses(with("step_size", tenet::detail::int_field(0)), "\"step_size\" must be positive");
  refuses(with("last_epoch", tenet::detail::int_field(-2)), "\"last_epoch\" must be at least -1");
  tensor_dict extra = good;
  extra.insert("gamma_typo", tenet::detail::real_field(0.5));
  refuses(extra, "unexpected key \"gamma_typo\"");
  CHECK_NOTHROW(sched.check_state_dict(good));

  // a StepLR's state is not a CosineAnnealingLR's
  optim::CosineAnnealingLR cos(opt, 4);
  CHECK_THROWS_WITH(cos.load_state_dict(good), Catch::Contains("missing key \"T_max\""));

  // OneCycleLR: its string, its flags and its phases
  two_params m2;
  optim::Adagrad ada(m2.parameters(), {.lr = 0.1});
  optim::OneCycleLR one(ada, 1.0, 10, {.cycle_momentum = false});
  const tensor_dict od = one.state_dict();
  CHECK(od.contains("_schedule_phases.1.end_momentum"));
  CHECK_FALSE(od.contains("_schedule_phases.2.end_step"));
  const auto with_one = [&](const std::string& key, any_tensor v) {
    tensor_dict d;
    for (const auto& [k, t] : od)
      if (k != key) d.insert(k, t);
    if (v.defined()) d.insert(key, v);
    return d;
  };
  CHECK_THROWS_WITH(one.load_state_dict(with_one("_anneal_func_type", tenet::detail::text_field("cosine"))),
                    Catch::Contains("\"_anneal_func_type\" must be \"cos\" or \"linear\""));
  CHECK_THROWS_WITH(one.load_state_dict(with_one("cycle_momentum", tenet::detail::flag_field(true))),
                    Catch::Contains("\"cycle_momentum\" is true, but the optimizer Adagrad has no momentum"));
  CHECK_THROWS_WITH(one.load_state_dict(with_one("_schedule_phases.1.end_lr", {})),
                    Catch::Contains("missing key \"_schedule_phases.1.end_lr\""));
  CHECK_THROWS_WITH(one.load_state_dict(with_one("_schedule_phases.1.end_step", {})),
                    Catch::Contains("_schedule_phases.1"));
  CHECK(safetensors::serialize(one.state_dict()) == safetensors::serialize(od));
}

// ---------------------------------------------------------------------------------------------
// DataLoader position

namespace {
using ds_t = data::TensorDataset<Tensor<float, shape<dyn, 2>>, Tensor<i64, shape<dyn>>>;
ds_t numbered(i64 n) {
  Tensor<float, shape<dyn, 2>> x({n, 2});
  Tensor<i64, shape<dyn>> y({n});
  for (i64 i = 0; i < n; ++i) {
    x(i, 0) = static_cast<float>(i);
    x(i, 1) = -static_cast<float>(i);
    y(i) = i;
  }
  return ds_t(x, y);
}
std::vector<i64> labels_of(const ds_t::batch_type& b) {
  const auto& y = std::get<1>(b);
  std::vector<i64> v;
  for (i64 i = 0; i < y.size(0); ++i) v.push_back(y(i));
  return v;
}
/// The batches (their labels) of one loop.
std::vector<std::vector<i64>> one_loop(data::DataLoader<ds_t>& loader) {
  std::vector<std::vector<i64>> out;
  for (auto& b : loader) out.push_back(labels_of(b));
  return out;
}
i64 int_of(const tensor_dict& d, const std::string& k) { return static_cast<i64>(number(d.at(k))); }
}  // namespace

TEST_CASE("optim_resume: a DataLoader resumed from its state_dict in the middle of an epoch gives the same batches") {
  const ds_t ds = numbered(23);
  for (bool prefetch : {false, true}) {
    INFO("prefetch " << prefetch);
    const data::loader_options o{.batch_size = 4, .shuffle = true, .seed = 17, .prefetch = prefetch};
    data::DataLoader whole(ds, o);
    const auto e0 = one_loop(whole), e1 = one_loop(whole), e2 = one_loop(whole);
    REQUIRE(e0.size() == 6);
    CHECK(e0 != e1);

    for (i64 stop : {1, 3, 6}) {  // stop inside epoch 1 after `stop` batches (6: inside its last batch)
      INFO("stop after batch " << stop);
      data::DataLoader first(ds, o);
      CHECK(one_loop(first) == e0);
      tensor_dict saved;
      i64 k = 0;
      for (auto& b : first) {
        CHECK(labels_of(b) == e1[static_cast<std::size_t>(k)]);
        if (++k == stop) {
          saved = first.state_dict();  // inside the loop: epoch 1, `stop` batches handed out
          break;
        }
      }
      CHECK(int_of(saved, "epoch") == 1);
      CHECK(int_of(saved, "num_yielded") == stop);
      CHECK(int_of(saved, "seed") == 17);
      // after the break the loader itself goes on with epoch 2, and says so
      CHECK(int_of(first.state_dict(), "epoch") == 2);
      CHECK(int_of(first.state_dict(), "num_yielded") == 0);

      data::loader_options other = o;
      other.seed = 99;  // the state brings the seed back
      data::DataLoader resumed(ds, other);
      resumed.load_state_dict(safetensors::deserialize(safetensors::serialize(saved)));
      CHECK(resumed.epoch() == 1);
      const auto rest = one_loop(resumed);
      CHECK(rest == std::vector<std::vector<i64>>(e1.begin() + stop, e1.end()));
      CHECK(one_loop(resumed) == e2);
      CHECK(resumed.options().seed == 17);
    }
  }
  // set_epoch drops a pending resume
  data::DataLoader a(ds, {.batch_size = 4, .shuffle = true, .seed = 17});
  data::DataLoader b(ds, {.batch_size = 4, .shuffle = true, .seed = 17});
  tensor_dict s = a.state_dict();
  s.set("num_yielded", tenet::detail::int_field(2));
  b.load_state_dict(s);
  b.set_epoch(0);
  CHECK(one_loop(b) == one_loop(a));
}

TEST_CASE("optim_resume: a DataLoader refuses a state_dict that does not fit it, naming the key") {
  const ds_t ds = numbered(23);
  data::DataLoader loader(ds, {.batch_size = 4, .shuffle = true, .seed = 3});
  (void)one_loop(loader);
  const tensor_dict good = loader.state_dict();
  const std::string before = safetensors::serialize(good);
  const auto refuses = [&](tensor_dict d, const std::string& text) {
    CHECK_THROWS_WITH(loader.load_state_dict(d), Catch::Contains(text) && Catch::Contains("DataLoader::load_state_dict"));
    CHECK_THROWS_AS(loader.check_state_dict(d), value_error);
    CHECK(safetensors::serialize(loader.state_dict()) == before);
  };
  const auto with = [&](const std::string& key, any_tensor v) {
    tensor_dict d;
    for (const auto& [k, t] : good)
      if (k != key) d.insert(k, t);
    if (v.defined()) d.insert(key, v);
    return d;
  };
  refuses(with("batch_size", tenet::detail::int_field(5)), "\"batch_size\" is 5 in the state, 4 in this loader");
  refuses(with("dataset_size", tenet::detail::int_field(24)), "\"dataset_size\" is 24 in the state, 23");
  refuses(with("shuffle", tenet::detail::flag_field(false)), "\"shuffle\" is false in the state, true");
  refuses(with("num_yielded", tenet::detail::int_field(7)), "\"num_yielded\" must lie in [0, 6]");
  refuses(with("epoch", tenet::detail::int_field(-1)), "\"epoch\" must be non-negative");
  refuses(with("epoch", {}), "missing key \"epoch\"");
  refuses(with("drop_last", tenet::detail::int_field(0)), "\"drop_last\" must be a bool scalar");
  tensor_dict extra = good;
  extra.insert("sampler", tenet::detail::int_field(0));
  refuses(extra, "unexpected key \"sampler\"");
}

// ---------------------------------------------------------------------------------------------
// training_state: the whole run

namespace {

struct Net : nn::Module {
  nn::Linear<6, 16> fc1;
  nn::Dropout drop{0.25};  // draws from the default generator every step
  nn::Linear<16, 3> fc2;
  Net() {
    register_module("fc1", fc1);
    register_module("drop", drop);
    register_module("fc2", fc2);
  }
  template <Expression X>
  auto operator()(const X& x) const {
    return fc2(drop(relu(fc1(x))));
  }
};
struct OtherNet : nn::Module {  // the same names, another hidden size
  nn::Linear<6, 8> fc1;
  nn::Linear<8, 3> fc2;
  OtherNet() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
};

using train_ds = data::TensorDataset<Tensor<float, shape<dyn, 6>>, Tensor<i64, shape<dyn>>>;
train_ds make_data() {
  manual_seed(2024);
  Tensor<float, shape<dyn, 6>> x = randn<float, shape<dyn, 6>>(50);
  Tensor<i64, shape<dyn>> y({50});
  for (i64 i = 0; i < 50; ++i) y(i) = (x(i, 0) + x(i, 1) > 0 ? 1 : 0) + (x(i, 2) > 0.5f ? 1 : 0);
  return train_ds(x, y);
}

constexpr i64 kBatches = 7;  // 50 rows in batches of 8
constexpr i64 kEpochs = 3;

/// Every object of a run, built fresh (the model from its own seed).
struct run {
  int seeded;
  Net model;
  optim::AdamW opt;
  optim::OneCycleLR sched;
  data::DataLoader<train_ds> loader;
  Generator augment{77};  // the run's own stream: which rows of each batch it trains on
  i64 step = 0;
  explicit run(const train_ds& ds, std::uint64_t model_seed, std::uint64_t loader_seed = 5)
      : seeded((manual_seed(model_seed), 0)),
        opt(model.parameters(), {.lr = 1e-3, .weight_decay = 0.05}),
        sched(opt, 0.05, kBatches * kEpochs),
        loader(ds, {.batch_size = 8, .shuffle = true, .seed = loader_seed, .prefetch = true}) {}
  training_state state() {
    return {{"model", model}, {"optimizer", opt},  {"scheduler", sched}, {"loader", loader},
            {"rng", default_generator()}, {"augment", augment}, {"step", step}};
  }
  /// Trains until `step` is `stop`; after each step, `after()` runs inside the loop and may end it.
  void train(i64 stop, const std::function<bool()>& after = [] { return false; }) {
    while (step < stop) {
      for (auto& [x, y] : loader) {
        const i64 n = x.size(0), keep = n - n / 4;
        const Tensor<i64, shape<dyn>> rows = randperm(n, augment).narrow<0>(0, keep);
        Tensor<float, shape<dyn, 6>> xs = index_select<0>(x, rows);
        Tensor<i64, shape<dyn>> ys = index_select<0>(y, rows);
        Tensor<float, shape<>> loss = cross_entropy(model(xs), ys);
        loss.backward();
        opt.step();
        opt.zero_grad();
        sched.step();
        ++step;
        if (after() || step == stop) return;
      }
    }
  }
};

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("tenet_test_optim_resume_" + name + ".safetensors");
}

void check_same_run(run& a, run& b) {
  {
    INFO("parameters");
    check_same_bits(a.model.state_dict(), b.model.state_dict());
  }
  {
    INFO("optimizer state");
    check_same_bits(a.opt.state_dict(), b.opt.state_dict());
  }
  {
    INFO("scheduler state");
    check_same_bits(a.sched.state_dict(), b.sched.state_dict());
  }
  {
    INFO("loader state");
    check_same_bits(a.loader.state_dict(), b.loader.state_dict());
  }
  CHECK(a.opt.lr() == b.opt.lr());
  CHECK(a.opt.momentum() == b.opt.momentum());
  CHECK(a.step == b.step);
  CHECK(a.augment.state().offset == b.augment.state().offset);
}

}  // namespace

TEST_CASE("optim_resume: a run saved and resumed into fresh objects ends bit for bit as the uninterrupted run") {
  const train_ds ds = make_data();
  const i64 total = kBatches * kEpochs;
  run straight(ds, 1);
  straight.train(total);
  const auto end_rng = default_generator().state();
  REQUIRE(straight.step == total);
  REQUIRE(straight.loader.epoch() == kEpochs);

  // stopped after k steps: mid-epoch (10: epoch 1, batch 3 of 7), inside an epoch's last batch (7),
  // and in the first epoch (2)
  for (i64 k : {10, 7, 2}) {
    INFO("stopped after step " << k);
    const auto path = temp_file("run" + std::to_string(k));
    {
      run first(ds, 1);
      first.train(k, [&] {
        if (first.step == k) first.state().save(path.string());  // inside the loop, after the step
        return first.step == k;
      });
    }
    manual_seed(12345);  // the process's stream moves on meanwhile
    (void)randn<float, shape<16>>();
    run resumed(ds, 999, 31);  // another initialization and another loader seed: the file brings them back
    CHECK_FALSE(same_bits(resumed.model.state_dict(), straight.model.state_dict()));
    resumed.state().load(path.string());
    CHECK(resumed.step == k);
    resumed.train(total);
    check_same_run(straight, resumed);
    const auto rng = default_generator().state();
    CHECK(rng.seed == end_rng.seed);
    CHECK(rng.offset == end_rng.offset);

    // the test can fail: without the default generator's state (dropout's masks) the run differs
    run no_rng(ds, 999, 31);
    training_state partial{{"model", no_rng.model}, {"optimizer", no_rng.opt}, {"scheduler", no_rng.sched},
                           {"loader", no_rng.loader}, {"augment", no_rng.augment}, {"step", no_rng.step}};
    partial.load(path.string(), /*strict=*/false);
    no_rng.train(total);
    CHECK_FALSE(same_bits(no_rng.model.state_dict(), straight.model.state_dict()));
    std::filesystem::remove(path);
  }
}

TEST_CASE("optim_resume: training_state's file: its layout, and what a bad file or a mismatched part gives") {
  const train_ds ds = make_data();
  run a(ds, 1);
  a.train(4);
  const std::string bytes = a.state().serialize();
  safetensors::metadata meta;
  const tensor_dict file = safetensors::deserialize(bytes, &meta);
  CHECK(meta.at("format") == "pt");
  CHECK(meta.at("tenet.training_state") == "1");
  CHECK(meta.at("tenet.part.model") == "Module");
  CHECK(meta.at("tenet.part.optimizer") == "AdamW");
  CHECK(meta.at("tenet.part.scheduler") == "OneCycleLR");
  CHECK(meta.at("tenet.part.loader") == "DataLoader");
  CHECK(meta.at("tenet.part.rng") == "Generator");
  CHECK(meta.at("tenet.part.step") == "int64");
  CHECK(file.contains("model.fc1.weight"));
  CHECK(file.contains("optimizer.state.0.exp_avg"));
  CHECK(file.contains("scheduler.last_epoch"));
  CHECK(file.contains("loader.num_yielded"));
  CHECK(file.contains("rng.offset"));
  CHECK(file.contains("augment.seed"));
  CHECK(int_of(file, "step") == 4);
  CHECK(int_of(file, "scheduler.last_epoch") == 4);

  // the target: other values everywhere, so that any change shows
  run b(ds, 7, 8);
  b.train(1);
  OtherNet other;  // (its initialization draws from the default generator: before the snapshot)
  const auto snapshot = [&] {
    return std::make_tuple(safetensors::serialize(b.state().state_dict()), default_generator().state().offset,
                           default_generator().state().seed);
  };
  const auto before = snapshot();
  const std::string b_bytes = b.state().serialize();  // to put b back after a load that succeeds
  const auto unchanged_at = [&](int line) {
    INFO("checked at line " << line);
    const auto now = snapshot();
    CHECK(std::get<0>(now) == std::get<0>(before));
    CHECK(std::get<1>(now) == std::get<1>(before));
    CHECK(std::get<2>(now) == std::get<2>(before));
  };

  // truncated or corrupt bytes
  for (std::size_t len : {std::size_t{0}, std::size_t{7}, std::size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    INFO("truncated to " << len);
    CHECK_THROWS_AS(b.state().deserialize(std::string_view(bytes).substr(0, len)), value_error);
    unchanged_at(__LINE__);
  }
  {
    std::string bad = bytes;
    bad[8] = '[';  // the header is no longer a JSON object
    CHECK_THROWS_AS(b.state().deserialize(bad), value_error);
    std::string extra = bytes + "x";
    CHECK_THROWS_WITH(b.state().deserialize(extra), Catch::Contains("extra bytes"));
    unchanged_at(__LINE__);
  }
  // a model's file is not a training_state file
  CHECK_THROWS_WITH(b.state().deserialize(safetensors::serialize(a.model.state_dict(), {{"format", "pt"}})),
                    Catch::Contains("not a training_state file"));
  unchanged_at(__LINE__);
  // a file on disk that is not there
  CHECK_THROWS_WITH(b.state().load(temp_file("absent").string()), Catch::Contains("cannot open"));

  // the checkpoint of a different model: the parts before it in the list are not loaded either
  {
    training_state s{{"step", b.step}, {"rng", default_generator()}, {"optimizer", b.opt}, {"model", other}};
    training_state t{{"step", a.step}, {"rng", default_generator()}, {"optimizer", a.opt}, {"model", a.model}};
    const auto default_before = default_generator().state();
    CHECK_THROWS_WITH(s.deserialize(t.serialize()),
                      Catch::Contains("part \"model\"") && Catch::Contains("fc1.weight") &&
                          Catch::Contains("size mismatch"));
    CHECK_THROWS_AS(s.deserialize(t.serialize()), shape_error);
    CHECK(default_generator().state().offset == default_before.offset);
    unchanged_at(__LINE__);
  }
  // a missing part, an extra part (strict), a part of another kind
  {
    training_state fewer{{"model", a.model}, {"optimizer", a.opt}, {"loader", a.loader}, {"step", a.step}};
    CHECK_THROWS_WITH(b.state().deserialize(fewer.serialize()),
                      Catch::Contains("lacks the part(s) \"scheduler\", \"rng\", \"augment\""));
    unchanged_at(__LINE__);
    training_state mine{{"model", b.model}, {"step", b.step}};
    CHECK_THROWS_WITH(mine.deserialize(bytes), Catch::Contains("does not name: \"augment\", \"loader\""));
    unchanged_at(__LINE__);
    mine.deserialize(bytes, /*strict=*/false);  // the others ignored
    CHECK(b.step == 4);
    check_same_bits(b.model.state_dict(), a.model.state_dict());
    b.state().deserialize(b_bytes);
    unchanged_at(__LINE__);

    optim::Adam adam(b.model.parameters(), {});
    training_state kinds{{"optimizer", adam}};
    CHECK_THROWS_WITH(kinds.deserialize(bytes, false),
                      Catch::Contains("part \"optimizer\" was saved from AdamW, this training_state's \"optimizer\" is Adam"));
    double best = 0.0;
    training_state counter{{"step", best}};
    CHECK_THROWS_WITH(counter.deserialize(bytes, false), Catch::Contains("saved from int64"));
  }
  // a part of the right kind whose values are wrong: the part and the key are named
  {
    tensor_dict d = a.state().state_dict();
    d.set("step", any_tensor(Tensor<float, shape<>>(sizes_t<0>{})));
    CHECK_THROWS_WITH(b.state().deserialize(safetensors::serialize(d, a.state().metadata())),
                      Catch::Contains("part \"step\"") && Catch::Contains("must be an integer"));
    tensor_dict e = a.state().state_dict();
    e.set("loader.batch_size", tenet::detail::int_field(3));
    CHECK_THROWS_WITH(b.state().deserialize(safetensors::serialize(e, a.state().metadata())),
                      Catch::Contains("part \"loader\": DataLoader::load_state_dict: \"batch_size\" is 3"));
    tensor_dict f;
    for (const auto& [k, t] : a.state().state_dict())
      if (k != "optimizer.param_groups.0.lr") f.insert(k, t);
    CHECK_THROWS_WITH(b.state().deserialize(safetensors::serialize(f, a.state().metadata())),
                      Catch::Contains("part \"optimizer\"") && Catch::Contains("param_groups.0.lr"));
    tensor_dict g = a.state().state_dict();
    g.insert("ghost.x", tenet::detail::int_field(1));
    CHECK_THROWS_WITH(b.state().deserialize(safetensors::serialize(g, a.state().metadata())),
                      Catch::Contains("\"ghost.x\" belongs to no part"));
    unchanged_at(__LINE__);
  }
  // part names
  training_state s;
  CHECK_THROWS_AS(s.add("a.b", b.step), value_error);
  CHECK_THROWS_AS(s.add("", b.step), value_error);
  s.add("step", b.step);
  CHECK_THROWS_WITH(s.add("step", b.opt), Catch::Contains("already there"));
  CHECK(s.names() == std::vector<std::string>{"step"});
}
