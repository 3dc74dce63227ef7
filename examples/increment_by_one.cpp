// Without CUDA this file is compiled by g++: the kernel runs on the CPU, and launching it on a GPU would throw an
// error saying to compile it with nvcc.
#include "increment_by_one.inc"
