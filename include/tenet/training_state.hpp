#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// tenet::training_state: the whole state of a training run as one safetensors file, to stop a run
// and resume it exactly (issue 37, item 5). It holds named references to the objects that make up
// the run, as the dict of torch.save({'model': model.state_dict(), 'optimizer': ...}) or of
// torch.distributed.checkpoint's save/load, and saves or loads all of them at once:
//
//   std::int64_t step = 0;
//   tenet::training_state state{{"model", model}, {"optimizer", opt}, {"scheduler", sched},
//                               {"loader", loader}, {"rng", tenet::default_generator()}, {"step", step}};
//   state.save("run.safetensors");
//   ...                                  // later, into objects built as before:
//   state.load("run.safetensors");       // every part checked first, then every part loaded
//
// A part is a module, an optimizer, an LR scheduler, a DataLoader (its position, mid-epoch too), a
// tenet::Generator (tenet::default_generator() is the one manual_seed seeds), an std::int64_t or
// double counter, or any object with `tensor_dict state_dict() const` and
// `load_state_dict(const tensor_dict&)` (and, optionally, `check_state_dict(const tensor_dict&)
// const`). The file: each part's state_dict under "<part>.<key>" (a counter: one scalar named
// "<part>"), and in the metadata {"format": "pt", "tenet.training_state": "1",
// "tenet.part.<part>": "<kind>"} where the kind is the optimizer's or scheduler's class name,
// "DataLoader", "Generator", "int64", "float64", "Module" or "stateful". It is an ordinary
// safetensors file: safetensors.torch.load_file reads it.
#include <concepts>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <tenet/data.hpp>
#include <tenet/error.hpp>
#include <tenet/factories.hpp>  // Generator
#include <tenet/nn/module.hpp>
#include <tenet/optim.hpp>
#include <tenet/safetensors.hpp>
#include <tenet/tensor_dict.hpp>


namespace tenet {

/// An object whose state a training_state can save and load.
template <class T>
concept stateful = requires(T& t, const T& c, const tensor_dict& d) {
  { c.state_dict() } -> std::convertible_to<tensor_dict>;
  t.load_state_dict(d);
};

namespace detail {
template <class T>
inline constexpr bool is_data_loader = false;
template <class D>
inline constexpr bool is_data_loader<data::DataLoader<D>> = true;
}  // namespace detail

/// One part of a training_state: a reference to the object (which must outlive the
/// training_state) and how to save, check and load its state.
class state_ref {
 public:
  template <class T>
    requires(stateful<T> && !std::is_const_v<T>)
  state_ref(T& obj) {  // NOLINT(google-explicit-constructor): {"model", model} reads as torch's dict
    if constexpr (std::derived_from<T, nn::Module>) kind_ = "Module";
    else if constexpr (std::derived_from<T, optim::Optimizer> || std::derived_from<T, optim::LRScheduler>) kind_ = obj.name();
    else if constexpr (detail::is_data_loader<T>) kind_ = "DataLoader";
    else kind_ = "stateful";
    save_ = [&obj] { return tensor_dict(obj.state_dict()); };
    load_ = [&obj](const tensor_dict& d) { obj.load_state_dict(d); };
    if constexpr (requires(const T& c, const tensor_dict& d) { c.check_state_dict(d); })
      check_ = [&obj](const tensor_dict& d) { obj.check_state_dict(d); };
  }
  /// A random stream: "seed" and "offset" (int64 scalars with the bits of the uint64 values).
  state_ref(Generator& g) : kind_("Generator") {  // NOLINT(google-explicit-constructor)
    save_ = [&g] {
      const auto s = g.state();
      tensor_dict d;
      d.insert("seed", detail::int_field(static_cast<std::int64_t>(s.seed)));
      d.insert("offset", detail::int_field(static_cast<std::int64_t>(s.offset)));
      return d;
    };
    const auto read = [](const tensor_dict& d) {
      detail::state_reader r(d, "Generator");
      const auto seed = static_cast<std::uint64_t>(r.integer("seed"));
      const auto offset = static_cast<std::uint64_t>(r.integer("offset"));
      r.finish();
      return detail::philox_draw{seed, offset};
    };
    check_ = [read](const tensor_dict& d) { (void)read(d); };
    load_ = [read, &g](const tensor_dict& d) { g.set_state(read(d)); };
  }
  /// A counter (the step, the epoch): one int64 scalar.
  state_ref(std::int64_t& v) : kind_("int64"), scalar_(true) {  // NOLINT(google-explicit-constructor)
    save_ = [&v] { return one(detail::int_field(v)); };
    check_ = [](const tensor_dict& d) { (void)reader(d).integer(""); };
    load_ = [&v](const tensor_dict& d) { v = reader(d).integer(""); };
  }
  /// A number (a best loss): one float64 scalar.
  state_ref(double& v) : kind_("float64"), scalar_(true) {  // NOLINT(google-explicit-constructor)
    save_ = [&v] { return one(detail::real_field(v)); };
    check_ = [](const tensor_dict& d) { (void)reader(d).real(""); };
    load_ = [&v](const tensor_dict& d) { v = reader(d).real(""); };
  }

