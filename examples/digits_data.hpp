// The 8x8 handwritten digits of examples/data/digits.txt (scikit-learn's load_digits, UCI, CC BY
// 4.0), read for the examples that train on them (digits_mlp, train_resume, ddp_digits).
#pragma once
#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <tenet/error.hpp>

/// One image per row: its label 0..9 and its 64 pixels / 16. Reads digits.txt ("<label> <64
/// base-17 digits>" per line, '#' comments); `who` names the program in the errors.
inline std::vector<std::pair<int, std::vector<float>>> read_digits(const std::string& path, const std::string& who) {
  std::ifstream in(path);
  if (!in) throw tenet::value_error(who + ": cannot open " + path);
  std::vector<std::pair<int, std::vector<float>>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    int label = -1;
    std::string pixels;
    ls >> label >> pixels;
    if (label < 0 || label > 9 || pixels.size() != 64) throw tenet::value_error(who + ": malformed line: " + line);
    std::vector<float> v(64);
    for (std::size_t i = 0; i < 64; ++i) {
      const char c = pixels[i];
      const int p = c >= '0' && c <= '9' ? c - '0' : c - 'a' + 10;
      if (p < 0 || p > 16) throw tenet::value_error(who + ": bad pixel in line: " + line);
      v[i] = static_cast<float>(p) / 16.0f;
    }
    rows.emplace_back(label, std::move(v));
  }
  return rows;
}
