"""SmolLM2's decoding path near the speed of its weights: the loop ``chat`` runs.

A decoding step of a 135M-parameter model reads every weight matrix once, for one
matrix-vector product each (211 matrices, 538 MB in float32): on one core that reading
takes most of a step, and everything else is overhead. :func:`attn_core.nn.forward_cached`
is the course's readable cached step for any decoder; it checks its inputs, keeps an
immutable :class:`~attn_core.decoding.KVCache` (a new copy of every layer's keys and values
per token), recomputes RoPE's angles and checks every intermediate product for overflow.
:class:`LLMDecoder` computes the same logits with the checks done once, at the public
boundary (:func:`attn_core.model.llm_generate.llm_generate` checks the arguments; the
weights were checked at load; each step's logits are checked once):

* the keys and values go into buffers allocated once per text and written in place, one
  row per token (no copy of the cache, no concatenation);
* RoPE's cosines and sines are a table made once per text (the same float64 angles as
  :func:`attn_core.rope`, rounded to the weights' dtype);
* a step is matrix-vector products ``W @ x`` on the file's (out, in) matrices, the head
  split a reshape, and the few element-wise operations of RMSNorm (the course's own,
  :mod:`attn_core.nn.rms_norm`), softmax and SwiGLU (``silu(g) * u`` in four passes);
* the prefill of a prompt runs the causal attention of :func:`attn_core.fast.fast_attention`
  (one thread: query blocks, the keys after a block skipped) and unembeds the last
  position only (the one a generation draws from).

Tested against :func:`attn_core.nn.prefill` and :func:`attn_core.nn.forward_cached` and an
independent float64 loop (``tests/test_llm_fast.py``).

The loader (:func:`attn_core.model.llm_file.read_gguf`) stores each block's query, key and
value matrices as rows of one array, and its gate and up matrices likewise
(:func:`stack_matrices`; the parameters stay views of the same shapes and layout), so that a
step reads each group with ONE matrix-vector product: 4 products per block instead of 7.

Public API
----------
* :class:`LLMDecoder` -- ``start(ids)`` then ``step(token)``, each returning the next
  token's logits
* :func:`stack_matrices` -- the block matrices that read the same input, as rows of one array
"""

from __future__ import annotations

import numpy as np

from .._validate import check_result, checked_later
from ..fast import BLOCK_BYTES, _fast_core
from ..nn.rms_norm import _rms_norm_parts
from ..positions import frequencies

__all__ = ["LLMDecoder", "stack_matrices"]

#: Weight names of a block, in the order of :meth:`LLMDecoder._layers`' tuples.
_BLOCK = ("ln1.g", "attn.w_q", "attn.w_k", "attn.w_v", "attn.w_o", "ln2.g", "mlp.w_gate",
          "mlp.w_up", "mlp.w_down")


#: The block matrices that read the same input, stacked by :func:`stack_matrices`.
STACKED = (("attn.w_q", "attn.w_k", "attn.w_v"), ("mlp.w_gate", "mlp.w_up"))


def stack_matrices(params, n_layers):
    """``params`` with each block's :data:`STACKED` groups made views of ONE array, in place
    (each group's separate arrays are let go as soon as it is stacked: a load never holds
    two copies of the weights).

    Parameters
    ----------
    params : dict of ndarray
        Matrices ``(in, out)`` under ``"h{i}.attn.w_q"`` etc.
    n_layers : int

    Returns
    -------
    dict
        ``params`` itself: the same names and values; ``w_q``, ``w_k``, ``w_v`` (and
        ``w_gate``, ``w_up``) are now the views ``rows[a:b].T`` of one C-ordered
        ``(out_q + out_k + out_v, in)`` array (the (out, in) layout of a GGUF file), so
        their layout is that of the file's own matrices and one product ``rows @ x``
        computes all of them.
    """
    out = params
    for i in range(n_layers):
        for group in STACKED:
            names = [f"h{i}.{k}" for k in group]
            rows = np.ascontiguousarray(np.concatenate([np.asarray(out[n]).T for n in names]))
            start = 0
            for n in names:
                width = out[n].shape[1]
                out[n] = rows[start:start + width].T  # (in, out) view
                start += width
    return out