  /// "Module", "AdamW", "OneCycleLR", "DataLoader", "Generator", "int64", "float64" or "stateful".
  const std::string& kind() const { return kind_; }

 private:
  friend class training_state;
  /// A counter's one value is the dict's key "" (the part's name in the file).
  static detail::state_reader reader(const tensor_dict& d) { return detail::state_reader(d, "the value"); }
  static tensor_dict one(any_tensor t) {
    tensor_dict d;
    d.insert("", std::move(t));
    return d;
  }
  std::string kind_;
  bool scalar_ = false;  // one tensor, named as the part (its state_dict's one key is "")
  std::function<tensor_dict()> save_;
  std::function<void(const tensor_dict&)> check_;  // empty: the object has no check_state_dict
  std::function<void(const tensor_dict&)> load_;
};

/// The parts of a training run by name (see the top of this file).
class training_state {
 public:
  using part = std::pair<std::string, state_ref>;

  training_state() = default;
  training_state(std::initializer_list<part> parts) {
    for (const auto& [n, r] : parts) add(n, r);
  }
  /// Adds a part; value_error when the name is empty, holds a '.', or is taken.
  training_state& add(const std::string& name, state_ref ref) {
    if (name.empty() || name.find('.') != std::string::npos)
      throw value_error("tenet: training_state: the part name \"" + name +
                        "\" must be non-empty and hold no '.' (the file's names are \"<part>.<key>\")");
    if (!detail::json::valid_utf8(name))
      throw value_error("tenet: training_state: the part name " + detail::json::quote(name) + " is not valid UTF-8");
    for (const auto& [n, r] : parts_)
      if (n == name) throw value_error("tenet: training_state: the part \"" + name + "\" is already there");
    parts_.emplace_back(name, std::move(ref));
    return *this;
  }
  /// The part names, in the order they were added.
  std::vector<std::string> names() const {
    std::vector<std::string> v;
    for (const auto& [n, r] : parts_) v.push_back(n);
    return v;
  }

