#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// nn::Sequential<M...> (a fixed chain, its modules named "0", "1", ... as torch's) and
// nn::ModuleList<M> (a growable list of modules of one type, named "0", "1", ...).
#include <cstddef>
#include <deque>
#include <string>
#include <tuple>
#include <utility>

#include <tenet/error.hpp>
#include <tenet/nn/module.hpp>

namespace tenet::nn {

template <class... M>
class Sequential : public Module {
  static_assert(sizeof...(M) > 0, "tenet: nn::Sequential needs at least one module");
  static_assert((std::is_base_of_v<Module, M> && ...), "tenet: nn::Sequential holds nn::Module types");

 public:
  /// Each module default-constructed (set their public options afterwards: `seq.get<1>().p = 0.2`).
  Sequential() { register_all(std::index_sequence_for<M...>{}); }
  std::string type_name() const override { return "Sequential"; }
  static constexpr std::size_t size() { return sizeof...(M); }
  template <std::size_t I>
  auto& get() {
    return std::get<I>(mods_);
  }
  template <std::size_t I>
  const auto& get() const {
    return std::get<I>(mods_);
  }
  template <Expression X>
  auto operator()(const X& x) const {
    return apply<0>(x);
  }

 private:
  template <std::size_t... I>
  void register_all(std::index_sequence<I...>) {
    (register_module_at(std::to_string(I),
                        [](const Module& self) -> Module& {
                          return std::get<I>(const_cast<Sequential&>(static_cast<const Sequential&>(self)).mods_);
                        }),
     ...);
  }
  template <std::size_t I, class X>
  auto apply(const X& x) const {
    if constexpr (I + 1 == sizeof...(M)) return std::get<I>(mods_)(x);
    else return apply<I + 1>(std::get<I>(mods_)(x));
  }
  std::tuple<M...> mods_;
};

template <class M>
class ModuleList : public Module {
  static_assert(std::is_base_of_v<Module, M>, "tenet: nn::ModuleList holds nn::Module types");

 public:
  ModuleList() = default;
  /// The list moves with its elements (they keep their addresses); the source is left empty.
  ModuleList(ModuleList&& o) : Module(std::move(o)), mods_(std::move(o.mods_)) { o.forget_elements(); }
  ModuleList& operator=(ModuleList&& o) {
    if (this != &o) {
      Module::operator=(std::move(o));
      mods_ = std::move(o.mods_);
      o.forget_elements();
    }
    return *this;
  }
  /// n default-constructed modules.
  explicit ModuleList(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) append();
  }
  /// Appends a module constructed from args and returns it.
  template <class... A>
  M& append(A&&... args) {
    M& m = mods_.emplace_back(std::forward<A>(args)...);
    const std::size_t i = mods_.size() - 1;
    register_module_at(std::to_string(i), [i](const Module& self) -> Module& {
      return const_cast<ModuleList&>(static_cast<const ModuleList&>(self)).mods_[i];
    });
    return m;
  }
  std::size_t size() const { return mods_.size(); }
  std::string type_name() const override { return "ModuleList"; }
  /// torch's ModuleList repr: a run of modules that print the same is one line, "(0-5): 6 x ...".
  std::string repr() const override {
    if (mods_.empty()) return type_name() + "()";
    std::string s = type_name() + "(";
    for (std::size_t i = 0; i < mods_.size();) {
      const std::string r = mods_[i].repr();
      std::size_t j = i;
      while (j + 1 < mods_.size() && mods_[j + 1].repr() == r) ++j;
      const std::string local = i == j ? "(" + std::to_string(i) + "): " + r
                                       : "(" + std::to_string(i) + "-" + std::to_string(j) + "): " +
                                             std::to_string(j - i + 1) + " x " + r;
      s += "\n  " + detail::add_indent(local, 2);
      i = j + 1;
    }
    return s + "\n)";
  }
  M& operator[](std::int64_t i) { return mods_[index(i)]; }
  const M& operator[](std::int64_t i) const { return mods_[index(i)]; }
  auto begin() { return mods_.begin(); }
  auto end() { return mods_.end(); }
  auto begin() const { return mods_.begin(); }
  auto end() const { return mods_.end(); }

 private:
  void forget_elements() {
    mods_.clear();
    clear_registry();
  }
  std::size_t index(std::int64_t i) const {
    const auto n = static_cast<std::int64_t>(mods_.size());
    if (i < -n || i >= n)
      throw index_error("tenet: nn::ModuleList: index " + std::to_string(i) + " is out of range for a list of " +
                        std::to_string(n) + " modules");
    return static_cast<std::size_t>(i < 0 ? i + n : i);
  }
  std::deque<M> mods_;
};

}  // namespace tenet::nn