def _stacked(mats):
    """The one (sum of out, in) array whose consecutive rows are the (out, in) views
    ``mats``, or None when they are separate arrays."""
    base = mats[0].base
    if base is None or base.ndim != 2 or not base.flags.c_contiguous or any(
            m.base is not base or not m.flags.c_contiguous for m in mats):
        return None
    row = base.strides[0]
    first = (mats[0].__array_interface__["data"][0] - base.__array_interface__["data"][0])
    start = first // row
    for m in mats:
        if m.__array_interface__["data"][0] != base.__array_interface__["data"][0] + start * row:
            return None
        start += m.shape[0]
    return base[first // row:start]


def _rope_table(n, d_head, base, dtype, pairing):
    """RoPE of positions ``0 .. n-1`` as ``x * cos + x[..., partner] * sin``: ``(cos, sin,
    partner)``, ``cos`` and ``sin`` (n, d_head) and ``partner`` (d_head,) the index of each
    feature's pair (2c <-> 2c+1 interleaved, c <-> c + d/2 in halves), ``sin`` negated on
    the pair's first feature. The angles are :func:`attn_core.rope`'s (float64), rounded to
    ``dtype`` as it rounds them, so each turned feature is the same two rounded products and
    one rounded sum as in :func:`attn_core.rope` (``a cos - b sin``, ``a sin + b cos``)."""
    angle = np.arange(n)[:, None] * frequencies(d_head, base)  # (n, 1) * (d/2,) -> (n, d/2)
    cos, sin = np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)  # (n, d/2) each
    half = np.arange(d_head // 2)
    if pairing == "interleaved":  # features 2c and 2c+1
        first, second = 2 * half, 2 * half + 1
    else:  # features c and c + d/2
        first, second = half, half + d_head // 2
    cos_full, sin_full = np.empty((n, d_head), dtype), np.empty((n, d_head), dtype)
    cos_full[:, first], cos_full[:, second] = cos, cos
    sin_full[:, first], sin_full[:, second] = -sin, sin
    partner = np.empty(d_head, dtype=np.intp)
    partner[first], partner[second] = second, first
    return cos_full, sin_full, partner


def _silu_times(gate, up):
    """``silu(gate) * up`` written over ``up`` (returned), ``gate`` used as scratch: both are
    the caller's own buffers (the two halves of one product), so no (n, d_ff) array is
    allocated. Four passes, ``gate * up / (1 + exp(-gate))``: where ``exp`` overflows (gate
    below about -88 in float32) the quotient is 0, silu's limit (the caller silences the
    warning). Equal to :func:`attn_core.nn.silu` times ``up`` to rounding."""
    np.multiply(up, gate, out=up)  # (..., d_ff): gate * up
    np.negative(gate, out=gate)
    np.exp(gate, out=gate)  # exp(-gate)
    gate += 1
    np.divide(up, gate, out=up)
    return up


def _turn(x, cos, sin, partner):
    """RoPE in place on ``x`` (..., d_head), with ``cos``, ``sin`` broadcasting to it and
    ``partner`` from :func:`_rope_table`: four passes and one temporary of ``x``'s size."""
    turned = np.take(x, partner, axis=-1)  # (..., d): each feature's pair partner
    turned *= sin
    x *= cos
    x += turned
    return x


class LLMDecoder:
    """One text's decoding state: preallocated KV buffers, RoPE's table, the weights' views.

    Parameters
    ----------
    params, config
        A checked model (:func:`attn_core.model.llm_file.load_llm`); this class does not
        check them again (its callers do, once).
    capacity : int
        The most tokens the text will hold (prompt and answer), ``<= config.n_ctx``: the
        buffers' length (``np.empty``: pages never written take no memory).

    Notes
    -----
    ``start(ids)`` runs the prompt (n,) and returns the logits (vocab,) after its last
    token; ``step(token)`` appends one token and returns the logits after it. Both equal
    the last row of :func:`attn_core.nn.prefill` / :func:`attn_core.nn.forward_cached`'s
    logits up to float rounding (the products run in another order).
    """

    def __init__(self, params, config, capacity):
        o = config.block_options
        self.n_heads, self.n_kv = o.n_heads, o.kv_heads
        self.d_head = config.d_model // config.n_heads
        self.eps, self.pairing = o.eps, o.pairing
        self.wte = params["wte"]  # (vocab, d)
        self.w_out = params["w_unembed"].T  # (vocab, d): wte itself when they are tied
        self.g_f = params["ln_f.g"]
        self.params = [tuple(params[f"h{i}.{k}"] for k in _BLOCK)
                       for i in range(config.n_layers)]  # (in, out) matrices: x @ w
        # (out, in) views: w.T @ x, a matrix-vector product on the file's own layout; the
        # stacked groups as one matrix when the loader stacked them (else None)
        self.layers = [tuple(a if a.ndim == 1 else a.T for a in p) for p in self.params]
        self.stacked = [(_stacked(layer[1:4]), _stacked(layer[6:8])) for layer in self.layers]
        dtype = self.wte.dtype
        self.scale = dtype.type(1 / np.sqrt(self.d_head))
        self.cos, self.sin, self.partner = _rope_table(capacity, self.d_head, o.rope_base,
                                                       dtype, o.pairing)
        shape = (config.n_layers, self.n_kv, capacity, self.d_head)
        self.keys, self.values = np.empty(shape, dtype), np.empty(shape, dtype)
        self.capacity, self.length = capacity, 0

    def start(self, ids):
        """The prompt ``ids`` (n,), ``1 <= n <= capacity``, through every layer from an empty
        cache; returns the logits (vocab,) after its last token."""
        n = len(ids)
        h, kv, dh = self.n_heads, self.n_kv, self.d_head
        cos, sin = self.cos[:n, None, :], self.sin[:n, None, :]  # (n, 1, d)
        x = np.take(self.wte, ids, axis=0)  # (n, d): a copy, added to in place below
        with checked_later():  # the logits are checked at the end
            for i, (g1, w_q, w_k, w_v, w_o, g2, w_g, w_u, w_d) in enumerate(self.params):
                a = _rms_norm_parts(x, g1, self.eps)[0]  # (n, d)
                w_qkv, w_gu = self.stacked[i]
                if w_qkv is not None:  # one product for q, k and v: (n, (h + 2 kv) dh)
                    qkv = a @ w_qkv.T
                else:
                    qkv = np.concatenate([a @ w_q, a @ w_k, a @ w_v], axis=-1)
                heads = qkv.reshape(n, h + 2 * kv, dh)  # a view (qkv is C-contiguous)
                _turn(heads[:, :h + kv], cos, sin, self.partner)  # q's and k's, in place
                q, k, v = heads[:, :h], heads[:, h:h + kv], heads[:, h + kv:]  # views
                self.keys[i, :, :n] = k.swapaxes(0, 1)  # (kv, n, dh)
                self.values[i, :, :n] = v.swapaxes(0, 1)
                # grouped heads: query head j reads key/value head j // (h / kv); the g
                # heads of a group go through one product per query block (fast._groups)
                q = q.swapaxes(0, 1).reshape(kv, h // kv, n, dh)  # (kv, g, n, dh)
                k_all, v_all = self.keys[i, :, None, :n], self.values[i, :, None, :n]
                heads = _fast_core(q, k_all, v_all, None, float(self.scale), True,
                                   (kv, h // kv), 1, BLOCK_BYTES)  # (kv, g, n, dh)
                merged = heads.reshape(h, n, dh).swapaxes(0, 1).reshape(n, h * dh)
                x += merged @ w_o  # x is this call's own array (wte[ids] copied the rows)
                a = _rms_norm_parts(x, g2, self.eps)[0]
                if w_gu is not None:  # one product for the gate and the up projection
                    gu = a @ w_gu.T  # (n, 2 d_ff)
                    gate, up = gu[:, :gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
                else:
                    gate, up = a @ w_g, a @ w_u  # (n, d_ff) each
                x += _silu_times(gate, up) @ w_d
            y = _rms_norm_parts(x[-1], self.g_f, self.eps)[0]  # (d,): the last position
            logits = self.w_out @ y  # (vocab, d) @ (d,) -> (vocab,)
        check_result(logits, "the logits")
        self.length = n
        return logits

    def step(self, token):
        """One new token (an int id) after the ``length`` tokens already in the buffers;
        returns the logits (vocab,) after it."""
        t = self.length
        if t >= self.capacity:
            raise ValueError(f"the decoder's buffers hold {self.capacity} tokens and are full:"
                             " start again with a cropped text")
        h, kv, dh = self.n_heads, self.n_kv, self.d_head
        cos, sin = self.cos[t], self.sin[t]  # (d,)
        x = self.wte[token].copy()  # (d,): this step's own, added to in place below
        with checked_later():  # the logits are checked at the end
            for i, (g1, w_q, w_k, w_v, w_o, g2, w_g, w_u, w_d) in enumerate(self.layers):
                w_qkv, w_gu = self.stacked[i]
                a = _rms_norm_parts(x, g1, self.eps)[0]  # (d,)
                if w_qkv is not None:  # one product for q, k and v
                    qkv = w_qkv @ a  # ((h + 2 kv) dh,)
                else:
                    qkv = np.concatenate([w_q @ a, w_k @ a, w_v @ a])
                heads = qkv.reshape(h + 2 * kv, dh)  # a view: sliced, not np.split (overhead)
                _turn(heads[:h + kv], cos, sin, self.partner)  # q's and k's, in place
                keys, values = self.keys[i, :, :t + 1], self.values[i, :, :t + 1]
                keys[:, t], values[:, t] = heads[h:h + kv], heads[h + kv:]  # (kv, dh) each
                q = heads[:h] * self.scale  # (h, dh), scaled as attention() scales queries
                s = np.matmul(q.reshape(kv, h // kv, dh), keys.swapaxes(-1, -2))  # (kv, g, t+1)
                s -= s.max(axis=-1, keepdims=True)
                np.exp(s, out=s)
                s *= 1 / s.sum(axis=-1, keepdims=True)
                out = np.matmul(s, values)  # (kv, g, t+1) @ (kv, t+1, dh) -> (kv, g, dh)
                x += w_o @ out.reshape(-1)  # heads in order j = kv_head * g + member
                a = _rms_norm_parts(x, g2, self.eps)[0]
                if w_gu is not None:  # one product for the gate and the up projection
                    gu = w_gu @ a  # (2 d_ff,)
                    gate, up = gu[:len(gu) // 2], gu[len(gu) // 2:]
                else:
                    gate, up = w_g @ a, w_u @ a  # (d_ff,) each
                x += w_d @ _silu_times(gate, up)
            y = _rms_norm_parts(x, self.g_f, self.eps)[0]
            logits = self.w_out @ y  # (vocab, d) @ (d,) -> (vocab,)
        check_result(logits, "the logits")
        self.length = t + 1
        return logits
