// The autograd sweep (issue 26): run.sh builds and runs it; see there.
#include "harness.hpp"
void part1(); void part2(); void part3(); void part4(); void part5();
int main(int argc, char** argv) {
  std::string which = argc > 1 ? argv[1] : "12345";
  if (which.find('1') != std::string::npos) part1();
  if (which.find('2') != std::string::npos) part2();
  if (which.find('3') != std::string::npos) part3();
  if (which.find('4') != std::string::npos) part4();
  if (which.find('5') != std::string::npos) part5();
  std::printf("\n%d ok/refused/no-grad, %d problems\n", sw::n_ok, sw::n_problem);
}
