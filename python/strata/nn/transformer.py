"""Attention and the Transformer encoder (torch.nn.MultiheadAttention, TransformerEncoderLayer, TransformerEncoder,
F.scaled_dot_product_attention), composed from products, softmax and the layers, with PyTorch's parameter names,
initialisation and mask conventions (a True in a boolean mask means "may not attend")."""
import copy
import math

import strata
from strata import _C
from strata.nn import functional as F
from strata.nn import init
from strata.nn.layers import Dropout, LayerNorm, Linear
from strata.nn.module import Module, ModuleList, Parameter


def _additive_mask(mask, like):
    """A boolean mask (True: masked) as 0 / -inf, or a float mask as it is, in like's dtype."""
    if mask is None:
        return None
    if mask.dtype == strata.bool:
        return strata.where(mask, strata.full_like(mask, -math.inf, dtype=like.dtype),
                            strata.zeros_like(mask, dtype=like.dtype))
    return mask.to(like.dtype)


def _causal_mask(rows, cols, like):
    i = strata.arange(rows, device=like.device).unsqueeze(1)
    j = strata.arange(cols, device=like.device).unsqueeze(0)
    return _additive_mask(j > i, like)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(q k^T * scale + mask) v over the last two dims, as PyTorch's (a True in a boolean attn_mask means
    "takes part"), fused: no more than a block of the L x S scores is held at a time (strata/nn/attention.cpp)."""
    if enable_gqa:
        raise NotImplementedError("scaled_dot_product_attention: enable_gqa=True is not implemented; repeat the key "
                                  "and value heads with repeat_interleave instead")
    return _C.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)


def _scaled_dot_product_attention_composed(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                           scale=None):
    """The same from matmul, softmax and dropout: the reference that the tests hold the fused kernels to."""
    return _C.nn.functional._scaled_dot_product_attention_composed(query, key, value, attn_mask, dropout_p,
                                                                    is_causal, scale)


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if add_bias_kv or add_zero_attn or (kdim not in (None, embed_dim)) or (vdim not in (None, embed_dim)):
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn and kdim/vdim other than "
                                      "embed_dim are not implemented; project keys and values to embed_dim first")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        options = dict(dtype=dtype or strata.float32, device=device)
        self.in_proj_weight = Parameter(strata.empty(3 * embed_dim, embed_dim, **options))
        if bias:
            self.in_proj_bias = Parameter(strata.zeros(3 * embed_dim, **options))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        init.xavier_uniform_(self.in_proj_weight)
        if bias:
            init.zeros_(self.out_proj.bias)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        unbatched = query.dim() == 2
        if unbatched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            key_padding_mask = key_padding_mask.unsqueeze(0) if key_padding_mask is not None else None
        elif self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        tgt_len, batch, embed = query.shape
        src_len = key.shape[0]
        if embed != self.embed_dim:
            raise strata.ShapeError(f"MultiheadAttention: expected embedding size {self.embed_dim}, got {embed}")
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None, None, None)
        heads = lambda x, n: x.reshape(n, batch * self.num_heads, self.head_dim).transpose(0, 1)  # noqa: E731
        q = heads(F.linear(query, w_q, b_q), tgt_len)
        k = heads(F.linear(key, w_k, b_k), src_len)
        v = heads(F.linear(value, w_v, b_v), src_len)
        if not need_weights:  # the fused attention, which never holds the [N * H, L, S] weights
            out = self._fused_attention(q, k, v, attn_mask, key_padding_mask, is_causal, batch, tgt_len, src_len)
            out = self.out_proj(out.transpose(0, 1).reshape(tgt_len, batch, embed))
            return (out.squeeze(1) if unbatched else out.transpose(0, 1) if self.batch_first else out), None
        scores = q.matmul(k.transpose(1, 2)) / math.sqrt(self.head_dim)  # [N * H, L, S]
        mask = _causal_mask(tgt_len, src_len, q) if is_causal and attn_mask is None else _additive_mask(attn_mask, q)
        if mask is not None:
            scores = scores + (mask if mask.dim() == 2 else mask.reshape(batch * self.num_heads, tgt_len, src_len))
        if key_padding_mask is not None:
            padding = _additive_mask(key_padding_mask, q).reshape(batch, 1, 1, src_len)
            scores = (scores.reshape(batch, self.num_heads, tgt_len, src_len) + padding).reshape(
                batch * self.num_heads, tgt_len, src_len)
        weights = strata.softmax(scores, -1)
        attended = F.dropout(weights, self.dropout, self.training) if self.dropout > 0 else weights
        out = attended.matmul(v).transpose(0, 1).reshape(tgt_len, batch, embed)
        out = self.out_proj(out)
        if unbatched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = weights.reshape(batch, self.num_heads, tgt_len, src_len)
        weights = weights.mean(1) if average_attn_weights else weights
        return out, (weights.squeeze(0) if unbatched else weights)


    def _fused_attention(self, q, k, v, attn_mask, key_padding_mask, is_causal, batch, tgt_len, src_len):
        """softmax(q k^T / sqrt(d) + masks) v of q, k, v [N * H, L or S, d] -> [N * H, L, d]: the masks (True:
        masked, MultiheadAttention's convention) made additive and merged into one that broadcasts over the heads
        where it can."""
        heads = self.num_heads
        causal = is_causal and attn_mask is None
        mask = _additive_mask(attn_mask, q)
        if mask is not None and mask.dim() == 3:
            mask = mask.reshape(batch, heads, tgt_len, src_len)
        if key_padding_mask is not None:
            padding = _additive_mask(key_padding_mask, q).reshape(batch, 1, 1, src_len)
            if causal:
                mask, causal = _causal_mask(tgt_len, src_len, q), False
            mask = padding if mask is None else mask + padding
        shape = lambda x, n: x.reshape(batch, heads, n, self.head_dim)  # noqa: E731
        out = scaled_dot_product_attention(shape(q, tgt_len), shape(k, src_len), shape(v, src_len), mask,
                                           self.dropout if self.training else 0.0, causal)
        return out.reshape(batch * heads, tgt_len, self.head_dim)


class TransformerEncoderLayer(Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        options = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=batch_first, **options)
        self.linear1 = Linear(d_model, dim_feedforward, bias, **options)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, **options)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, **options)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, **options)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        if isinstance(activation, str):
            if activation not in ("relu", "gelu"):
                raise RuntimeError(f"activation should be relu/gelu, not {activation}")
            activation = F.relu if activation == "relu" else F.gelu
        self.activation = activation

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class TransformerEncoder(Module):
    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """Only the causal mask of PyTorch's encoder-decoder Transformer: the decoder layers are not implemented."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("nn.Transformer (the encoder-decoder model) is not implemented; build encoders with "
                                  "nn.TransformerEncoder and nn.TransformerEncoderLayer")

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The causal mask: 0 on and below the diagonal, -inf above."""
        return _causal_mask(sz, sz, strata.empty(0, dtype=dtype or strata.float32, device=device))
