// A kernel written once, launched with explicit blocks and threads (the Numba tutorial's increment_by_one).
// Compiled by nvcc, the same lambda runs on the GPU and on the CPU.
#include "increment_by_one.inc"