  /// Every part's state_dict under "<part>.<key>" (a counter as "<part>"); the tensors share the
  /// objects' storage (serialize() copies them).
  tensor_dict state_dict() const {
    tensor_dict d;
    for (const auto& [n, r] : parts_)
      for (const auto& [k, t] : r.save_()) d.insert(r.scalar_ ? n : n + "." + k, t);
    return d;
  }
  /// The metadata saved with it: the format and each part's kind.
  safetensors::metadata metadata() const {
    safetensors::metadata m{{"format", "pt"}, {std::string(version_key), "1"}};
    for (const auto& [n, r] : parts_) m[std::string(part_key) + n] = r.kind_;
    return m;
  }
  /// The bytes of the safetensors file.
  std::string serialize() const { return safetensors::serialize(state_dict(), metadata()); }
  /// Writes the file (value_error when it cannot be written).
  void save(const std::string& path) const {
    const std::string bytes = serialize();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) throw value_error("tenet: training_state::save: " + path + ": cannot open the file for writing");
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) throw value_error("tenet: training_state::save: " + path + ": writing failed");
  }

  /// Loads every part from the bytes of a file save() wrote. Everything is checked before any part
  /// changes: the file (a value_error for a truncated or corrupt one, or one without
  /// training_state metadata), that it has every part (missing ones listed) and, with strict, no
  /// other; that each part's kind is the one saved (an AdamW state does not load into Adam; a
  /// module's class name is not checked, its keys, dtypes and sizes are); then each part's own
  /// checks (the errors of its load_state_dict, prefixed with the part's name: a module's are
  /// value_error / dtype_error / shape_error). Only then are the parts loaded, in order. (A part
  /// of a type without check_state_dict is checked by its own load; those load first.)
  void deserialize(std::string_view bytes, bool strict = true, const std::string& where = "buffer") {
    safetensors::metadata meta;
    const tensor_dict all = safetensors::deserialize(bytes, &meta, where);
    const std::string at = "tenet: training_state::load: " + where + ": ";
    const auto fail = [&](const std::string& why) { throw value_error(at + why); };
    if (meta.find(std::string(version_key)) == meta.end())
      fail("not a training_state file (its metadata has no \"" + std::string(version_key) +
           "\"); a file of safetensors::save_model loads with safetensors::load_model");
    if (meta.at(std::string(version_key)) != "1")
      fail("training_state format version \"" + meta.at(std::string(version_key)) + "\", this tenet reads \"1\"");
    // the file's parts and their kinds
    std::map<std::string, std::string> kinds;
    for (const auto& [k, v] : meta)
      if (k.starts_with(part_key)) kinds[k.substr(part_key.size())] = v;
    std::map<std::string, tensor_dict> dicts;
    for (const auto& [name, t] : all) {
      const auto dot = name.find('.');
      const std::string p = name.substr(0, dot);
      const auto kind = kinds.find(p);
      if (kind == kinds.end())
        fail("the tensor \"" + name + "\" belongs to no part the metadata declares (the file is corrupt)");
      const bool scalar = kind->second == "int64" || kind->second == "float64";
      if (scalar != (dot == std::string::npos))
        fail("the tensor \"" + name + "\" does not fit part \"" + p + "\" of kind " + kind->second +
             " (the file is corrupt)");
      dicts[p].insert(scalar ? std::string() : name.substr(dot + 1), t);
    }
    std::string missing, unexpected;
    for (const auto& [n, r] : parts_)
      if (!kinds.count(n)) missing += (missing.empty() ? "\"" : ", \"") + n + "\"";
    if (strict)
      for (const auto& [n, k] : kinds) {
        bool mine = false;
        for (const auto& [m, r] : parts_) mine = mine || m == n;
        if (!mine) unexpected += (unexpected.empty() ? "\"" : ", \"") + n + "\"";
      }
    if (!missing.empty() || !unexpected.empty())
      fail((missing.empty() ? "" : "the file lacks the part(s) " + missing + "; ") +
           (unexpected.empty() ? "" : "the file holds part(s) this training_state does not name: " + unexpected + "; ") +
           "the file's parts are " + list(kinds) + " (load(path, false) ignores the file's other parts)");
    for (const auto& [n, r] : parts_)
      if (kinds.at(n) != r.kind_)
        fail("part \"" + n + "\" was saved from " + kinds.at(n) + ", this training_state's \"" + n + "\" is " + r.kind_);
    static const tensor_dict empty;
    const auto dict_of = [&](const std::string& n) -> const tensor_dict& {
      const auto it = dicts.find(n);
      return it == dicts.end() ? empty : it->second;
    };
    for (const auto& [n, r] : parts_)
      if (r.check_) in_part(at, n, [&] { r.check_(dict_of(n)); });
    for (int checked = 0; checked < 2; ++checked)  // the parts that have no check first
      for (const auto& [n, r] : parts_)
        if (static_cast<bool>(r.check_) == static_cast<bool>(checked)) in_part(at, n, [&] { r.load_(dict_of(n)); });
  }
  /// Reads the file at path and loads it (deserialize's checks; nothing changes when one fails).
  void load(const std::string& path, bool strict = true) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw value_error("tenet: training_state::load: " + path + ": cannot open the file for reading");
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    deserialize(bytes, strict, path);
  }

 private:
  static constexpr std::string_view version_key = "tenet.training_state";
  static constexpr std::string_view part_key = "tenet.part.";

  /// Runs f, prefixing an error's message with the part's name (the error keeps its type).
  template <class F>
  static void in_part(const std::string& at, const std::string& part, F&& f) {
    const auto text = [&](const std::exception& e) {
      std::string_view w = e.what();
      if (w.starts_with("tenet: ")) w.remove_prefix(7);
      return at + "part \"" + part + "\": " + std::string(w);
    };
    try {
      f();
    } catch (const shape_error& e) {
      throw shape_error(text(e));
    } catch (const dtype_error& e) {
      throw dtype_error(text(e));
    } catch (const index_error& e) {
      throw index_error(text(e));
    } catch (const device_error& e) {
      throw device_error(text(e));
    } catch (const value_error& e) {
      throw value_error(text(e));
    }
  }
  static std::string list(const std::map<std::string, std::string>& kinds) {
    std::string s;
    for (const auto& [n, k] : kinds) s += (s.empty() ? "" : ", ") + ("\"" + n + "\" (" + k + ")");
    return s.empty() ? "none" : s;
  }

  std::vector<part> parts_;
};

}  // namespace tenet
