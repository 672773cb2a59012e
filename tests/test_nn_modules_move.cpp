// Modules that register themselves (TENET_MODULE) and move (issue 37, item 6): the moved module's
// registry names its own members, trains, saves and prints as the original; a module registered by
// reference refuses to move with a value_error; TENET_MODULE before its fields is refused.
#include <tenet/tenet.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

using namespace tenet;

namespace {

struct Net : nn::Module {
  nn::Linear<4, 8> fc1;
  nn::Linear<8, 3> fc2;
  Tensor<float, shape<3>> scale = full<float, shape<3>>(1.5f);
  Tensor<float, shape<3>> seen = zeros<float, shape<3>>();
  nn::Sequential<nn::Linear<3, 3>, nn::ReLU> head;
  nn::ModuleList<nn::LayerNorm<3>> norms{2};
  nn::BatchNorm1d<3> bn;
  TENET_MODULE(fc1, fc2, scale, head, norms, bn);
  TENET_MODULE_BUFFERS(seen);

  template <Expression X>
  auto operator()(const X& x) const {
    return norms[1](norms[0](head(fc2(relu(fc1(x))) * scale)));
  }
};

/// A module registered by reference, the pre-TENET_MODULE way.
struct ByReference : nn::Module {
  nn::Linear<2, 2> fc;
  Tensor<float, shape<2>> w = ones<float, shape<2>>();
  ByReference() {
    register_module("fc", fc);
    register_parameter("w", w);
  }
};

/// Member pointers in a constructor: movable.
struct ByMemberPointer : nn::Module {
  nn::Linear<2, 2> fc;
  Tensor<float, shape<2>> w = ones<float, shape<2>>();
  Tensor<float, shape<2>> stat = zeros<float, shape<2>>();
  ByMemberPointer() {
    register_module("fc", &ByMemberPointer::fc);
    register_parameter("w", &ByMemberPointer::w);
    register_buffer("stat", &ByMemberPointer::stat, false);
  }
};

struct FieldsAfter : nn::Module {
  TENET_MODULE(fc);
  nn::Linear<2, 2> fc;
};

/// Outer module holding an inner TENET_MODULE module: nesting moves too.
struct Outer : nn::Module {
  Net inner;
  nn::Linear<3, 1> out;
  TENET_MODULE(inner, out);
};

std::string printed(const nn::Module& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}

std::vector<float> values(const any_tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  t.copy_to_host(v.data());
  return v;
}

/// Every state_dict entry of `a` has `b`'s name, dtype, sizes and values.
void check_same_state(const nn::Module& a, const nn::Module& b) {
  const auto da = a.state_dict(), db = b.state_dict();
  REQUIRE(da.size() == db.size());
  auto ib = db.begin();
  for (const auto& [n, v] : da) {
    REQUIRE(n == ib->first);
    REQUIRE(v.sizes() == ib->second.sizes());
    REQUIRE(v.scalar_type() == ib->second.scalar_type());
    if (v.scalar_type() == dtype::float32) CHECK(values(v) == values(ib->second));
    ++ib;
  }
}

/// The registered tensors of m are m's own members: their addresses lie inside m (a ModuleList's
/// elements, on the heap, excepted).
void check_addresses_inside(const nn::Module& m, std::size_t size) {
  const auto* lo = reinterpret_cast<const char*>(dynamic_cast<const void*>(&m));
  for (const auto& [n, r] : m.named_parameters()) {
    if (n.find("norms.") != std::string::npos) continue;
    const auto* p = static_cast<const char*>(r.slot().address());
    INFO(n);
    CHECK((p >= lo && p < lo + size));
  }
}

Net make_net(bool flip) {
  manual_seed(flip ? 1 : 2);
  Net a, b;
  return flip ? std::move(a) : std::move(b);  // two candidates: no copy elision, a real move
}

}  // namespace

TEST_CASE("nn move: TENET_MODULE registers fields in order, as register_* did") {
  Net n;
  std::vector<std::string> names;
  for (const auto& [k, v] : n.state_dict()) names.push_back(k);
  const std::vector<std::string> want = {"scale",           "seen",           "fc1.weight",         "fc1.bias",
                                         "fc2.weight",      "fc2.bias",       "head.0.weight",      "head.0.bias",
                                         "norms.0.weight",  "norms.0.bias",   "norms.1.weight",     "norms.1.bias",
                                         "bn.weight",       "bn.bias",        "bn.running_mean",    "bn.running_var",
                                         "bn.num_batches_tracked"};
  CHECK(names == want);
  CHECK(n.named_parameters().size() == 13);  // the buffers are not parameters
  CHECK(n.named_buffers().size() == 4);
  for (const auto& [k, p] : n.named_parameters()) CHECK(p.requires_grad());
  CHECK(n.named_children().size() == 5);
  CHECK(n.named_children()[3].second == &n.norms);
}

