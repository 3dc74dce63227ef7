"""nanoGPT's shakespeare_char training in PyTorch eager, on the batches and schedule strata-train --task shakespeare
uses, for bench/shakespeare/run: the model is nanoGPT's model.py (the parts a char model uses, same names and
initialisation), the loop its train.py (AdamW with a decayed and an undecayed group, fused=False as on a CPU,
warm-up then cosine, gradient clipping at 1.0). The batches are strata-train's (Note [Batches are a function of the
step] in tools/train/shakespeare.cpp): a hash of (seed, stream, index, row), so both frameworks train on the same
characters in the same order. Prints one JSON document as strata-train --json does.
"""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn as nn
from torch.nn import functional as F

MASK64 = (1 << 64) - 1


def mix_seed(seed, a, b):  # tools/train/job_checkpoint.cpp
    z = (((seed * 1000003 + a) & MASK64) * 1000003 + b) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def batch_offset(seed, stream, index, row, split_size, block):  # GptTrainer::batch_offset
    return mix_seed((seed + stream * 0x9E3779B97F4A7C15) & MASK64, index, row) % (split_size - block)


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"], bias=c["bias"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"], bias=c["bias"])
        self.n_head, self.n_embd, self.dropout = c["n_head"], c["n_embd"], c["dropout"]
        self.resid_dropout = nn.Dropout(c["dropout"])

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                           dropout_p=self.dropout if self.training else 0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"], bias=c["bias"])
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"], bias=c["bias"])
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = LayerNorm(c["n_embd"], c["bias"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = LayerNorm(c["n_embd"], c["bias"])
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
            wpe=nn.Embedding(c["block_size"], c["n_embd"]),
            drop=nn.Dropout(c["dropout"]),
            h=nn.ModuleList([Block(c) for _ in range(c["n_layer"])]),
            ln_f=LayerNorm(c["n_embd"], c["bias"]),
        ))
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c["n_layer"]))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


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
    model = GPT(c).to(a.device)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99), fused=a.device.startswith("cuda"))
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
            losses = [run(*batch(split, 1 + split, k, 0, B)).float() for k in range(eval_iters)
                      if True] if amp_dtype is None else []
            if amp_dtype is not None:
                for k in range(eval_iters):
                    with autocast():
                        losses.append(run(*batch(split, 1 + split, k, 0, B)).float())
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
                loss = run(x, y)
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
