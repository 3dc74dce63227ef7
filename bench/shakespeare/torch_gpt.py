"""nanoGPT's shakespeare_char training in PyTorch eager, on the batches and schedule strata-train --task shakespeare
uses, for bench/shakespeare/run: the model is nanoGPT's model.py itself (python/tests/nanogpt/model_torch.py), the
loop its train.py (configure_optimizers' AdamW, fused on a GPU only, warm-up then cosine, gradient clipping at 1.0). The batches are strata-train's (Note [Batches are a function of the
step] in tools/train/shakespeare.cpp): a hash of (seed, stream, index, row), so both frameworks train on the same
characters in the same order. Prints one JSON document as strata-train --json does.
"""
import argparse
import contextlib
import importlib.util
import json
import math
import pathlib
import resource
import sys
import time

import torch

MASK64 = (1 << 64) - 1


def mix_seed(seed, a, b):  # tools/train/job_checkpoint.cpp
    z = (((seed * 1000003 + a) & MASK64) * 1000003 + b) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def batch_offset(seed, stream, index, row, split_size, block):  # GptTrainer::batch_offset
    return mix_seed((seed + stream * 0x9E3779B97F4A7C15) & MASK64, index, row) % (split_size - block)


def nanogpt():
    """nanoGPT's own model.py (python/tests/nanogpt/model_torch.py, unchanged but for its header)."""
    path = pathlib.Path(__file__).resolve().parents[2] / "python" / "tests" / "nanogpt" / "model_torch.py"
    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["nanogpt_model"] = module  # dataclasses look the module up while the class is made
    spec.loader.exec_module(module)
    return module


RECIPES = {  # tools/train/shakespeare.cpp's gpt_recipe
    "cpu": dict(block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False, batch_size=12, iters=2000,
                eval_iters=20),
    "gpu": dict(block_size=256, n_layer=6, n_head=6, n_embd=384, dropout=0.2, bias=False, batch_size=64, iters=5000,
                eval_iters=200),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--recipe", default="cpu")
    p.add_argument("--iters", type=int)
    p.add_argument("--eval-interval", type=int, default=250)
    p.add_argument("--eval-iters", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--amp", choices=["bf16", "f16"])
    p.add_argument("--compile", action="store_true")
    a = p.parse_args()
    c = dict(RECIPES[a.recipe])
    iters = a.iters or c["iters"]
    eval_iters = a.eval_iters or c["eval_iters"]
    text = open(a.data, "rb").read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    n = len(data) * 9 // 10
    splits = [data[:n], data[n:]]
    c["vocab_size"] = len(chars)
    torch.manual_seed(a.seed)
    model_py = nanogpt()
    config = model_py.GPTConfig(**{k: c[k] for k in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd",
                                                      "dropout", "bias")})
    with contextlib.redirect_stdout(sys.stderr):  # nanoGPT prints as it builds; stdout is the JSON document
        model = model_py.GPT(config).to(a.device)
        opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), a.device.split(":")[0])
    run = torch.compile(model) if a.compile else model
    T, B = c["block_size"], c["batch_size"]
    amp_dtype = {"bf16": torch.bfloat16, "f16": torch.float16}.get(a.amp)
    scaler = torch.amp.GradScaler(enabled=a.amp == "f16")

    def batch(split, stream, index, first_row, rows):
        d = splits[split]
        starts = [batch_offset(a.seed, stream, index, first_row + r, len(d), T) for r in range(rows)]
        x = torch.stack([d[s:s + T] for s in starts])
        y = torch.stack([d[s + 1:s + 1 + T] for s in starts])
        return x.to(a.device), y.to(a.device)

    def lr_at(it):  # GptTrainer::lr_at, nanoGPT's get_lr
        if it < 100:
            return 1e-3 * (it + 1) / 101
        ratio = (it - 100) / max(1, iters - 100)
        return 1e-4 + 0.5 * (1 + math.cos(math.pi * ratio)) * (1e-3 - 1e-4)

    def autocast():
        return torch.autocast(a.device.split(":")[0], dtype=amp_dtype, enabled=amp_dtype is not None)

    @torch.no_grad()
    def evaluate():
        model.eval()
        out = []
        for split in range(2):
            losses = []
            for k in range(eval_iters):
                with autocast():
                    losses.append(run(*batch(split, 1 + split, k, 0, B))[1].float())
            out.append(torch.stack(losses).mean().item())
        model.train()
        return out

    def sync():
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()

    reports = []
    tr, va = evaluate()
    reports.append({"iteration": 0, "train_loss": tr, "val_loss": va})
    it = 0
    while it < iters:
        end = min(iters, (it // a.eval_interval + 1) * a.eval_interval)
        first = it
        loss_sum = torch.zeros((), device=a.device)
        sync()
        start = time.perf_counter()
        while it < end:
            for g in opt.param_groups:
                g["lr"] = lr_at(it)
            x, y = batch(0, 0, it, 0, B)
            with autocast():
                _, loss = run(x, y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            loss_sum += loss.detach().float()
            it += 1
        sync()
        seconds = time.perf_counter() - start
        tr, va = evaluate()
        reports.append({"iteration": it, "train_loss": tr, "val_loss": va,
                        "step_loss": loss_sum.item() / (it - first), "seconds": seconds,
                        "tokens_per_second": (it - first) * B * T / seconds})
    print(json.dumps({"framework": f"torch {torch.__version__}", "threads": torch.get_num_threads(),
                      "iters": iters, "final_val_loss": reports[-1]["val_loss"],
                      "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "evaluations": reports}, indent=2))


if __name__ == "__main__":
    main()
