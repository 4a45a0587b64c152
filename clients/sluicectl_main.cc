#include <iostream>
#include <string>
#include <vector>

#include "clients/sluicectl.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return sluice::ctl::Run(args, std::cout, std::cerr);
}