TEST_CASE("nn move: a moved module's registry names its own members") {
  manual_seed(3);
  Net a;
  const tensor_dict before = [&] {
    tensor_dict d;
    for (const auto& [k, v] : a.state_dict()) d.insert(k, v.clone());
    return d;
  }();
  const std::string text = printed(a);
  a.eval();
  Net b = std::move(a);
  CHECK_FALSE(b.training());
  CHECK_FALSE(b.named_children()[0].second->training());
  check_addresses_inside(b, sizeof(Net));
  CHECK(&b.named_parameters()[1].second.get<float, shape<8, 4>>() == &b.fc1.weight);
  CHECK(b.named_children()[2].second == &b.head);
  CHECK(&b.head.named_parameters()[0].second.get<float, shape<3, 3>>() == &b.head.get<0>().weight);
  CHECK(&b.norms.named_parameters()[2].second.get<float, shape<3>>() == &b.norms[1].weight);
  CHECK(printed(b) == text);
  Net ref;  // another instance with the saved values, compared through the state_dict
  ref.load_state_dict(before);
  check_same_state(b, ref);
  for (const auto& [k, p] : b.named_parameters()) CHECK(p.requires_grad());
  // the moved-from module stays a valid object: its registry still answers (its ModuleList is empty)
  CHECK(a.named_parameters().size() == 9);
  CHECK(a.norms.size() == 0);
  // move assignment
  Net c;
  c = std::move(b);
  check_addresses_inside(c, sizeof(Net));
  check_same_state(c, ref);
}

TEST_CASE("nn move: a moved module trains; its optimizer updates its own tensors") {
  Net a = make_net(true);
  Net b = make_net(true);  // the same initial values
  check_same_state(a, b);
  std::vector<Net> many;
  many.reserve(1);
  many.push_back(std::move(a));
  many.emplace_back();  // grows: the first is moved again
  Net& m = many[0];
  check_addresses_inside(m, sizeof(Net));
  auto x = randn<float, shape<dyn, 4>>(5);
  optim::SGD opt_m(m.parameters(), {.lr = 0.1});
  optim::SGD opt_b(b.parameters(), {.lr = 0.1});
  for (int s = 0; s < 3; ++s) {
    Tensor<float, shape<>> lm = sum(m(x));
    lm.backward();
    opt_m.step();
    opt_m.zero_grad();
    Tensor<float, shape<>> lb = sum(b(x));
    lb.backward();
    opt_b.step();
    opt_b.zero_grad();
    CHECK(lm.item() == lb.item());
  }
  check_same_state(m, b);
  // the parameters did move away from their initial values
  Net fresh = make_net(true);
  CHECK(values(any_tensor(fresh.fc1.weight)) != values(any_tensor(m.fc1.weight)));
}

TEST_CASE("nn move: nesting, member pointers, and load_state_dict after a move") {
  manual_seed(5);
  Outer o;
  Outer p = std::move(o);
  check_addresses_inside(p, sizeof(Outer));
  CHECK(p.named_parameters().size() == 15);
  CHECK(p.named_children()[0].second == &p.inner);
  ByMemberPointer q;
  ByMemberPointer r = std::move(q);
  CHECK(&r.named_parameters()[0].second.get<float, shape<2>>() == &r.w);
  CHECK(r.named_buffers()[0].second.slot().address() == &r.stat);
  CHECK(r.state_dict().size() == 3);  // stat is not persistent
  tensor_dict d;
  d.insert("w", any_tensor(full<float, shape<2>>(7.f)));
  d.insert("fc.weight", any_tensor(zeros<float, shape<2, 2>>()));
  d.insert("fc.bias", any_tensor(zeros<float, shape<2>>()));
  r.load_state_dict(d);
  CHECK(values(any_tensor(r.w)) == std::vector<float>{7.f, 7.f});
}

TEST_CASE("nn move: registered by reference refuses to move; TENET_MODULE before its fields is refused") {
  ByReference a;
  try {
    ByReference b = std::move(a);
    FAIL("moved");
  } catch (const value_error& e) {
    const std::string m = e.what();
    CHECK(m.find("ByReference") != std::string::npos);
    CHECK(m.find("parameter \"w\"") != std::string::npos);
    CHECK(m.find("registered by reference") != std::string::npos);
  }
  CHECK(a.named_parameters().size() == 3);  // the source is untouched
  ByReference c;
  try {
    c = std::move(a);
    FAIL("moved");
  } catch (const value_error& e) {
    CHECK(std::string(e.what()).find("registered by reference") != std::string::npos);
  }
  CHECK(c.named_parameters().size() == 3);
  try {
    FieldsAfter f;
    FAIL("constructed");
  } catch (const value_error& e) {
    CHECK(std::string(e.what()).find("declared after it") != std::string::npos);
  }
}
