"""nanoGPT's model.py (nanogpt/model_torch.py, MIT) runs on Strata with `torch` renamed to `strata` and nothing else
(done by this test, `port`): its parameter count, AdamW groups, a short training run on characters, sampling with
temperature and top-k, and, where PyTorch is installed, the same logits, loss, gradients and AdamW steps as
PyTorch's run of the unrenamed file on the same weights and batch."""
import contextlib
import hashlib
import importlib.util
import io
import math
import pathlib
import re
import sys
import types

import numpy as np
import pytest

import strata

HERE = pathlib.Path(__file__).resolve().parent
NANOGPT = HERE / "nanogpt"
EXCERPT = HERE.parents[1] / "tests" / "data" / "shakespeare-excerpt.txt"
# sha256 of nanoGPT's model.py at commit 3adf61e154c3fe3fca428ad6bc3818b27a3b8291 (last changed in f08abb4).
NANOGPT_SHA256 = "7c01703240dbec5d554527dc666e35b3df8391d0b117fddc07afcf325a21d11c"
SMALL = dict(block_size=32, vocab_size=65, n_layer=2, n_head=2, n_embd=32, dropout=0.0)


def body(path):
    """A file's text after its leading '# ' header (where each copy says what it is)."""
    lines = path.read_text().splitlines(keepends=True)
    while lines and lines[0].startswith("# "):
        lines.pop(0)
    return "".join(lines)


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def port(path, name):
    """The port itself: nanoGPT's file with `torch` renamed to `strata` and nothing else, run as module `name`."""
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses look the module up while the class is made
    exec(compile(re.sub(r"\btorch\b", "strata", body(path)), f"{path.name} (ported)", "exec"), module.__dict__)
    return module


ported = port(NANOGPT / "model_torch.py", "nanogpt_strata")


def quietly(function, *args, **kwargs):
    """nanoGPT prints as it builds: the output is returned with the result."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = function(*args, **kwargs)
    return result, out.getvalue()


def gpt(bias, **changes):
    strata.manual_seed(1337)
    model, _ = quietly(ported.GPT, ported.GPTConfig(**{**SMALL, "bias": bias, **changes}))
    return model


def corpus():
    """Characters and their ids, nanoGPT's prepare.py way: the Shakespeare excerpt of the test data where it is,
    else a text of this test's own (both have fewer than 65 distinct characters)."""
    if EXCERPT.exists():
        text = EXCERPT.read_text()
    else:
        lines = ["First Citizen: Before we proceed any further, hear me speak.", "All: Speak, speak.",
                 "First Citizen: You are all resolved rather to die than to famish?", "All: Resolved. resolved."]
        text = "\n".join(lines[i % 4] for i in range(200))
    chars = sorted(set(text))
    assert len(chars) <= SMALL["vocab_size"]
    index = {c: i for i, c in enumerate(chars)}
    return strata.tensor([index[c] for c in text], dtype=strata.long)


def batch(data, batch_size=8, block_size=SMALL["block_size"]):
    """train.py's get_batch."""
    ix = strata.randint(len(data) - block_size, (batch_size,))
    x = strata.stack([data[i:i + block_size] for i in ix])
    y = strata.stack([data[i + 1:i + 1 + block_size] for i in ix])
    return x, y


def test_the_port_is_nanogpt_with_torch_renamed_and_nothing_else():
    pristine = body(NANOGPT / "model_torch.py")
    assert hashlib.sha256(pristine.encode()).hexdigest() == NANOGPT_SHA256, "model_torch.py is not nanoGPT's"
    assert "torch" not in re.sub(r"\btorch\b", "strata", pristine)
    assert ported.GPT.__module__ == "nanogpt_strata" and ported.nn is strata.nn and ported.F is strata.nn.functional


@pytest.mark.parametrize("bias", [False, True])
def test_parameter_count_and_adamw_groups(bias):
    model, printed = quietly(ported.GPT, ported.GPTConfig(**SMALL, bias=bias))
    C, V, L, T = SMALL["n_embd"], SMALL["vocab_size"], SMALL["n_layer"], SMALL["block_size"]
    # Per block: two LayerNorms (C each), c_attn (3C x C), attention's c_proj (C x C), c_fc (4C x C), the MLP's
    # c_proj (C x 4C); with bias, the Linears' 3C + C + 4C + C and the LayerNorms' 2C. The tied wte/lm_head counts
    # once; ln_f adds C (2C with bias).
    per_block = 12 * C * C + 2 * C + (11 * C if bias else 0)
    expected = V * C + L * per_block + (2 * C if bias else C)
    assert model.get_num_params() == expected
    assert model.get_num_params(non_embedding=False) == expected + T * C
    assert printed.startswith(f"number of parameters: {expected / 1e6:.2f}M")
    assert model.transformer.wte.weight is model.lm_head.weight

    optimizer, printed = quietly(model.configure_optimizers, 0.1, 1e-3, (0.9, 0.95), "cpu")
    assert isinstance(optimizer, strata.optim.AdamW)
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() < 2 for p in no_decay["params"])
    # wte (= lm_head), wpe and four matrices a block; LayerNorm weights (and every bias, with bias=True).
    assert len(decay["params"]) == 2 + 4 * L
    assert len(no_decay["params"]) == (2 * L + 1) * (2 if bias else 1) + (4 * L if bias else 0)
    assert sum(p.numel() for p in decay["params"]) + sum(p.numel() for p in no_decay["params"]) == expected + T * C
    assert "using fused AdamW: False" in printed


