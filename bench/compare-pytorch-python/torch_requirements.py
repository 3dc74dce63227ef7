"""Prints, one per line, the requirements of a PyTorch wheel that `import torch` needs on a machine of this kind
(bench/compare-pytorch-python/run --torch pypi installs them beside the wheel).

Note [PyTorch from PyPI without its GPU stack]
PyPI's torch wheel is the CUDA build, and its Python module loads libtorch_cuda.so even on a CPU, so `import torch`
needs the CUDA libraries; the wheel's dependencies bring them all, about 3 GB. A machine of this kind has CUDA 13 in
/usr/local/cuda, which ld.so finds: cuBLAS, cuFFT, cuSOLVER, cuSPARSE, nvJitLink, NVRTC and cuDNN come from there
(none of them runs in a CPU benchmark). What it lacks, or has in a version whose symbols libtorch_cuda does not
find, comes from the wheels the metadata names: the CUDA runtime, CUPTI and cuFile (of the toolkit pinned by
cuda-toolkit[...]), NCCL (the machine's 2.28 lacks ncclCommResume), cuSPARSELt and NVSHMEM: about 520 MB.
Triton and cuda-bindings are not needed to import torch or to run it on the CPU.
"""
import re
import sys
import zipfile

# Requirements left out: provided by /usr/local/cuda, or not loaded by `import torch` (see the note above).
LEFT_OUT = {"triton", "cuda-bindings", "nvidia-cudnn-cu13", "setuptools"}
# The parts of the CUDA toolkit the machine's CUDA does not provide.
TOOLKIT_PARTS = "cudart,cupti,cufile"


def requirements(wheel):
    with zipfile.ZipFile(wheel) as z:
        metadata = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(metadata).decode().splitlines()
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        spec, _, marker = line[len("Requires-Dist:"):].partition(";")
        if "extra ==" in marker:
            continue
        spec = spec.strip()
        name = re.match(r"[A-Za-z0-9._-]+", spec).group(0).lower()
        if name in LEFT_OUT:
            continue
        if name == "cuda-toolkit":
            spec = re.sub(r"\[[^]]*\]", f"[{TOOLKIT_PARTS}]", spec)
        yield spec.replace(" ", "")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: torch_requirements.py TORCH_WHEEL")
    for spec in requirements(sys.argv[1]):
        print(spec)


if __name__ == "__main__":
    main()
