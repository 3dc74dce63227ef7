// a block reduction
#define N 256
extern __shared__ __align__(16) float dynamic[];
__device__ float twice(float x) { return 2 * x; }
extern "C" __global__ __launch_bounds__(256) void block_sum(const double* __restrict__ x, double* total, long long n) {
  __shared__ double partial[N];
  extern __shared__ float more[];
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? x[i] : 0.0;  /* comment { */
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, partial[0]);
  const char* text = "}{ __global__ void fake(";
}
template <typename T> __global__ void templated(T* x) {}
extern "C" __global__ void declared(unsigned int, std::int64_t y, size_t z);