@pytest.mark.parametrize("bias", [False, True])
def test_training_lowers_the_loss_and_sampling_respects_top_k(bias, device):
    data = corpus()
    model = gpt(bias).to(device)
    optimizer, _ = quietly(model.configure_optimizers, 0.1, 1e-2, (0.9, 0.99), strata.device(device).type)
    losses = []
    for _ in range(25):
        x, y = batch(data)
        _, loss = model(x.to(device), y.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        strata.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    # From about ln(65) = 4.17 to about 3.2 (character frequencies, then pairs).
    assert losses[0] == pytest.approx(math.log(SMALL["vocab_size"]), abs=0.15)
    assert sum(losses[-5:]) / 5 < losses[0] - 0.7, losses
    assert model.transformer.wte.weight is model.lm_head.weight

    model.eval()
    prompt = data[:30].reshape(1, 30).expand(2, 30).contiguous().to(device)  # 50 tokens: the context gets cropped
    strata.manual_seed(7)
    out = model.generate(prompt, 20, temperature=0.8, top_k=5)
    strata.manual_seed(7)
    again = model.generate(prompt, 20, temperature=0.8, top_k=5)
    assert out.shape == (2, 50) and out.dtype == strata.long and not out.requires_grad
    assert strata.is_grad_enabled()  # @strata.no_grad() restored it
    assert out[:, :30].tolist() == prompt.tolist()
    assert 0 <= out.min().item() and out.max().item() < SMALL["vocab_size"]
    assert out.tolist() == again.tolist()
    with strata.no_grad():
        for t in range(30, 50):
            logits, _ = model(out[:, max(0, t - SMALL["block_size"]):t])
            top5 = strata.topk(logits[:, -1, :], 5).indices
            assert all(out[b, t].item() in top5[b].tolist() for b in range(2)), f"token {t} is outside the top 5"


def test_slow_attention_and_cropping_agree_with_the_fused_path(monkeypatch):
    model = gpt(True)
    model.eval()
    x, _ = batch(corpus(), batch_size=2)
    with strata.no_grad():
        fused, _ = model(x, x)
    # Without scaled_dot_product_attention, nanoGPT registers a causal-mask buffer and masks the scores itself.
    monkeypatch.delattr(strata.nn.functional, "scaled_dot_product_attention")
    slow, printed = quietly(ported.GPT, ported.GPTConfig(**SMALL, bias=True))
    assert "WARNING: using slow attention" in printed
    assert "transformer.h.0.attn.bias" in dict(slow.named_buffers())
    slow.load_state_dict(model.state_dict(), strict=False)
    slow.eval()
    with strata.no_grad():
        manual, _ = slow(x, x)
        np.testing.assert_allclose(manual.numpy(), fused.numpy(), rtol=1e-5, atol=1e-5)
        slow.crop_block_size(16)
        assert slow.transformer.wpe.weight.shape == (16, SMALL["n_embd"])
        assert slow.transformer.h[0].attn.bias.shape == (1, 1, 16, 16)
        head = x[:, :16].contiguous()
        cropped, _ = slow(head, head)
        np.testing.assert_allclose(cropped.numpy(), manual[:, :16].numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(AssertionError, match="block size is only 16"):
        slow(x[:, :17])


@pytest.mark.parametrize("bias", [False, True])
def test_logits_loss_gradients_and_adamw_steps_match_pytorch(bias):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian's python3-torch)")
    original = load(NANOGPT / "model_torch.py", "nanogpt_torch")
    model = gpt(bias)
    reference, _ = quietly(original.GPT, original.GPTConfig(**SMALL, bias=bias))
    with torch.no_grad():
        state = reference.state_dict()
        for name, value in model.state_dict().items():
            state[name].copy_(torch.from_numpy(value.numpy()))
    assert reference.transformer.wte.weight is reference.lm_head.weight
    # A weight decay large enough that decaying the wrong group would show: lr * 2 * 0.02 a step on the matrices.
    optimizer, _ = quietly(model.configure_optimizers, 2.0, 1e-3, (0.9, 0.95), "cpu")
    reference_optimizer, _ = quietly(reference.configure_optimizers, 2.0, 1e-3, (0.9, 0.95), "cpu")
    data = corpus()
    for step in range(3):
        x, y = batch(data)
        logits, loss = model(x, y)
        expected_logits, expected_loss = reference(torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy()))
        np.testing.assert_allclose(logits.detach().numpy(), expected_logits.detach().numpy(), rtol=1e-5, atol=1e-5)
        assert loss.item() == pytest.approx(expected_loss.item(), rel=1e-5)
        optimizer.zero_grad(set_to_none=True)
        reference_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        expected_loss.backward()
        expected = dict(reference.named_parameters())
        for name, p in model.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), expected[name].grad.numpy(), rtol=1e-4, atol=1e-6,
                                       err_msg=f"step {step}: the gradient of {name}")
        optimizer.step()
        reference_optimizer.step()
    # Adam's step is about lr whatever the gradient's size, so an element whose gradient is near 0 may differ by a
    # few 1e-6 from rounding: 1e-5 is 1% of lr.
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.detach().numpy(), expected[name].detach().numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=f"{name} after 3 AdamW steps")
